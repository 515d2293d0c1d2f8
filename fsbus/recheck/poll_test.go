package recheck

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
)

// TestPollRechecksOnNewHeads: Start's loop, driven by ticks from the test, rechecks at
// the first tick after a head appears in the folder, and at no tick while the set of
// heads is unchanged (none in the folder at all, or the same ones); once ctx is done
// the loop returns.
func TestPollRechecksOnNewHeads(t *testing.T) {
	root := t.TempDir()
	open := func() (*fsbus.Channel, error) { return &fsbus.Channel{Root: root}, nil }
	dir := ""
	var runs atomic.Int32
	p := &poller{
		heads: func() (string, error) { return headNames(open, &dir) },
		run:   func() (*Result, error) { runs.Add(1); return &Result{Outcome: Match, Epoch: 1}, nil },
		log:   io.Discard,
	}
	ctx, cancel := context.WithCancel(context.Background())
	tick, done := make(chan time.Time), make(chan struct{})
	go func() {
		defer close(done)
		p.loop(ctx, tick)
	}()
	// tick sends n ticks; a send returns once the loop receives it, so when tick
	// returns every step before the last has ended, and the last has at least begun.
	ticks := func(n int) {
		for range n {
			tick <- time.Time{}
		}
	}
	head := func(name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, "checkpoints", name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "checkpoints", name, "head.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ticks(3)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d rechecks of a folder with no checkpoint head", n)
	}
	head("owner")
	ticks(2) // the first tick's step ends before the second is received
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d rechecks at the tick after a head appeared, want 1", n)
	}
	ticks(5)
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d rechecks with the heads unchanged, want still 1", n)
	}
	head("other")
	ticks(2)
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d rechecks after a second head appeared, want 2", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against a hang, not a measure of speed
		t.Fatal("the loop goes on after its context is done")
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d rechecks in all, want 2", n)
	}
}

// TestPollRetriesPendingWithBackoff: a pending recheck (or a failed one) is tried again
// at the next poll, then after twice as many polls each time up to an hour's, at the
// same heads; a result that is not pending ends the retries; new heads, even in the
// middle of a backoff, start again from one poll.
func TestPollRetriesPendingWithBackoff(t *testing.T) {
	poll, heads := 0, "a"
	var at []time.Duration // when each recheck ran: its poll's time since the first
	outcome := func() (*Result, error) { return &Result{Outcome: Pending}, nil }
	var log strings.Builder
	p := &poller{
		heads: func() (string, error) { return heads, nil },
		run: func() (*Result, error) {
			at = append(at, time.Duration(poll)*Poll)
			return outcome()
		},
		log: &log,
	}
	until := func(d time.Duration) {
		for ; time.Duration(poll)*Poll <= d; poll++ {
			p.step()
		}
	}
	gaps := func() []time.Duration {
		var g []time.Duration
		for i := 1; i < len(at); i++ {
			g = append(g, at[i]-at[i-1])
		}
		return g
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour, time.Hour}
	until(63*time.Minute + 3*time.Hour)
	if g := gaps(); !slices.Equal(g, want) || at[0] != 0 {
		t.Fatalf("%d pending rechecks, at %v… (gaps %v…); want one at once, then gaps %v", len(at), at[:min(len(at), 12)], g[:min(len(g), 12)], want)
	}

	// A recheck that is not pending ends the retries.
	outcome = func() (*Result, error) { return &Result{Outcome: Match, Epoch: 1}, nil }
	until(63*time.Minute + 4*time.Hour)
	n := len(at)
	until(63*time.Minute + 10*time.Hour)
	if len(at) != n || !strings.Contains(log.String(), "epoch 1: match") {
		t.Fatalf("%d rechecks after a match, want none; log %q", len(at)-n, log.String())
	}

	// New heads: at once, then a poll later again; a failed recheck backs off as a
	// pending one does.
	outcome = func() (*Result, error) { return nil, errors.New("disk on fire") }
	heads, at = "a\nb", nil
	start := time.Duration(poll) * Poll
	until(start + 7*time.Minute)
	if g := gaps(); len(at) == 0 || at[0] != start || !slices.Equal(g, want[:3]) {
		t.Fatalf("failed rechecks of new heads at %v (gaps %v); want one at %v, then gaps %v", at, g, start, want[:3])
	}
	if !strings.Contains(log.String(), "disk on fire") {
		t.Fatalf("log %q", log.String())
	}

	// Heads that change in the middle of a backoff: at once, then a poll later.
	heads, at = "a\nb\nc", nil
	start = time.Duration(poll) * Poll
	until(start + 3*time.Minute)
	if g := gaps(); len(at) == 0 || at[0] != start || !slices.Equal(g, want[:2]) {
		t.Fatalf("rechecks of heads changed during a backoff at %v (gaps %v); want one at %v, then gaps %v", at, g, start, want[:2])
	}
}
