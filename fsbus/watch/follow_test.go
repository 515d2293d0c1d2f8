package watch

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// TestFollow: Follow reports, as they arrive, every entry, the orders and messages
// that concern its follower (never those of others), and a contest once, naming the
// winner; nothing already there when it started (`ferry watch`). Both watch
// modes.
func TestFollow(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		opt  WatchOptions
	}{{"fsnotify", WatchOptions{Rescan: never}}, {"poll", WatchOptions{Poll: true, Rescan: 20 * time.Millisecond}}} {
		t.Run(mode.name, func(t *testing.T) {
			w := newTalkWorld(t)
			w.send(t, w.alice, "bob", "old news") // before the start: not reported
			events := make(chan FollowEvent, 100)
			ready := make(chan bool, 1)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Follow(ctx, w.c, FollowOptions{As: "bob", Watch: mode.opt, OnReady: func(p bool) { ready <- p }},
					func(e FollowEvent) error {
						select {
						case events <- e:
						default: // a failed test stopped reading
						}
						return nil
					})
			}()
			stopped := false
			t.Cleanup(func() { // a failed test's Follow must end before its folder goes
				if !stopped {
					cancel()
					<-done
				}
			})
			select {
			case p := <-ready:
				if p != mode.opt.Poll {
					t.Fatalf("polling %v, want %v", p, mode.opt.Poll)
				}
			case err := <-done:
				t.Fatalf("Follow returned before it was ready: %v", err)
			}
			alice := otherWriter(t, w, "alice")
			msg, err := alice.TalkSend(fsbus.TalkSendOptions{To: "bob", Body: "the build is green"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := alice.TalkSend(fsbus.TalkSendOptions{To: "carol", Body: "not for bob"}); err != nil {
				t.Fatal(err)
			}
			offered, err := alice.NewOrder(fsbus.NewOrderOptions{Title: "for bob", To: "bob"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := alice.NewOrder(fsbus.NewOrderOptions{Title: "for carol", To: "carol"}); err != nil {
				t.Fatal(err)
			}
			o, err := alice.NewOrder(fsbus.NewOrderOptions{Title: "fix the flaky test"})
			if err != nil {
				t.Fatal(err)
			}
			// alice claims; bob, on a machine that had not seen her claim, claims too:
			// two claims name the order's creation as basis.
			if _, err := alice.Claim(o.ID, ""); err != nil {
				t.Fatal(err)
			}
			bob := otherWriter(t, w, "bob")
			if _, err := bob.Ledger.Append("bob", bob.Device, ledger.Draft{Type: fold.TypeOrderClaim, Ref: o.ID, Data: testJSON(fold.EntryData{Basis: o.Head})}, bob.Signer, ledger.HLC{}); err != nil {
				t.Fatal(err)
			}

			var got []FollowEvent
			want := func(ok func([]FollowEvent) bool) {
				t.Helper()
				deadline := time.After(watchDeadline)
				for !ok(got) {
					select {
					case e := <-events:
						got = append(got, e)
					case <-deadline:
						t.Fatalf("events so far: %+v", got)
					}
				}
			}
			has := func(kind string, match func(FollowEvent) bool) func([]FollowEvent) bool {
				return func(es []FollowEvent) bool {
					return slices.ContainsFunc(es, func(e FollowEvent) bool { return e.Kind == kind && match(e) })
				}
			}
			want(has(FollowMessage, func(e FollowEvent) bool {
				return e.ID == msg.ID && e.From == "alice" && e.Preview == "the build is green"
			}))
			want(has(FollowContest, func(e FollowEvent) bool { return e.Ref == o.ID && e.Winner != "" && len(e.Lost) == 1 }))
			want(func(es []FollowEvent) bool {
				n := 0
				for _, e := range es {
					if e.Kind == FollowEntry {
						n++
					}
				}
				return n == 7 // two posts, three creates, two claims
			})
			want(has(FollowOrder, func(e FollowEvent) bool {
				return e.ID == offered.ID && e.State == string(fold.StateOffered) && e.OfferedTo == "bob" && e.Title == "for bob"
			}))
			cancel()
			select {
			case err := <-done:
				stopped = true
				if err != nil {
					t.Fatalf("Follow after cancel = %v, want nil", err)
				}
			case <-time.After(watchDeadline):
				t.Fatal("Follow did not return after cancel")
			}
			close(events)
			for e := range events {
				got = append(got, e)
			}
			var last uint64
			seen := map[string]int{}
			for _, e := range got {
				switch e.Kind {
				case FollowEntry:
					if e.Type == fold.TypeMsgPost && e.Writer != "alice" {
						t.Errorf("entry %+v", e)
					}
					// Cursors never go back (events reported together share where they
					// began; the last names where they ended).
					var n uint64
					if _, err := fmtSscanCursor(e.Cursor, &n); err != nil || n < last {
						t.Errorf("entry cursor %q after %d", e.Cursor, last)
					}
					last = n
				case FollowMessage:
					if e.Preview == "old news" || e.Preview == "not for bob" {
						t.Errorf("bob was told of %+v", e)
					}
				case FollowOrder:
					if e.Title == "for carol" {
						t.Errorf("bob was told of carol's order: %+v", e)
					}
				case FollowProblem:
					t.Errorf("problem: %s", e.Error)
				}
				seen[e.Kind+" "+e.ID+e.Ref]++
			}
			for k, n := range seen {
				if k[:len(FollowEntry)] != FollowEntry && n > 1 && k[:len(FollowOrder)] != FollowOrder {
					t.Errorf("%s reported %d times", k, n)
				}
			}
		})
	}
}

// fmtSscanCursor reads the arrival number of a cursor "<log id>.<n>".
func fmtSscanCursor(cur string, n *uint64) (int, error) {
	i := strings.LastIndexByte(cur, '.')
	v, err := strconv.ParseUint(cur[i+1:], 10, 64)
	*n = v
	return 1, err
}

// testJSON is v in canonical JSON, as entry data is written.
func testJSON(v any) []byte {
	b, err := ledger.Canonical(v)
	if err != nil {
		panic(err)
	}
	return b
}
