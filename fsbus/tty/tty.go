// Package tty draws ferry's only terminal output that is not plain text: a one-line
// progress display on stderr, and only when stderr is a terminal. Output
// that is piped or redirected never carries it, and no colour is ever printed, so
// NO_COLOR holds without a check. The line is redrawn in place with '\r' and erased
// with spaces, no escape sequences.
package tty

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// IsTerminal reports whether w is an *os.File open on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Progress is a one-line progress display. The zero value is unusable; use New or
// ForTerminal. Its methods are safe for concurrent use.
type Progress struct {
	w      io.Writer
	prefix string
	// Delay is how long a piece of work runs before the line shows (default 500 ms):
	// work that ends sooner prints nothing.
	Delay time.Duration
	// Every is the least time between two redraws (default 100 ms).
	Every time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time

	mu    sync.Mutex
	start time.Time // when the current work began; zero between pieces of work
	drawn time.Time // last redraw
	width int       // runes of the line on screen (0: nothing shown)
	stage string
}

// New draws on w unconditionally (tests, and callers that checked the terminal).
// prefix starts the line ("ferry").
func New(w io.Writer, prefix string) *Progress {
	return &Progress{w: w, prefix: prefix, Delay: 500 * time.Millisecond, Every: 100 * time.Millisecond}
}

// ForTerminal is New when w is a terminal and nil otherwise; a nil *Progress accepts
// every call and draws nothing.
func ForTerminal(w io.Writer, prefix string) *Progress {
	if !IsTerminal(w) {
		return nil
	}
	return New(w, prefix)
}

func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Report says how far the work is: stage names it ("checking signatures"), done and
// total count its units (total 0: unknown, shown without a count). The line appears
// once the work has run Delay, then is redrawn at most every Every and at each new
// stage. Report("", 0, 0) ends the work and erases the line.
func (p *Progress) Report(stage string, done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if stage == "" {
		p.erase()
		p.start, p.stage = time.Time{}, ""
		return
	}
	if p.start.IsZero() {
		p.start = now
	}
	if now.Sub(p.start) < p.Delay || (stage == p.stage && now.Sub(p.drawn) < p.Every && done != total) {
		return
	}
	line := p.prefix + ": " + stage
	if total > 0 {
		line += fmt.Sprintf(" %d/%d (%d%%)", done, total, done*100/total)
	} else {
		line += "…"
	}
	n := len([]rune(line))
	pad := ""
	if n < p.width {
		pad = strings.Repeat(" ", p.width-n)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.width, p.drawn, p.stage = n, now, stage
}

// erase blanks the line when one is shown.
func (p *Progress) erase() {
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}
