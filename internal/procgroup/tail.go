package procgroup

import (
	"sync"
	"unicode/utf8"
)

// TailBuffer is an io.Writer that keeps the last Max bytes written to it (a child
// process's stderr: `ferry run` keeps StderrTail bytes, the MCP client 4 KiB). It is
// safe for concurrent use; String never starts inside a UTF-8 sequence the cut split.
type TailBuffer struct {
	Max int // bytes kept

	mu sync.Mutex
	b  []byte
}

// Write appends p, dropping the oldest bytes past Max. It never fails.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

// String returns the bytes kept.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.b)
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:] // the cut may split a rune
	}
	return s
}
