package fsbus

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// The owner's checkpoint on disk (docs/format.md §20, ADR 0019): heads at
// checkpoints/<epoch>-<16 hex>/head.json, chunks at checkpoints/chunks/<64 hex>, both
// written once and named by their hash; a `checkpoint` entry in the master's segment
// names the head. Load folds from the newest counting checkpoint (fold.FoldChannel).

// headMax and chunkMax bound what is read of a head or chunk file: a head holds the cut
// (about 200 bytes a segment) and the rotation lines; a chunk is at most 64 KiB.
const (
	headMax  = 16 << 20
	chunkMax = 64 << 10
)

// checkpointFiles reads a channel folder's checkpoint objects (fold.Checkpoints).
type checkpointFiles struct{ root string }

func (c checkpointFiles) Head(epoch int, hash string) ([]byte, error) {
	return readBounded(filepath.Join(c.root, filepath.FromSlash(fold.HeadPath(epoch, hash))), headMax)
}

func (c checkpointFiles) Chunk(hash string) ([]byte, error) {
	return readBounded(filepath.Join(c.root, filepath.FromSlash(fold.ChunkPath(hash))), chunkMax)
}

// readBounded reads a regular file of at most limit bytes; fold.ErrObjectMissing when
// it is not there.
func readBounded(path string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fold.ErrObjectMissing
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", path, fi.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past %d bytes", path, limit)
	}
	return b, nil
}

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
	if !hasCheckpointEntry(snap.Entries) {
		c.ownerCheckpoint = nil
		return fold.FoldFull(in)
	}
	cf := fold.FoldChannel(in, checkpointFiles{c.Root})
	cf.Problems = append(cf.Problems, c.checkEpochSeen(cf)...)
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

// epochSeenPath is where this machine keeps the highest counting checkpoint epoch it
// has seen for the project (docs/format.md §18): "<epoch> <entry hash>\n".
func (c *Channel) epochSeenPath() string {
	return filepath.Join(c.Home.ConfigDir, "checkpoints", c.Project())
}

// checkEpochSeen compares the counting chain with the highest epoch this machine has
// seen: a lower one is a folder rolled back (restored from an old copy), reported
// loudly; a higher one is remembered. A failure to remember is a warning: the check
// then compares with the last epoch remembered.
func (c *Channel) checkEpochSeen(cf *fold.ChannelFold) []fold.CheckpointProblem {
	top, hash := 0, ""
	if n := len(cf.Chain); n > 0 {
		top, hash = cf.Chain[n-1].Data.Epoch, cf.Chain[n-1].Entry.Hash()
	}
	p := c.epochSeenPath()
	seen := 0
	var seenHash string
	if b, err := os.ReadFile(p); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			seen, _ = strconv.Atoi(f[0])
			seenHash = f[1]
		}
	}
	switch {
	case top < seen:
		return []fold.CheckpointProblem{{Hash: seenHash, Epoch: seen, Kind: "rolled_back",
			Detail: fmt.Sprintf("this machine has seen the owner's checkpoint of epoch %d (%s) count, and the folder's counting checkpoints end at epoch %d: the folder was rolled back or restored from an old copy; restore the checkpoint's files and the master's segment from another machine", seen, seenHash, top)}}
	case top > seen:
		if err := fsutil.WriteFile(p, []byte(fmt.Sprintf("%d %s\n", top, hash)), 0o644); err != nil {
			if os.MkdirAll(filepath.Dir(p), 0o755) != nil || fsutil.WriteFile(p, []byte(fmt.Sprintf("%d %s\n", top, hash)), 0o644) != nil {
				c.Home.warn("epoch-seen", fmt.Sprintf("ferry: warning: could not remember checkpoint epoch %d in %s: %v", top, p, err))
			}
		}
	}
	return nil
}
