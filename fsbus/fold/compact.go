package fold

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// Folding a channel with its checkpoints, recomputing their states, and making the
// next one (docs/format.md §20, ADR 0019 §6–§7).

// ChannelFold is a channel folded with its counting checkpoints.
type ChannelFold struct {
	State *State
	// Folded is State with what folding it again needs (FoldFull's).
	Folded *Folded
	// Chain is the counting chain; Used is the checkpoint the state was folded from
	// (its index in Chain), -1 for none.
	Chain []Counting
	Used  int
	// ReadOnly is set when a counting checkpoint was folded under other fold rules
	// than this build's: the state is folded without it, for reading only, and this
	// build must write nothing (ADR 0019 §7).
	ReadOnly bool
	Problems []CheckpointProblem
	// Cut are the problems of the records against the cut folded from.
	Cut []CutProblem
}

// FoldChannel folds in (a snapshot's entries and forks) from the newest counting
// checkpoint whose state loads; entries at or below its cut are then read only for
// nothing but the split. With no counting checkpoint it is Fold.
func FoldChannel(in FoldInput, cps Checkpoints) *ChannelFold {
	in.Entries = MergedSet(in.Entries)
	cf := &ChannelFold{Used: -1}
	if cps == nil {
		cf.Folded = FoldFull(in)
		cf.State = cf.Folded.State
		return cf
	}
	cf.Chain, cf.Problems = CountingChain(WithForkedCheckpoints(in.Entries, in.Forks), in.Master, in.Project, cps)
	for i := len(cf.Chain) - 1; i >= 0; i-- {
		c := cf.Chain[i]
		if c.Data.Rules != RulesVersion {
			cf.ReadOnly = true
			cf.Problems = append(cf.Problems, CheckpointProblem{Hash: c.Entry.Hash(), Epoch: c.Data.Epoch, Kind: "rules",
				Detail: fmt.Sprintf("the checkpoint was folded under fold rules %d and this build folds under %d: this build reads the channel without it and writes nothing; upgrade ferry", c.Data.Rules, RulesVersion)})
			break
		}
		base, err := LoadBaseLazy(c, cps, false)
		if err != nil {
			cf.Problems = append(cf.Problems, CheckpointProblem{Hash: c.Entry.Hash(), Epoch: c.Data.Epoch, Kind: "state", Detail: err.Error()})
			continue
		}
		at, above, probs := Split(in.Entries, in.Forks, base.Cut, nil)
		for _, p := range probs {
			if p.Kind == "broken" {
				cf.Cut = append(cf.Cut, p)
			}
		}
		decided := forkFinality(in.Entries, at, above, base.Cut)
		tried := in
		tried.Forks = ForksAbove(in.Entries, in.Forks, base.Cut, above)
		tried.Base, tried.Entries = base, append(slices.Clone(base.Lines), above...)
		folded := FoldFull(tried)
		if err := base.Err(); err != nil {
			// A chunk the fold read did not (not arrived yet, or damaged): the state
			// cannot be folded from, as when the core does not load.
			cf.Problems = append(cf.Problems, CheckpointProblem{Hash: c.Entry.Hash(), Epoch: c.Data.Epoch, Kind: "state", Detail: err.Error()})
			continue
		}
		cf.Folded, cf.Used = folded, i
		cf.State = cf.Folded.State
		cf.State.Finality = append(cf.State.Finality, decided...)
		return cf
	}
	cf.Folded = FoldFull(in)
	cf.State = cf.Folded.State
	return cf
}

// Stop returns the problem of the checkpoint the chain stops at here, nil for none:
// the one that would extend it but does not count here (CountingChain marks it). A
// counting checkpoint whose state does not load is no stop: it is never replaced, and
// a recomputation from the history here restores its chunks (Recompute).
func (cf *ChannelFold) Stop() *CheckpointProblem {
	for i := range cf.Problems {
		if cf.Problems[i].Stops {
			return &cf.Problems[i]
		}
	}
	return nil
}

