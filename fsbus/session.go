package fsbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/archive"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/fsbus/internal/guard"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// View is one consistent reading of a channel: the merged ledger, the folded state and
// this machine's arrival log.
type View struct {
	Snapshot *ledger.Snapshot
	State    *fold.State
	Arrivals *arrivals.Log
	// Presence holds each writer's verified heartbeat, keyed "<writer>.<device>".
	Presence map[string]*Presence

	fold *fold.Folded // State with what folding new entries into it needs (fold_incr.go)
	// epoch is the newest counting owner's checkpoint's epoch at the Load (0: none).
	epoch int
}

// objects returns the ObjectReader over the channel's files.
func (c *Channel) objects() fold.ObjectReader {
	return func(writer, id string) ([]byte, string, error) {
		return verify.ReadObject(verify.ObjectPath(c.Root, writer, id))
	}
}

// Load reads every segment, folds the state and ingests new entries into the arrival
// log. It never writes to the channel. Through the local index (index.go) it reads only
// the bytes appended since the last Load on this machine and checks only signatures
// not checked before; it folds only the things new entries touch, on top of this
// process's last fold (ADR 0010) or, in a new process, the fold checkpoint (ADR 0011),
// and everything when Thorough is set or either is too old or does not apply.
// FERRY_NO_INDEX=1 reads, checks and folds everything. It returns an error when the
// channel is gone, a segment cannot be read, or the arrival log cannot be written.
func (c *Channel) Load() (*View, error) {
	if err := c.checkPresent(); err != nil {
		return nil, err
	}
	defer c.progress("", 0, 0)
	c.progress("reading", 0, 0)
	c.foldMu.Lock()
	defer c.foldMu.Unlock()
	if !c.lastFullAt.IsZero() && time.Since(c.lastFullAt) >= fullFoldEvery {
		c.checkIndexPrefixes() // the minute's full fold reads changed segments again too
	}
	trust := fullFoldEvery
	if c.Thorough {
		// Everything again: every segment byte the index covers and every object file.
		c.checkIndexThoroughly()
		trust = 0
	} else if c.lastFold == nil {
		// A new process: start from the fold checkpoint when there is a good one (ADR 0011).
		if r := c.takeRestored(); r != nil {
			c.lastSnap, c.lastFold, c.lastFullAt, trust = r.snap, r.fold, r.fullAt, checkpointTrust
			c.rosterChecked = map[string]bool{}
			for i := range r.fold.Roster {
				c.rosterChecked[r.fold.Roster[i].Hash()] = true
			}
			if c.lastArr == nil {
				c.lastArr = r.arr // read on from its offset when the log is still that one
			}
			if r.owner != nil {
				c.setOwnerCheckpoint(r.owner)
			}
		}
	}
	// The arrival log's size before the segments are read: what other processes log
	// while this Load reads is told apart (Arrivals.Complete).
	logSize0 := int64(-1)
	if fi, err := os.Stat(c.arrivalsPath()); err == nil {
		logSize0 = fi.Size()
	}
	snap, err := c.readLedger(nil)
	if err != nil {
		return nil, fmt.Errorf("reading ledger: %w", err)
	}
	in := fold.FoldInput{Project: c.Project(), Master: c.MasterKey, Objects: c.objects()}
	var f *fold.Folded
	if snap.Base != nil && snap.Base == c.lastSnap && c.lastFold != nil && time.Since(c.lastFullAt) < trust && c.lastFold.CanDelta(snap.Added) {
		// Only appends since the last Load: fold the things they touch.
		if lookUpSaved(len(c.lastFold.Roster), len(snap.Added), c.savedSigs()) {
			c.loadIndexSigs()
		}
		c.prewarmSigs(slices.Concat(c.lastFold.Roster, snap.Added))
		c.progress("folding", 0, 0)
		f, _ = c.lastFold.FoldDelta(in, snap.Added, len(snap.Entries), maxHLCText(snap), c.objectExists)
		snap.Problems = c.ownerCheckpoint.AnchorCut(snap)
	}
	fresh := f == nil
	switch {
	case fresh:
		c.folds.full++
	case trust == checkpointTrust:
		c.folds.fromCheckpoint++
	default:
		c.folds.delta++
	}
	if fresh {
		c.lastFullAt = time.Now()
		c.loadIndexSigs() // every signature is checked: those this machine checked before are known
		c.prewarmSigs(snap.Entries)
		c.progress("folding", 0, 0)
		if f = c.foldWhole(in, snap); c.floored.Miss != nil && snap.Floors != nil {
			if snap, err = c.readLedger(nil); err != nil { // whole: the floors did not hold
				return nil, fmt.Errorf("reading ledger: %w", err)
			}
			f = c.foldWhole(in, snap)
		}
		if ch := archive.Gaps(c.Ledger, snap.Problems, c.Ledger.Archived()); ch != nil {
			c.Ledger.SetArchived(ch) // records no counting cut covers are in archive/ (format.md §21)
			if snap, err = c.readLedger(nil); err != nil {
				return nil, fmt.Errorf("reading ledger: %w", err)
			}
			f = c.foldWhole(in, snap)
		}
	}
	st := f.State
	// Read resolves forks by hash without checking signatures, so a forged copy of a
	// record (same writer, device and seq, bad signature) could displace the signed one.
	// When there is a fork, read again leaving out records whose signature fails against
	// the roster just folded: the first pass restores the master's chain (its key is
	// fixed), the second the agents' chains under the grants that pass restored.
	for i := 0; i < 2 && len(snap.Forks) > 0; i++ {
		if snap, err = c.readLedger(c.rosterKeys(st)); err != nil {
			return nil, fmt.Errorf("reading ledger: %w", err)
		}
		fresh = true
		if f = c.foldWhole(in, snap); c.floored.Miss != nil && snap.Floors != nil {
			if snap, err = c.readLedger(nil); err != nil { // whole: the floors did not hold
				return nil, fmt.Errorf("reading ledger: %w", err)
			}
			f, i = c.foldWhole(in, snap), -1 // and its forks checked again
		}
		st = f.State
	}
	if err := c.followPin(st); err != nil { // the pin follows the master key rotation chain
		return nil, err
	}
	c.progress("arrivals", 0, 0)
	arr, err := c.ingestArrivals(snap.Entries, snap.Added, snap.Base != nil && snap.Base == c.lastSnap, logSize0)
	if err != nil {
		return nil, err
	}
	c.lastSnap, c.lastFold = snap, f
	if err := c.saveIndex(); err != nil { // a failed save costs only the next Load's work
		c.Home.CacheNotSaved(c.indexPath(), err)
	}
	c.compactArrivals(snap, arr)
	if fresh {
		c.sinceCheckpoint = 0
	} else {
		c.sinceCheckpoint += len(snap.Added)
	}
	if _, keep := st.ForCache(); keep && (fresh || c.sinceCheckpoint >= checkpointEvery) {
		// What this fold cost the next process need not pay (ADR 0011). A failure
		// costs only the next process a full fold.
		if err := c.writeCheckpoint(f, snap, c.lastFullAt, c.lastArr); err != nil {
			c.Home.CacheNotSaved(c.checkpointPath(), err)
		} else {
			c.sinceCheckpoint = 0
		}
	}
	pres := c.observePresence(st, arr)
	v := &View{Snapshot: snap, State: st, Arrivals: arr, Presence: pres, fold: f}
	if cf := c.ownerCheckpoint; cf != nil && len(cf.Chain) > 0 {
		v.epoch = cf.Chain[len(cf.Chain)-1].Data.Epoch
	}
	c.noteLoaded(v) // the policy in force (policy.go)
	return v, nil
}

