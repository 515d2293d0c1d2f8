package fold

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// The cut of an owner's checkpoint (docs/format.md §20 "The cut", ADR 0019 §4).
//
// For every (writer, device) segment the compactor saw, the cut names the last seq k at
// or below the cut, that record's hash H and the byte offset after its line in the
// compactor's copy of the segment (a hint a reader checks against H, never trusted). At
// or below k only H and its ancestors by prev count: at a fork at or below k the branch
// holding H wins, whatever the hashes. Above k a segment is read as docs/format.md §10
// says, with H as the tip at seq k: which records count above the cut depends only on
// the records above it and on H, so a machine that holds the segment's past and one
// that reads only after the offset keep the same ones. Segments the cut does not name
// are above it whole.

// CutPoint is the cut of one segment.
type CutPoint struct {
	Writer string `json:"writer"`
	Device string `json:"device"`
	Seq    uint64 `json:"seq"`
	Hash   string `json:"hash"`
	Offset int64  `json:"offset"`
}

// Cut is a checkpoint's cut: one point per segment, sorted by writer then device.
type Cut []CutPoint

// At returns the cut of (writer, device), or false when the cut does not name it.
func (c Cut) At(writer, device string) (CutPoint, bool) {
	i, ok := slices.BinarySearchFunc(c, [2]string{writer, device}, func(p CutPoint, k [2]string) int {
		return cmp.Or(strings.Compare(p.Writer, k[0]), strings.Compare(p.Device, k[1]))
	})
	if !ok {
		return CutPoint{}, false
	}
	return c[i], true
}

// Below reports whether the entry at (writer, device, seq) is at or below the cut by
// position (seq ≤ k); whether it counts there is Split's business.
func (c Cut) Below(writer, device string, seq uint64) bool {
	p, ok := c.At(writer, device)
	return ok && seq <= p.Seq
}

// Check reports the first malformed point: an unsorted or repeated segment, a bad name,
// a zero seq or a hash that is not an entry hash.
func (c Cut) Check() error {
	for i, p := range c {
		switch {
		case !ValidName(p.Writer) || !ledger.ValidName(p.Device):
			return fmt.Errorf("cut names a bad segment %q/%q", p.Writer, p.Device)
		case p.Seq == 0:
			return fmt.Errorf("cut of %s/%s names seq 0", p.Writer, p.Device)
		case !validHash(p.Hash):
			return fmt.Errorf("cut of %s/%s names %q, not an entry hash", p.Writer, p.Device, p.Hash)
		case p.Offset < 0:
			return fmt.Errorf("cut of %s/%s names a negative offset", p.Writer, p.Device)
		case i > 0 && cmp.Or(strings.Compare(c[i-1].Writer, p.Writer), strings.Compare(c[i-1].Device, p.Device)) >= 0:
			return fmt.Errorf("cut is not sorted by writer and device at %s/%s", p.Writer, p.Device)
		}
	}
	return nil
}

