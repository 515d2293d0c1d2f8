package fold

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// The incremental fold (catch-up and claims in O(new entries)).
//
// Every thing the fold keeps — an order, a message, an ask, a hand-in, the primary role
// with the presence standbys, the decisions — is a function of the roster (the entries
// that seat, bind and retire writers) and of that thing's own entries
// (TestOrderFoldOfSubsetMatches, TestIncrementalFoldMatchesFold). So when new entries
// only add to things, the state after them is the state before with each touched thing
// folded again from the roster plus its entries, and nothing else read again. A new
// entry that changes the roster (agent.*, grant.*, policy.*, a type of a family this
// binary does not fold per thing), a writer never seen, or an idempotency key already
// used by another entry makes the caller fold everything again, as does a snapshot that
// is not the last one plus appends (ledger.Snapshot.Added).
//
// Objects arrive on their own: a thing whose object file was missing at the last fold
// is folded again once the file is there, with no new entry. An object file changed in
// place after it was folded (tampering: objects are written once) is seen by the next
// full fold — `ferry doctor`, `ferry ledger verify`, a running process within
// FullFoldEvery, a new one within CheckpointTrust of the checkpoint's full fold.

// Folded is a State with what folding it again after new entries needs.
type Folded struct {
	State  *State         `json:"-"`
	Roster []ledger.Entry `json:"-"` // entries that build the roster, merged order
	// Things holds each thing's entries, in merged order, as pointers into the
	// snapshots they were read in (a copy of each entry would double the memory).
	Things map[string][]*ledger.Entry `json:"-"`
	// Missing maps each object file the fold found missing to its thing.
	Missing map[ObjRef]string `json:"-"`
	// Tips holds each chain's entry with the highest seq: (writer, device) → entry.
	Tips map[[2]string]*ledger.Entry `json:"-"`
	// Dangling maps the basis of each pending lifecycle entry to the things that
	// wait for it: when an entry with that hash arrives they are folded again.
	Dangling map[string][]string `json:"-"`
	// Crossed holds the things with an entry ignored because its basis lies in
	// another thing's chain: folding such a thing alone would take that entry for
	// pending, so touching one folds everything.
	Crossed map[string]bool `json:"-"`
}

// ObjRef names an object file: its author and id.
type ObjRef struct{ Writer, ID string }

// Thing keys: a one-letter kind and the id ("o" orders, "m" messages, "a" asks, "h"
// hand-ins), "P" for the primary chain and presence standbys, "D" for the decisions,
// and "x"+hash for an entry that belongs to no thing (an ack naming no message).
const (
	thingPrimary   = "P"
	thingDecisions = "D"
)

// ThingKeys returns the things an entry belongs to, or roster = true when it may change
// the roster or belongs to no family folded per thing.
func ThingKeys(e *ledger.Entry) (keys []string, roster bool) {
	switch Family(e.Type) {
	case "order":
		return []string{"o" + e.Ref}, false
	case "ask":
		return []string{"a" + e.Ref}, false
	case "handin":
		return []string{"h" + e.Ref}, false
	case "primary", "presence":
		return []string{thingPrimary}, false
	case "decision":
		return []string{thingDecisions}, false
	case "msg":
		if e.Type != TypeMsgAck {
			return []string{"m" + e.Ref}, false
		}
		if d, ok := DecodeData(e); ok {
			for _, id := range d.IDs {
				keys = append(keys, "m"+id)
			}
		}
		if len(keys) == 0 {
			keys = []string{"x" + e.Hash()}
		}
		return keys, false
	}
	return nil, true
}

// objectThing is the thing key of an object id ("" for a kind the fold does not read).
func objectThing(id string) string {
	for _, p := range []string{PrefixOrder, PrefixMessage, PrefixAsk, PrefixHandin} {
		if strings.HasPrefix(id, p) {
			return p[:1] + id
		}
	}
	return ""
}

// recordMissing wraps an ObjectReader so that every object found missing is noted in
// missing by thing.
func recordMissing(r ObjectReader, missing map[ObjRef]string) ObjectReader {
	if r == nil {
		return nil
	}
	return func(writer, id string) ([]byte, string, error) {
		b, h, err := r(writer, id)
		if errors.Is(err, ErrObjectMissing) {
			if k := objectThing(id); k != "" {
				missing[ObjRef{writer, id}] = k
			}
		}
		return b, h, err
	}
}