// sigFramesAfter is how many new entries make a Load load the index's signature frames
// (one cache insert per signature the index holds) rather than check each new entry's
// signature (one ed25519 verification each). The figure is a judgement from CPU
// profiles of BenchmarkBigCatchUp, not a measured break-even.
const sigFramesAfter = 512

// lookUpSaved says whether a delta fold that checks the signatures of roster roster
// entries and added new ones should first load the saved signatures the local index
// holds: they were checked by the processes that saved them, and looking them up beats
// checking them again, unless the index holds far more than they are.
func lookUpSaved(roster, added, saved int) bool {
	return added > sigFramesAfter || (roster+added)*verifyPerSaved > saved
}

// verifyPerSaved is how many saved signatures the local index puts in the signature
// cache for the cost of one ed25519 check: a check takes about 40 µs, decoding and
// caching a saved one well under 1 µs (BenchmarkVerifyLine and BenchmarkRemember in
// fsbus/internal/sigcache; 50 leaves room for the decoding).
const verifyPerSaved = 50

// fullFoldEvery bounds how long a process folds only what is new: its first
// Load after that folds everything again, re-reading every object file and checking
// every segment byte the index covers, so a file changed behind its back (objects are
// written once: that is tampering or a broken sync) is seen by a long-running process
// (ferry mcp serve, ferry watch) within this time. A new process starting from the
// fold checkpoint counts from the checkpoint's full fold (CheckpointTrust, ADR 0011);
// a thorough one (Channel.Thorough) sees it at once.
const fullFoldEvery = time.Minute

// maxHLCText is the snapshot's highest HLC as text ("" when it has no entries).
func maxHLCText(snap *ledger.Snapshot) string {
	if n := len(snap.Entries); n > 0 {
		return snap.Entries[n-1].HLC
	}
	return ""
}

// objectExists reports whether an object file is there now (the incremental fold's
// check for objects that were missing).
func (c *Channel) objectExists(o fold.ObjRef) bool {
	_, err := os.Stat(verify.ObjectPath(c.Root, o.Writer, o.ID))
	return err == nil
}

