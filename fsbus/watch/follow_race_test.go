package watch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
)

// TestFollowBesideWriters: a follower (ferry watch) while two other processes post
// messages and a third loads without pause: every entry is reported exactly once.
func TestFollowBesideWriters(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	ready := make(chan struct{})
	done := make(chan error, 1)
	fc := fsbustest.Reopen(t, w.c)
	go func() {
		done <- Follow(ctx, fc, FollowOptions{OnReady: func(bool) { close(ready) }}, func(e FollowEvent) error {
			if e.Kind == FollowEntry && e.Type == fold.TypeMsgPost {
				mu.Lock()
				seen[e.Ref]++
				mu.Unlock()
			}
			return nil
		})
	}()
	<-ready
	// A third process loads all the time, logging each entry as soon as it is there:
	// often while the follower is between reading the segments and the log.
	logger := fsbustest.Reopen(t, w.c)
	stop := make(chan struct{})
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := logger.Load(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	per := 60 // messages each writer posts
	if testing.Short() {
		per = 20
	}
	var wg sync.WaitGroup
	sent := make(chan string, 2*per)
	for _, name := range []string{"alice", "carol"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := otherWriter(t, w, name)
			for i := range per {
				m, err := s.TalkSend(fsbus.TalkSendOptions{To: "bob", Body: fmt.Sprintf("%s %d", name, i)})
				if err != nil {
					t.Error(err)
					return
				}
				sent <- m.ID
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-logged
	close(sent)
	deadline := time.Now().Add(watchDeadline)
	for id := range sent {
		for {
			mu.Lock()
			n := seen[id]
			mu.Unlock()
			if n > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2*per {
		t.Fatalf("the follower reported %d of %d messages", len(seen), 2*per)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("message %s reported %d times", id, n)
		}
	}
}

// TestWatchResumesFromAnyEvent: going on from the cursor of any event a watch
// reported — here the entry of a message, which comes before the message's own event
// — reports that message again: a consumer that stops between the two loses nothing.
// The last event's cursor moves past them all.
func TestWatchResumesFromAnyEvent(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	v0, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	m := w.send(t, w.alice, "bob", "hello")
	v, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	report := func(since string) []FollowEvent {
		t.Helper()
		f := &follower{c: w.c, me: "bob", orders: map[string]string{}, msgs: map[string]bool{}, contests: map[string]bool{}, sent: map[uint64]bool{}}
		n, ok := v.Arrivals.ParseCursor(since)
		if !ok {
			t.Fatalf("cursor %q", since)
		}
		f.start, f.last = n, n
		var out []FollowEvent
		if err := f.report(v, func(e FollowEvent) error { out = append(out, e); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	has := func(evs []FollowEvent) bool {
		return slices.ContainsFunc(evs, func(e FollowEvent) bool { return e.Kind == FollowMessage && e.ID == m.ID })
	}
	evs := report(v0.Arrivals.Cursor())
	i := slices.IndexFunc(evs, func(e FollowEvent) bool { return e.Kind == FollowEntry && e.Ref == m.ID })
	if i < 0 || !has(evs) || i == len(evs)-1 {
		t.Fatalf("events %+v: want the message's entry, then its message", evs)
	}
	if again := report(evs[i].Cursor); !has(again) {
		t.Fatalf("going on from the entry's cursor %s: %+v, without the message", evs[i].Cursor, again)
	}
	if last := report(evs[len(evs)-1].Cursor); has(last) {
		t.Fatalf("going on from the last event's cursor reported the message again: %+v", last)
	}
}