// FoldFull folds entries from scratch (Fold) and keeps what foldDelta needs.
func FoldFull(in FoldInput) *Folded {
	f := &Folded{Things: map[string][]*ledger.Entry{}, Missing: map[ObjRef]string{}, Tips: map[[2]string]*ledger.Entry{}}
	in.Objects = recordMissing(in.Objects, f.Missing)
	in.Entries = MergedSet(in.Entries)
	f.State = Fold(in)
	f.Dangling = f.State.dangling
	f.Crossed = crossedThings(f.State.Ignored)
	if in.Base != nil { // a chain whose last record is at or below the cut ends there
		for _, p := range in.Base.Cut {
			e := ledger.AttestedEntry(p.Writer, p.Device, p.Seq, p.Hash)
			f.tip(&e)
		}
	}
	for i := range in.Entries {
		e := &in.Entries[i]
		f.tip(e)
		keys, roster := ThingKeys(e)
		if roster {
			f.Roster = append(f.Roster, *e)
			continue
		}
		for _, k := range keys {
			f.Things[k] = append(f.Things[k], e)
		}
	}
	return f
}

// CanDelta reports whether foldDelta can fold added into f: no entry changes the
// roster, every writer is known, and no idempotency key is one another entry used.
// Over an owner's checkpoint (from.go) also: no entry names a thing terminal at the
// cut (it is superseded, which a whole fold reports) or a key the cut holds, and
// every chunk those lookups read did read.
func (f *Folded) CanDelta(added []ledger.Entry) bool {
	base := f.State.base
	for _, e := range added {
		if _, roster := ThingKeys(&e); roster {
			return false
		}
		if e.Writer != MasterWriter && f.State.Agents[e.Writer] == nil {
			return false
		}
		if f.State.underAttestedBound(&e) { // judged on the whole segment (attest.go)
			return false
		}
		if e.Idem != "" {
			if rec, seen := f.State.Idem.Get(e.Writer + "\x00" + e.Idem); seen && rec.Hash != e.Hash() {
				return false
			}
			if _, atCut, err := base.idemRec(e.Writer + "\x00" + e.Idem); atCut || err != nil {
				return false
			}
		}
		if base.terminalThing(&e) {
			return false
		}
	}
	return base == nil || (f.chainsOnCut(added, base.Cut) && base.Err() == nil)
}

// chainsOnCut reports whether added continue, in every segment cut names, the chain
// kept there one seq at a time from its tip (f.Tips: the cut's own entry when nothing
// above it was kept): then they are what Split (compact.go) keeps above the cut. A
// fork, a gap or a record on a branch without the cut's entry is left to a whole fold.
func (f *Folded) chainsOnCut(added []ledger.Entry, cut Cut) bool {
	order := make([]*ledger.Entry, len(added))
	for i := range added {
		order[i] = &added[i]
	}
	slices.SortFunc(order, func(a, b *ledger.Entry) int {
		return cmp.Or(strings.Compare(a.Writer, b.Writer), strings.Compare(a.Device, b.Device), cmp.Compare(a.Seq, b.Seq))
	})
	last := map[[2]string]*ledger.Entry{}
	for _, e := range order {
		if _, pinned := cut.At(e.Writer, e.Device); !pinned {
			continue
		}
		k := [2]string{e.Writer, e.Device}
		prev := last[k]
		if prev == nil {
			prev = f.Tips[k]
		}
		if prev == nil || e.Seq != prev.Seq+1 || e.Prev != prev.Hash() {
			return false
		}
		last[k] = e
	}
	return true
}