// validHash reports whether s has the shape of an entry hash ("sha256:" and 64 hex).
func validHash(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, r := range h {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// Covers reports whether c extends prev: every segment prev names is named by c at the
// same or a higher seq. (That H descends from prev's hash is checked by Split.)
func (c Cut) Covers(prev Cut) error {
	for _, p := range prev {
		q, ok := c.At(p.Writer, p.Device)
		if !ok || q.Seq < p.Seq {
			return fmt.Errorf("cut of %s/%s is below the previous checkpoint's (seq %d)", p.Writer, p.Device, p.Seq)
		}
	}
	return nil
}

// CutProblem is a segment whose records do not meet the cut.
type CutProblem struct {
	Writer string `json:"writer"`
	Device string `json:"device"`
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"` // "missing" (H or an ancestor is not held), "broken" (above the cut), or "pending" (Recompute: a chunk of the state not here yet)
	Detail string `json:"detail"`
}

// Split divides a snapshot's records by cut into the records that count at or below it
// — for each segment it names, H and its ancestors by prev, in seq order — and the
// records that count above it, in merged order, with the problems found: a segment
// that lacks H or one of its ancestors (its past cannot be recomputed here; the records
// above still count), and above the cut a seq whose records do not follow the tip.
// entries and forks are a snapshot's (ledger.Snapshot: the records its fork rule kept
// and those it left out); a segment the cut does not name keeps the snapshot's choice.
// valid, when not nil, passes over a candidate whose signature fails while another at
// its seq verifies, as docs/format.md §10's verifying read does.
func Split(entries []ledger.Entry, forks []ledger.Fork, cut Cut, valid func(*ledger.Entry) bool) (at, above []ledger.Entry, probs []CutProblem) {
	type seg = [2]string
	bySeg := map[seg][]*ledger.Entry{}
	keptBySeg := map[seg][]*ledger.Entry{}
	for i := range entries {
		e := &entries[i]
		k := seg{e.Writer, e.Device}
		if _, pinned := cut.At(e.Writer, e.Device); !pinned {
			above = append(above, *e)
			continue
		}
		bySeg[k] = append(bySeg[k], e)
		keptBySeg[k] = append(keptBySeg[k], e)
	}
	for i := range forks {
		for j := range forks[i].Losers {
			e := &forks[i].Losers[j]
			if _, pinned := cut.At(e.Writer, e.Device); pinned {
				bySeg[seg{e.Writer, e.Device}] = append(bySeg[seg{e.Writer, e.Device}], e)
			}
		}
	}
	for _, p := range cut {
		k := seg{p.Writer, p.Device}
		rs := bySeg[k]
		if len(rs) == 0 {
			probs = append(probs, CutProblem{Writer: p.Writer, Device: p.Device, Seq: p.Seq, Kind: "missing",
				Detail: fmt.Sprintf("the cut needs %s at seq %d and the segment is not here", p.Hash, p.Seq)})
			continue
		}
		byHash := make(map[string]*ledger.Entry, len(rs))
		var hi []*ledger.Entry
		for _, e := range rs {
			if e.Seq <= p.Seq {
				byHash[e.Hash()] = e
			} else {
				hi = append(hi, e)
			}
		}
		var chain []*ledger.Entry
		want, seq := p.Hash, p.Seq
		for seq > 0 {
			e := byHash[want]
			if e == nil || e.Seq != seq {
				probs = append(probs, CutProblem{Writer: p.Writer, Device: p.Device, Seq: seq, Kind: "missing",
					Detail: fmt.Sprintf("the cut needs %s at seq %d and no record here has it", want, seq)})
				break
			}
			chain = append(chain, e)
			want, seq = e.Prev, seq-1
			if seq == 0 && want != "" {
				probs = append(probs, CutProblem{Writer: p.Writer, Device: p.Device, Seq: 1, Kind: "missing", Detail: "seq 1 names a prev"})
			}
		}
		for i := len(chain) - 1; i >= 0; i-- {
			at = append(at, *chain[i])
		}
		// The snapshot's own choice above the cut, when it follows H and no other
		// record is above the cut (no fork crosses it): the common case, and the one a
		// verifying read already made. Otherwise, and in particular when the
		// snapshot's fork rule kept another branch than H's, the records above the cut
		// are read again from H.
		var kept []ledger.Entry
		tip, next := p.Hash, p.Seq+1
		follows := true
		for _, e := range keptBySeg[k] {
			if e.Seq <= p.Seq {
				continue
			}
			if e.Seq != next || e.Prev != tip {
				follows = false
				break
			}
			kept = append(kept, *e)
			tip, next = e.Hash(), next+1
		}
		if !follows || len(kept) != len(hi) {
			kept = resolveAbove(hi, p.Seq, p.Hash, valid)
		}
		if len(kept) > 0 && (kept[0].Seq != p.Seq+1 || kept[0].Prev != p.Hash) {
			probs = append(probs, CutProblem{Writer: p.Writer, Device: p.Device, Seq: kept[0].Seq, Kind: "broken",
				Detail: fmt.Sprintf("the records above the cut do not follow %s at seq %d", p.Hash, p.Seq)})
		}
		above = append(above, kept...)
	}
	return at, MergedSet(above), probs
}

// resolveAbove keeps, from one segment's records above seq `from` (tip its hash, ""
// for a whole segment), the chain docs/format.md §10 keeps: at each seq the
// lowest-hash record whose prev names the tip, else the lowest-hash one (a broken
// chain); records whose prev names a record left out are left out with it, and so are
// records at seq from+1 whose prev is not tip: they continue a branch that lost at or
// below the cut.
func resolveAbove(rs []*ledger.Entry, from uint64, tip string, valid func(*ledger.Entry) bool) []ledger.Entry {
	bySeq := map[uint64][]*ledger.Entry{}
	for _, e := range rs {
		if e.Seq > from {
			bySeq[e.Seq] = append(bySeq[e.Seq], e)
		}
	}
	seqs := slices.Sorted(func(yield func(uint64) bool) {
		for s := range bySeq {
			if !yield(s) {
				return
			}
		}
	})
	var out []ledger.Entry
	left := map[string]bool{} // hashes left out
	from1, top := from+1, tip
	for _, s := range seqs {
		var cands []*ledger.Entry
		seen := map[string]bool{}
		for _, e := range bySeq[s] {
			h := e.Hash()
			if seen[h] {
				continue
			}
			seen[h] = true
			if e.Prev != "" && left[e.Prev] || s == from1 && top != "" && e.Prev != top {
				left[h] = true
				continue
			}
			cands = append(cands, e)
		}
		if len(cands) == 0 {
			continue
		}
		slices.SortFunc(cands, func(a, b *ledger.Entry) int { return strings.Compare(a.Hash(), b.Hash()) })
		if valid != nil && len(cands) > 1 {
			var good []*ledger.Entry
			for _, c := range cands {
				if valid(c) {
					good = append(good, c)
				}
			}
			if len(good) > 0 {
				cands = good
			}
		}
		win := cands[0]
		for _, c := range cands {
			if c.Prev == tip || s == 1 {
				win = c
				break
			}
		}
		for _, c := range cands {
			if c != win {
				left[c.Hash()] = true
			}
		}
		out = append(out, *win)
		tip = win.Hash()
	}
	return out
}
