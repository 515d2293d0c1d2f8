package fold

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Scoped grants (docs/format.md §13 "Scopes"; docs/design.md §2 "Identity, trust and
// levels": a grant.set carries optional scopes). A grant that names scopes limits its
// agent to orders carrying at least one of those labels: the agent may claim only such
// orders and only such orders may be offered to it. A grant without scopes limits
// nothing. The rule holds on write (checkScope: denied, naming the scopes) and, for
// claims, in the fold (scopeChain: a hand-written claim beyond the scopes counts for
// nothing and is listed in State.Ignored).

// InScope reports whether an agent granted scopes may claim, or be offered, an order
// carrying labels: true when scopes is empty or when the two share a label (labels
// compare exactly, as written).
func InScope(scopes, labels []string) bool {
	if len(scopes) == 0 {
		return true
	}
	for _, l := range labels {
		if slices.Contains(scopes, l) {
			return true
		}
	}
	return false
}

// scopeError is the denied error for an agent whose scopes do not cover an order.
func scopeError(agent string, scopes []string, o *Order, act string) error {
	what := "order " + o.ID
	if o.ID == "" {
		what = "the new order"
	}
	labels := "no labels"
	if len(o.Labels) > 0 {
		labels = "labels " + strings.Join(o.Labels, ", ")
	}
	return errs.Errorf(errs.Denied,
		fmt.Sprintf("pick an order labelled %s, or ask the owner to widen the grant (`ferry grant %s --level LEVEL --scope LABEL`)", strings.Join(scopes, " or "), agent),
		"%s's grant is scoped to %s; %s carries %s, so it cannot be %s", agent, strings.Join(scopes, ", "), what, labels, act)
}

// CheckScope is the write-side rule: it returns denied when the entry typ (a claim by
// writer, or an offer to d.To) would reach an agent whose newest grant's scopes the
// order's labels do not meet, and nil otherwise.
func (st *State) CheckScope(writer, typ string, o *Order, to string) error {
	switch typ {
	case TypeOrderClaim:
		if a := st.Agents[writer]; a != nil && !InScope(a.Scopes, o.Labels) {
			return scopeError(writer, a.Scopes, o, "claimed by it")
		}
	case TypeOrderOffer, TypeOrderCreate:
		if a := st.Agents[to]; to != "" && a != nil && !InScope(a.Scopes, o.Labels) {
			return scopeError(to, a.Scopes, o, "offered to it")
		}
	}
	return nil
}

// scopeChain is the fold-side rule, run on one order's chain tree before it is
// resolved: an order.claim whose writer's covering grant (the grant the claim entry
// falls under, docs/design.md §2 grant bounds) names scopes the order's labels miss is cut from
// the tree with everything built on it and listed as ignored.
//
// Offers are refused on write but not cut here: whether an offer came before or after
// the recipient's grant was scoped cannot be told without a clock (the author's and the
// owner's entries share no chain), and an offer the fold voided on a later re-grant
// would rewrite history. An out-of-scope offer can never lead to a claim that counts;
// the author (or an orchestrator) offers the order again.
func scopeChain(st *State, o *Order, root *orderNode, ignore func(*ledger.Entry, string)) {
	var walk func(n *orderNode)
	walk = func(n *orderNode) {
		kept := n.children[:0]
		for _, ch := range n.children {
			if why := st.outOfScope(ch, o); why != "" {
				ignoreSubtree(ch, why, ignore)
				continue
			}
			kept = append(kept, ch)
			walk(ch)
		}
		n.children = kept
	}
	walk(root)
}

// outOfScope returns why a lifecycle node breaks its order's scope rule, or "".
func (st *State) outOfScope(n *orderNode, o *Order) string {
	switch n.e.Type {
	case TypeOrderClaim:
		a := st.Agents[n.e.Writer]
		g, ok := a.Cover(n.e.Device, n.e.Seq)
		if ok && !InScope(g.scopes, o.Labels) {
			return fmt.Sprintf("claim outside the writer's scopes (%s)", strings.Join(g.scopes, ", "))
		}
	}
	return ""
}

// ScopesNow is the scopes of an agent's newest grant (nil: unscoped or unknown).
func (st *State) ScopesNow(name string) []string {
	if a := st.Agents[name]; a != nil {
		return a.Scopes
	}
	return nil
}
