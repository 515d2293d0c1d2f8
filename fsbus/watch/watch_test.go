package watch

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/fsnotify/fsnotify"
)

// Waiting for change (docs/design.md §4 long-poll): a write by another session wakes a wait,
// with fsnotify and with the polling fallback; new writer directories are watched as
// they appear; the time running out and a cancelled wait both return. Every wait runs
// under a generous deadline that only a hang reaches: no assertion is on elapsed time.

// watchDeadline bounds every wait of these tests: far above any wake-up, far below
// the go test timeout.
const watchDeadline = 30 * time.Second

// never is a Rescan interval no test reaches: with it, only fsnotify can wake a wait.
const never = time.Hour

// otherWriter opens the channel of w again, as a second process would, and returns
// name's session on it.
func otherWriter(t *testing.T, w *talkWorld, name string) *fsbus.Session {
	t.Helper()
	c, err := fsbus.Open(w.c.Home, w.c.Root)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitResult is what a WaitFor in a goroutine returned.
type waitResult struct {
	v   *fsbus.View
	err error
}

// startWait runs WaitFor in a goroutine; waiting is closed once it first waits.
func startWait(ctx context.Context, c *fsbus.Channel, opt WatchOptions, ready func(*fsbus.View) bool) (waiting <-chan struct{}, done <-chan waitResult) {
	w := make(chan struct{})
	var once sync.Once
	opt.OnWait = func() { once.Do(func() { close(w) }) }
	d := make(chan waitResult, 1)
	go func() {
		v, err := WaitFor(ctx, c, opt, ready)
		d <- waitResult{v, err}
	}()
	return w, d
}

// await returns what the wait returned, failing the test when it hangs.
func await(t *testing.T, done <-chan waitResult, what string) waitResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(watchDeadline + 5*time.Second):
		t.Fatalf("%s: WaitFor never returned", what)
		return waitResult{}
	}
}

func TestWaitForWakesOnAnotherWriter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  WatchOptions
	}{
		// fsnotify alone: the timed rescan is out of reach, so only an event can wake.
		{"fsnotify", WatchOptions{Rescan: never}},
		// The fallback: no fsnotify, a rescan every 50 ms.
		{"poll", WatchOptions{Poll: true, Rescan: 50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTalkWorld(t)
			alice := otherWriter(t, w, "alice")
			ctx, cancel := context.WithTimeout(context.Background(), watchDeadline)
			defer cancel()
			waiting, done := startWait(ctx, w.c, tc.opt, func(v *fsbus.View) bool { return v.TalkWaiting("bob", "") > 0 })
			select {
			case <-waiting:
			case r := <-done:
				t.Fatalf("WaitFor returned before anything was written: %v", r.err)
			}
			sent, err := alice.TalkSend(fsbus.TalkSendOptions{To: "bob", Body: "the build is green"})
			if err != nil {
				t.Fatal(err)
			}
			r := await(t, done, tc.name)
			if r.err != nil {
				t.Fatalf("WaitFor = %v, want woken by alice's message", r.err)
			}
			if m, ok := r.v.State.Messages[sent.ID]; !ok || m.To != "bob" {
				t.Fatalf("woken view holds %v, want alice's message %s", slices.Collect(maps.Keys(r.v.State.Messages)), sent.ID)
			}
		})
	}
}

func TestWatcherFallsBackToPolling(t *testing.T) {
	w := newTalkWorld(t)
	if pw := Watch(w.c, WatchOptions{Poll: true}); !pw.Polling() {
		t.Error("WatchOptions.Poll: the watcher does not poll")
	} else {
		pw.Close()
	}
	t.Setenv(envWatch, "poll")
	pw := Watch(w.c, WatchOptions{})
	defer pw.Close()
	if !pw.Polling() {
		t.Errorf("%s=poll: the watcher does not poll", envWatch)
	}
	os.Unsetenv(envWatch)
	nw := Watch(w.c, WatchOptions{})
	defer nw.Close()
	if nw.Polling() {
		t.Errorf("without %s the watcher polls: fsnotify did not start here", envWatch)
	}
}

