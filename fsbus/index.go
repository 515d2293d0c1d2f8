package fsbus

import (
	"bufio"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/cache"
	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// The local index (docs/format.md §18 "The local index"): this machine's cache of what
// it has read and verified of a channel, so that Load reads and verifies only what is
// new. It lives in the cache dir beside the arrival log, one file per channel
// directory:
//
//	<cache>/channels/<project>/index-<first 16 hex of sha256(channel root)>.bin
//
// The file is a header line "ferry-index 4 <project> <master key>\n" followed by
// frames, each a uvarint payload length, the payload and the payload's CRC-32C
// (Castagnoli, 4 bytes big-endian: damage, not tampering, is what a machine-local cache
// guards against, and the CRC costs a fraction of a hash on a large index). A payload is 'L' and a ledger.ReadState chunk (a segment's identity, offset,
// last line hash, records and malformed lines), or 'V' and signatures this machine
// checked and found good: a count, then per signature the entry hash (text) and the
// public key (32 bytes). Frames are appended under the flock index.lock in the lock dir
// and fsync'd; a fresh or compacted index is written whole to a temp file, fsync'd and
// renamed over the old one (fsutil.WriteFile).
//
// Trust: the index is never trusted over the channel. Every Load re-reads each
// segment's first and last remembered line and compares their hashes, reading a
// segment again from its start when it was truncated or replaced. Each segment's
// running sha256 over every byte read is kept too: a process opening the index (unless
// it starts from the fold checkpoint, whose full fold did this, ADR 0011), a thorough
// Load, and a running process once a minute (FullFoldEvery), hash the files again up
// to the offsets read and read again any segment changed in place between its first
// and last line (ledger.ReadState.CheckPrefixes). A file that is
// damaged (a frame's checksum fails, a frame does not decode, a torn last frame), of
// another version, project, master key, or missing is rebuilt from the channel. Good
// signatures are remembered by entry hash and key: the hash covers the signed bytes
// and the signature, so a remembered result never vouches for other bytes. The cache
// dir is machine-local and as trusted as the arrival log next to it.
//
// FERRY_NO_INDEX=1 turns the index off: every Load then reads every segment in full
// (Ledger.Read).

// envNoIndex is the variable that turns the local index off when set to "1".
const envNoIndex = "FERRY_NO_INDEX"

// 2: segment chunks carry the running hash (CheckPrefixes); 3: CRC-32C frames

// indexCompactFrames is how many frames an index may hold before a Load rewrites it
// whole (compaction): each Load with new data appends about one frame per changed
// segment and one of signatures.
const indexCompactFrames = 512

// localIndex is a channel's index as one process holds it.
type localIndex struct {
	mu     sync.Mutex
	rs     *ledger.ReadState // nil until opened
	frames int               // frames in the file as opened (plus those appended since)
	whole  bool              // the next save writes the file whole
	// restored is the fold checkpoint open restored, until Load takes it.
	restored *restoredFold
	// sigFrames are the index's signature frames not yet in the signature cache
	// (loadSigsLocked).
	sigFrames [][]byte
}

// indexPath is the channel's index file.
func (c *Channel) indexPath() string {
	sum := sha256.Sum256([]byte(c.Root))
	return filepath.Join(c.Home.StateDir(c.Project()), "index-"+hex.EncodeToString(sum[:8])+".bin")
}

// indexEnabled reports whether Load uses the index (FERRY_NO_INDEX is not "1").
func indexEnabled() bool { return os.Getenv(envNoIndex) != "1" }

// readLedger is Ledger.Read (keys == nil) or Ledger.ReadVerified through the local
// index when it is enabled. The first call in a process opens the index file.
func (c *Channel) readLedger(keys ledger.KeyFunc) (*ledger.Snapshot, error) {
	if !indexEnabled() {
		if keys == nil {
			return c.Ledger.Read()
		}
		return c.Ledger.ReadVerified(keys)
	}
	ix := c.localIndex()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.rs == nil {
		ix.open(c)
	}
	if keys != nil {
		ix.loadSigsLocked(c.Project()) // every signature is checked
	}
	fl := c.floored.Floors(c.Root, c.epochSeenPath(), c.Thorough)
	moved := !slices.Equal(fl, ix.rs.Floors())
	if moved {
		ix.rs.SetFloors(fl)
	}
	snap, err := c.Ledger.ReadIncremental(ix.rs, keys, sigcache.Verify)
	if moved && ix.rs.Stats().Reset > 0 {
		ix.whole = true // what was read below the floors leaves the file too
	}
	return snap, err
}

// checkIndexPrefixes runs ledger.ReadState.CheckPrefixes on this process's index (when
// it is open): segments changed in place are read again by the next read.
func (c *Channel) checkIndexPrefixes() {
	if !indexEnabled() {
		return
	}
	ix := c.localIndex()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.rs != nil {
		ix.rs.CheckPrefixes(c.Root)
	}
}

// checkIndexThoroughly hashes every segment byte the index covers once (a thorough
// Load): opening the index does it when the index is not open yet (no checkpoint is
// restored for a thorough Load), else CheckPrefixes runs on the open one.
func (c *Channel) checkIndexThoroughly() {
	if !indexEnabled() {
		return
	}
	ix := c.localIndex()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.rs == nil {
		ix.open(c) // CheckPrefixes included
		ix.restored = nil
		return
	}
	ix.rs.CheckPrefixes(c.Root)
}

// localIndex returns the channel's index, making it on first use.
func (c *Channel) localIndex() *localIndex {
	c.indexOnce.Do(func() { c.index = &localIndex{} })
	return c.index
}

// open reads the index file into ix. Whatever cannot be trusted is dropped: ix then
// starts empty and the next save writes the file whole.
func (ix *localIndex) open(c *Channel) {
	ix.rs, ix.frames, ix.whole = ledger.NewReadState(), 0, true
	f, err := os.Open(c.indexPath())
	if err != nil {
		return // missing (or unreadable): rebuilt
	}
	defer f.Close()
	// The fold checkpoint's state decodes beside the index's records (ADR 0011).
	// A thorough Load never uses it. The floors are found first: restoring checks the
	// fold against the owner's checkpoint they come from (restoreOwner).
	pre := make(chan *checkpointRead, 1)
	if c.floored.Floors(c.Root, c.epochSeenPath(), c.Thorough); c.Thorough {
		pre <- nil
	} else {
		go func() { pre <- c.readCheckpointState() }()
	}
	rs, sigs, frames, err := cache.ReadIndex(bufio.NewReaderSize(f, 1<<20), c.Project(), ledger.FormatKey(c.MasterKey))
	if err != nil {
		return // damaged or foreign: rebuilt
	}
	ix.rs, ix.sigFrames, ix.frames, ix.whole = rs, sigs, frames, frames > indexCompactFrames
	// A process starting from a fold checkpoint trusts the full check its full fold
	// made (CheckpointTrust, ADR 0011). Otherwise every byte the index covers is checked
	// once per process: a line changed in place (same length, first and last line
	// intact) makes its segment read again.
	if ix.restored = c.restoreCheckpoint(ix.rs, <-pre); ix.restored == nil {
		ix.rs.CheckPrefixes(c.Root)
	}
}

// takeRestored opens the index when it is not open yet and returns the fold checkpoint
// it restored (nil when none), once: the caller (Load, under foldMu) makes it its last
// fold.
func (c *Channel) takeRestored() *restoredFold {
	var r *restoredFold
	c.withOpenIndex(func(ix *localIndex) {
		r, ix.restored = ix.restored, nil
	})
	return r
}

// withOpenIndex runs fn on this process's index under its lock, opening the index
// first when it is not open yet. It does nothing when the index is off.
func (c *Channel) withOpenIndex(fn func(ix *localIndex)) {
	if !indexEnabled() {
		return
	}
	ix := c.localIndex()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.rs == nil {
		ix.open(c)
	}
	fn(ix)
}

// loadSigsLocked puts the signatures of the index's signature frames in the process's
// signature cache, once; under ix.mu. A frame that does not decode is dropped (its
// checksum held: only a bug writes one), which costs a signature check per entry.
func (ix *localIndex) loadSigsLocked(project string) {
	for _, b := range ix.sigFrames {
		sigs, err := cache.DecodeSigs(b)
		if err != nil {
			continue
		}
		for _, s := range sigs {
			sigcache.Remember(s.Hash, s.Pub, project)
		}
	}
	ix.sigFrames = nil
}

// savedSigs estimates how many signatures the index's signature frames not yet loaded
// hold (a saved one is a hash and a key, about savedSigSize bytes); 0 when the index is
// off or its frames are loaded.
func (c *Channel) savedSigs() int {
	n := 0
	c.withOpenIndex(func(ix *localIndex) {
		for _, b := range ix.sigFrames {
			n += len(b) / savedSigSize
		}
	})
	return n
}

// savedSigSize is the size of one saved signature in a signature frame: the entry hash
// as text ("sha256:" and 64 hex digits) with its length, and the 32-byte key.
const savedSigSize = 1 + 71 + ed25519.PublicKeySize

// loadIndexSigs is loadSigsLocked for a Load about to check every signature (a full
// fold): the index is opened first when it is not.
func (c *Channel) loadIndexSigs() {
	c.withOpenIndex(func(ix *localIndex) { ix.loadSigsLocked(c.Project()) })
}

// saveIndex writes what this Load added to the index: appended frames, or the whole
// file when it was missing, damaged or holds too many frames. Under the flock
// index.lock. A failure is returned; the index is then rebuilt whole on the next save
// (an index that is not written only costs the next Load its work again).
func (c *Channel) saveIndex() error {
	if !indexEnabled() {
		return nil
	}
	ix := c.localIndex()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.rs == nil {
		return nil
	}
	sigs := slices.DeleteFunc(sigcache.Take(c.Project()), func(s sigcache.Rec) bool { return c.rosterChecked[s.Hash] })
	var buf []byte
	whole := ix.whole
	var chunks [][]byte
	if whole {
		chunks = ix.rs.Chunks()
		buf = append(buf, cache.IndexHeader+c.Project()+" "+ledger.FormatKey(c.MasterKey)+"\n"...)
		ix.loadSigsLocked(c.Project())   // the frames not loaded yet are written again too
		sigs = sigcache.All(c.Project()) // the pending ones included
		if keep := c.floorKeep(ix.rs); keep != nil {
			sigs = slices.DeleteFunc(sigs, func(s sigcache.Rec) bool { return !keep[s.Hash] })
		}
	} else {
		chunks = ix.rs.TakeChanges()
	}
	for _, ch := range chunks {
		buf = cache.AppendFrame(buf, 'L', ch)
	}
	if len(sigs) > 0 {
		p := binary.AppendUvarint(nil, uint64(len(sigs)))
		for _, s := range sigs {
			p = fold.AppendStr(p, s.Hash)
			p = append(p, s.Pub...)
		}
		buf = cache.AppendFrame(buf, 'V', p)
	}
	if !whole && len(chunks) == 0 && len(sigs) == 0 {
		return nil
	}
	lockDir := c.Home.LockDir(c.Project())
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		ix.whole = true
		return fmt.Errorf("creating lock dir: %w", err)
	}
	lk := flock.New(filepath.Join(lockDir, "index.lock"))
	if err := lk.Lock(); err != nil {
		ix.whole = true
		return fmt.Errorf("locking the local index: %w", err)
	}
	defer lk.Unlock()
	path := c.indexPath()
	var err error
	if whole {
		err = fsutil.WriteFile(path, buf, 0o644)
		ix.frames = len(chunks) + 1
	} else {
		_, err = fsutil.Append(path, buf, fsutil.AppendOptions{Sync: true}) // a missing file is an error: frames without a header mean nothing
		ix.frames += len(chunks) + 1
	}
	ix.whole = err != nil || ix.frames > indexCompactFrames
	if err != nil {
		return fmt.Errorf("writing the local index: %w", err)
	}
	return nil
}

