package procgroup

import "testing"

// TestTailBuffer: the last Max bytes are kept, and String never starts inside a
// character the cut split.
func TestTailBuffer(t *testing.T) {
	tb := &TailBuffer{Max: 2}
	tb.Write([]byte("abcdéf")) // the last 2 bytes split é
	if s := tb.String(); s != "f" {
		t.Errorf("tail %q, want f", s)
	}
	tb = &TailBuffer{Max: 8}
	tb.Write([]byte("hello "))
	tb.Write([]byte("world"))
	if s := tb.String(); s != "lo world" {
		t.Errorf("tail %q, want %q", s, "lo world")
	}
}
