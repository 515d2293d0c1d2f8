package ledger

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"
)

// TestVectorsHLC checks the HLC text form and the next-HLC rule against the
// hand-written vectors in fixtures/vectors/hlc.json (docs/format.md, Clock).
func TestVectorsHLC(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../fixtures/vectors/hlc.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Valid   []string `json:"valid"`
		Invalid []string `json:"invalid"`
		Order   []string `json:"order"`
		Next    []struct {
			Name      string   `json:"name"`
			Now       string   `json:"now"`
			MaxSkewMs int64    `json:"max_skew_ms"`
			Last      string   `json:"last"`
			Observed  []string `json:"observed"`
			Next      string   `json:"next"`
			Skewed    []string `json:"skewed"`
		} `json:"next"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	parse := func(s string) HLC {
		t.Helper()
		if s == "" {
			return HLC{}
		}
		h, err := ParseHLC(s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, s := range f.Valid {
		h, err := ParseHLC(s)
		if err != nil {
			t.Errorf("ParseHLC(%q): %v", s, err)
		} else if h.String() != s {
			t.Errorf("ParseHLC(%q).String() = %q", s, h.String())
		}
	}
	for _, s := range f.Invalid {
		if ValidHLC(s) {
			t.Errorf("ValidHLC(%q) = true", s)
		}
	}
	for i := 1; i < len(f.Order); i++ {
		a, b := parse(f.Order[i-1]), parse(f.Order[i])
		if !a.Less(b) || f.Order[i-1] >= f.Order[i] {
			t.Errorf("%s must sort before %s, as value and as text", f.Order[i-1], f.Order[i])
		}
	}
	for _, c := range f.Next {
		now, err := time.Parse(hlcTimeLayout, c.Now)
		if err != nil {
			t.Fatal(err)
		}
		var obs []HLC
		for _, o := range c.Observed {
			obs = append(obs, parse(o))
		}
		next, skewed := NextHLC(now, time.Duration(c.MaxSkewMs)*time.Millisecond, parse(c.Last), obs...)
		var sk []string
		for _, s := range skewed {
			sk = append(sk, s.String())
		}
		if next.String() != c.Next || !slices.Equal(sk, c.Skewed) && len(sk)+len(c.Skewed) > 0 {
			t.Errorf("%s: next %s skewed %v, want %s skewed %v", c.Name, next, sk, c.Next, c.Skewed)
		}
	}
}
