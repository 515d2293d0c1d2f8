package arrivals

import "testing"

// TestParseHeader: version 1 headers carry no compaction mark, version 2 headers carry
// one; any other line is no header.
func TestParseHeader(t *testing.T) {
	for _, c := range []struct {
		line  string
		id    string
		epoch int
		ok    bool
	}{
		{"ferry-arrivals 1 k3f9x2ab", "k3f9x2ab", 0, true},
		{"ferry-arrivals 2 k3f9x2ab compacted 3", "k3f9x2ab", 3, true},
		{"ferry-arrivals 1 k3f9x2ab compacted 3", "", 0, false},
		{"ferry-arrivals 2 k3f9x2ab", "", 0, false},
		{"ferry-arrivals 2 k3f9x2ab compacted 0", "", 0, false},
		{"ferry-arrivals 2 k3f9x2ab compacted x", "", 0, false},
		{"ferry-arrivals 2 k3f compacted 2 compacted 3", "", 0, false},
		{"ferry-arrivals 1 k3.f9", "", 0, false},
		{"ferry-arrivals 3 k3f9x2ab", "", 0, false},
		{"", "", 0, false},
	} {
		id, epoch, ok := parseHeader(c.line)
		if id != c.id || epoch != c.epoch || ok != c.ok {
			t.Errorf("%q: %q %d %v, want %q %d %v", c.line, id, epoch, ok, c.id, c.epoch, c.ok)
		}
	}
}
