package fold

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// chainNode is a lifecycle entry in the chain tree of one thing (an order, an ask, the
// primary role), carrying the thing's state after it. S is the state machine's state.
type chainNode[S any] struct {
	e        *ledger.Entry // nil for a virtual root (a chain with no creating entry)
	d        EntryData
	lvl      Level // level the entry fell under
	children []*chainNode[S]
	state    S    // state after this entry (valid nodes only)
	valid    bool // the entry was allowed from its parent's state
	rank     int  // highest stage rank reached in this node's subtree
}

func (n *chainNode[S]) hash() string {
	if n.e == nil {
		return ""
	}
	return n.e.Hash()
}

// chainRules is one thing's state machine: step applies a child entry to its parent's
// state or refuses it (the same function the write path checks with), rank is the
// stage rank of a state (docs/format.md §14).
type chainRules[S any] struct {
	step func(s S, n *chainNode[S]) (S, error)
	rank func(s S) int
}

// linkChain attaches every node to the node its data.basis names among byHash (which
// holds the roots and the nodes). A node whose basis has not arrived is pending and
// counted per ref; one whose basis lies in another thing's chain is ignored. A node
// with an empty basis attaches to byHash[""] when the chain has a virtual root, and is
// pending otherwise.
//
// dangling, when not nil, hears the basis of every pending node with its ref: the
// incremental fold folds that thing again when the basis arrives (fold_incr.go).
// reasonOtherChain is the reason linkChain ignores an entry whose basis lies in another
// thing's chain.
const reasonOtherChain = "basis names an entry of another chain"

func linkChain[S any](nodes []*chainNode[S], byHash map[string]*chainNode[S], ignore func(*ledger.Entry, string), dangling func(basis, ref string)) (pending map[string]int) {
	pending = map[string]int{}
	for _, n := range nodes {
		parent := byHash[n.d.Basis]
		if parent == nil {
			pending[n.e.Ref]++
			if dangling != nil {
				dangling(n.d.Basis, n.e.Ref)
			}
			continue
		}
		if parent.e != nil && parent.e.Ref != n.e.Ref {
			// A basis binds an entry to a chain only together with its ref.
			ignore(n.e, reasonOtherChain)
			continue
		}
		parent.children = append(parent.children, n)
	}
	return pending
}

// resolveChain applies the branch rule of docs/design.md §2 "Races across machines" to the
// tree under root (whose state is set): it validates every child against its parent's
// state (an invalid entry and everything built on it is ignored), ranks subtrees by the
// furthest stage reached, and walks the winning path — at each node the valid child
// of highest rank, ties to the lower entry hash. It returns the path (root first) and a
// contest for every node where valid branches competed, naming the winner, the losers
// and everyone involved (involved: extra names plus every writer in competing
// branches). Nothing here reads a clock.
func resolveChain[S any](ref string, root *chainNode[S], r chainRules[S], involved []string, ignore func(*ledger.Entry, string)) (path []*chainNode[S], contests []Contest) {
	root.valid = true
	rankChain(root, r, ignore)
	n := root
	path = append(path, n)
	for {
		var valid []*chainNode[S]
		for _, ch := range n.children {
			if ch.valid {
				valid = append(valid, ch)
			}
		}
		if len(valid) == 0 {
			return path, contests
		}
		slices.SortFunc(valid, func(a, b *chainNode[S]) int {
			return cmp.Or(cmp.Compare(b.rank, a.rank), strings.Compare(a.e.Hash(), b.e.Hash()))
		})
		win := valid[0]
		if len(valid) > 1 {
			c := Contest{Ref: ref, Basis: n.hash(), Winner: stepOf(win)}
			who := map[string]bool{}
			for _, name := range involved {
				who[name] = true
			}
			for _, l := range valid[1:] {
				c.Losers = append(c.Losers, stepOf(l))
			}
			for _, b := range valid {
				markInvolved(b, who)
			}
			c.Involved = slices.Sorted(maps.Keys(who))
			contests = append(contests, c)
		}
		n = win
		path = append(path, n)
	}
}

// rankChain validates children and computes subtree ranks.
func rankChain[S any](n *chainNode[S], r chainRules[S], ignore func(*ledger.Entry, string)) {
	n.rank = r.rank(n.state)
	for _, ch := range n.children {
		next, err := r.step(n.state, ch)
		if err != nil {
			ignoreSubtree(ch, "not allowed: "+errMessage(err), ignore)
			continue
		}
		ch.valid, ch.state = true, next
		rankChain(ch, r, ignore)
		if ch.rank > n.rank {
			n.rank = ch.rank
		}
	}
}

func ignoreSubtree[S any](n *chainNode[S], why string, ignore func(*ledger.Entry, string)) {
	ignore(n.e, why)
	for _, ch := range n.children {
		ignoreSubtree(ch, "built on an entry that does not count", ignore)
	}
}

func markInvolved[S any](n *chainNode[S], seen map[string]bool) {
	seen[n.e.Writer] = true
	for _, ch := range n.children {
		if ch.valid {
			markInvolved(ch, seen)
		}
	}
}

func stepOf[S any](n *chainNode[S]) Step {
	return Step{Type: n.e.Type, By: n.e.Writer, HLC: n.e.HLC, Hash: n.e.Hash(), Note: n.d.Note, To: n.d.To, Verdict: n.d.Verdict}
}

func errMessage(err error) string {
	var fe *errs.Error
	if errors.As(err, &fe) {
		return fe.Message
	}
	return err.Error()
}