// Session is a channel opened as one writer with its key.
type Session struct {
	*Channel
	Name   string
	Signer ledger.Signer
	// AutoSettle, when set, makes every write first expire the windows this session is
	// entitled to close (SettleWindows) under the same lock and from the same reading
	// of the channel, so a command run as the holder settles at no extra cost. A write
	// that expired orders calls it with them, in the order written, once the lock is
	// released.
	AutoSettle func(expired []string)
	// Workspace is the directory an order's file pointers are relative to;
	// "" means the git top-level of the current directory, else the current directory.
	Workspace string
	supported bool // this writer's segment holds an agent.support naming FormatVersion
	archived  bool // its first write looked for frozen files to move (MoveFrozen)
}

// As opens a session as name, loading its key from this machine's keystore. It returns
// not_found naming the command to run when this machine has no key for name.
func (c *Channel) As(name string) (*Session, error) {
	if name != fold.MasterWriter {
		if err := fold.CheckName("agent name", name); err != nil {
			return nil, err
		}
	}
	k, err := c.Home.Signer(c.Project(), name) // a locked key signs once unlocked (keystore.go)
	if err != nil {
		return nil, err
	}
	return &Session{Channel: c, Name: name, Signer: k}, nil
}

// withChannelLock runs fn holding the machine-local channel lock: the lock that makes
// fold → check → append a true compare-and-set on one machine (docs/design.md §2 rule 5).
func (c *Channel) withChannelLock(fn func() error) error {
	dir := c.Home.LockDir(c.Project())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating lock dir: %w", err)
	}
	lk := flock.New(filepath.Join(dir, "channel.lock"))
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("locking channel: %w", err)
	}
	defer lk.Unlock()
	return fn()
}

// write is the one write path: under the channel lock it loads a fresh view, lets plan
// decide (and refuse) the entry, writes the objects plan asks for, then appends the
// entry to this writer's segment. A refusal writes nothing. When plan returns a nil
// draft the call is an idempotent no-op and the returned entry is zero.
func (s *Session) write(plan func(v *View) (*ledger.Draft, []pendingObject, error)) (ledger.Entry, *View, error) {
	var out ledger.Entry
	var view *View
	var expired []string
	err := s.withChannelLock(func() error {
		v, err := s.Load()
		if err != nil {
			return err
		}
		if s.AutoSettle != nil {
			done, err := s.settleLocked(v)
			if err != nil {
				return err
			}
			if expired = done; len(done) > 0 {
				if v, err = s.Load(); err != nil {
					return err
				}
			}
		}
		decide := func(v *View) (*ledger.Draft, []pendingObject, error) {
			// Before plan signs any object: a pending master key of an interrupted
			// rotation is installed here, so the objects and the entry are signed by
			// the same key (ADR 0008 §6).
			if err := s.checkMasterKey(v.State); err != nil {
				return nil, nil, err
			}
			if cf := s.ownerCheckpoint; cf != nil && cf.ReadOnly {
				return nil, nil, ckfile.ReadOnlyError()
			}
			d, objs, err := plan(v)
			if err != nil || d == nil {
				return nil, nil, err
			}
			if err := s.checkIdentity(v.State, d.Type); err != nil {
				return nil, nil, err
			}
			if err := guard.Draft(s.Name, d, scannedObjects(objs)); err != nil { // the secret guard (internal/secretguard)
				return nil, nil, err
			}
			if d.Type == fold.TypeOrderRelease && v.State.Retired(s.Name) {
				var rd fold.EntryData
				if json.Unmarshal(d.Data, &rd) != nil || rd.Agent != s.Name {
					return nil, nil, retiredError(s.Name)
				}
			}
			return d, objs, nil
		}
		view = v
		d, objs, err := decide(v)
		if err != nil || d == nil {
			return err
		}
		if err := s.checkLinks(objs); err != nil { // never write through a link (links.go)
			return err
		}
		// Only a write that will happen restores this writer's chain (a refusal changes
		// nothing); when the restore brought records back, decide again on them.
		nv, err := s.ensureChain(v)
		if err != nil {
			return err
		}
		if nv != v {
			v, view = nv, nv
			if d, objs, err = decide(v); err != nil || d == nil {
				return err
			}
		}
		if err := s.checkLost(v); err != nil {
			return err
		}
		var written []string
		for _, o := range objs {
			if err := writeNew(o.path, o.data); err != nil {
				removeAll(written)
				return err
			}
			written = append(written, o.path)
		}
		e, err := s.appendMarked(v, *d, s.observedHLC(v))
		if err != nil {
			removeAll(written) // objects no entry names would only confuse readers
			return err
		}
		out = e
		return nil
	})
	if len(expired) > 0 {
		s.AutoSettle(expired)
	}
	if err == nil && out.Seq != 0 && !s.archived {
		s.archived = true // its writer moves a frozen file at its first write (format.md §21)
		if len(ledger.ChainFiles(s.Root, s.Name, s.Device)) > 1 {
			if _, _, aerr := s.moveFrozen(view, false); aerr != nil {
				s.Home.warn("archive", "ferry: warning: moving frozen files: "+aerr.Error())
			}
		}
	}
	return out, view, err
}

