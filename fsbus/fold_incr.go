package fsbus

import (
	"errors"
	"maps"
	"slices"
	"sort"
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

// folded is a State with what folding it again after new entries needs.
type folded struct {
	st     *State
	roster []ledger.Entry // entries that build the roster, merged order
	// things holds each thing's entries, in merged order, as pointers into the
	// snapshots they were read in (a copy of each entry would double the memory).
	things map[string][]*ledger.Entry
	// missing maps each object file the fold found missing to its thing.
	missing map[objRef]string
	// tips holds each chain's entry with the highest seq: (writer, device) → entry.
	tips map[[2]string]*ledger.Entry
	// dangling maps the basis of each pending lifecycle entry to the things that
	// wait for it: when an entry with that hash arrives they are folded again.
	dangling map[string][]string
	// crossed holds the things with an entry ignored because its basis lies in
	// another thing's chain: folding such a thing alone would take that entry for
	// pending, so touching one folds everything.
	crossed map[string]bool
}

// objRef names an object file: its author and id.
type objRef struct{ writer, id string }

// Thing keys: a one-letter kind and the id ("o" orders, "m" messages, "a" asks, "h"
// hand-ins), "P" for the primary chain and presence standbys, "D" for the decisions,
// and "x"+hash for an entry that belongs to no thing (an ack naming no message).
const (
	thingPrimary   = "P"
	thingDecisions = "D"
)

// thingKeys returns the things an entry belongs to, or roster = true when it may change
// the roster or belongs to no family folded per thing.
func thingKeys(e *ledger.Entry) (keys []string, roster bool) {
	switch family(e.Type) {
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
		if d, ok := decodeData(e); ok {
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
func recordMissing(r ObjectReader, missing map[objRef]string) ObjectReader {
	if r == nil {
		return nil
	}
	return func(writer, id string) ([]byte, string, error) {
		b, h, err := r(writer, id)
		if errors.Is(err, ErrObjectMissing) {
			if k := objectThing(id); k != "" {
				missing[objRef{writer, id}] = k
			}
		}
		return b, h, err
	}
}

// foldFull folds entries from scratch (Fold) and keeps what foldDelta needs.
func foldFull(in FoldInput) *folded {
	f := &folded{things: map[string][]*ledger.Entry{}, missing: map[objRef]string{}, tips: map[[2]string]*ledger.Entry{}}
	in.Objects = recordMissing(in.Objects, f.missing)
	in.Entries = mergedSet(in.Entries)
	f.st = Fold(in)
	f.dangling = f.st.dangling
	f.crossed = crossedThings(f.st.Ignored)
	for i := range in.Entries {
		e := &in.Entries[i]
		f.tip(e)
		keys, roster := thingKeys(e)
		if roster {
			f.roster = append(f.roster, *e)
			continue
		}
		for _, k := range keys {
			f.things[k] = append(f.things[k], e)
		}
	}
	return f
}

// canDelta reports whether foldDelta can fold added into f: no entry changes the
// roster, every writer is known, and no idempotency key is one another entry used.
func (f *folded) canDelta(added []ledger.Entry) bool {
	for _, e := range added {
		if _, roster := thingKeys(&e); roster {
			return false
		}
		if e.Writer != MasterWriter && f.st.Agents[e.Writer] == nil {
			return false
		}
		if f.st.underAttestedBound(&e) { // judged on the whole segment (attest.go)
			return false
		}
		if e.Idem != "" {
			if rec, seen := f.st.idem.get(e.Writer + "\x00" + e.Idem); seen && rec.hash != e.Hash() {
				return false
			}
		}
	}
	return true
}

// foldDelta returns f with added folded in, or ok = false when that needs a full fold
// (see the package comment above). in gives the project, master key and objects;
// in.Entries is not read. total and maxHLC are the entry count and highest HLC of the
// whole snapshot after added. exists reports whether an object file is there now. f is
// not modified: a View holding it keeps reading what it read.
func (f *folded) foldDelta(in FoldInput, added []ledger.Entry, total int, maxHLC string, exists func(objRef) bool) (nf *folded, ok bool) {
	if !f.canDelta(added) {
		return nil, false
	}
	old := f.st
	touched := map[string]bool{}
	addedBy := map[string][]*ledger.Entry{}
	for i := range added {
		e := &added[i]
		keys, _ := thingKeys(e)
		for _, k := range keys {
			touched[k] = true
			addedBy[k] = append(addedBy[k], e)
		}
	}
	for o, k := range f.missing {
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
		for _, k := range f.dangling[e.Hash()] {
			touched[k] = true
		}
		if keys, _ := thingKeys(e); len(keys) == 1 {
			addedAt[e.Hash()] = keys[0]
		}
	}
	for i := range added {
		e := &added[i]
		switch family(e.Type) {
		case "order", "ask", "primary":
		default:
			continue
		}
		d, _ := decodeData(e)
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
		if c, _ := old.counts.get(d.Basis); c && !slices.ContainsFunc(f.things[own], func(x *ledger.Entry) bool { return x.Hash() == d.Basis }) {
			return nil, false
		}
	}
	tips := maps.Clone(f.tips)
	for i := range added {
		if t := tips[[2]string{added[i].Writer, added[i].Device}]; t == nil || added[i].Seq > t.Seq {
			tips[[2]string{added[i].Writer, added[i].Device}] = &added[i]
		}
	}
	for k := range touched {
		if f.crossed[k] {
			return nil, false
		}
	}
	if len(touched) == 0 {
		nf := *f
		nf.tips = tips
		st := *old
		st.Entries, st.MaxHLC = total, maxHLC
		nf.st = &st
		return &nf, true
	}
	things := f.things
	if len(addedBy) > 0 {
		things = maps.Clone(f.things)
		for k, es := range addedBy {
			merged := slices.Concat(things[k], es)
			slices.SortFunc(merged, func(a, b *ledger.Entry) int {
				if entryLess(a, b) {
					return -1
				}
				if entryLess(b, a) {
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
				more, _ := thingKeys(e)
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
	mini = append(mini, f.roster...)
	for k := range touched {
		for _, e := range f.things[k] {
			oldHashes[e.Hash()] = true
		}
		for _, e := range things[k] {
			if h := e.Hash(); !newHashes[h] {
				newHashes[h] = true
				mini = append(mini, *e)
			}
		}
	}
	missing := map[objRef]string{}
	in.Entries = mini
	in.Objects = recordMissing(in.Objects, missing)
	in.unattested = old.unattested // needs the whole snapshot (attest.go)
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
			c.segs = maps.Clone(a.segs)
			c.Devices = slices.Clone(a.Devices)
			a, cloned[e.Writer] = &c, true
			st.Agents[e.Writer] = a
		}
		if e.Seq > a.segs[e.Device] {
			a.segs[e.Device] = e.Seq
		}
		if part.Counts(e.Hash()) {
			a.noteSegment(e)
		}
	}
	for name := range cloned {
		sort.Strings(st.Agents[name].Devices)
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
	idem := map[string]idemRec{}
	for h := range newHashes {
		if part.Counts(h) {
			counts[h] = true
		}
	}
	for i := range added {
		if e := &added[i]; e.Idem != "" {
			k := e.Writer + "\x00" + e.Idem
			if rec, ok := part.idem.get(k); ok {
				idem[k] = rec
			}
		}
	}
	st.counts, st.idem = old.counts.with(counts), old.idem.with(idem)

	nm := map[objRef]string{}
	for o, k := range f.missing {
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
	for b, ks := range f.dangling {
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
	return &folded{st: &st, roster: f.roster, things: things, missing: nm, tips: tips, dangling: dangling, crossed: crossedThings(st.Ignored)}, true
}

// crossedThings returns the things of the entries ignored for naming a basis in
// another thing's chain.
func crossedThings(igs []Ignored) map[string]bool {
	out := map[string]bool{}
	for _, ig := range igs {
		if ig.Reason != reasonOtherChain {
			continue
		}
		switch family(ig.Type) {
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
func (f *folded) tip(e *ledger.Entry) {
	k := [2]string{e.Writer, e.Device}
	if t := f.tips[k]; t == nil || e.Seq > t.Seq {
		f.tips[k] = e
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
	sort.SliceStable(igs, func(i, j int) bool {
		a, b := &igs[i], &igs[j]
		switch {
		case a.Writer != b.Writer:
			return a.Writer < b.Writer
		case a.Device != b.Device:
			return a.Device < b.Device
		case a.Seq != b.Seq:
			return a.Seq < b.Seq
		case a.Hash != b.Hash:
			return a.Hash < b.Hash
		}
		return a.Reason < b.Reason
	})
}

// sortContested orders contests by the thing they are about, keeping each thing's
// contests in chain order.
func sortContested(cs []Contest) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Ref < cs[j].Ref })
}
