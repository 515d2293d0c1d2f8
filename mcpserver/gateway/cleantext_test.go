package gateway

import "testing"

// TestCleanText: what the gateway passes on from a child loses every character the
// rest of ferry refuses or escapes (internal/textsafe, text of lines): C0 controls but
// newline and tab, DEL, C1 controls (U+009B is a CSI), line separators and bidi
// controls ("\u202e" makes "evil\u202egnp.exe" show as "evilexe.png").
func TestCleanText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain text ✓", "plain text ✓"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab"},
		{"ok\x1b[2Jtitle\x07\x7f\r", "ok[2Jtitle"},
		{"c1\u009b31mcsi\u0085", "c131mcsi"},
		{"evil\u202egnp.exe", "evilgnp.exe"},
		{"\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200fbidi", "bidi"},
		{"line\u2028para\u2029end", "lineparaend"},
	} {
		if got := CleanText(tc.in); got != tc.want {
			t.Errorf("CleanText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := description("srv", "Reads \u202efdp.exe files.\u009b"); got != "Reads fdp.exe files." {
		t.Errorf("description = %q", got)
	}
}
