package fsbus

import (
	"path/filepath"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// The owner's checkpoint on disk (docs/format.md §20, ADR 0019): heads at
// checkpoints/<epoch>-<16 hex>/head.json, chunks at checkpoints/chunks/<64 hex>, both
// written once and named by their hash; a `checkpoint` entry in the master's segment
// names the head. Load folds from the newest counting checkpoint (fold.FoldChannel).

// hasCheckpointEntry reports whether entries hold a master checkpoint entry.
func hasCheckpointEntry(entries []ledger.Entry) bool {
	for i := range entries {
		if entries[i].Type == fold.TypeCheckpoint && entries[i].Writer == fold.MasterWriter {
			return true
		}
	}
	return false
}

// foldWhole folds a snapshot from scratch: from the newest counting owner's checkpoint
// when the ledger holds one, else everything. It notes what the checkpoints gave on c.
func (c *Channel) foldWhole(in fold.FoldInput, snap *ledger.Snapshot) *fold.Folded {
	in.Entries, in.Forks = snap.Entries, snap.Forks
	if !hasCheckpointEntry(fold.WithForkedCheckpoints(snap.Entries, snap.Forks)) {
		c.ownerCheckpoint = nil
		return fold.FoldFull(in)
	}
	cf := fold.FoldChannel(in, ckfile.Dir{Root: c.Root})
	probs, err := ckfile.CheckEpoch(filepath.Join(c.Home.ConfigDir, "checkpoints", c.Project()), cf)
	if err != nil {
		c.Home.warn("epoch-seen", "ferry: warning: "+err.Error())
	}
	cf.Problems = append(cf.Problems, probs...)
	c.ownerCheckpoint = cf
	return cf.Folded
}

// OwnerCheckpoint returns what the last Load's owner's checkpoints gave (nil when the
// ledger holds none): the counting chain, the one folded from, and the problems.
func (c *Channel) OwnerCheckpoint() *fold.ChannelFold { return c.ownerCheckpoint }

// readOnlyError is the refusal of every write while a counting checkpoint was folded
// under other fold rules than this build's.
func readOnlyError(cf *fold.ChannelFold) error {
	return errs.Errorf(errs.Denied, "upgrade ferry on this machine (`ferry update`), then try again",
		"this build folds under fold rules %d and the channel's owner's checkpoint was folded under other rules: it reads the channel and writes nothing", fold.RulesVersion)
}
