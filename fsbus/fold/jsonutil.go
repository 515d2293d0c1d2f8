package fold

import "encoding/json"

func JSONUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
