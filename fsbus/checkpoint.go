package fsbus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/cache"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// The fold checkpoint (docs/format.md §18 "The fold checkpoint", which gives the file's
// layout; ADR 0011): a process that folded the channel keeps what it folded in
// <cache>/channels/<project>/fold-<first 16 hex of sha256(channel root)>.bin, so that
// the next process starts from it, reads only what was appended since and folds only
// the things that touched (foldDelta, ADR 0010). The header names a digest of the
// types the state codec walks (snapcodec.go) and this build (binaryIdentity): only the
// binary that wrote it reads it. A state folded from an owner's checkpoint is
// restored only by a process reading from that same cut (restoreOwner).
//
// Trust: as trusted as the index (machine-local cache). It is used only when its
// checksum, header and ledger snapshot all match the index just opened and its full
// fold is younger than checkpointTrust; anything else is ignored and the process folds
// everything, writing a new one. A full fold re-reads every object file and re-hashes
// every segment byte the index covers, which is how a file changed in place behind
// ferry's back is found.

// checkpointTrust is how long after a full fold a new process may start from the
// checkpoint that fold left, instead of folding everything again (ADR 0011). A running
// process folds everything every FullFoldEvery.
const checkpointTrust = 10 * time.Minute

// checkpointEvery is how many entries a process folds through foldDelta after the
// last checkpoint before it writes a new one: what a new process's first Load folds
// on top of a checkpoint is bounded by about this plus what arrived since.
const checkpointEvery = 2000

// checkpointPath is the channel's checkpoint file.
func (c *Channel) checkpointPath() string {
	sum := sha256.Sum256([]byte(c.Root))
	return filepath.Join(c.Home.StateDir(c.Project()), "fold-"+hex.EncodeToString(sum[:8])+".bin")
}

// checkpointHead is the checkpoint's header line for this binary and channel.
func (c *Channel) checkpointHead() string {
	return cache.CheckpointHeader + cache.StateLayout() + "-" + cache.BinaryIdentity() + " " + c.Project() + " " + ledger.FormatKey(c.MasterKey) + "\n"
}

// readCheckpoint reads the checkpoint file's header and payload, checking its
// checksum. It returns errCheckpoint (wrapped) for a missing, damaged or foreign
// file, and the full fold time and the payload past it otherwise.
func (c *Channel) readCheckpoint() (fullAt time.Time, ledgerLast, body []byte, err error) {
	raw, err := os.ReadFile(c.checkpointPath())
	if err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("%w: %v", cache.ErrCheckpoint, err)
	}
	head := c.checkpointHead()
	if !bytes.HasPrefix(raw, []byte(head)) || len(raw) < len(head)+cache.FrameSumSize {
		return time.Time{}, nil, nil, fmt.Errorf("%w: header", cache.ErrCheckpoint)
	}
	payload, sum := raw[len(head):len(raw)-cache.FrameSumSize], raw[len(raw)-cache.FrameSumSize:]
	if s := cache.FrameSum(payload); !bytes.Equal(s[:], sum) {
		return time.Time{}, nil, nil, fmt.Errorf("%w: checksum", cache.ErrCheckpoint)
	}
	d := &fold.StateDec{B: payload}
	ms := d.Uvarint()
	ledgerLast = d.Take(d.Length())
	if d.Err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("%w: %v", cache.ErrCheckpoint, d.Err)
	}
	return time.UnixMilli(int64(ms)), ledgerLast, d.B, nil
}

// writeCheckpoint writes the checkpoint of f, folded from snap, whose last full fold
// was at fullAt, under the flock index.lock, atomically (fsutil.WriteFile). It does
// nothing when the index is off or its last snapshot is not snap (the last read was
// verified — a fork — or another read came after). A failure is returned and costs only the next process a full fold.
func (c *Channel) writeCheckpoint(f *fold.Folded, snap *ledger.Snapshot, fullAt time.Time, arr *arrivals.Reading) error {
	if !indexEnabled() {
		return nil
	}
	ix := c.localIndex()
	ix.mu.Lock()
	var last []byte
	if ix.rs != nil && ix.rs.Last() == snap { // the references must be into snap's entries
		last = ix.rs.SaveLast()
	}
	ix.mu.Unlock()
	if last == nil {
		return nil
	}
	var stamps []cache.FileStamp
	if o := c.ownerCheckpoint; o != nil && o.Used >= 0 && f.State.Base() != nil {
		used := o.Chain[o.Used]
		paths := []string{filepath.Join(c.Root, filepath.FromSlash(fold.HeadPath(used.Data.Epoch, used.Data.Head)))}
		for _, ref := range used.Head.State {
			paths = append(paths, filepath.Join(c.Root, filepath.FromSlash(fold.ChunkPath(ref.Hash))))
		}
		var err error
		if stamps, err = cache.StampFiles(paths); err != nil {
			return err
		}
	}
	payload, err := cache.EncodeCheckpoint(f, snap, last, fullAt, arr, c.ownerCheckpoint, stamps)
	if err != nil {
		return err
	}
	head := c.checkpointHead()
	sum := cache.FrameSum(payload)
	out := make([]byte, 0, len(head)+len(payload)+len(sum))
	out = append(append(append(out, head...), payload...), sum[:]...)
	lockDir := c.Home.LockDir(c.Project())
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return fmt.Errorf("creating lock dir: %w", err)
	}
	lk := flock.New(filepath.Join(lockDir, "index.lock"))
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("locking the local index: %w", err)
	}
	defer lk.Unlock()
	if err := fsutil.WriteFile(c.checkpointPath(), out, 0o644); err != nil {
		return fmt.Errorf("writing the fold checkpoint: %w", err)
	}
	return nil
}

