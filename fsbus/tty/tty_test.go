package tty

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestProgress: nothing before the delay, a line after it, redraws in place padded
// over the longer line before, throttled within a stage, erased at the end.
func TestProgress(t *testing.T) {
	var b bytes.Buffer
	clock := time.Unix(0, 0)
	p := New(&b, "ferry")
	p.Now = func() time.Time { return clock }
	p.Report("reading", 0, 0)
	clock = clock.Add(100 * time.Millisecond)
	p.Report("checking signatures", 10, 100)
	if b.Len() != 0 {
		t.Fatalf("drawn before the delay: %q", b.String())
	}
	clock = clock.Add(time.Second)
	p.Report("checking signatures", 40, 100)
	if got := b.String(); got != "\rferry: checking signatures 40/100 (40%)" {
		t.Fatalf("got %q", got)
	}
	clock = clock.Add(10 * time.Millisecond)
	p.Report("checking signatures", 50, 100) // within Every: not drawn
	if strings.Contains(b.String(), "50/100") {
		t.Errorf("not throttled: %q", b.String())
	}
	p.Report("folding", 0, 0) // a new stage is drawn at once, padded over the old line
	want := "\rferry: folding…" + strings.Repeat(" ", len("ferry: checking signatures 40/100 (40%)")-len([]rune("ferry: folding…")))
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("got %q, want suffix %q", b.String(), want)
	}
	b.Reset()
	p.Report("", 0, 0)
	if got := b.String(); got != "\r"+strings.Repeat(" ", len([]rune("ferry: folding…")))+"\r" {
		t.Errorf("erase: %q", got)
	}
	// The next piece of work starts its own delay.
	b.Reset()
	p.Report("reading", 0, 0)
	if b.Len() != 0 {
		t.Errorf("drawn at once: %q", b.String())
	}
}

// TestNotATerminal: a buffer, a file and a pipe get no progress at all.
func TestNotATerminal(t *testing.T) {
	var b bytes.Buffer
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, out := range []any{&b, f, w} {
		p := ForTerminal(out.(interface{ Write([]byte) (int, error) }), "ferry")
		if p != nil {
			t.Errorf("%T: progress on a non-terminal", out)
		}
		p.Report("x", 1, 2) // a nil Progress draws nothing and does not panic
		p.Report("", 0, 0)
	}
	if b.Len() != 0 {
		t.Errorf("wrote %q", b.String())
	}
}