func TestWatcherAddsNewWriterDirectories(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	wa := Watch(w.c, WatchOptions{Rescan: never})
	defer wa.Close()
	if wa.Polling() {
		t.Fatal("fsnotify did not start")
	}
	// erin has never written: her ledger directory does not exist yet.
	dir := filepath.Join(w.c.Root, "ledger", "erin")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists before erin joined", dir)
	}
	if _, err := fsbus.Join(w.c, "erin", "test"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(watchDeadline)
	for !slices.Contains(wa.fw.WatchList(), dir) {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher never added %s; it watches %v", dir, wa.fw.WatchList())
		}
		select {
		case <-wa.C:
		case <-time.After(10 * time.Millisecond):
		}
	}
	// An append to erin's own segment, and nothing else, now wakes this watcher.
	if _, err := w.master.Grant(fsbus.GrantOptions{Agent: "erin", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	o, err := w.alice.NewOrder(fsbus.NewOrderOptions{Title: "try the fix"})
	if err != nil {
		t.Fatal(err)
	}
	erin := otherWriter(t, w, "erin")
	for quiet := false; !quiet; { // drain the hints of the writes above
		select {
		case <-wa.C:
		case <-time.After(300 * time.Millisecond):
			quiet = true
		}
	}
	if _, err := erin.Claim(o.ID, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wa.C:
	case <-time.After(watchDeadline):
		t.Fatalf("an append to %s did not wake the watcher", dir)
	}
}

func TestWaitForTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	notYet := func(*fsbus.View) bool { return false }

	// The time runs out: the last view comes back with DeadlineExceeded.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	v, err := WaitFor(ctx, w.c, WatchOptions{}, notYet)
	if !errors.Is(err, context.DeadlineExceeded) || v == nil || v.State == nil {
		t.Fatalf("WaitFor past its deadline = (%v, %v), want the last view and DeadlineExceeded", v, err)
	}

	// A cancelled wait returns promptly, with both watch modes.
	for _, opt := range []WatchOptions{{Rescan: never}, {Poll: true, Rescan: never}} {
		ctx, cancel := context.WithCancel(context.Background())
		waiting, done := startWait(ctx, w.c, opt, notYet)
		select {
		case <-waiting:
		case r := <-done:
			t.Fatalf("WaitFor returned before it waited: %v", r.err)
		}
		cancel()
		if r := await(t, done, "cancel"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled WaitFor (poll %v) = %v, want context.Canceled", opt.Poll, r.err)
		}
	}
}

func TestArrivedSince(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	v := w.load(t)
	cur := v.Arrivals.Cursor()
	for _, since := range []string{"", "0123abcd.7", "nonsense"} {
		if !v.ArrivedSince(since, "bob") {
			t.Errorf("ArrivedSince(%q) = false, want true (no usable cursor: everything is new)", since)
		}
	}
	if v.ArrivedSince(cur, "bob") {
		t.Errorf("ArrivedSince(the current cursor) = true, want false")
	}
	w.send(t, w.bob, "alice", "my own write")
	if v := w.load(t); v.ArrivedSince(cur, "bob") {
		t.Errorf("bob's own message is news to bob")
	} else if !v.ArrivedSince(cur, "alice") {
		t.Errorf("bob's message is not news to alice")
	}
}

func TestTalkWaiting(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	cur := w.load(t).Arrivals.Cursor()
	if n := w.load(t).TalkWaiting("bob", ""); n != 0 {
		t.Fatalf("TalkWaiting on an empty channel = %d", n)
	}
	w.send(t, w.alice, "carol", "not for bob")
	if n := w.load(t).TalkWaiting("bob", cur); n != 0 {
		t.Fatalf("a message to carol counts for bob: %d", n)
	}
	w.send(t, w.alice, "bob", "for bob")
	w.send(t, w.alice, "all", "for everyone")
	if n := w.load(t).TalkWaiting("bob", cur); n != 2 {
		t.Fatalf("TalkWaiting(bob, cursor) = %d, want 2", n)
	}
	w.read(t, w.bob, fsbus.TalkReadOptions{})
	v := w.load(t)
	if n := v.TalkWaiting("bob", ""); n != 0 {
		t.Fatalf("TalkWaiting(bob) after reading = %d, want 0 (nothing unread)", n)
	}
	if n := v.TalkWaiting("bob", cur); n != 2 {
		t.Fatalf("TalkWaiting(bob, old cursor) after reading = %d, want 2 (a cursor lists read ones too)", n)
	}
}

