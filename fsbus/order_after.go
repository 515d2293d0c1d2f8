package fsbus

import (
	"slices"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// orderEntries returns the entries an order's fold depends on, in entries' order: every
// master entry (grants, revocations, retirements, policy), every agent.join and
// agent.retire (keys announced, self-retirements), and every entry whose ref is id
// (the order's create, lifecycle, progress and extend). An order's state, history,
// contests and pending count are a function of these alone (fold.go passes 1–2 build
// levels from the roster; foldOrders resolves each order's chain on its own), so
// Fold of this subset gives the same Order as Fold of all entries —
// TestOrderFoldOfSubsetMatches holds it to that on the busy fixture and random channels.
func orderEntries(entries []ledger.Entry, id string) []ledger.Entry {
	var out []ledger.Entry
	for _, e := range entries {
		if e.Writer == fold.MasterWriter || e.Ref == id || e.Type == fold.TypeAgentJoin || e.Type == fold.TypeAgentRetire {
			out = append(out, e)
		}
	}
	return out
}

// foldOrder folds the view's entries plus e (when e was just written; e.Seq 0 means
// none) for order id only: the order as every reader will fold it, at the cost of the
// roster and that order's entries instead of the whole ledger (a write costs
// one full fold, the one under the lock, not two). It returns nil when id is not an
// order of that fold.
func (s *Session) foldOrder(v *View, e ledger.Entry, id string) *fold.Order {
	var entries []ledger.Entry
	if f := v.fold; f != nil {
		// The incremental fold keeps the roster and each order's entries apart.
		entries = slices.Clone(f.Roster)
		for _, e := range f.Things["o"+id] {
			entries = append(entries, *e)
		}
	} else {
		entries = orderEntries(v.Snapshot.Entries, id)
	}
	if e.Seq != 0 {
		entries = append(entries, e) // Fold puts them in merged order
	}
	// From the owner's checkpoint the view was folded from, when there is one: the
	// rules where an entry above its cut meets its state apply, and an order terminal
	// at its cut is read from its chunk.
	base := v.State.Base()
	return fold.Fold(fold.FoldInput{Project: s.Project(), Master: s.MasterKey, Entries: entries, Objects: s.objects(), Base: base}).Order(id)
}
