// Package textsafe is ferry's one rule for the characters text must not carry to a
// screen or a model as they are, and its one way of cutting text short.
//
// Refuse a field that holds one, or clean text before showing it:
//
//	if textsafe.Line.Index(title) >= 0 || textsafe.LinesCR.Index(body) >= 0 {
//		// refuse: a control, line separator or bidi control
//	}
//	shown := textsafe.Lines.Clean(s, func(rune) string { return "\uFFFD" })
//	short, cut := textsafe.Cut(s, 80) // at most 80 characters, the last "…" when cut
//
// # The rule
//
// [Unsafe] runes are the C0 controls U+0000–U+001F (tab, newline and CR included),
// DEL U+007F, the C1 controls U+0080–U+009F (U+009B is a CSI that starts a terminal
// escape as ESC [ does), the line and paragraph separators U+2028 and U+2029 (a line
// break to some readers and not others), and the bidi controls that reorder what a
// line shows: the marks U+061C, U+200E and U+200F, the embeddings and overrides
// U+202A–U+202E and the isolates U+2066–U+2069 ("evil\u202egnp.exe" shows as
// "evilexe.png"). A [Mode] lets text of several lines keep newline and tab, and input
// as typed keep CR too (CRLF line ends). Invalid UTF-8 is no concern of this package:
// every byte of it is a U+FFFD to a range loop.
//
// # Cutting
//
// [Cut] bounds text in characters (runes), [CutBytes] and [Head] in bytes; all three
// cut on a rune boundary, so a cut never splits a character into invalid UTF-8.
package textsafe

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis marks where [Cut] and [CutBytes] cut text short.
const Ellipsis = "…"

// Unsafe reports whether r must not reach a screen as it is (see the package doc):
// the rule of [Line], which allows no control at all.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0: // C0, DEL, C1
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return true
	}
	return false
}

// Mode says which of the [Unsafe] whitespace controls a text may hold nonetheless.
type Mode uint8

const (
	// Line is one line: every Unsafe rune is unsafe, tab and newline included.
	Line Mode = iota
	// Lines is text of several lines as shown: newline and tab are safe.
	Lines
	// LinesCR is text of several lines as typed or pasted: newline, tab and CR are
	// safe (CRLF line ends).
	LinesCR
)

// Unsafe reports whether r is unsafe in text of mode m.
func (m Mode) Unsafe(r rune) bool {
	switch r {
	case '\n', '\t':
		return m == Line
	case '\r':
		return m != LinesCR
	}
	return Unsafe(r)
}

// Index returns the byte offset in s of the first rune unsafe in mode m, or -1 when
// there is none.
func (m Mode) Index(s string) int { return strings.IndexFunc(s, m.Unsafe) }

// Clean returns s with every rune unsafe in mode m replaced by repl(r) (an empty
// string drops it); s itself when there is none.
func (m Mode) Clean(s string, repl func(r rune) string) string {
	i := m.Index(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if m.Unsafe(r) {
			b.WriteString(repl(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Cut returns s cut to at most n runes and whether it was cut: a cut keeps the first
// n-1 runes and ends with [Ellipsis]. n below 1 cuts everything.
func Cut(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	if n < 1 {
		return "", true
	}
	k := 0
	for i := range s {
		if k == n-1 {
			return s[:i] + Ellipsis, true
		}
		k++
	}
	return s, false // not reached: s has more than n runes
}

// CutBytes returns s cut to at most n bytes on a rune boundary and whether it was cut:
// a cut ends with [Ellipsis], counted in n. n below len(Ellipsis) cuts everything.
func CutBytes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	if n < len(Ellipsis) {
		return "", true
	}
	return Head(s, n-len(Ellipsis)) + Ellipsis, true
}

// Head returns the longest prefix of s of at most n bytes that does not split a
// rune, with no mark. A byte of invalid UTF-8 counts as a rune of its own.
func Head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// A rune that byte n is inside of starts at most UTFMax-1 bytes before it.
	for i := max(0, n-(utf8.UTFMax-1)); i < n; {
		_, size := utf8.DecodeRuneInString(s[i:])
		if i+size > n {
			return s[:i]
		}
		i += size
	}
	return s[:n]
}
