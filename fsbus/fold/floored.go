package fold

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/ledger"
)

// Folding a reading that started from the cut (docs/format.md §20 "Reading from the
// cut"): a process that knows a counting checkpoint reads each segment from its cut
// point (ledger.ReadState.SetFloors), so its snapshot holds only the records above the
// cut, their forks and problems. The checkpoints below the cut are then not in the
// snapshot: the chain is taken from the head, which names the previous counting
// checkpoint's line, and that checkpoint's head names the compactor.

// Floors returns the floors of a reading from cut: one per cut point whose offset is
// known (a cut point without one came from a conflict copy; its segment is read whole
// and its records at or below the cut dropped by the floor all the same).
func Floors(cut Cut) []ledger.Floor {
	out := make([]ledger.Floor, 0, len(cut))
	for _, p := range cut {
		out = append(out, ledger.Floor{Writer: p.Writer, Device: p.Device, Seq: p.Seq, Hash: p.Hash, Offset: p.Offset})
	}
	return out
}

// NewestCut returns the cut of cf's newest counting checkpoint, or nil for a nil cf,
// one with no counting chain, or one read only.
func (cf *ChannelFold) NewestCut() Cut {
	if cf == nil || cf.ReadOnly || len(cf.Chain) == 0 {
		return nil
	}
	return cf.Chain[len(cf.Chain)-1].Head.Cut
}

// AnchorCut returns snap's problems less the seq gaps at or below cf's newest counting
// cut of chains anchored to it (ledger.AnchorCut): the records there may have moved to
// archive/ (docs/format.md §21 "Records at or below a cut"). A nil cf, or one with no
// counting chain or read only, keeps every problem.
func (cf *ChannelFold) AnchorCut(snap *ledger.Snapshot) []ledger.Problem {
	cut := cf.NewestCut()
	if cut == nil || len(snap.Problems) == 0 {
		return snap.Problems
	}
	return ledger.AnchorCut(snap.Problems, snap.Entries, Floors(cut))
}