// FoldDelta returns f with added folded in, or ok = false when that needs a full fold
// (see the package comment above). in gives the project, master key and objects;
// in.Entries is not read. total and maxHLC are the entry count and highest HLC of the
// whole snapshot after added (over an owner's checkpoint they are counted from f's
// state instead: the snapshot need not hold the records below the cut). exists reports whether an object file is there now. f is
// not modified: a View holding it keeps reading what it read.
func (f *Folded) FoldDelta(in FoldInput, added []ledger.Entry, total int, maxHLC string, exists func(ObjRef) bool) (nf *Folded, ok bool) {
	if !f.CanDelta(added) {
		return nil, false
	}
	old := f.State
	if old.base != nil {
		// Counted from the state: a snapshot may hold records the cut leaves out (at or
		// below it, or on a branch without its entry), and the added ones all count
		// (CanDelta).
		total, maxHLC = old.Entries+len(added), old.MaxHLC
		for i := range added {
			maxHLC = max(maxHLC, added[i].HLC)
		}
	}
	touched := map[string]bool{}
	addedBy := map[string][]*ledger.Entry{}
	for i := range added {
		e := &added[i]
		keys, _ := ThingKeys(e)
		for _, k := range keys {
			touched[k] = true
			addedBy[k] = append(addedBy[k], e)
		}
	}
	for o, k := range f.Missing {
		if exists(o) {
			touched[k] = true
		}
	}
	// A new entry some pending entry names as its basis: fold the waiting things too
	// (the basis may lie in another thing's chain, which makes the waiting entry
	// ignored, not pending). A new entry whose basis is a counted entry outside its
	// own thing is folded with everything (the full fold decides).
	addedAt := map[string]string{} // hash → thing, of the new entries
	for i := range added {
		e := &added[i]
		for _, k := range f.Dangling[e.Hash()] {
			touched[k] = true
		}
		if keys, _ := ThingKeys(e); len(keys) == 1 {
			addedAt[e.Hash()] = keys[0]
		}
	}
	for i := range added {
		e := &added[i]
		switch Family(e.Type) {
		case "order", "ask", "primary":
		default:
			continue
		}
		d, _ := DecodeData(e)
		if d.Basis == "" {
			continue
		}
		own := addedAt[e.Hash()]
		if k, ok := addedAt[d.Basis]; ok {
			if k != own {
				return nil, false
			}
			continue
		}
		if c, _ := old.Counted.Get(d.Basis); c && !slices.ContainsFunc(f.Things[own], func(x *ledger.Entry) bool { return x.Hash() == d.Basis }) {
			return nil, false
		}
	}
	tips := maps.Clone(f.Tips)
	for i := range added {
		if t := tips[[2]string{added[i].Writer, added[i].Device}]; t == nil || added[i].Seq > t.Seq {
			tips[[2]string{added[i].Writer, added[i].Device}] = &added[i]
		}
	}
	for k := range touched {
		if f.Crossed[k] {
			return nil, false
		}
	}
	if len(touched) == 0 {
		nf := *f
		nf.Tips = tips
		st := *old
		st.Entries, st.MaxHLC = total, maxHLC
		nf.State = &st
		return &nf, true
	}
	things := f.Things
	if len(addedBy) > 0 {
		things = maps.Clone(f.Things)
		for k, es := range addedBy {
			merged := slices.Concat(things[k], es)
			slices.SortFunc(merged, func(a, b *ledger.Entry) int {
				if EntryLess(a, b) {
					return -1
				}
				if EntryLess(b, a) {
					return 1
				}
				return strings.Compare(a.Hash(), b.Hash())
			})
			things[k] = merged
		}
	}
	// An ack names several messages, and whether it counts depends on all of them:
	// fold every message an ack of a touched message names.
	for grew := true; grew; {
		grew = false
		for k := range touched {
			if k[0] != 'm' {
				continue
			}
			for _, e := range things[k] {
				if e.Type != TypeMsgAck {
					continue
				}
				more, _ := ThingKeys(e)
				for _, m := range more {
					if !touched[m] {
						touched[m], grew = true, true
					}
				}
			}
		}
	}

	// Fold the roster and the touched things' entries.
	oldHashes, newHashes := map[string]bool{}, map[string]bool{}
	var mini []ledger.Entry
	mini = append(mini, f.Roster...)
	for k := range touched {
		for _, e := range f.Things[k] {
			oldHashes[e.Hash()] = true
		}
		for _, e := range things[k] {
			if h := e.Hash(); !newHashes[h] {
				newHashes[h] = true
				mini = append(mini, *e)
			}
		}
	}
	missing := map[ObjRef]string{}
	in.Entries = mini
	in.Objects = recordMissing(in.Objects, missing)
	in.unattested = old.unattested // needs the whole snapshot (attest.go)
	in.Base = old.base             // mini holds the touched things' lines of it
	part := Fold(in)

	st := *old
	st.Entries, st.MaxHLC, st.dangling = total, maxHLC, nil
	st.Orders, st.Messages, st.Asks, st.Handins = maps.Clone(old.Orders), maps.Clone(old.Messages), maps.Clone(old.Asks), maps.Clone(old.Handins)
	for k := range touched {
		id := k[1:]
		switch k[0] {
		case 'o':
			spliceThing(st.Orders, part.Orders, id)
		case 'm':
			spliceThing(st.Messages, part.Messages, id)
		case 'a':
			spliceThing(st.Asks, part.Asks, id)
		case 'h':
			spliceThing(st.Handins, part.Handins, id)
		case 'P':
			st.Primary = part.Primary
		case 'D':
			st.Decisions = part.Decisions
		}
	}

	// The writers of the new entries: the segments they wrote, and for entries that
	// count, the devices and the last HLC shown (Fold: noteSegment).
	st.Agents = maps.Clone(old.Agents)
	cloned := map[string]bool{}
	for i := range added {
		e := &added[i]
		if e.Writer == MasterWriter {
			continue
		}
		a := st.Agents[e.Writer]
		if !cloned[e.Writer] {
			c := *a
			c.Segs = maps.Clone(a.Segs)
			c.Devices = slices.Clone(a.Devices)
			a, cloned[e.Writer] = &c, true
			st.Agents[e.Writer] = a
		}
		if e.Seq > a.Segs[e.Device] {
			a.Segs[e.Device] = e.Seq
		}
		if part.Counts(e.Hash()) {
			a.noteSegment(e)
		}
	}
	for name := range cloned {
		slices.Sort(st.Agents[name].Devices)
	}

	// Ignored entries and contests of the touched things come from the partial fold.
	st.Ignored = nil
	for _, ig := range old.Ignored {
		if !oldHashes[ig.Hash] {
			st.Ignored = append(st.Ignored, ig)
		}
	}
	for _, ig := range part.Ignored {
		if newHashes[ig.Hash] {
			st.Ignored = append(st.Ignored, ig)
		}
	}
	sortIgnored(st.Ignored)
	st.Contested = nil
	for _, c := range old.Contested {
		if !oldHashes[c.Winner.Hash] {
			st.Contested = append(st.Contested, c)
		}
	}
	for _, c := range part.Contested {
		if newHashes[c.Winner.Hash] {
			st.Contested = append(st.Contested, c)
		}
	}
	sortContested(st.Contested)

	counts := map[string]bool{}
	idem := map[string]IdemRec{}
	for h := range newHashes {
		if part.Counts(h) {
			counts[h] = true
		}
	}
	for i := range added {
		if e := &added[i]; e.Idem != "" {
			k := e.Writer + "\x00" + e.Idem
			if rec, ok := part.Idem.Get(k); ok {
				idem[k] = rec
			}
		}
	}
	st.Counted, st.Idem = old.Counted.With(counts), old.Idem.With(idem)

	nm := map[ObjRef]string{}
	for o, k := range f.Missing {
		if !touched[k] {
			nm[o] = k
		}
	}
	for o, k := range missing {
		if touched[k] {
			nm[o] = k
		}
	}
	dangling := map[string][]string{}
	for b, ks := range f.Dangling {
		for _, k := range ks {
			if !touched[k] {
				dangling[b] = append(dangling[b], k)
			}
		}
	}
	for b, ks := range part.dangling {
		for _, k := range ks {
			if touched[k] && !slices.Contains(dangling[b], k) {
				dangling[b] = append(dangling[b], k)
			}
		}
	}
	return &Folded{State: &st, Roster: f.Roster, Things: things, Missing: nm, Tips: tips, Dangling: dangling, Crossed: crossedThings(st.Ignored)}, true
}

