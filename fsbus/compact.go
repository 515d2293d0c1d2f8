package fsbus

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// `ferry compact`: the owner signs where the past ends (docs/format.md §20, ADR 0019).

// CompactOptions are the options of Compact.
type CompactOptions struct {
	// Settle overrides policy.settle_s when SettleSet: only entries this machine first
	// saw at least that long ago are covered.
	Settle    time.Duration
	SettleSet bool
	// Force compacts although seated writers were not seen to advance within the
	// settle time, or a seated writer's segment holds no agent.support naming format 2.
	Force bool
}

// CompactResult is what Compact wrote.
type CompactResult struct {
	Epoch int `json:"epoch"`
	// Entry is the checkpoint entry's hash; empty when nothing new had settled and
	// nothing was written.
	Entry string `json:"entry,omitempty"`
	Head  string `json:"head,omitempty"` // the head file, relative to the channel folder
	// Chunks is how many chunks the state has, Written how many of them were new files.
	Chunks  int `json:"chunks"`
	Written int `json:"written"`
	// Segments the cut names; Covered the entries at or below it; Lines those the
	// state keeps verbatim; Terminal the things it holds as final.
	Segments int `json:"segments"`
	Covered  int `json:"covered"`
	Lines    int `json:"lines"`
	Terminal int `json:"terminal"`
	// Unsettled are the seated writers not seen to advance within the settle time
	// (compacted past with Force).
	Unsettled []string `json:"unsettled,omitempty"`
	Settle    string   `json:"settle"`
}

// Compact writes the owner's next checkpoint: the state at a cut covering every entry
// this machine first saw at least the settle time ago, closed under reference, folded
// from the previous counting checkpoint's state. Only the master on the compactor
// device compacts; a channel read under other fold rules, or with the master key
// locked, writes nothing.
func (s *Session) Compact(opt CompactOptions) (*CompactResult, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner on the machine that holds the master key", "only the master compacts the ledger")
	}
	res := &CompactResult{}
	e, _, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		*res = CompactResult{}
		return s.planCompact(v, opt, res)
	})
	if err != nil {
		return nil, err
	}
	if e.Seq != 0 {
		res.Entry = e.Hash()
	}
	return res, nil
}

