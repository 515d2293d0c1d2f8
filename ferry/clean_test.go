package main

import "testing"

// TestCleanShowsControlCharacters: text from the channel never carries a terminal
// escape to the screen; newlines and tabs pass, unicode passes.
func TestCleanShowsControlCharacters(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain title", "plain title"},
		{"línea\tcon\nsaltos ✓", "línea\tcon\nsaltos ✓"},
		{"ok\x1b[2Jtitle", `ok\x1b[2Jtitle`},
		{"bell\x07", `bell\x07`},
		{"c1\u009bcsi", `c1\x9bcsi`},
		{"line\u2028sep", `line\u{2028}sep`},
		{"del\x7f", `del\x7f`},
		{"evil\u202egnp.exe", `evil\u{202e}gnp.exe`},
	} {
		if got := clean(tc.in); got != tc.want {
			t.Errorf("clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