// crossedThings returns the things of the entries ignored for naming a basis in
// another thing's chain.
func crossedThings(igs []Ignored) map[string]bool {
	out := map[string]bool{}
	for _, ig := range igs {
		if ig.Reason != reasonOtherChain {
			continue
		}
		switch Family(ig.Type) {
		case "order":
			out["o"+ig.Ref] = true
		case "ask":
			out["a"+ig.Ref] = true
		case "primary", "presence":
			out[thingPrimary] = true
		}
	}
	return out
}

// tip notes e as its chain's tip when it has the highest seq seen.
func (f *Folded) tip(e *ledger.Entry) {
	k := [2]string{e.Writer, e.Device}
	if t := f.Tips[k]; t == nil || e.Seq > t.Seq {
		f.Tips[k] = e
	}
}

// spliceThing puts the thing id of part into m (or takes it out when part has none).
func spliceThing[T any](m, part map[string]*T, id string) {
	if t, ok := part[id]; ok {
		m[id] = t
	} else {
		delete(m, id)
	}
}

// sortIgnored puts ignored entries in one order whatever the path that folded them:
// by writer, device, seq, hash and reason.
func sortIgnored(igs []Ignored) {
	slices.SortStableFunc(igs, func(a, b Ignored) int {
		return cmp.Or(strings.Compare(a.Writer, b.Writer), strings.Compare(a.Device, b.Device), cmp.Compare(a.Seq, b.Seq),
			strings.Compare(a.Hash, b.Hash), strings.Compare(a.Reason, b.Reason))
	})
}

// sortContested orders contests by the thing they are about, keeping each thing's
// contests in chain order.
func sortContested(cs []Contest) {
	slices.SortStableFunc(cs, func(a, b Contest) int { return strings.Compare(a.Ref, b.Ref) })
}