// errMark is the error appendMarked's mark returns: the high-water mark could not be
// written, so the entry was not.
type errMark struct{ err error }

func (e *errMark) Error() string { return e.err.Error() }
func (e *errMark) Unwrap() error { return e.err }

// appendMarked appends d to this writer's segment, guarded by the machine-local
// high-water mark (docs/format.md §10 "Writer continuity"): under the segment lock,
// "<seq> <hash> pending" is written and fsynced before the line; when that fails the
// write is refused (internal, naming the file and the OS error) and nothing is
// appended. After the append the mark is promoted to "<seq> <hash>" in place, without
// fsync; a failure there is only a warning (Home.Warn), since the pending mark already
// guards. When the line
// itself could not be written (ledger.ErrNotWritten), the mark goes back to the tip the
// entry would have followed, so the next write needs no retry. Callers hold
// the channel lock, so no other process of this machine moves the mark in between.
//
// A segment whose entries in v hold no agent.support naming FormatVersion gets one
// with d, in the same write and fsync (docs/format.md §12): before d, or after it when
// d is an agent.join, which stays a segment's first line.
func (s *Session) appendMarked(v *View, d ledger.Draft, hlc ledger.HLC) (ledger.Entry, error) {
	project := s.Project()
	var marked *ledger.Entry
	ds := []ledger.Draft{d}
	if s.needsSupport(v) {
		ds = []ledger.Draft{fold.SupportDraft(s.Name, FormatVersion), d}
		if d.Type == fold.TypeAgentJoin {
			ds[0], ds[1] = d, ds[0]
		}
	}
	es, err := s.Ledger.AppendBatch(s.Name, s.Device, ds, s.Signer, hlc, func(es []ledger.Entry) error {
		e := es[len(es)-1]
		if err := s.Home.writeHighWater(project, s.Name, s.Device, highWater{Seq: e.Seq, Hash: e.Hash(), Pending: true}); err != nil {
			return &errMark{err}
		}
		marked = &es[0]
		return nil
	})
	if err != nil {
		if m := (*errMark)(nil); errors.As(err, &m) {
			return ledger.Entry{}, &errs.Error{Category: errs.Internal, Err: err,
				Message: fmt.Sprintf("%v; nothing was written", m.err),
				Hint:    "free space or fix permissions in this machine's ferry config dir (" + s.Home.ConfigDir + "), then retry: the mark that lets ferry notice lost entries must be saved before each write"}
		}
		if errors.Is(err, ledger.ErrNotWritten) && marked != nil {
			// The line is not in the segment: put the mark back on the tip the entry
			// would have followed, so the next write needs no retry.
			back := highWater{Seq: marked.Seq - 1, Hash: marked.Prev}
			if werr := s.Home.writeHighWater(project, s.Name, s.Device, back); werr != nil {
				s.Home.warn("", fmt.Sprintf("%v (the next write answers retry_needed once)", werr))
			}
		}
		return ledger.Entry{}, &errs.Error{Category: errs.Internal, Err: err,
			Message: fmt.Sprintf("appending %s: %v", d.Type, err),
			Hint:    "check that the channel folder is writable and not full; nothing counts until the entry is written"}
	}
	tip := es[len(es)-1]
	s.supported = s.supported || len(es) > 1
	if err := s.Home.promoteHighWater(project, s.Name, s.Device, highWater{Seq: tip.Seq, Hash: tip.Hash()}); err != nil {
		s.Home.warn("", fmt.Sprintf("the entry was written, but %v (the pending mark written before it still guards)", err))
	}
	if ds[0].Type == d.Type {
		return es[0], nil
	}
	return tip, nil
}

// needsSupport reports whether this writer's next write carries an agent.support
// (appendMarked): the channel is still at format 1 and its segment's entries in v hold
// none naming FormatVersion. At format 2 a build that cannot read it refuses the
// channel, so the statement is owed no more (docs/format.md §12): a reading from the
// owner's checkpoint holds none of the records at or below its cut, and would
// otherwise find every segment lacking one.
func (s *Session) needsSupport(v *View) bool {
	s.supported = s.supported || FormatVersion < 2 || s.Config.Format >= 2 || fold.HasSupport(v.Snapshot.Entries, s.Name, s.Device, FormatVersion)
	return !s.supported
}

// observedHLC is the highest HLC read that is at most max_skew ahead of this machine's
// clock: the one a write absorbs (docs/format.md §6). Snapshot.MaxHLC alone would not do:
// Append refuses to absorb a value beyond max_skew, so one far-ahead entry would stop
// the writer from absorbing every other HLC it has read.
func (s *Session) observedHLC(v *View) ledger.HLC {
	snap := v.Snapshot
	skew := time.Duration(s.PolicyOf(v).MaxSkewS) * time.Second
	if skew <= 0 {
		skew = ledger.DefaultMaxSkew
	}
	limit := s.now().Add(skew).UnixMilli()
	for i := len(snap.Entries) - 1; i >= 0; i-- { // entries are in HLC order
		if h, err := ledger.ParseHLC(snap.Entries[i].HLC); err == nil && h.Ms <= limit {
			return h
		}
	}
	return ledger.HLC{}
}

