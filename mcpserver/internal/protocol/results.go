package protocol

import "encoding/json"

// ToolResult is a successful tools/call result: structuredContent plus the same JSON as
// compact text, so clients that pass either one to the model lose nothing
// (docs/design.md §4).
func ToolResult(v any) (any, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, Errorf(CodeInternalError, "encoding result: %v", err)
	}
	return map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": string(b)}},
		"structuredContent": json.RawMessage(b),
	}, nil
}

// ToolError is a failed tools/call result: isError, one text block, no
// structuredContent.
func ToolError(text string) any {
	return map[string]any{
		"content": []any{map[string]any{"type": "text", "text": text}},
		"isError": true,
	}
}