// Replacement decides whether the next compaction may go on past cf's problems
// (docs/format.md §20 "Replacing a checkpoint that does not count", ADR 0020).
// blocked is the problem that stops it: a folder rolled back below the highest epoch
// this machine saw count; the checkpoint the chain stops at (Stop) while its entry was
// first seen here (seenMs, Unix ms; 0 not seen) at or after guardMs, since its files
// may still be on their way; or a checkpoint of the chain whose head or state has not
// arrived or does not load. replace is the checkpoint the next one replaces: the stop,
// once its entry was first seen before guardMs. Both nil: nothing stands in the way.
func (cf *ChannelFold) Replacement(seenMs func(hash string) int64, guardMs int64) (replace, blocked *CheckpointProblem) {
	for i := range cf.Problems {
		if cf.Problems[i].Kind == "rolled_back" {
			return nil, &cf.Problems[i]
		}
	}
	if stop := cf.Stop(); stop != nil {
		if s := seenMs(stop.Hash); s != 0 && s < guardMs {
			return stop, nil
		}
		return nil, stop
	}
	for i := range cf.Problems {
		switch cf.Problems[i].Kind {
		case "pending", "state":
			return nil, &cf.Problems[i]
		}
	}
	return nil, nil
}

// WithForkedCheckpoints returns entries with the master's checkpoint entries that a fork
// of the snapshot left out: a machine that reads a segment only above a cut resolves a
// fork crossing the cut without H, so its fork rule may leave out a checkpoint entry
// that follows H; Split, from the checkpoint's cut, decides which records count.
func WithForkedCheckpoints(entries []ledger.Entry, forks []ledger.Fork) []ledger.Entry {
	var extra []ledger.Entry
	for _, f := range forks {
		for _, l := range f.Losers {
			if l.Writer == MasterWriter && l.Type == TypeCheckpoint {
				extra = append(extra, l)
			}
		}
	}
	if extra == nil {
		return entries
	}
	return MergedSet(append(slices.Clone(entries), extra...))
}

