package fold

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// The fold with a checkpoint (docs/format.md §20 "Folding from a checkpoint", ADR
// 0019 §6): state = fold(the checkpoint's base, the entries above its cut). FoldInput
// then holds the base and, as Entries, the base's lines and the entries above the cut
// (Split); entries at or below the cut that the base does not keep are not given. The
// fold is the ordinary one, with these rules where an entry above the cut meets the
// base:
//
//   - Terminal at the cut: an entry above the cut of an order or ask the base holds as
//     terminal (accepted or cancelled; answered) is superseded, whatever its basis, and
//     so is a create of its id: it counts for nothing and is listed in
//     State.Superseded, naming the checkpoint and everyone involved.
//   - First in merged order is final at the cut: an idempotency key the base holds
//     stays the base's, a secret name's first author is the base's, and a create of an
//     id the base keeps beats a rival create above the cut, whatever their HLCs.
//   - Bounds below the cut: a grant.set, grant.revoke or the master's agent.retire
//     above the cut that bounds a segment below that segment's cut applies with the cut
//     as its bound, and a grant that names no bound for a segment the cut names is
//     bounded by the cut there (entries at or below the cut keep the grant they had
//     there); an attested bound at or below a segment's cut is settled by the cut, never
//     looked up, and one above it voids no line of the base (attest.go).
//   - Forks: the losing records the fold reads are those above the cut that Split left
//     out (ForksAbove); a fork at or below the cut is the cut's decision.
//
// Each of these, when it changes what a fold of every entry without the checkpoint
// would give, is also noted in State.Finality.

// Superseded is an entry above a checkpoint's cut that names a thing terminal at the
// cut: it counts for nothing. Involved are the entry's writer and everyone the base
// records as involved in the thing (author, holder, submitter, reviewers), to be told:
// each is also a Contest (Checkpoint set), so catch-up and status tell them as they
// tell a lost branch.
type Superseded struct {
	Ignored
	Epoch    int      `json:"epoch"`
	Involved []string `json:"involved"`
}

// supersededReason is the ignored reason of an entry on a thing terminal at the cut.
func supersededReason(epoch int, what string) string {
	return fmt.Sprintf("superseded by the owner's checkpoint (epoch %d): the %s was final at its cut", epoch, what)
}

// above reports whether e is an entry above the base's cut (not one of its lines).
func (st *State) above(e *ledger.Entry) bool {
	return st.base != nil && !st.base.HasLine(e.Hash())
}

// baseLine reports whether e is one of the base's lines.
func (st *State) baseLine(e *ledger.Entry) bool {
	return st.base != nil && st.base.HasLine(e.Hash())
}

// supersede lists e when it is an entry above the cut on a thing terminal at the cut,
// and reports whether it did.
func (st *State) supersede(e *ledger.Entry, ignore func(*ledger.Entry, string)) bool {
	if !st.above(e) || !st.base.terminalThing(e) {
		return false
	}
	what, involved, head := "", []string{e.Writer}, Step{}
	switch Family(e.Type) {
	case "order":
		o := st.base.TerminalOrder(e.Ref).Order
		what = "order " + string(o.State)
		if n := len(o.History); n > 0 {
			head = o.History[n-1]
		}
		involved = append(involved, o.Author, o.Holder)
		if o.Result != nil {
			involved = append(involved, o.Result.By)
		}
		for _, r := range o.Reviews {
			involved = append(involved, r.By)
		}
	case "ask":
		a := st.base.TerminalAsk(e.Ref).Ask
		what = "ask " + string(a.State)
		head = Step{Type: TypeAskAnswer, By: MasterWriter, HLC: a.Answered, Hash: a.Head}
		involved = append(involved, a.Author, MasterWriter)
	}
	slices.Sort(involved)
	involved = slices.DeleteFunc(slices.Compact(involved), func(s string) bool { return s == "" })
	why := supersededReason(st.base.Epoch, what)
	ignore(e, why)
	st.Superseded = append(st.Superseded, Superseded{
		Ignored: Ignored{Writer: e.Writer, Device: e.Device, Seq: e.Seq, Type: e.Type, Ref: e.Ref, Hash: e.Hash(), Reason: why},
		Epoch:   st.base.Epoch, Involved: involved})
	st.Contested = append(st.Contested, Contest{Ref: e.Ref, Winner: head, Involved: involved, Checkpoint: st.base.Epoch,
		Losers: []Step{{Type: e.Type, By: e.Writer, HLC: e.HLC, Hash: e.Hash()}}})
	st.finality("superseded " + e.Hash())
	return true
}

// finality notes a place where the checkpoint decided otherwise than a fold of every
// entry would.
func (st *State) finality(what string) {
	st.Finality = append(st.Finality, what)
}

