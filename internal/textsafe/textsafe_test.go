package textsafe

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestUnsafe: every rune of the rule, its neighbours that are safe, and what each Mode
// lets through.
func TestUnsafe(t *testing.T) {
	// want: unsafe in Line, Lines, LinesCR.
	for _, tc := range []struct {
		r                    rune
		line, lines, linesCR bool
	}{
		{'a', false, false, false},
		{' ', false, false, false},
		{'~', false, false, false},
		{'\t', true, false, false},
		{'\n', true, false, false},
		{'\r', true, true, false},
		{0x00, true, true, true},
		{0x07, true, true, true},    // BEL
		{0x1b, true, true, true},    // ESC
		{0x1f, true, true, true},    // last C0
		{0x7f, true, true, true},    // DEL
		{0x80, true, true, true},    // first C1
		{0x85, true, true, true},    // NEL
		{0x9b, true, true, true},    // CSI
		{0x9f, true, true, true},    // last C1
		{0xa0, false, false, false}, // no-break space
		{'é', false, false, false},
		{0x200d, false, false, false}, // zero-width joiner (emoji sequences)
		{0x061c, true, true, true},    // ALM, the Arabic letter mark
		{0x061b, false, false, false}, // Arabic semicolon, beside it
		{0x200e, true, true, true},    // LRM
		{0x200f, true, true, true},    // RLM
		{0x2027, false, false, false},
		{0x2028, true, true, true}, // line separator
		{0x2029, true, true, true}, // paragraph separator
		{0x202a, true, true, true}, // LRE
		{0x202b, true, true, true}, // RLE
		{0x202c, true, true, true}, // PDF
		{0x202d, true, true, true}, // LRO
		{0x202e, true, true, true}, // RLO
		{0x202f, false, false, false},
		{0x2065, false, false, false},
		{0x2066, true, true, true}, // LRI
		{0x2067, true, true, true}, // RLI
		{0x2068, true, true, true}, // FSI
		{0x2069, true, true, true}, // PDI
		{0x206a, false, false, false},
		{'✓', false, false, false},
		{utf8.RuneError, false, false, false},
	} {
		if got := Unsafe(tc.r); got != tc.line {
			t.Errorf("Unsafe(%U) = %v, want %v", tc.r, got, tc.line)
		}
		for _, m := range []struct {
			m    Mode
			want bool
		}{{Line, tc.line}, {Lines, tc.lines}, {LinesCR, tc.linesCR}} {
			if got := m.m.Unsafe(tc.r); got != m.want {
				t.Errorf("Mode(%d).Unsafe(%U) = %v, want %v", m.m, tc.r, got, m.want)
			}
		}
	}
}

func TestIndex(t *testing.T) {
	for _, tc := range []struct {
		m    Mode
		s    string
		want int
	}{
		{Line, "", -1},
		{Line, "plain title ✓", -1},
		{Line, "two\nlines", 3},
		{Lines, "two\nlines\tand a tab", -1},
		{Lines, "crlf\r\n", 4},
		{LinesCR, "crlf\r\nline", -1},
		{LinesCR, "ok\x1b[2J", 2},
		{Lines, "c1 \u009b", 3},
		{Lines, "évil\u202egnp.exe", 5},
		{Lines, "iso\u2066late\u2069", 3},
		{Lines, "sep\u2028", 3},
		{Line, "bad \xff byte", -1}, // invalid UTF-8 is not this package's
	} {
		if got := tc.m.Index(tc.s); got != tc.want {
			t.Errorf("Mode(%d).Index(%q) = %d, want %d", tc.m, tc.s, got, tc.want)
		}
	}
}

func TestClean(t *testing.T) {
	hex := func(r rune) string { return fmt.Sprintf("<%x>", r) }
	drop := func(rune) string { return "" }
	for _, tc := range []struct {
		m    Mode
		s    string
		repl func(rune) string
		want string
	}{
		{Lines, "línea\tcon\nsaltos ✓", hex, "línea\tcon\nsaltos ✓"},
		{Line, "línea\tcon\nsaltos", hex, "línea<9>con<a>saltos"},
		{Lines, "ok\x1b[2Jtitle\x07", drop, "ok[2Jtitle"},
		{Lines, "c1\u009bcsi", drop, "c1csi"},
		{Lines, "evil\u202egnp.exe", hex, "evil<202e>gnp.exe"},
		{Lines, "a\r\nb", hex, "a<d>\nb"},
		{LinesCR, "a\r\nb\x7f", drop, "a\r\nb"},
		{Line, "\u2028\u2029\u200e\u200f", func(rune) string { return "\uFFFD" }, "\uFFFD\uFFFD\uFFFD\uFFFD"},
	} {
		if got := tc.m.Clean(tc.s, tc.repl); got != tc.want {
			t.Errorf("Mode(%d).Clean(%q) = %q, want %q", tc.m, tc.s, got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
		cut  bool
	}{
		{"hello", 5, "hello", false},
		{"hello!", 5, "hell…", true},
		{"ünïcödé", 4, "ünï…", true},
		{"ünïcödé", 7, "ünïcödé", false},
		{"ab", 1, "…", true},
		{"", 0, "", false},
		{"ab", 0, "", true},
	} {
		got, cut := Cut(tc.s, tc.n)
		if got != tc.want || cut != tc.cut {
			t.Errorf("Cut(%q, %d) = %q, %v; want %q, %v", tc.s, tc.n, got, cut, tc.want, tc.cut)
		}
		if utf8.RuneCountInString(got) > max(tc.n, 0) {
			t.Errorf("Cut(%q, %d) = %q: over %d runes", tc.s, tc.n, got, tc.n)
		}
	}
}

func TestCutBytes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
		cut  bool
	}{
		{"hello", 5, "hello", false},
		{"hello world", 8, "hello…", true}, // "…" is 3 bytes, counted in n
		{"ééééé", 8, "éé…", true},          // 5 bytes for runes: "éé", not half an é
		{"ééééé", 9, "ééé…", true},
		{"ab", 2, "ab", false},
		{"abcd", 2, "", true},
	} {
		got, cut := CutBytes(tc.s, tc.n)
		if got != tc.want || cut != tc.cut {
			t.Errorf("CutBytes(%q, %d) = %q, %v; want %q, %v", tc.s, tc.n, got, cut, tc.want, tc.cut)
		}
		if len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("CutBytes(%q, %d) = %q: over %d bytes or invalid UTF-8", tc.s, tc.n, got, tc.n)
		}
	}
}

func TestHead(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 9, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"}, // é is bytes 1–2
		{"héllo", 3, "hé"},
		{"a😀b", 4, "a"}, // 😀 is bytes 1–4
		{"a😀b", 5, "a😀"},
		{"x", 0, ""},
		{"x", -1, ""},
		{"\x80\x80\x80\x80\x80", 3, "\x80\x80\x80"}, // stray bytes: each its own
		{"ab\xe2\x80", 3, "ab\xe2"},                 // a torn rune is stray bytes
	} {
		if got := Head(tc.s, tc.n); got != tc.want {
			t.Errorf("Head(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
	// Every cut of a valid text is valid and as long as it can be.
	s := strings.Repeat("aé✓😀", 4)
	for n := 0; n <= len(s); n++ {
		h := Head(s, n)
		if !utf8.ValidString(h) || len(h) > n || len(h) < n-(utf8.UTFMax-1) || !strings.HasPrefix(s, h) {
			t.Errorf("Head(%q, %d) = %q", s, n, h)
		}
	}
}