// FoldFloored folds in — a snapshot read from the floors of the checkpoint whose
// entry names head headHash at epoch — from that checkpoint's state, as FoldChannel
// would fold the whole reading. It returns the reason, and no fold, when the reading
// cannot stand for the whole one: the floors are not that head's cut, a floor's entry
// is in no file (ledger.KindCutMissing), the checkpoint entry is not here or not signed
// by the master key in force, its head, state or previous checkpoint does not check,
// it was folded under other fold rules, or a checkpoint entry other than it and its
// basis is here (the chain may have moved on, or may count another branch). The caller then reads whole and
// folds with FoldChannel, which reports each of these.
//
// checked says that this machine loaded that head's state before (LoadBaseLazy).
func FoldFloored(in FoldInput, snap *ledger.Snapshot, cps Checkpoints, epoch int, headHash string, checked bool) (*ChannelFold, error) {
	for _, p := range snap.Problems {
		if p.Kind == ledger.KindCutMissing {
			return nil, fmt.Errorf("%s: %s", p.Path, p.Detail)
		}
	}
	if snap.Below > 0 { // a whole reading notes the forks among them the cut decides (State.Finality)
		return nil, fmt.Errorf("%d records at or below the cut were read (conflict copies, or a file whose cut offset did not check)", snap.Below)
	}
	above := MergedSet(snap.Entries)
	var entry *ledger.Entry
	var data CheckpointData
	cands := WithForkedCheckpoints(above, snap.Forks) // as CountingChain sees them
	var others []*ledger.Entry
	for i := range cands {
		e := &cands[i]
		if e.Writer != MasterWriter || e.Type != TypeCheckpoint {
			continue
		}
		var d CheckpointData
		if json.Unmarshal(e.Data, &d) != nil {
			return nil, fmt.Errorf("checkpoint entry %s does not decode", e.Hash())
		}
		if d.Epoch == epoch && d.Head == headHash && entry == nil {
			entry, data = e, d
		} else {
			others = append(others, e)
		}
	}
	if entry == nil {
		return nil, fmt.Errorf("no checkpoint entry of epoch %d naming head %s above its cut", epoch, headHash)
	}
	// A replacement may have rivals of its epoch at or below its cut, which this
	// reading does not hold: CountingChain decides, over the whole reading (ADR 0020).
	if data.Replaces != "" {
		return nil, fmt.Errorf("checkpoint of epoch %d replaces %s: its rivals may lie below its cut", epoch, data.Replaces)
	}
	// Any other checkpoint entry here but its basis may change which chain counts (a
	// later one, a second one of its epoch, or the compactor's own of an epoch a
	// take-over below it also wrote): CountingChain decides, over the whole reading.
	for _, e := range others {
		if e.Hash() != data.Basis {
			return nil, fmt.Errorf("checkpoint entry %s above the cut of epoch %d", e.Hash(), epoch)
		}
	}
	if data.Rules != RulesVersion {
		return nil, fmt.Errorf("checkpoint of epoch %d folded under fold rules %d, this build folds under %d", epoch, data.Rules, RulesVersion)
	}
	raw, err := cps.Head(epoch, headHash)
	if err != nil {
		return nil, err
	}
	var loose Head // its chunks are checked by hash; its signature once the key in force is known
	if err := json.Unmarshal(raw, &loose); err != nil || ledger.HashBytes(raw) != headHash {
		return nil, fmt.Errorf("head %s does not decode or hash to its name", HeadPath(epoch, headHash))
	}
	if !slices.Equal(Floors(loose.Cut), snap.Floors) {
		return nil, fmt.Errorf("the reading's floors are not the cut of epoch %d", epoch)
	}
	base, err := LoadBaseLazy(Counting{Entry: *entry, Data: data, Head: &loose}, cps, checked)
	if err != nil {
		return nil, err
	}
	all := append(slices.Clone(base.Lines), above...)
	masters := ResolveMasters(&State{Project: in.Project}, FoldInput{Entries: MergedSet(slices.Clone(all)), Master: in.Master, Project: in.Project}, func(*ledger.Entry, string) {})
	if !sigcache.Verify(entry, masters.KeyAt(entry.Device, entry.Seq), in.Project) {
		return nil, fmt.Errorf("checkpoint entry %s not signed by the master key in force", entry.Hash())
	}
	parse := ParseHead
	if checked {
		// This machine checked these bytes before (their hash is the one the
		// checkpoint entry, verified above, names): only its shape is checked again.
		parse = parseHeadChecked
	}
	head, err := parse(raw, headHash, masters.KeyAt(entry.Device, entry.Seq), in.Project)
	if err != nil {
		return nil, err
	}
	if head.Epoch != data.Epoch || head.Rules != data.Rules {
		return nil, fmt.Errorf("head names epoch %d and rules %d, its entry %d and %d", head.Epoch, head.Rules, data.Epoch, data.Rules)
	}
	if p, ok := head.Cut.At(MasterWriter, entry.Device); ok && p.Seq >= entry.Seq {
		return nil, fmt.Errorf("cut of the master's segment %s (seq %d) is not below the checkpoint entry (seq %d)", entry.Device, p.Seq, entry.Seq)
	}
	chain := []Counting{{Entry: *entry, Data: data, Head: head}}
	if epoch == 1 {
		if data.Basis != "" {
			return nil, fmt.Errorf("checkpoint of epoch 1 names a basis")
		}
	} else {
		prev, err := previousCounting(head, data, masters, cps, in.Project)
		if err != nil {
			return nil, err
		}
		if entry.Device != prev.Head.Compactor && !data.TakeOver {
			return nil, fmt.Errorf("checkpoint of epoch %d written on device %s; epoch %d names compactor %s", epoch, entry.Device, prev.Data.Epoch, prev.Head.Compactor)
		}
		if err := head.Cut.Covers(prev.Head.Cut); err != nil {
			return nil, err
		}
		chain = append([]Counting{*prev}, chain...)
	}
	in.Base, in.Entries, in.Forks = base, all, snap.Forks
	cf := &ChannelFold{Chain: chain, Used: len(chain) - 1, Folded: FoldFull(in)}
	cf.State = cf.Folded.State
	if err := base.Err(); err != nil { // a chunk the fold read did not
		return nil, err
	}
	return cf, nil
}

// previousCounting is the counting checkpoint a head names as previous: its line,
// which must hash to data's basis and verify under the master key in force, and its
// head.
func previousCounting(head *Head, data CheckpointData, masters *MasterChain, cps Checkpoints, project string) (*Counting, error) {
	if len(head.Previous) == 0 {
		return nil, fmt.Errorf("head of epoch %d names no previous checkpoint", head.Epoch)
	}
	prev, err := ledger.ParseLine(head.Previous)
	if err != nil {
		return nil, fmt.Errorf("head of epoch %d: previous checkpoint line: %w", head.Epoch, err)
	}
	var pd CheckpointData
	switch {
	case prev.Hash() != data.Basis:
		return nil, fmt.Errorf("head of epoch %d names a previous checkpoint %s, its entry the basis %s", head.Epoch, prev.Hash(), data.Basis)
	case prev.Writer != MasterWriter || prev.Type != TypeCheckpoint || json.Unmarshal(prev.Data, &pd) != nil || pd.Epoch != data.Epoch-1:
		return nil, fmt.Errorf("head of epoch %d names a previous line that is not the checkpoint of epoch %d", head.Epoch, data.Epoch-1)
	case !sigcache.Verify(&prev, masters.KeyAt(prev.Device, prev.Seq), project):
		return nil, fmt.Errorf("previous checkpoint %s not signed by the master key in force", prev.Hash())
	}
	raw, err := cps.Head(pd.Epoch, pd.Head)
	if err != nil {
		return nil, err
	}
	ph, err := ParseHead(raw, pd.Head, masters.KeyAt(prev.Device, prev.Seq), project)
	if err != nil {
		return nil, err
	}
	return &Counting{Entry: prev, Data: pd, Head: ph}, nil
}