// planCompact decides the checkpoint under the channel lock (Session.write).
func (s *Session) planCompact(v *View, opt CompactOptions, res *CompactResult) (*ledger.Draft, []pendingObject, error) {
	cf := s.ownerCheckpoint
	var prev *fold.Counting
	var prevBase *fold.Base
	if cf != nil && len(cf.Chain) > 0 {
		prev = &cf.Chain[len(cf.Chain)-1]
		if prev.Head.Compactor != s.Device {
			return nil, nil, errs.Errorf(errs.Denied, "run `ferry compact` on that machine",
				"this device (%s) is not the compactor: the owner's checkpoint of epoch %d names device %s", s.Device, prev.Data.Epoch, prev.Head.Compactor)
		}
		var err error
		if prevBase, err = fold.LoadBase(*prev, checkpointFiles{s.Root}); err != nil {
			return nil, nil, errs.Errorf(errs.Invalid, "run `ferry doctor`; restore the checkpoint's files from another machine",
				"the owner's checkpoint of epoch %d does not load: %v", prev.Data.Epoch, err)
		}
	}
	settle := time.Duration(s.EffectivePolicy(v).Policy.SettleS) * time.Second
	if settle == 0 {
		settle = fold.DefaultSettleS * time.Second
	}
	if opt.SettleSet {
		settle = opt.Settle
	}
	res.Settle = settle.String()
	now := s.now()
	settledAt := now.Add(-settle)

	// Seated writers not seen to advance within the settle time may hold entries this
	// machine has not seen: they would land above the cut.
	advanced := map[string]bool{}
	for _, p := range v.Presence {
		if p.SeenMs >= settledAt.UnixMilli() {
			advanced[p.Writer] = true
		}
	}
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if !v.Arrivals.Seen(e.Hash()).Before(settledAt) {
			advanced[e.Writer] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(v.State.Agents)) {
		if a := v.State.Agents[name]; a.Seated && !a.Retired && !advanced[name] {
			res.Unsettled = append(res.Unsettled, name)
		}
	}
	if len(res.Unsettled) > 0 && !opt.Force {
		return nil, nil, errs.Errorf(errs.Conflict, "wait until they have synced, retire them, or compact with --force (their entries not yet here land above the cut, and those on things the checkpoint holds as final are superseded)",
			"seated writers not seen to advance in the last %s: %s", settle, strings.Join(res.Unsettled, ", "))
	}

	// The cut: per segment, the longest prefix of the kept chain this machine first
	// saw at least settle ago, never below the previous cut; then closed under reference.
	limit := map[[2]string]uint64{}
	stop := map[[2]string]bool{}
	for _, e := range segmentOrder(v.Snapshot.Entries) {
		k := [2]string{e.Writer, e.Device}
		if stop[k] {
			continue
		}
		if v.Arrivals.Seen(e.Hash()).IsZero() || v.Arrivals.Seen(e.Hash()).After(settledAt) {
			stop[k] = true
			continue
		}
		limit[k] = e.Seq
	}
	if prevBase != nil {
		for _, p := range prevBase.Cut {
			k := [2]string{p.Writer, p.Device}
			limit[k] = max(limit[k], p.Seq)
		}
	}
	cut := fold.CutOf(v.Snapshot.Entries, func(w, d string) (uint64, bool) { m, ok := limit[[2]string{w, d}]; return m, ok })
	cut = fold.CloseCut(v.Snapshot.Entries, v.Snapshot.Forks, cut, v.State.ObjectPending)
	if prevBase != nil {
		if err := cut.Covers(prevBase.Cut); err != nil {
			return nil, nil, errs.Errorf(errs.Conflict, "run `ferry doctor`", "the cut closed under reference falls below the previous checkpoint's: %v", err)
		}
		if slices.EqualFunc(cut, prevBase.Cut, func(a, b fold.CutPoint) bool { return a.Writer == b.Writer && a.Device == b.Device && a.Hash == b.Hash }) {
			res.Epoch = prev.Data.Epoch
			return nil, nil, nil // nothing new has settled
		}
	}
	if len(cut) == 0 {
		return nil, nil, nil
	}
	for i := range cut {
		cut[i].Offset = lineEnd(ledger.SegmentPath(filepath.Join(s.Root, "ledger"), cut[i].Writer, cut[i].Device), cut[i].Hash)
	}

	epoch := 1
	if prev != nil {
		epoch = prev.Data.Epoch + 1
	}
	in := fold.FoldInput{Project: s.Project(), Master: s.MasterKey, Objects: s.objects(), Entries: v.Snapshot.Entries, Forks: v.Snapshot.Forks}
	at, _, probs := fold.Split(v.Snapshot.Entries, v.Snapshot.Forks, cut, nil)
	for _, p := range probs {
		if p.Kind == "missing" {
			return nil, nil, errs.Errorf(errs.Conflict, "run `ferry doctor`", "segment %s/%s: %s", p.Writer, p.Device, p.Detail)
		}
	}
	base, err := fold.NextBase(in, prevBase, at, epoch, cut)
	if err != nil {
		return nil, nil, err
	}
	enc, err := fold.EncodeBase(base)
	if err != nil {
		return nil, nil, err
	}
	chunks, refs := fold.Chunks(enc)
	head, err := fold.NewHead(s.Project(), base, refs, s.Device, v.Snapshot.Entries, prev)
	if err != nil {
		return nil, nil, err
	}
	headBytes, headHash, err := fold.SignHead(head, s.Signer)
	if err != nil {
		return nil, nil, err
	}
	var objs []pendingObject
	for i, c := range chunks {
		p := filepath.Join(s.Root, filepath.FromSlash(fold.ChunkPath(refs[i].Hash)))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, c) {
			continue // written by an earlier checkpoint: chunks are shared
		}
		if err := s.mkdirNoLinks(filepath.Dir(p)); err != nil {
			return nil, nil, err
		}
		objs = append(objs, pendingObject{path: p, data: c, verbatim: true})
	}
	res.Written = len(objs)
	hp := filepath.Join(s.Root, filepath.FromSlash(fold.HeadPath(epoch, headHash)))
	if err := s.mkdirNoLinks(filepath.Dir(hp)); err != nil {
		return nil, nil, err
	}
	objs = append(objs, pendingObject{path: hp, data: headBytes, verbatim: true})

	terminal := len(base.Orders) + len(base.Asks)
	*res = CompactResult{Epoch: epoch, Head: fold.HeadPath(epoch, headHash), Chunks: len(chunks), Written: res.Written, Segments: len(cut),
		Covered: base.Entries, Lines: len(base.Lines), Terminal: terminal, Unsettled: res.Unsettled, Settle: res.Settle}
	d := fold.CheckpointData{Epoch: epoch, Head: headHash, Rules: fold.RulesVersion}
	if prev != nil {
		d.Basis = prev.Entry.Hash()
	}
	return &ledger.Draft{Type: fold.TypeCheckpoint, Ref: fold.TypeCheckpoint, Data: mustJSON(d)}, objs, nil
}

// segmentOrder returns entries by (writer, device, seq).
func segmentOrder(entries []ledger.Entry) []*ledger.Entry {
	out := make([]*ledger.Entry, len(entries))
	for i := range entries {
		out[i] = &entries[i]
	}
	slices.SortFunc(out, func(a, b *ledger.Entry) int {
		if c := strings.Compare(a.Writer, b.Writer); c != 0 {
			return c
		}
		if c := strings.Compare(a.Device, b.Device); c != 0 {
			return c
		}
		return int(a.Seq) - int(b.Seq)
	})
	return out
}

// lineEnd returns the byte offset just after the line of the segment file at path whose
// record hashes to hash, or 0 when the file holds no such line (the record came from a
// conflict copy): the cut's offset is a hint a reader checks, never trusts.
func lineEnd(path, hash string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			off += int64(len(line))
			if e, perr := ledger.ParseLine(bytes.TrimRight(line, "\r\n")); perr == nil && e.Hash() == hash {
				return off
			}
		}
		if err != nil {
			return 0
		}
	}
}

// mkdirNoLinks makes dir under the channel folder, refusing to go through a link.
func (s *Session) mkdirNoLinks(dir string) error {
	if l := linkBelow(s.Root, dir); l != "" {
		return errs.Errorf(errs.Invalid, "replace the link with a real directory; `ferry doctor` lists every link in the channel",
			"%s in the channel is a symbolic link: ferry never writes through links (nothing was written)", l)
	}
	return os.MkdirAll(dir, 0o755)
}