// pendingObject is an object file a write publishes before its entry.
type pendingObject struct {
	path string
	data []byte
	// sealed marks an age file (the vault, docs/format.md §11): ciphertext the secret
	// guard does not scan.
	sealed bool
	// verbatim marks an owner's checkpoint file: the lines it holds were scanned when
	// their writers wrote them.
	verbatim bool
}

// scannedObjects is the data of the objects the secret guard scans: all but sealed ones.
func scannedObjects(objs []pendingObject) [][]byte {
	var out [][]byte
	for _, o := range objs {
		if !o.sealed && !o.verbatim {
			out = append(out, o.data)
		}
	}
	return out
}

// checkIdem looks up an idempotency key of this writer. It returns the earlier entry's
// ref when the key was used with the same arguments (replay: write nothing) and a
// conflict when it was used with other arguments (docs/format.md §15).
func (s *Session) checkIdem(st *fold.State, key, args string) (ref string, replay bool, err error) {
	if key == "" {
		return "", false, nil
	}
	if err := checkIdemKey(key); err != nil {
		return "", false, err
	}
	rec, ok, err := st.IdemLookup(s.Name + "\x00" + key)
	if err != nil {
		return "", false, errs.Errorf(errs.RetryNeeded, "retry when the sync tool has finished; run `ferry doctor` if it stays", "idempotency key %q: the owner's checkpoint that may hold it does not read here: %v", key, err)
	}
	if !ok {
		return "", false, nil
	}
	if rec.Args != args {
		return "", false, errs.Errorf(errs.Conflict, "use a new key for a different call", "idempotency key %q was already used with other arguments", key)
	}
	return rec.Ref, true, nil
}

// argsHash is the hash of a call's arguments that an idempotent entry carries in
// data.args: "sha256:" of the RFC 8785 form of args.
func argsHash(args any) string {
	c, err := ledger.Canonical(args)
	if err != nil {
		return ""
	}
	return ledger.HashBytes(c)
}

// mustJSON is canonical JSON of data known to marshal.
func mustJSON(v any) []byte {
	c, err := ledger.Canonical(v)
	if err != nil {
		panic(fmt.Sprintf("fsbus: encoding entry data: %v", err))
	}
	return c
}

// checkIdentity refuses a write (other than agent.join) by an agent whose key on this
// machine is not the key the owner seated for its name, and every write (but a
// release, which write checks) by a retired agent: such an entry would count for
// nothing, so writing it would only mislead (an unknown
// or unseated agent, or a retired one).
func (s *Session) checkIdentity(st *fold.State, typ string) error {
	if err := s.checkUnlocked(); err != nil { // a locked key writes nothing
		return err
	}
	if err := s.checkMasterKey(st); err != nil { // a rotated-out master key neither
		return err
	}
	if s.Name == fold.MasterWriter || typ == fold.TypeAgentJoin {
		return nil
	}
	a := st.Agents[s.Name]
	// A retired agent writes nothing but the releases of its own retirement (checked
	// by write): the fold counts none of its later entries.
	if a != nil && a.Retired && typ != fold.TypeOrderRelease {
		return retiredError(s.Name)
	}
	here := ledger.FormatKey(s.Signer.Public())
	if a != nil && a.Seated && a.Key != here {
		return errs.Errorf(errs.Denied,
			fmt.Sprintf("use another agent name on this machine (`ferry join --as %s-2`), or, if this key replaced the old one, the owner runs `ferry grant %s --key %s`", s.Name, s.Name, here),
			"this machine's key for %s is not the key the owner seated (seated %s, here %s)", s.Name, a.Key, here)
	}
	return nil
}

// CheckWrite returns the refusal a write of typ by this session would meet for who
// it is, before anything is written: denied when its level in v does not allow typ,
// when this machine's key is not the key seated for its name, or when the agent is
// retired; the key's error when it is locked.
func (s *Session) CheckWrite(v *View, typ string) error {
	if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), typ); err != nil {
		return err
	}
	return s.checkIdentity(v.State, typ)
}

// retiredError is the refusal of a write by a retired agent.
func retiredError(name string) error {
	return errs.Errorf(errs.Denied, "retirement is final: work under a new agent name (`ferry join --as "+name+"-2`), once the owner seats it",
		"agent %s is retired: it writes nothing more", name)
}

