package fsbus

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
)

// TestOrderFoldOfSubsetMatches: folding only the roster and one order's entries
// (orderEntries) gives exactly the Order the whole ledger folds — state, history,
// contests, pending count, result, reviews, progress — on the two-machine scenario
// (branches, ties, revocations, retirements), on random arrival subsets of it, and
// on the busy fixture (a write refolds one order, not the ledger).
func TestOrderFoldOfSubsetMatches(t *testing.T) {
	t.Parallel()
	compared := 0
	same := func(t *testing.T, what string, full *fold.State, fold func(id string) *fold.State) {
		t.Helper()
		compared += len(full.Orders)
		if len(full.Orders) == 0 && what == "scenario" || what == "busy fixture" && len(full.Orders) < 40 {
			t.Fatalf("%s: no orders to compare", what)
		}
		for id, want := range full.Orders {
			got := fold(id).Orders[id]
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Fatalf("%s, order %s: the subset folds\n%s\nthe whole ledger\n%s", what, id, gb, wb)
			}
		}
	}

	w := propWorldFor(t)
	same(t, "scenario", w.full, func(id string) *fold.State { return w.fold(orderEntries(w.entries, id), nil) })
	r := propSeed(t)
	for i := range propIters(60) {
		sub, objs, mode := w.propSubset(r)
		sub = propShuffle(r, sub, 0)
		full := w.fold(sub, objs)
		same(t, fmt.Sprintf("subset %d (%s)", i, mode), full, func(id string) *fold.State { return w.fold(orderEntries(sub, id), objs) })
	}

	c := openBusyCopy(t)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "busy fixture", v.State, func(id string) *fold.State {
		return fold.Fold(fold.FoldInput{Project: c.Project(), Master: c.MasterKey, Entries: orderEntries(v.Snapshot.Entries, id), Objects: c.objects()})
	})
	t.Logf("%d orders compared", compared)
}