// floorKeep returns, for an index read from an owner's checkpoint's cut, the hashes
// whose signatures the index keeps when written whole: the records the last Load read
// (above the cut) and the lines of the state it folded from; the signatures of records
// at or below the cut leave it (docs/format.md §20 "Reading from the cut"). nil when
// the index is read whole: every signature is kept.
func (c *Channel) floorKeep(rs *ledger.ReadState) map[string]bool {
	if len(rs.Floors()) == 0 || c.lastSnap == nil || c.lastSnap.Floors == nil {
		return nil
	}
	keep := make(map[string]bool, len(c.lastSnap.Entries))
	for i := range c.lastSnap.Entries {
		keep[c.lastSnap.Entries[i].Hash()] = true
	}
	for _, f := range c.lastSnap.Forks {
		for i := range f.Losers {
			keep[f.Losers[i].Hash()] = true
		}
	}
	if c.lastFold != nil {
		if b := c.lastFold.State.Base(); b != nil {
			for i := range b.Lines {
				keep[b.Lines[i].Hash()] = true
			}
		}
	}
	return keep
}

// progressBlock is how many entries prewarmSigs checks between two progress reports.
var progressBlock = 4096

// prewarmSigs checks, on every core, the signatures Fold will check, so that the
// sequential fold finds them in the signature cache: master entries against the master
// key, agent.join against the key it announces, every other entry against each key a
// verified grant.set ever bound to its writer (normally one). It only fills the cache;
// Fold still decides which key applies to which entry.
func (c *Channel) prewarmSigs(entries []ledger.Entry) {
	project := c.Project()
	masterKey := c.masterKeys(entries) // the rotation chain's key per entry
	cache.Parallel(len(entries), func(i int) {
		if e := &entries[i]; e.Writer == fold.MasterWriter {
			sigcache.Verify(e, masterKey(e), project)
		}
	})
	granted := map[string][]ed25519.PublicKey{}
	for i := range entries {
		e := &entries[i]
		if e.Writer != fold.MasterWriter || e.Type != fold.TypeGrantSet || !sigcache.Verify(e, masterKey(e), project) {
			continue
		}
		if d, ok := fold.DecodeData(e); ok {
			if k, err := ledger.ParseKey(d.Key); err == nil {
				granted[e.Ref] = append(granted[e.Ref], k)
			}
		}
	}
	// The agents' entries, in blocks so c.Progress hears how far the checks are.
	for lo := 0; lo < len(entries); lo += progressBlock {
		hi := min(lo+progressBlock, len(entries))
		c.progress("verifying", lo, len(entries))
		cache.Parallel(hi-lo, func(i int) { cache.VerifyAgentEntry(&entries[lo+i], granted, project) })
	}
	c.progress("verifying", len(entries), len(entries))
}