// clampBounds returns the bounds (and bound hashes) an entry above the cut applies for
// writer's segments: a bound below a segment's cut is raised to the cut, a grant that
// names no bound for a segment the cut names is bounded by the cut there, and an
// attested bound at or below the cut loses its hash (the cut settles it).
func (st *State) clampBounds(writer string, e *ledger.Entry, bounds map[string]uint64, hashes map[string]string) (map[string]uint64, map[string]string) {
	if st.base == nil {
		return bounds, hashes
	}
	line := st.base.HasLine(e.Hash())
	if raised, ok := st.base.RaisedBounds[e.Hash()]; ok && line {
		bounds = raised // as the state was folded with it (Base.RaisedBounds)
	}
	var nb map[string]uint64
	var nh map[string]string
	for dev, b := range bounds {
		p, ok := st.base.Cut.At(writer, dev)
		if !ok {
			continue
		}
		if !line && b < p.Seq {
			if nb == nil {
				nb = maps.Clone(bounds)
			}
			nb[dev] = p.Seq
			st.finality(fmt.Sprintf("bound of %s/%s raised to the cut in %s", writer, dev, e.Hash()))
		}
		if _, has := hashes[dev]; has && b <= p.Seq {
			if nh == nil {
				nh = maps.Clone(hashes)
			}
			delete(nh, dev)
			if !line {
				st.finality(fmt.Sprintf("attested bound of %s/%s settled by the cut in %s", writer, dev, e.Hash()))
			}
		}
	}
	// A grant above the cut that names no bound for a segment the cut names would
	// cover that segment's entries at or below the cut: they keep the grant they had
	// there, as if it named the cut.
	if !line && e.Type != TypeAgentRetire {
		for _, p := range st.base.Cut {
			if _, named := bounds[p.Device]; p.Writer != writer || named {
				continue
			}
			if nb == nil {
				nb = maps.Clone(bounds)
				if nb == nil {
					nb = map[string]uint64{}
				}
			}
			if _, done := nb[p.Device]; !done {
				nb[p.Device] = p.Seq
				st.finality(fmt.Sprintf("bound of %s/%s set to the cut in %s", writer, p.Device, e.Hash()))
			}
		}
	}
	if nb != nil {
		bounds = nb
	}
	if nh != nil {
		hashes = nh
	}
	if _, ok := st.base.RaisedBounds[e.Hash()]; nb != nil || (ok && line) {
		if st.raised == nil {
			st.raised = map[string]map[string]uint64{}
		}
		st.raised[e.Hash()] = bounds
	}
	return bounds, hashes
}

// beginBase sets st's base before the passes. Its idempotency keys stay in it, read
// from their chunks when an entry above the cut names one (State.IdemGet).
func (st *State) beginBase(b *Base) {
	st.base = b
}

// takeIdem notes an entry above the cut whose idempotency key the base holds, when a
// fold without the checkpoint would have given it the key (its HLC is lower).
func (st *State) takeIdem(e *ledger.Entry, k string) {
	if !st.above(e) {
		return
	}
	if rec, ok, _ := st.base.idemRec(k); ok && rec.Hash != e.Hash() && EntryHLCBefore(e, rec.HLC) {
		st.finality("idempotency key " + k + " kept by the base over " + e.Hash())
	}
}

// EntryHLCBefore reports whether e's HLC is below hlc (what merged order decides first).
func EntryHLCBefore(e *ledger.Entry, hlc string) bool { return e.HLC < hlc }

// endBase adds the base's agent traces to st after the passes. Its terminal things stay
// in the base, read from their chunks when asked for (State.Order, State.Ask).
func (st *State) endBase(agent func(string) *Agent) {
	b := st.base
	st.Contested = append(st.Contested, b.Contested...)
	for _, name := range slices.Sorted(maps.Keys(b.Agents)) {
		tr := b.Agents[name]
		a := agent(name)
		for dev, seq := range tr.Segs {
			if seq > a.Segs[dev] {
				a.Segs[dev] = seq
			}
		}
		for _, d := range tr.Devices {
			if !slices.Contains(a.Devices, d) {
				a.Devices = append(a.Devices, d)
			}
		}
		slices.Sort(a.Devices)
		if tr.LastHLC > a.LastHLC {
			a.LastHLC = tr.LastHLC
		}
	}
	if b.MaxHLC > st.MaxHLC {
		st.MaxHLC = b.MaxHLC
	}
}

// baseFirst returns entries with the base's lines first, each part in its order: the
// order in which a rule that takes the first entry reads them once a checkpoint counts.
func (st *State) baseFirst(entries []*ledger.Entry) []*ledger.Entry {
	if st.base == nil {
		return entries
	}
	out := make([]*ledger.Entry, 0, len(entries))
	for _, e := range entries {
		if st.base.HasLine(e.Hash()) {
			out = append(out, e)
		}
	}
	for _, e := range entries {
		if !st.base.HasLine(e.Hash()) {
			out = append(out, e)
		}
	}
	return out
}

// rivalAcrossCut is the standing a rival create gets from the base: 1 for a create the
// base keeps when another is above the cut, so the base's wins whatever the writers'
// standing now.
func (st *State) rivalAcrossCut(e *ledger.Entry) int {
	if st.base != nil && st.base.HasLine(e.Hash()) {
		return 1
	}
	return 0
}

// sortSuperseded orders superseded entries as Ignored are.
func sortSuperseded(s []Superseded) {
	slices.SortFunc(s, func(a, b Superseded) int {
		return strings.Compare(a.Hash, b.Hash)
	})
}