// ForksAbove returns the forks of a snapshot (entries, the records its fork rule kept,
// and forks) as a fold from the checkpoint at cut sees them, above being Split's: a
// segment the cut does not name keeps its forks; of a segment it names, the records
// above the cut that Split did not keep are the losers, whatever the snapshot's fork
// rule chose at or below the cut. A machine that holds only the records above the cut
// and one that holds them all get the same.
func ForksAbove(entries []ledger.Entry, forks []ledger.Fork, cut Cut, above []ledger.Entry) []ledger.Fork {
	kept := make(map[string]*ledger.Entry, len(above))
	for i := range above {
		kept[above[i].Hash()] = &above[i]
	}
	type seg = [2]string
	lost := map[seg][]ledger.Entry{}
	seen := map[string]bool{}
	note := func(e *ledger.Entry) {
		p, pinned := cut.At(e.Writer, e.Device)
		if !pinned || e.Seq <= p.Seq || kept[e.Hash()] != nil || seen[e.Hash()] {
			return
		}
		seen[e.Hash()] = true
		lost[seg{e.Writer, e.Device}] = append(lost[seg{e.Writer, e.Device}], *e)
	}
	var out []ledger.Fork
	for i := range entries {
		note(&entries[i])
	}
	for _, f := range forks {
		if _, pinned := cut.At(f.Writer, f.Device); !pinned {
			out = append(out, f)
			continue
		}
		for i := range f.Losers {
			note(&f.Losers[i])
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(lost), func(a, b seg) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		ls := lost[k]
		slices.SortFunc(ls, func(a, b ledger.Entry) int {
			return cmp.Or(cmp.Compare(a.Seq, b.Seq), strings.Compare(a.Hash(), b.Hash()))
		})
		f := ledger.Fork{Writer: k[0], Device: k[1], Seq: ls[0].Seq, Losers: ls}
		for i := range above {
			if e := &above[i]; e.Writer == k[0] && e.Device == k[1] && e.Seq == f.Seq {
				f.Winner = *e
			}
		}
		out = append(out, f)
	}
	return out
}

// forkFinality notes each segment the cut names whose records that count (at and
// above, Split's) are not the ones the snapshot's fork rule kept (entries): there the
// cut decided a fork otherwise than a fold of every entry without it would.
func forkFinality(entries, at, above []ledger.Entry, cut Cut) []string {
	type seg = [2]string
	split := map[string]bool{}
	for _, part := range [][]ledger.Entry{at, above} {
		for i := range part {
			split[part[i].Hash()] = true
		}
	}
	differ := map[seg]bool{}
	n := map[seg]int{}
	for i := range entries {
		e := &entries[i]
		k := seg{e.Writer, e.Device}
		if _, pinned := cut.At(e.Writer, e.Device); !pinned {
			continue
		}
		n[k]++
		if !split[e.Hash()] {
			differ[k] = true
		}
	}
	for _, part := range [][]ledger.Entry{at, above} {
		for i := range part {
			n[seg{part[i].Writer, part[i].Device}]--
		}
	}
	var out []string
	for _, p := range cut {
		if k := (seg{p.Writer, p.Device}); differ[k] || n[k] != 0 {
			out = append(out, fmt.Sprintf("fork of %s/%s decided by the cut at seq %d", p.Writer, p.Device, p.Seq))
		}
	}
	return out
}

// FoldFrom folds base and the entries above its cut (Split's above).
func FoldFrom(in FoldInput, base *Base, above []ledger.Entry) *State {
	in.Base = base
	in.Entries = append(slices.Clone(base.Lines), above...)
	return Fold(in)
}

// Dispute is a counting checkpoint whose state differs from the one this build
// recomputes from the entries at or below its cut.
type Dispute struct {
	Epoch int    `json:"epoch"`
	Hash  string `json:"checkpoint"` // the checkpoint entry's hash
	Rules int    `json:"rules"`
	First string `json:"first"` // the lowest thing id whose state differs
}

// Recompute recomputes the state of every counting checkpoint in chain from the
// entries at or below its cut (a snapshot's entries and forks, in), each from the one
// before, and returns the first that differs from its signed state, or the problems
// that stopped the recomputation (records missing at or below a cut, or a chunk of a
// state not arrived yet: kind "pending"). A nil dispute
// and no problems means every state matched.
func Recompute(in FoldInput, chain []Counting, cps Checkpoints) (*Dispute, []CutProblem, error) {
	in.Entries = MergedSet(in.Entries)
	var prev *Base
	for _, c := range chain {
		at, _, probs := Split(in.Entries, in.Forks, c.Head.Cut, nil)
		var missing []CutProblem
		for _, p := range probs {
			if p.Kind == "missing" {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			return nil, missing, nil
		}
		if closed := CloseCut(in.Entries, in.Forks, c.Head.Cut, nil); !slices.Equal(closed, c.Head.Cut) {
			return &Dispute{Epoch: c.Data.Epoch, Hash: c.Entry.Hash(), Rules: RulesVersion, First: "cut"}, nil, nil
		}
		st, lines := nextState(in, prev, at)
		if e := firstObjectPending(st, at); e != nil && in.Objects != nil {
			// An object file at or below the cut not here yet (not synced, or only partly):
			// the fold here is not the cut's, and nothing is disputed until it arrives.
			return nil, []CutProblem{{Writer: e.Writer, Device: e.Device, Seq: e.Seq, Kind: "pending",
				Detail: fmt.Sprintf("checkpoint of epoch %d: the object file of %s %s has not arrived", c.Data.Epoch, Family(e.Type), e.Ref)}}, nil
		}
		got, err := deriveNext(st, lines, c.Data.Epoch, c.Head.Cut)
		if err != nil {
			return nil, nil, err
		}
		want, err := LoadBase(c, cps)
		if errors.Is(err, ErrObjectMissing) {
			n, rerr := restoreChunks(got, c.Head, cps)
			if n > 0 {
				want, err = LoadBase(c, cps)
			}
			if rerr != nil && errors.Is(err, ErrObjectMissing) { // best effort: the chunk stays pending
				err = fmt.Errorf("%w (it could not be restored here: %v)", err, rerr)
			}
		}
		if errors.Is(err, ErrObjectMissing) { // not arrived yet: nothing to dispute
			return nil, []CutProblem{{Kind: "pending", Detail: fmt.Sprintf("checkpoint of epoch %d: %v", c.Data.Epoch, err)}}, nil
		}
		if errors.Is(err, ErrObjectUnreadable) {
			return nil, nil, err // this machine could not read a file: nothing is disputed on it
		}
		if err != nil {
			return &Dispute{Epoch: c.Data.Epoch, Hash: c.Entry.Hash(), Rules: RulesVersion, First: "(the state does not load: " + err.Error() + ")"}, nil, nil
		}
		ge, err := EncodeWhole(got)
		if err != nil {
			return nil, nil, err
		}
		we, _ := EncodeWhole(want)
		if string(ge) != string(we) {
			return &Dispute{Epoch: c.Data.Epoch, Hash: c.Entry.Hash(), Rules: RulesVersion, First: FirstDifference(got, want)}, nil, nil
		}
		prev = want
	}
	return nil, nil, nil
}

// ChunkPutter is a Checkpoints that can also publish a chunk file.
type ChunkPutter interface {
	PutChunk(hash string, b []byte) error
}

// restoreChunks publishes the chunks of got, the state recomputed at h's cut, that h
// names and of which cps has no file, when cps is a ChunkPutter and got's chunk refs
// are exactly h's (the recomputed state is the signed one): a chunk is named by its
// hash, so bytes that hash to the name are that chunk, wherever they came from
// (docs/format.md §20 "Replacing a checkpoint that does not count", ADR 0020). A file
// only partly here (ErrObjectTorn: empty, or NUL bytes) is replaced too; one whose
// bytes hash to another name is not (it is disputed). It returns how many it
// published, and the first error met publishing one; none when the refs differ (the
// comparison then waits for the chunks).
func restoreChunks(got *Base, h *Head, cps Checkpoints) (int, error) {
	put, ok := cps.(ChunkPutter)
	if !ok {
		return 0, nil
	}
	chunks, refs, err := StateChunks(got)
	if err != nil {
		return 0, err
	}
	same := func(a, b []ChunkRef) bool {
		return slices.EqualFunc(a, b, func(x, y ChunkRef) bool { return x.Hash == y.Hash && x.First == y.First && x.Filter == y.Filter })
	}
	if !same(refs.Core, h.State) || !same(refs.Things, h.Things) || !same(refs.Idem, h.Idem) {
		return 0, nil
	}
	n := 0
	for _, b := range chunks {
		hash := ledger.HashBytes(b)
		if _, err := cps.Chunk(hash); !errors.Is(err, ErrObjectMissing) {
			continue
		}
		if err := put.PutChunk(hash, b); err != nil {
			return n, fmt.Errorf("restoring %s: %w", ChunkPath(hash), err)
		}
		n++
	}
	return n, nil
}

// NextBase folds the base at cut: from prev (nil for the first checkpoint) and the
// records at or below cut (Split's at), of which those prev's cut covers are its own.
// It returns the base decoded from its own encoding, as a reader of the chunks gets it.
func NextBase(in FoldInput, prev *Base, at []ledger.Entry, epoch int, cut Cut) (*Base, error) {
	st, lines := nextState(in, prev, at)
	return deriveNext(st, lines, epoch, cut)
}

// nextState is NextBase's fold: the state at the cut and the lines it keeps.
func nextState(in FoldInput, prev *Base, at []ledger.Entry) (*State, []ledger.Entry) {
	var fresh []ledger.Entry
	for i := range at {
		e := &at[i]
		if prev == nil || !prev.Cut.Below(e.Writer, e.Device, e.Seq) {
			fresh = append(fresh, *e)
		}
	}
	var st *State
	var lines []ledger.Entry
	if prev == nil {
		in.Base, in.Entries = nil, at
		st, lines = Fold(in), at
	} else {
		st = FoldFrom(in, prev, fresh)
		lines = append(slices.Clone(prev.Lines), fresh...)
	}
	return st, lines
}

// deriveNext is NextBase's base from its fold's state and lines.
func deriveNext(st *State, lines []ledger.Entry, epoch int, cut Cut) (*Base, error) {
	b, err := DeriveBase(st, lines, epoch, cut, st.Entries)
	if err != nil {
		return nil, err
	}
	enc, err := EncodeBase(b)
	if err != nil {
		return nil, err
	}
	chunks, refs, err := EncodeThings(b)
	if err != nil {
		return nil, err
	}
	idem, idemRefs, err := EncodeIdem(b)
	if err != nil {
		return nil, err
	}
	out, err := DecodeBase(enc)
	if err != nil {
		return nil, err
	}
	byHash := make(map[string][]byte, len(chunks)+len(idem))
	for _, c := range append(chunks, idem...) {
		byHash[ledger.HashBytes(c)] = c
	}
	out.withThings(refs, idemRefs, func(h string) ([]byte, error) { return byHash[h], nil })
	if _, _, err := out.Terminals(); err != nil {
		return nil, err
	}
	if _, err := out.AllIdem(); err != nil {
		return nil, err
	}
	return out, nil
}

// FirstDifference returns the lowest thing id (an order or ask id, a line's thing key,
// "idem", "agents", "contested" or "cut") at which two bases differ, "" when none.
func FirstDifference(a, b *Base) string {
	keys := map[string]bool{}
	side := func(x *Base) map[string]string {
		m := map[string]string{}
		for id, o := range x.Orders {
			v, _ := ledger.Canonical(o)
			m[id] += string(v)
		}
		for id, t := range x.Asks {
			v, _ := ledger.Canonical(t)
			m[id] += string(v)
		}
		for i := range x.Lines {
			ks, roster := ThingKeys(&x.Lines[i])
			if roster {
				ks = []string{"roster"}
			}
			for _, k := range ks {
				if len(k) > 1 && k[0] != 'x' {
					k = k[1:]
				}
				m[k] += x.Lines[i].Hash()
			}
		}
		idem, _ := ledger.Canonical(x.Idem)
		agents, _ := ledger.Canonical(x.Agents)
		contested, _ := ledger.Canonical(x.Contested)
		cut, _ := ledger.Canonical(x.Cut)
		m["idem"], m["agents"], m["contested"], m["cut"] = string(idem), string(agents), string(contested), string(cut)
		for k := range m {
			keys[k] = true
		}
		return m
	}
	ma, mb := side(a), side(b)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if ma[k] != mb[k] {
			return k
		}
	}
	if a.Entries != b.Entries || a.MaxHLC != b.MaxHLC || a.Epoch != b.Epoch {
		return "entries"
	}
	return ""
}

// CloseCut shortens cut until it is closed under reference over records (a snapshot's
// entries and forks): nothing at or below it names by basis, claim or take an entry
// that is not at or below it, acknowledges a message whose post is not, names an object
// pending says has not arrived (State.ObjectPending), bounds a segment above its cut
// (grant.set, grant.revoke, the master's agent.retire, master.rotate) or attests by
// bound_hashes a record that is not at or below it. Each offending entry's segment is cut just
// below it, and the check repeats until nothing shortens. A segment cut to nothing
// leaves the cut.
func CloseCut(entries []ledger.Entry, forks []ledger.Fork, cut Cut, pending func(e *ledger.Entry) bool) Cut {
	return CloseCutFrom(entries, forks, cut, pending, nil)
}

// CloseCutFrom is CloseCut for the next checkpoint after the one whose state is prev
// (nil: none): what prev holds is held — its lines count as records at or below the
// cut, so that a reference into the records below prev's cut, which may have moved to
// archive/ (docs/format.md §21), is closed — and the records at or below prev's cut,
// closed when it was written, are not checked again.
func CloseCutFrom(entries []ledger.Entry, forks []ledger.Fork, cut Cut, pending func(e *ledger.Entry) bool, prev *Base) Cut {
	cut = slices.Clone(cut)
	var prevLines []ledger.Entry
	if prev != nil {
		prevLines = prev.Lines
	}
	for {
		at, _, _ := Split(entries, forks, cut, nil)
		held := make(map[string]bool, len(at)+len(prevLines))
		posts := map[string]bool{}
		seated := map[string]bool{} // writers a grant.set at or below the cut names
		for _, list := range [][]ledger.Entry{prevLines, at} {
			for i := range list {
				e := &list[i]
				held[e.Hash()] = true
				if e.Type == TypeMsgPost {
					posts[e.Ref] = true
				}
				if e.Writer == MasterWriter && e.Type == TypeGrantSet {
					seated[e.Ref] = true
				}
			}
		}
		lower := map[[2]string]uint64{} // segment → highest seq that may stay
		bad := func(e *ledger.Entry) {
			k := [2]string{e.Writer, e.Device}
			if s, ok := lower[k]; !ok || e.Seq-1 < s {
				lower[k] = e.Seq - 1
			}
		}
		for i := range at {
			e := &at[i]
			if prev != nil && prev.Cut.Below(e.Writer, e.Device, e.Seq) {
				continue // closed when prev was written
			}
			if e.Writer != MasterWriter && !seated[e.Writer] && e.Type != TypeAgentJoin && e.Type != TypeAgentSupport {
				bad(e) // written under a seat the cut does not hold
			}
			d, _ := DecodeData(e)
			pd, _ := DecodePrimaryData(e)
			for _, h := range []string{d.Basis, d.Claim, pd.Take} {
				if h != "" && !held[h] {
					bad(e)
				}
			}
			if e.Type == TypeMsgAck {
				for _, id := range d.IDs {
					if !posts[id] {
						bad(e)
					}
				}
			}
			if d.Object != "" && pending != nil && pending(e) {
				bad(e)
			}
			if e.Writer == MasterWriter && len(d.Bounds) > 0 {
				owner := e.Ref
				if e.Type == TypeMasterRotate {
					owner = MasterWriter
				}
				for dev, b := range d.Bounds {
					p, ok := cut.At(owner, dev)
					if b > 0 && (!ok || b > p.Seq) {
						bad(e)
					}
					if h := d.BoundHashes[dev]; b > 0 && h != "" && !held[h] {
						bad(e) // it attests a record the cut does not hold
					}
				}
			}
		}
		if len(lower) == 0 {
			return cut
		}
		byHash := make(map[string]*ledger.Entry, len(at))
		for i := range at {
			byHash[at[i].Hash()] = &at[i]
		}
		var next Cut
		for _, p := range cut {
			s, ok := lower[[2]string{p.Writer, p.Device}]
			if !ok || s >= p.Seq {
				next = append(next, p)
				continue
			}
			// Walk H's ancestry down to seq s; prev's point stands for the records
			// below it, which may not be here.
			e := byHash[p.Hash]
			for e != nil && e.Seq > s {
				e = byHash[e.Prev]
			}
			if pp, ok := prev.cutAt(p.Writer, p.Device); e == nil && ok && pp.Seq == s {
				next = append(next, pp)
				continue
			}
			if e == nil || s == 0 {
				continue
			}
			next = append(next, CutPoint{Writer: p.Writer, Device: p.Device, Seq: e.Seq, Hash: e.Hash(), Offset: 0})
		}
		cut = next
	}
}

// CutOf returns the cut naming, for each segment of entries (a snapshot's kept
// records), its highest record at or below limit's seq for it (limit nil: every record).
// Offsets are left 0; the caller that knows the files sets them.
func CutOf(entries []ledger.Entry, limit func(writer, device string) (uint64, bool)) Cut {
	top := map[[2]string]*ledger.Entry{}
	for i := range entries {
		e := &entries[i]
		k := [2]string{e.Writer, e.Device}
		if limit != nil {
			if m, ok := limit(e.Writer, e.Device); !ok || e.Seq > m {
				continue
			}
		}
		if t := top[k]; t == nil || e.Seq > t.Seq {
			top[k] = e
		}
	}
	var c Cut
	for k, e := range top {
		c = append(c, CutPoint{Writer: k[0], Device: k[1], Seq: e.Seq, Hash: e.Hash()})
	}
	slices.SortFunc(c, func(a, b CutPoint) int {
		return cmp.Or(strings.Compare(a.Writer, b.Writer), strings.Compare(a.Device, b.Device))
	})
	return c
}

// NewHead builds the head of the checkpoint of epoch over base, written by the master
// on device, with the rotations and previous counting entry of entries (its snapshot).
func NewHead(project string, base *Base, refs StateRefs, device string, entries []ledger.Entry, prev *Counting) (*Head, error) {
	h := &Head{V: HeadVersion, Project: project, Epoch: base.Epoch, Rules: RulesVersion, Cut: base.Cut, State: refs.Core,
		Things: refs.Things, Idem: refs.Idem, Compactor: device, Rotations: []json.RawMessage{}}
	if h.Things == nil {
		h.Things = []ChunkRef{}
	}
	if h.Idem == nil {
		h.Idem = []ChunkRef{}
	}
	for i := range entries {
		e := &entries[i]
		if e.Writer == MasterWriter && e.Type == TypeMasterRotate && base.Cut.Below(e.Writer, e.Device, e.Seq) {
			c, err := e.Canonical()
			if err != nil {
				return nil, err
			}
			h.Rotations = append(h.Rotations, c)
		}
	}
	if prev != nil {
		c, err := prev.Entry.Canonical()
		if err != nil {
			return nil, err
		}
		h.Previous = c
	}
	return h, nil
}

// firstObjectPending returns the first of at whose object file st saw pending, nil
// when none is.
func firstObjectPending(st *State, at []ledger.Entry) *ledger.Entry {
	for i := range at {
		if st.ObjectPending(&at[i]) {
			return &at[i]
		}
	}
	return nil
}

// ObjectPending reports whether e names an object file that had not arrived when st
// was folded (its thing is pending sync): a cut must not cover it.
func (st *State) ObjectPending(e *ledger.Entry) bool {
	switch Family(e.Type) {
	case "order":
		o := st.Orders[e.Ref]
		return o != nil && o.Missing
	case "ask":
		a := st.Asks[e.Ref]
		return a != nil && a.Missing
	case "handin":
		h := st.Handins[e.Ref]
		return h != nil && h.Missing
	case "msg":
		m := st.Messages[e.Ref]
		return m != nil && m.Pending
	}
	return false
}