// ensureChain makes this writer's own chain whole before a write that will happen
// (docs/adr/0007-writer-continuity.md): when v shows trouble in it — a hole
// or a malformed line in its segment, a fork or a broken chain of (name, device) —
// Ledger.Restore moves the damaged part aside, appends the kept records the segment
// lacks (from conflict copies, or found after the hole) and the view is read again.
// Conflict copies alone need no call: Append restores from them itself. checkLost
// runs later, just before the append. Errors: retry_needed, once, when the restore
// found that the damage destroyed records (it names their seqs; the records after them
// count again); internal for I/O errors.
func (s *Session) ensureChain(v *View) (*View, error) {
	if ownTrouble(v.Snapshot, s.Name, s.Device, verify.Rel(s.Root, s.Ledger.CurrentPath(s.Name, s.Device))) {
		r, err := s.Ledger.Restore(s.Name, s.Device, s.Signer.Public())
		if err != nil {
			return nil, &errs.Error{Category: errs.Internal, Err: err, Message: err.Error(),
				Hint: "check that the channel folder is writable and not full; nothing was written"}
		}
		if r.Moved != "" && len(r.Missing) > 0 {
			// The damage destroyed records: say so once (this restore found it; the
			// next one finds no damage and writes on).
			seg := s.Ledger.CurrentPath(s.Name, s.Device)
			return nil, errs.Errorf(errs.RetryNeeded,
				fmt.Sprintf("if another machine or a backup still has them, put a copy of its %s.jsonl into %s under another *.jsonl name, e.g. '%s (restored).jsonl': the next write merges them without a fork; then retry (a retry writes on after seq %d)",
					s.Device, filepath.Dir(seg), s.Device, r.Tip.Seq),
				"unreadable bytes in %s destroyed seq %s of %s (the damaged part is kept in %s); the %d valid records after them were appended again and count; nothing was written",
				verify.Rel(s.Root, seg), seqList(r.Missing), s.Name, filepath.Base(r.Moved), len(r.Appended))
		}
		if r.Changed() {
			if v, err = s.Load(); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// seqList renders seqs as "3", "3, 5" or "3-6" for runs.
func seqList(seqs []uint64) string {
	var parts []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		} else {
			parts = append(parts, fmt.Sprint(seqs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// ownTrouble reports whether snap shows damage to the chain of (name, device) that
// Append's own checks do not see: a hole or a malformed line in seg, the slash path of
// the file it appends to (ledger.Ledger.CurrentPath; Restore repairs that file, and
// older epoch files are frozen), or a fork or broken link of the chain.
func ownTrouble(snap *ledger.Snapshot, name, device, seg string) bool {
	for _, p := range snap.Problems {
		if p.Path == seg && (p.Kind == ledger.KindHole || p.Kind == ledger.KindMalformed) {
			return true
		}
		if p.Writer == name && p.Device == device && (p.Kind == ledger.KindFork || p.Kind == ledger.KindBrokenChain) {
			return true
		}
	}
	return false
}

// checkLost refuses a write when this machine's own earlier writes no longer count
// (docs/design.md §2 rule 4; docs/format.md §10 "Writer continuity"), reading the
// high-water mark of (name, device):
//
//   - retry_needed, every time until the entries come back, when the folder holds
//     fewer records of the chain than this machine's writes are known to have reached
//     (the mark's seq; one less while it is pending);
//   - retry_needed when the record this machine appended at the mark's seq lost a fork
//     to another record with the same seq — another home uses this device id (a copied
//     FERRY_HOME or config directory); the mark moves to the kept tip, so that the
//     retry writes on the branch readers keep;
//   - retry_needed once when the mark is pending and its entry is in no file the
//     reader merges while the records below it are all there: the writing process
//     stopped between the mark and the append (the write was never acknowledged), or
//     the entry was acknowledged with its promotion failing and then lost. The mark
//     moves to the folder's tip, so the retry writes on.
//
// A mark that does not parse (torn by a crash, edited by hand) is read as a pending
// mark of an unknown entry: refused once, naming the file. A mark that cannot be read
// is an error (internal, naming the file). Nothing is written to the channel by a
// refused call.
func (s *Session) checkLost(v *View) error {
	m, err := s.Home.readHighWater(s.Project(), s.Name, s.Device)
	if err != nil {
		return &errs.Error{Category: errs.Internal, Err: err, Message: fmt.Sprintf("%v; nothing was written", err),
			Hint: "if the file is damaged, delete it (the check of lost entries starts again from the next write); otherwise fix its permissions, then retry"}
	}
	seg := ledger.SegmentPath(s.Root, s.Name, s.Device)
	tip := v.chainTip(s.Name, s.Device)
	have := tipSeq(tip)
	if m.Pending {
		if e := v.ownEntry(s.Name, s.Device, m.Seq); e != nil && e.Hash() == m.Hash {
			m.Pending = false // the append happened; only its promotion did not
		} else if have >= m.acked() && (e == nil || m.Hash == "") {
			if err := s.Home.writeHighWater(s.Project(), s.Name, s.Device, highWater{Seq: have, Hash: tipHash(tip)}); err != nil {
				return &errs.Error{Category: errs.Internal, Err: err, Message: fmt.Sprintf("%v; nothing was written", err),
					Hint: "free space or fix permissions in this machine's ferry config dir (" + s.Home.ConfigDir + "), then retry"}
			}
			if m.Damaged != "" {
				return errs.Errorf(errs.RetryNeeded,
					"check with `ferry ledger verify` that nothing of this machine's is missing; the retry writes on",
					"this machine's high-water mark %s is damaged (%s), so it cannot tell whether its last write to %s was lost; the mark now names the folder's tip; nothing was written",
					s.Home.highWaterPath(s.Project(), s.Name, s.Device), secretguard.Quote(m.Damaged), verify.Rel(s.Root, seg))
			}
			return errs.Errorf(errs.RetryNeeded,
				fmt.Sprintf("check whether that write happened (`ferry ledger tail --writer %s`) and redo it if it is missing; the retry writes on", s.Name),
				"this machine's last write to %s (seq %d, entry %s) is in no file here: the process writing it stopped before the append, or the entry was lost since; nothing was written",
				verify.Rel(s.Root, seg), m.Seq, m.Hash)
		}
	}
	if hwm := m.acked(); have < hwm {
		torn := strings.TrimSuffix(filepath.Base(seg), ".jsonl") + ".torn-N"
		return errs.Errorf(errs.RetryNeeded, "if another copy of this channel on this machine (a second clone, another sync folder) holds the newer entries, bring them here first (`ferry sync --git` there and here, or let the sync tool finish); otherwise restore "+seg+" from another machine's copy or a backup (a damaged part is kept beside it as "+torn+"); then retry",
			"this machine wrote up to seq %d of its segment but the folder holds only seq %d: entries were lost; nothing was written", hwm, have)
	}
	if m.Hash == "" {
		return nil
	}
	at := v.ownEntry(s.Name, s.Device, m.Seq)
	if at == nil || at.Hash() == m.Hash {
		return nil
	}
	if err := s.Home.writeHighWater(s.Project(), s.Name, s.Device, highWater{Seq: tip.Seq, Hash: tip.Hash()}); err != nil {
		return &errs.Error{Category: errs.Internal, Err: err, Message: fmt.Sprintf("%v; nothing was written", err),
			Hint: "free space or fix permissions in this machine's ferry config dir (" + s.Home.ConfigDir + "), then retry"}
	}
	return errs.Errorf(errs.RetryNeeded,
		fmt.Sprintf("another home uses this device id %s (a copied FERRY_HOME or config directory): on the copy, delete the file 'device' in its ferry config directory (this home's is %s) so it makes its own; check what this machine wrote from seq %d on (`ferry ledger verify` lists the left-out records) and redo what is missing; a retry now writes on the kept branch",
			s.Device, filepath.Join(s.Home.ConfigDir, "device"), m.Seq),
		"this machine's write at seq %d of %s (entry %s) lost a fork to another record with the same seq (entry %s): readers leave it and what followed it out; nothing was written",
		m.Seq, verify.Rel(s.Root, seg), m.Hash, at.Hash())
}

// ownEntry is the kept entry of (name, device) at seq in v, nil when there is none.
func (v *View) ownEntry(name, device string, seq uint64) *ledger.Entry {
	if tip := v.chainTip(name, device); tip != nil && tip.Seq == seq {
		return tip
	}
	for i := range v.Snapshot.Entries {
		if e := &v.Snapshot.Entries[i]; e.Writer == name && e.Device == device && e.Seq == seq {
			return e
		}
	}
	return nil
}

// tipHash is the hash of a chain's tip ("" when the chain is empty).
func tipHash(tip *ledger.Entry) string {
	if tip == nil {
		return ""
	}
	return tip.Hash()
}

// tipSeq is the seq of a chain's tip (0 when the chain is empty).
func tipSeq(tip *ledger.Entry) uint64 {
	if tip == nil {
		return 0
	}
	return tip.Seq
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// viewWithEntry returns v with the entry just written folded in (no second read of the
// channel): this machine saw its writer change now, so its sighting is now. A zero
// entry (nothing written) returns v.
func (s *Session) viewWithEntry(v *View, e ledger.Entry) *View {
	if e.Seq == 0 {
		return v
	}
	// The entries are in merged order: put e in its place (after any equal one, as a
	// stable sort would) with one copy, not a sort of the whole ledger per write.
	old := v.Snapshot.Entries
	at := sort.Search(len(old), func(i int) bool { return fold.EntryLess(&e, &old[i]) })
	entries := slices.Insert(slices.Clip(old), at, e)
	snap := *v.Snapshot
	snap.Entries, snap.Added, snap.Base = entries, nil, nil
	arr := *v.Arrivals
	arr.Sighting = maps.Clone(v.Arrivals.Sighting)
	if arr.Sighting == nil {
		arr.Sighting = map[string]arrivals.Stamp{}
	}
	arr.Sighting[s.Name] = s.stamp()
	in := fold.FoldInput{Project: s.Project(), Master: s.MasterKey, Objects: s.objects()}
	var f *fold.Folded
	if v.fold != nil {
		f, _ = v.fold.FoldDelta(in, []ledger.Entry{e}, len(entries), entries[len(entries)-1].HLC, s.objectExists)
	}
	if f == nil {
		if f = s.foldWhole(in, &snap); s.floored.Miss != nil && snap.Floors != nil {
			if whole, err := s.readLedger(nil); err == nil { // the floors did not hold: read it whole, e with it
				snap, f = *whole, s.foldWhole(in, whole)
			}
		}
	}
	return &View{Snapshot: &snap, State: f.State, Arrivals: &arr, Presence: v.Presence, fold: f, epoch: v.epoch}
}

// maxIdemKey is the longest idempotency key, in bytes: the key is stored in the
// signed entry forever and read by every later fold.
const maxIdemKey = 128

// checkIdemKey refuses keys that are too long, not printable ASCII, or that look like a
// credential (invalid, the value never echoed).
func checkIdemKey(key string) error {
	if len(key) > maxIdemKey {
		return errs.Errorf(errs.Invalid, fmt.Sprintf("use a short key (at most %d bytes), e.g. a UUID", maxIdemKey), "idempotency key is %d bytes; the limit is %d", len(key), maxIdemKey)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return errs.Errorf(errs.Invalid, "use letters, digits and punctuation, e.g. a UUID", "idempotency key holds spaces or characters outside printable ASCII")
		}
	}
	// The key is stored verbatim in the append-only ledger and echoed by a conflict:
	// a credential-looking one is refused without echoing it (secret guard).
	return secretguard.Check("idempotency key", key)
}

// checkPresent returns not_found when the channel folder (its channel.toml) has gone
// since the channel was opened — a sync tool stopped, a folder moved or deleted — so a
// long-running process never folds an empty channel or recreates the folder by writing.
func (c *Channel) checkPresent() error {
	p := filepath.Join(c.Root, "channel.toml")
	fi, err := os.Stat(p)
	if err != nil {
		return errs.Errorf(errs.NotFound, "check that the synced folder is there (is the sync tool running? was it moved?)",
			"the channel folder %s is missing (no channel.toml)", c.Root)
	}
	now := configStamp{fi.Size(), fi.ModTime().UnixNano()}
	if c.configSeen == (configStamp{}) || now == c.configSeen {
		c.configSeen = now
		return nil
	}
	// channel.toml is written once, but for the owner's move to a newer format: read it
	// again, so a running process stops at a format it does not read instead of folding
	// the channel as it did (docs/format.md §17).
	cfg, mk, _, _, err := readConfigFile(c.Root)
	if err != nil {
		return err
	}
	if cfg.Project != c.Config.Project || !mk.Equal(c.MasterKey) {
		return errs.Errorf(errs.Invalid, "restore channel.toml from another machine or backup, or restart this process if the channel was made again",
			"channel.toml changed under this process: project %s with master key %s, not project %s with %s", cfg.Project, ledger.FormatKey(mk), c.Config.Project, ledger.FormatKey(c.MasterKey))
	}
	c.configSeen = now
	return nil
}

// configStamp is a file's size and modification time (Unix ns).
type configStamp struct {
	size, mod int64
}

// stampOf is the configStamp of the file at p, the zero one when it cannot be read.
func stampOf(p string) configStamp {
	fi, err := os.Stat(p)
	if err != nil {
		return configStamp{}
	}
	return configStamp{fi.Size(), fi.ModTime().UnixNano()}
}

// chainTip returns the entry with the highest seq of (writer, device) in v's snapshot
// (nil when there is none): from the fold's chain tips when v has them, else by
// going over the snapshot.
func (v *View) chainTip(writer, device string) *ledger.Entry {
	if v.fold != nil {
		return v.fold.Tips[[2]string{writer, device}]
	}
	var tip *ledger.Entry
	for i := range v.Snapshot.Entries {
		if e := &v.Snapshot.Entries[i]; e.Writer == writer && e.Device == device && (tip == nil || e.Seq > tip.Seq) {
			tip = e
		}
	}
	return tip
}

// ArrivedSince reports whether an entry written by a writer other than me arrived on
// this machine after the cursor since (docs/design.md §2 "The local arrival log,
// cursors and sightings": arrival order, so an old entry arriving late is new). With no
// cursor, or one from another machine or a lost arrival log, everything is new: it
// reports true, as Catchup then gives the whole digest.
func (v *View) ArrivedSince(since, me string) bool {
	n, ok := v.Arrivals.ParseCursor(since)
	if since == "" || !ok {
		return true
	}
	if v.Arrivals.Last <= n {
		return false
	}
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if e.Writer != me && v.Arrivals.Number(e.Hash()) > n {
			return true
		}
	}
	return false
}

// TalkWaiting returns how many messages Session.TalkRead would return to me now with
// the cursor since ("" for the unread ones), without reading or acknowledging them:
// the messages a long-polling `ferry_talk read` waits for.
func (v *View) TalkWaiting(me, since string) int {
	res, _ := talkRead(v, me, TalkReadOptions{Since: since, Peek: true, Limit: fold.TalkReadLimit})
	return len(res.Messages)
}