// restoredFold is a fold checkpoint restored over the index just opened.
type restoredFold struct {
	snap   *ledger.Snapshot
	fold   *fold.Folded
	fullAt time.Time
	arr    *arrivals.Reading // the arrival log as the checkpoint's process read it (nil: none)
	owner  *fold.ChannelFold // what the owner's checkpoints gave the fold (nil: none)
}

// restoreCheckpoint is called when a process opens the index (localIndex.open): when
// the checkpoint matches the index and its full fold is younger than CheckpointTrust,
// it returns it, and the process's first Load folds only what is new on top of it.
// The caller then skips the full check of segment bytes (CheckPrefixes) the
// checkpoint's full fold made. nil means: fold everything.
func (c *Channel) restoreCheckpoint(rs *ledger.ReadState, pre *checkpointRead) *restoredFold {
	if pre == nil {
		return nil
	}
	if o := pre.body.Owner; o != nil && o.Used >= 0 && o.Used < len(o.Chain) {
		// Read from the cut of the checkpoint folded from: the index's segments were,
		// and the reading goes on from them (readLedger keeps the floors it finds set).
		if h := c.floored.Hint; h == nil || h.Head != o.Chain[o.Used].Data.Head {
			return nil
		}
		rs.SetFloors(c.floored.Hint.Floors)
	}
	snap, err := rs.RestoreLast(pre.last)
	if err != nil {
		return nil
	}
	f, arr, err := cache.DecodeCheckpointRefs(&pre.body, pre.rest, snap)
	if err == nil {
		err = c.restoreOwner(f, pre.body.Owner, pre.body.Stamps)
	}
	if err != nil {
		rs.RestoreLast(nil) // drops the restored snapshot again
		return nil
	}
	if o := pre.body.Owner; o != nil {
		o.State, o.Folded = f.State, f
	}
	return &restoredFold{snap, f, pre.fullAt, arr, pre.body.Owner}
}

// restoreOwner checks a restored fold against the owner's checkpoint this process reads
// from (the hint of ckfile.Floored) and against stamps, its head and core chunks as
// the fold read them, and gives a state folded from one its chunk stores again
// (fold.State.AttachChunks). A fold made from another checkpoint, from one when this
// process reads from none, or whole when it reads from one, is not restored.
func (c *Channel) restoreOwner(f *fold.Folded, owner *fold.ChannelFold, stamps []cache.FileStamp) error {
	base := f.State.Base()
	if owner == nil || owner.Used < 0 {
		switch {
		case base != nil:
			return fmt.Errorf("%w: a state folded from an owner's checkpoint without it", cache.ErrCheckpoint)
		case c.floored.Hint != nil && len(c.floored.Hint.Floors) > 0:
			return fmt.Errorf("%w: folded whole, and this process reads from an owner's checkpoint", cache.ErrCheckpoint)
		}
		return nil
	}
	if base == nil || owner.Used >= len(owner.Chain) || owner.Chain[owner.Used].Head == nil {
		return fmt.Errorf("%w: owner's checkpoint without its state", cache.ErrCheckpoint)
	}
	used := owner.Chain[owner.Used]
	if h := c.floored.Hint; h == nil || h.Head != used.Data.Head {
		return fmt.Errorf("%w: folded from another owner's checkpoint than this process reads from", cache.ErrCheckpoint)
	}
	// The head and the core as the fold read them: written once, so a size or time that
	// changed since, or a file gone, makes this process fold from the cut again, which
	// hash-checks them and says why.
	if len(stamps) != 1+len(used.Head.State) {
		return fmt.Errorf("%w: %d stamps for a head and %d core chunks", cache.ErrCheckpoint, len(stamps), len(used.Head.State))
	}
	if err := cache.CheckStamps(stamps); err != nil {
		return err
	}
	return f.State.AttachChunks(used.Head, ckfile.Dir{Root: c.Root}.Chunk)
}

// checkpointRead is the part of a checkpoint read before the index is: what does not
// refer to the index's records.
type checkpointRead struct {
	fullAt time.Time
	last   []byte // the ledger's saved snapshot
	body   cache.CheckpointBody
	rest   []byte // what refers to the snapshot's entries (decodeCheckpointRefs)
}

// readCheckpointState reads the checkpoint file and decodes its state, when it is good
// and its full fold is younger than CheckpointTrust (and not over a minute ahead of
// this machine's clock); nil otherwise. It needs nothing from the index, so
// localIndex.open runs it beside reading the index.
func (c *Channel) readCheckpointState() *checkpointRead {
	fullAt, last, body, err := c.readCheckpoint()
	if err != nil || time.Since(fullAt) >= checkpointTrust || time.Until(fullAt) > time.Minute {
		return nil
	}
	pre := &checkpointRead{fullAt: fullAt, last: last}
	if pre.rest, err = fold.DecodeState(body, &pre.body); err != nil {
		return nil
	}
	return pre
}
