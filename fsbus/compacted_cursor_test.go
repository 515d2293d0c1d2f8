package fsbus

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
)

// TestCompactedCursor: a catch-up cursor from before the owner's checkpoint, whose
// changes since are at or below its cut (not in a reading from the cut), answers
// compacted with the checkpoint's epoch and the whole bounded digest — never an
// error, never a list that skips them (a talk read lists the unread messages) — whether the arrival log still holds those
// entries' lines or a compaction of the log dropped them; a cursor handed out after
// the checkpoint lists only what changed since.
func TestCompactedCursor(t *testing.T) {
	for _, logCompacted := range []bool{false, true} {
		t.Run(map[bool]string{false: "log kept", true: "log compacted"}[logCompacted], func(t *testing.T) {
			defer func(n int) { arrivalsCompactMin = n }(arrivalsCompactMin)
			arrivalsCompactMin = 1 << 30
			if logCompacted {
				arrivalsCompactMin = 1
			}
			w := newLifeWorld(t)
			must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "before the cursor"}))
			v, err := reopened(t, w.c).Load()
			if err != nil {
				t.Fatal(err)
			}
			old := w.c.Catchup(v, "bob", "").Next
			late := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "after the cursor"}))
			msg := must[*fold.Message](t)(w.alice.TalkSend(TalkSendOptions{To: "bob", Body: "after the cursor too"}))
			w.pass(time.Second) // seen before the settle time of 0 s: under the cut
			if c, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || c.Epoch != 1 {
				t.Fatalf("compact: %+v, %v", c, err)
			}
			r := reopened(t, w.c)
			var d *Catchup
			for range 2 { // the second reading is from the cut (and compacts the log)
				if v, err = r.Load(); err != nil {
					t.Fatal(err)
				}
				d = r.Catchup(v, "bob", old)
			}
			if v.Snapshot.Floors == nil {
				t.Fatal("the reading is not from the cut")
			}
			head, _ := os.ReadFile(r.arrivalsPath())
			if got := strings.Contains(strings.SplitN(string(head), "\n", 2)[0], " compacted "); got != logCompacted {
				t.Fatalf("arrival log compacted: %v, want %v", got, logCompacted)
			}
			if got := strings.Contains(string(head), "\nbelow "); got != logCompacted {
				t.Fatalf("arrival log holds a below line: %v, want %v", got, logCompacted)
			}
			if !d.Compacted || d.Epoch != 1 || d.Since {
				t.Fatalf("a cursor from before the checkpoint: compacted %v epoch %d since %v", d.Compacted, d.Epoch, d.Since)
			}
			if !slices.ContainsFunc(d.Open, func(o DigestRow) bool { return o.ID == late.ID }) {
				t.Fatalf("the whole digest lacks the order written after the cursor: %+v", d.Open)
			}
			bob, err := r.As("bob")
			if err != nil {
				t.Fatal(err)
			}
			tr, err := bob.TalkRead(TalkReadOptions{Since: old, Peek: true, Limit: fold.TalkReadLimit})
			if err != nil || !tr.Compacted || tr.Epoch != 1 || tr.Since || len(tr.Messages) != 1 || tr.Messages[0].ID != msg.ID {
				t.Fatalf("talk read from a cursor before the checkpoint: %+v, %v", tr, err)
			}
			// A cursor from after the checkpoint is served as usual.
			now := d.Next
			fresh := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "after the checkpoint"}))
			if v, err = r.Load(); err != nil {
				t.Fatal(err)
			}
			d = r.Catchup(v, "bob", now)
			if d.Compacted || !d.Since || len(d.Open) != 1 || d.Open[0].ID != fresh.ID {
				t.Fatalf("a cursor from after the checkpoint: compacted %v since %v open %+v", d.Compacted, d.Since, d.Open)
			}
		})
	}
}