// TestWatcherIgnoresTempNames: temp files of every sync tool, and our own, neither
// change the rescan's signature nor wake a watcher; the file they become does both
// (docs/design.md §2 rule 3).
func TestWatcherIgnoresTempNames(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	for _, mode := range []struct {
		name string
		opt  WatchOptions
	}{{"fsnotify", WatchOptions{Rescan: never}}, {"poll", WatchOptions{Poll: true, Rescan: 20 * time.Millisecond}}} {
		t.Run(mode.name, func(t *testing.T) {
			wa := Watch(w.c, mode.opt)
			defer wa.Close()
			if wa.Polling() != mode.opt.Poll {
				t.Fatalf("Polling() = %v, want %v", wa.Polling(), mode.opt.Poll)
			}
			drain(wa)
			before := wa.scan()
			seg := filepath.Join(w.c.Root, "ledger", "alice")
			orders := filepath.Join(w.c.Root, "orders")
			temps := []string{
				filepath.Join(orders, ".syncthing.o-0000000000000.json.tmp"),
				filepath.Join(orders, "~syncthing~o-0000000000001.json.tmp"),
				filepath.Join(orders, ".ferry-o-0000000000002.json-99.tmp"),
				filepath.Join(orders, "~$notes.md"),
				filepath.Join(seg, "zzzzzzzz.jsonl.tmp"),
				filepath.Join(seg, "zzzzzzzz.torn-1"),
			}
			for _, p := range temps {
				if err := os.WriteFile(p, []byte(mode.name+" in progress"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := wa.scan(); got != before {
				t.Fatalf("temp files changed the rescan signature")
			}
			select {
			case <-wa.C:
				t.Fatalf("temp files woke the watcher")
			case <-time.After(300 * time.Millisecond):
			}
			// The temp file becomes a real one: that is news.
			final := filepath.Join(orders, "o-00000000000"+mode.name[:2]+".json")
			if err := os.Rename(temps[0], final); err != nil {
				t.Fatal(err)
			}
			if got := wa.scan(); got == before {
				t.Fatalf("a published file did not change the rescan signature")
			}
			select {
			case <-wa.C:
			case <-time.After(watchDeadline):
				t.Fatalf("a published file did not wake the watcher")
			}
			for _, p := range append(temps[1:], final) {
				os.Remove(p)
			}
		})
	}
}

// drain empties the watcher's pending hints, waiting until it has been quiet a while.
func drain(wa *Watcher) {
	for {
		select {
		case <-wa.C:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// TestWatcherRescansOnOverflow: when fsnotify reports lost events
// (fsnotify.ErrEventOverflow), the watcher re-adds its directories and hints, though
// nothing it can see changed: the reader looks again.
func TestWatcherRescansOnOverflow(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	wa := Watch(w.c, WatchOptions{Rescan: never})
	defer wa.Close()
	if wa.Polling() {
		t.Fatal("fsnotify did not start")
	}
	drain(wa)
	// A writer directory made while events were being lost: the overflow's rescan
	// must watch it.
	dir := filepath.Join(w.c.Root, "ledger", "zed")
	wa.fw.Remove(filepath.Join(w.c.Root, "ledger")) // so no create event announces it
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wa.fw.Errors <- fsnotify.ErrEventOverflow
	select {
	case <-wa.C:
	case <-time.After(watchDeadline):
		t.Fatal("an overflow did not wake the watcher")
	}
	if !slices.Contains(wa.fw.WatchList(), dir) {
		t.Fatalf("after the overflow the watcher does not watch %s: %v", dir, wa.fw.WatchList())
	}
}

// TestWatcherTimedRescan: with fsnotify on, a change it is not told about (here: in a
// directory removed from its watch list, as on a network drive whose events never
// come) is found by the timed rescan.
func TestWatcherTimedRescan(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	wa := Watch(w.c, WatchOptions{Rescan: 50 * time.Millisecond})
	defer wa.Close()
	if wa.Polling() {
		t.Fatal("fsnotify did not start")
	}
	drain(wa)
	orders := filepath.Join(w.c.Root, "orders")
	if err := wa.fw.Remove(orders); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orders, "o-0000000000009.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wa.C:
	case <-time.After(watchDeadline):
		t.Fatal("the timed rescan did not notice a new order file")
	}
}
