package fold

import (
	"fmt"
	"slices"

	"github.com/ferryhq/ferry/ledger"
)

// Attested bounds (docs/format.md §13 "Attested bounds").
//
// A grant.set, grant.revoke or the master's agent.retire bounds each of the agent's
// segments by the last seq the owner had seen (data.bounds). A seq alone does not say
// which record: a revoked key can still fork its own segment inside the bounds (a
// conflict copy with another record at the bound seq, its hash ground lower so it wins
// the fork) or rewrite it in place, and the forged record would count. So grants (and the
// master's retirements) this binary writes also name, per segment, the hash of the record at the bound
// (data.bound_hashes). The fold then counts an agent's entry at a seq at or below an
// attested bound only when it is that record or an ancestor of it by prev, looked up
// among the segment's records and the losing branches of its forks; every other entry
// there counts for nothing and is listed. When the attested record is nowhere (the
// segment was rewritten in place) every entry at or below the bound is unattested:
// restore the segment from another machine. A segment that holds no record at the
// bound seq (sync lag, or cut short) is not judged until it does. Grants without bound_hashes (older
// binaries) keep the meaning of bounds alone.

// unattestedReason is the ignored reason of an entry at or below an attested bound
// that is not the attested record or one of its ancestors.
func unattestedReason(seq uint64, found bool) string {
	if found {
		return fmt.Sprintf("not the record the owner's grant attests at seq %d nor one before it: a fork of the segment made after the grant counts for nothing", seq)
	}
	return fmt.Sprintf("the segment no longer holds the record the owner's grant attests at seq %d (rewritten after the grant): its records up to seq %d count for nothing", seq, seq)
}

// unattested returns, by entry hash, why an agent entry at or below an attested bound
// does not count (see above). It needs the whole snapshot: entries and forks. The
// incremental fold reuses the last full fold's answer: a new entry at or below an
// attested bound (a fork, a rewrite, or a segment reaching its bound late) makes it
// fold everything (underAttestedBound).
func unattested(st *State, in FoldInput) map[string]string {
	if in.unattested != nil {
		return in.unattested
	}
	out := map[string]string{}
	type seg struct{ writer, device string }
	var attest map[seg][]grant
	for _, a := range st.Agents {
		for _, g := range slices.Concat(a.Grants, a.attests) {
			for dev := range g.boundHashes {
				if attest == nil {
					attest = map[seg][]grant{}
				}
				attest[seg{a.Name, dev}] = append(attest[seg{a.Name, dev}], g)
			}
		}
	}
	if attest == nil {
		return out
	}
	// First the records at the attested seqs: in the common case each is the attested
	// one and nothing else is needed.
	// atBound: segment → bound seq → hashes found there (one after fork resolution; a
	// fold input may hold more, and the answer must not depend on their order).
	atBound := map[seg]map[uint64]map[string]bool{}
	for i := range in.Entries {
		e := &in.Entries[i]
		k := seg{e.Writer, e.Device}
		for _, g := range attest[k] {
			if g.bounds[k.device] == e.Seq {
				if atBound[k] == nil {
					atBound[k] = map[uint64]map[string]bool{}
				}
				if atBound[k][e.Seq] == nil {
					atBound[k][e.Seq] = map[string]bool{}
				}
				atBound[k][e.Seq][e.Hash()] = true
			}
		}
	}
	bad := map[seg][]grant{}
	for k, gs := range attest {
		for _, g := range gs {
			b, h := g.bounds[k.device], g.boundHashes[k.device]
			there := atBound[k][b]
			if b == 0 || h == "" || len(there) == 0 || (there[h] && len(there) == 1) {
				continue // no bound named, no record at the bound seq yet (sync lag), or the attested one
			}
			bad[k] = append(bad[k], g)
		}
	}
	if len(bad) == 0 {
		return out
	}
	// A segment whose record at a bound is not the attested one: its records and the
	// losing branches of its forks, to find the attested record's past.
	kept := map[seg][]*ledger.Entry{}
	pool := map[string]*ledger.Entry{}
	for i := range in.Entries {
		e := &in.Entries[i]
		if k := (seg{e.Writer, e.Device}); bad[k] != nil {
			kept[k] = append(kept[k], e)
			pool[e.Hash()] = e
		}
	}
	for _, f := range in.Forks {
		if bad[seg{f.Writer, f.Device}] != nil {
			for i := range f.Losers {
				pool[f.Losers[i].Hash()] = &f.Losers[i]
			}
		}
	}
	for k, gs := range bad {
		for _, g := range gs {
			b, h := g.bounds[k.device], g.boundHashes[k.device]
			anc := map[string]bool{}
			rec, found := pool[h]
			var last *ledger.Entry
			for ; rec != nil && rec.Writer == k.writer && rec.Device == k.device && !anc[rec.Hash()]; rec = pool[rec.Prev] {
				anc[rec.Hash()] = true
				last = rec
			}
			if p, pinned := st.base.cutAt(k.writer, k.device); pinned && b > p.Seq && !anc[p.Hash] && (last == nil || last.Prev != p.Hash) {
				// The attested record does not descend from the cut's: without the
				// checkpoint its records at or below the cut would not count.
				st.finality(fmt.Sprintf("attested bound at %s/%s seq %d off the cut's branch", k.writer, k.device, b))
			}
			for _, e := range kept[k] {
				if e.Seq <= b && !anc[e.Hash()] && st.base != nil && st.base.Cut.Below(e.Writer, e.Device, e.Seq) {
					// A line of the checkpoint's base keeps the grant it had at the cut.
					st.finality(fmt.Sprintf("line %s kept by the cut over the attested bound at %s/%s seq %d", e.Hash(), k.writer, k.device, b))
					continue
				}
				if e.Seq <= b && !anc[e.Hash()] {
					if _, dup := out[e.Hash()]; !dup {
						out[e.Hash()] = unattestedReason(b, found)
					}
				}
			}
		}
	}
	return out
}

// underAttestedBound reports whether e is an agent entry at or below a bound some grant
// attests with a hash: folding it may change which entries of its segment count.
func (st *State) underAttestedBound(e *ledger.Entry) bool {
	a := st.Agents[e.Writer]
	if a == nil {
		return false
	}
	for _, g := range slices.Concat(a.Grants, a.attests) {
		if g.boundHashes[e.Device] != "" && e.Seq <= g.bounds[e.Device] {
			return true
		}
	}
	return false
}
