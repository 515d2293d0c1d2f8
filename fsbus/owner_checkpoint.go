package fsbus

import (
	"path/filepath"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/ledger"
)

// The owner's checkpoint on disk (docs/format.md §20, ADR 0019): heads at
// checkpoints/<epoch>-<16 hex>/head.json, chunks at checkpoints/chunks/<64 hex>.json, both
// written once and named by their hash; a `checkpoint` entry in the master's segment
// names the head. Load folds from the newest counting checkpoint (fold.FoldChannel).

// foldWhole folds a snapshot from scratch, with the owner's checkpoints when there are
// any (ckfile.Floored.Fold; after a miss of its floors the caller reads whole), and
// notes what they gave on c.
func (c *Channel) foldWhole(in fold.FoldInput, snap *ledger.Snapshot) *fold.Folded {
	c.floored.Cache = c.Home.StateDir(c.Project())
	cf := c.floored.Fold(c.Root, in, snap, c.Thorough)
	if cf == nil {
		c.ownerCheckpoint = nil
		in.Entries, in.Forks = snap.Entries, snap.Forks
		return fold.FoldFull(in)
	}
	probs, err := ckfile.CheckEpoch(c.epochSeenPath(), cf, c.now())
	if err != nil {
		c.Home.warn("epoch-seen", "ferry: warning: "+err.Error())
	}
	cf.Problems = append(cf.Problems, probs...)
	c.setOwnerCheckpoint(cf)
	snap.Problems = cf.AnchorCut(snap)
	return cf.Folded
}

// setOwnerCheckpoint notes cf, a whole fold's owner's checkpoints or those the fold
// checkpoint restored, on c: this process's writers go on in the files of its newest
// counting epoch (format.md §21 "Rolling over").
func (c *Channel) setOwnerCheckpoint(cf *fold.ChannelFold) {
	c.ownerCheckpoint = cf
	if n := len(cf.Chain); n > 0 && !cf.ReadOnly && cf.Chain[n-1].Data.Epoch > 0 {
		c.Ledger.SetEpoch(max(c.Ledger.Epoch(), uint64(cf.Chain[n-1].Data.Epoch)))
	}
}

// epochSeenPath is where this machine keeps the highest epoch it has seen count.
func (c *Channel) epochSeenPath() string {
	return filepath.Join(c.Home.ConfigDir, "checkpoints", c.Project())
}

// OwnerCheckpoint returns what the last Load's owner's checkpoints gave (nil when the
// ledger holds none): the counting chain, the one folded from, and the problems.
func (c *Channel) OwnerCheckpoint() *fold.ChannelFold { return c.ownerCheckpoint }

// Recheck folds the states of the counting checkpoints of the last Load again from the
// entries at or below their cuts (ckfile.Recheck; v's reading from the cut is read
// whole first) and returns the problems and the first checkpoint that differs.
func (c *Channel) Recheck(v *View) ([]fold.CheckpointProblem, *fold.Dispute, error) {
	in := fold.FoldInput{Project: c.Project(), Master: c.MasterKey, Objects: c.objects(), Entries: v.Snapshot.Entries, Forks: v.Snapshot.Forks}
	return ckfile.Recheck(c.Root, c.ownerCheckpoint, in, c.Ledger, v.Snapshot.Floors != nil, false)
}

// Dispute writes the dispute of the owner's checkpoint d (fold.TypeCheckpointDispute),
// or with withdrawn its withdrawal; a zero entry when fold.DisputeWanted says none is
// (d is not the newest counting checkpoint, this writer's dispute of it already
// stands, or for a withdrawal none does), or the last Load found no checkpoint.
func (s *Session) Dispute(d fold.Dispute, withdrawn bool) (ledger.Entry, error) {
	e, _, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if s.ownerCheckpoint == nil {
			return nil, nil, nil
		}
		if !fold.DisputeWanted(v.Snapshot.Entries, v.State, s.ownerCheckpoint.Chain, s.Name, d.Hash, withdrawn) {
			return nil, nil, nil
		}
		if err := s.CheckWrite(v, fold.TypeCheckpointDispute); err != nil {
			return nil, nil, err
		}
		dr := fold.DisputeDraft(d, withdrawn)
		return &dr, nil, nil
	})
	return e, err
}
