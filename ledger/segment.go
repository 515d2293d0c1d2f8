package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/gofrs/flock"
)

// Errors returned by Append beside ErrBadName and ErrLocked.
var (
	// ErrInvalidDraft is returned by Append when the draft has no type or its data is
	// not a JSON object.
	ErrInvalidDraft = errors.New("ledger: invalid draft")
)

// File and directory names of the on-disk layout (see the package doc).
const (
	ledgerDirName = "ledger"
	segmentExt    = ".jsonl"
	tornInfix     = ".torn-"
	tmpExt        = ".tmp"
)

// maxNameLen is the longest writer or device name ValidName accepts.
const maxNameLen = 63

// ValidName reports whether s is a portable writer or device name: 1–63 characters of
// [a-z0-9-] that do not start with '-' (the pattern ^[a-z0-9][a-z0-9-]{0,62}$), and
// not a name Windows reserves for devices (con, prn, aux, nul, com0–com9, lpt0–lpt9).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	switch s {
	case "con", "prn", "aux", "nul":
		return false
	}
	if len(s) == 4 && (strings.HasPrefix(s, "com") || strings.HasPrefix(s, "lpt")) && s[3] >= '0' && s[3] <= '9' {
		return false
	}
	return true
}

// checkNames returns ErrBadName (wrapped, naming the offender) unless both names are
// valid.
func checkNames(writer, device string) error {
	for _, n := range [...]struct{ what, name string }{{"writer", writer}, {"device", device}} {
		if !ValidName(n.name) {
			return fmt.Errorf("%w: %s %q (want 1-63 characters of [a-z0-9-], not starting with '-')", ErrBadName, n.what, n.name)
		}
	}
	return nil
}

// SegmentPath returns the file name of the segment of (writer, device) under the
// channel directory root: root/ledger/<writer>/<device>.jsonl. It is the only place
// segment names are built. It does not check the names; Append and Repair return
// ErrBadName for names ValidName rejects.
func SegmentPath(root, writer, device string) string {
	return filepath.Join(root, ledgerDirName, writer, device+segmentExt)
}

// tornPath returns the name a segment's n-th torn tail is moved to:
// <dir>/<device>.torn-<n>, beside the segment.
func tornPath(segment string, n int) string {
	return strings.TrimSuffix(segment, segmentExt) + tornInfix + strconv.Itoa(n)
}

// lockPath returns the machine-local lock file of a segment:
// <lockDir>/seg-<writer>.<device>.lock. The dot cannot occur in a name, so no two
// segments share a lock file.
func lockPath(lockDir, writer, device string) string {
	return filepath.Join(lockDir, "seg-"+writer+"."+device+".lock")
}

// Ledger is a handle on one channel's ledger directory. It holds no open files and
// caches nothing, so it is cheap to make, and it is safe for concurrent use by many
// goroutines; appends to one segment are serialised across goroutines and processes by
// the segment's lock file.
type Ledger struct {
	opts Options
	// skew is the max skew Append uses now, in nanoseconds: Options.MaxSkew until
	// SetMaxSkew changes it.
	skew atomic.Int64
	// epoch is the checkpoint epoch SetEpoch set: appends start its file.
	epoch atomic.Uint64
	// archived is the chains SetArchived set: reads take their archive/ files too.
	archived atomic.Pointer[[]Chain]
	// archiveDirs is the archive folders outside the channel SetArchiveDirs set.
	archiveDirs atomic.Pointer[[]string]
}

// Open returns a Ledger for the channel directory opts.Root. It only checks that Root
// is an existing directory (it returns the *fs.PathError of os.Stat otherwise, or an
// error when Root is empty or not a directory); it reads no segment. Zero MaxSkew means
// DefaultMaxSkew, nil Now means time.Now. LockDir and Project are needed only by
// Append (and Project by Verify).
func Open(opts Options) (*Ledger, error) {
	if opts.Root == "" {
		return nil, errors.New("ledger: opening: no channel directory given")
	}
	fi, err := os.Stat(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("opening ledger: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("opening ledger: %s is not a directory", opts.Root)
	}
	if opts.MaxSkew < 0 {
		return nil, fmt.Errorf("opening ledger: negative max skew %v", opts.MaxSkew)
	}
	if opts.MaxSkew == 0 {
		opts.MaxSkew = DefaultMaxSkew
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Ledger{opts: opts}
	l.skew.Store(int64(opts.MaxSkew))
	return l, nil
}

// SetMaxSkew changes how far later Appends move ahead of the wall clock (the
// channel's effective max_skew, which a policy change can move after Open); d <= 0
// means DefaultMaxSkew. It is safe to call while other goroutines append.
func (l *Ledger) SetMaxSkew(d time.Duration) {
	if d <= 0 {
		d = DefaultMaxSkew
	}
	l.skew.Store(int64(d))
}

// Root returns the channel directory the Ledger was opened on.
func (l *Ledger) Root() string { return l.opts.Root }

// Append writes the next entry of the segment of (writer, device) and returns it as a
// reader will see it (its Hash equals the hash any reader computes).
//
// It appends to the chain's newest own file, or starts the file of the epoch
// SetEpoch set when that is newer (docs/format.md §21). Under the segment's lock it
// first restores the chain's continuity when the writer directory holds conflict
// copies (see Restore: records of this chain found only in a
// copy are appended verbatim, and the next entry follows the tip readers keep, the
// fork winner included; a hole or a fork inside the segment itself is not seen here:
// callers that read one call Restore first). Then it repairs a torn tail (see Repair),
// reads the segment's last complete entry of (writer, device) backwards from the end
// of the file, and builds the next one: seq = last seq + 1 (1 when there is none), prev = the last
// entry's hash (omitted at seq 1), hlc = NextHLC(now, MaxSkew, last hlc,
// observed) — observed is the highest HLC the caller has read, usually
// Snapshot.MaxHLC; the zero HLC means none — and v = Version. The entry is signed by s
// for Options.Project, checked against s.Public(), written as one canonical line with
// a single write to a file opened O_APPEND, and fsynced before the lock is released.
//
// Append returns ErrBadName for a name ValidName rejects, ErrInvalidDraft when d.Type
// is empty or d.Data is neither empty, null, nor a JSON object, ErrLocked when the lock
// cannot be taken, ErrBadSignature when s signs wrongly, and wrapped I/O errors. After
// an error the segment holds at most one line more than before: none when the error
// came before the write; an incomplete one, which the next Append moves aside, when
// the write failed; a complete one, which counts, when only fsync or close failed.
func (l *Ledger) Append(writer, device string, d Draft, s Signer, observed HLC) (Entry, error) {
	return l.AppendMarked(writer, device, d, s, observed, nil)
}

// AppendMarked is Append with a mark: a function called under the segment's lock with
// the entry about to be written — after every check, the restore and the repair, before
// the write — so that the caller can durably record that entry before it can exist in
// the segment (a machine-local high-water mark, docs/format.md §10). When mark returns
// an error, nothing of the entry is written and AppendMarked returns that error
// wrapped. A nil mark is Append.
func (l *Ledger) AppendMarked(writer, device string, d Draft, s Signer, observed HLC, mark func(Entry) error) (Entry, error) {
	var m func([]Entry) error
	if mark != nil {
		m = func(es []Entry) error { return mark(es[0]) }
	}
	es, err := l.AppendBatch(writer, device, []Draft{d}, s, observed, m)
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// AppendBatch is AppendMarked for several entries of one segment: each follows the one
// before it, and all their lines go in one write and one fsync, so none is durable
// without the others having been written with it. mark sees every entry about to be
// written, in order. It returns the entries in order; after an error the segment holds
// what AppendMarked's error leaves, for the whole batch: none of its lines, an
// incomplete tail (moved aside by the next Append, which may keep complete lines
// before it), or every line when only fsync or close failed.
func (l *Ledger) AppendBatch(writer, device string, ds []Draft, s Signer, observed HLC, mark func([]Entry) error) ([]Entry, error) {
	if err := checkNames(writer, device); err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("%w: no entries", ErrInvalidDraft)
	}
	datas := make([]json.RawMessage, len(ds))
	for i, d := range ds {
		data, err := draftData(d)
		if err != nil {
			return nil, err
		}
		datas[i] = data
	}
	if s == nil {
		return nil, errors.New("ledger: appending: no signer")
	}
	if l.opts.Project == "" {
		return nil, errors.New("ledger: appending: no project id configured")
	}
	unlock, err := l.lock(writer, device)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// The chain goes on in its newest file, or in the file of the epoch SetEpoch set
	// when that is newer (docs/format.md §21); the older files are frozen.
	path, newest, files, ents := l.current(writer, device)
	// Conflict copies in the writer directory may hold records of this chain that its
	// files lack (one was replaced, rolled back or lost a fork): make the chain whole
	// first and chain onto the tip readers keep (ADR 0007).
	var restored *Restored
	if copiesIn(ents) {
		if restored, err = restorePath(l.opts.Root, path, writer, device, s.Public(), l.opts.Project); err != nil {
			return nil, err
		}
	}
	// The newest file's torn tail is repaired (even when the chain goes on in a new
	// file) and its last entry read. A missing file is made only after the mark: a
	// refused mark leaves the channel folder as it was, without an empty file or
	// directory.
	f, err := os.OpenFile(newest, os.O_RDWR|os.O_APPEND, 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("appending to %s: %w", newest, err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var last *Entry
	if f != nil {
		var dirty bool
		if last, dirty, err = scanHandle(f, writer, device); err != nil {
			return nil, fmt.Errorf("appending to %s: %w", newest, err)
		}
		if dirty {
			// Windows cannot truncate through an O_APPEND handle: close it, repair by
			// path, and reopen.
			f.Close()
			f = nil
			if _, last, err = repairPath(newest, writer, device); err != nil {
				return nil, err
			}
			if f, _, err = openSegment(newest); err != nil {
				return nil, fmt.Errorf("appending to %s: %w", newest, err)
			}
		}
	}
	if path != newest { // the chain goes on in a new epoch file
		if f != nil {
			f.Close()
			f = nil
		}
		// The restore above may have started it.
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("appending to %s: %w", path, err)
			}
			f = nil
		}
	}
	if last == nil {
		// A new or empty newest file takes its tip from the next older file holding one.
		if last, err = olderTip(files, newest, writer, device); err != nil {
			return nil, err
		}
	}
	if restored != nil && restored.Tip != nil {
		last = restored.Tip // the kept tip: with a fork in the files it need not be the last line
	}

	var es []Entry
	var line []byte
	for i, d := range ds {
		e, ln, err := l.next(writer, device, d, datas[i], s, last, observed)
		if err != nil {
			return nil, err
		}
		es, line, last = append(es, e), append(line, ln...), &e
	}
	if mark != nil {
		if err := mark(es); err != nil {
			return nil, fmt.Errorf("appending to %s: marking seq %d before the write: %w", path, es[len(es)-1].Seq, err)
		}
	}
	if f == nil {
		if f, err = createSegment(l.opts.Root, path); err != nil {
			return nil, fmt.Errorf("appending to %s: %w (%w)", path, err, ErrNotWritten)
		}
	}
	n, err := f.Write(line)
	if err == nil && n != len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return nil, fmt.Errorf("appending to %s: writing: %w (%w)", path, err, ErrNotWritten)
	}
	if err := fsutil.Sync(f); err != nil {
		return nil, fmt.Errorf("appending to %s: syncing: %w", path, err)
	}
	err = f.Close()
	f = nil
	if err != nil {
		return nil, fmt.Errorf("appending to %s: closing: %w", path, err)
	}
	return es, nil
}

// draftData validates d and returns its data in canonical form, nil when absent.
func draftData(d Draft) (json.RawMessage, error) {
	if d.Type == "" {
		return nil, fmt.Errorf("%w: empty type", ErrInvalidDraft)
	}
	t := bytes.TrimSpace(d.Data)
	if len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	if t[0] != '{' || !json.Valid(t) {
		return nil, fmt.Errorf("%w: data of %s is not a JSON object", ErrInvalidDraft, d.Type)
	}
	c, err := CanonicalJSON(t)
	if err != nil {
		return nil, fmt.Errorf("%w: data of %s: %w", ErrInvalidDraft, d.Type, err)
	}
	return c, nil
}

// next builds, signs and checks the entry that follows last (nil: none) and returns it
// parsed back, as a reader sees it, with its line (canonical form + "\n").
func (l *Ledger) next(writer, device string, d Draft, data json.RawMessage, s Signer, last *Entry, observed HLC) (Entry, []byte, error) {
	e := Entry{V: Version, Writer: writer, Device: device, Seq: 1, Type: d.Type, Ref: d.Ref, Data: data, Idem: d.Idem}
	var lastHLC HLC
	if last != nil {
		e.Seq = last.Seq + 1
		e.Prev = last.Hash()
		h, err := ParseHLC(last.HLC)
		if err != nil { // ParseLine has checked it; keep the guard cheap and loud
			return Entry{}, nil, fmt.Errorf("appending: last entry: %w", err)
		}
		lastHLC = h
	}
	h, _ := NextHLC(l.opts.Now(), time.Duration(l.skew.Load()), lastHLC, observed)
	e.HLC = h.String()
	if err := e.Sign(s, l.opts.Project); err != nil {
		return Entry{}, nil, fmt.Errorf("appending: %w", err)
	}
	c, err := e.Canonical()
	if err != nil {
		return Entry{}, nil, fmt.Errorf("appending: %w", err)
	}
	out, err := ParseLine(c)
	if err != nil {
		return Entry{}, nil, fmt.Errorf("appending: built entry does not parse: %w", err)
	}
	// A wrong signature would be written for good: check it before it is.
	if err := out.VerifySig(s.Public(), l.opts.Project); err != nil {
		return Entry{}, nil, fmt.Errorf("appending: signer's signature does not verify: %w", err)
	}
	line := make([]byte, len(c)+1)
	copy(line, c)
	line[len(c)] = '\n'
	return out, line, nil
}

// procLocks holds one mutex per lock file path. flock(2) excludes other open files
// even within one process, but the fcntl locks some systems fall back to do not, so
// goroutines of one process also take this mutex.
var procLocks sync.Map // string → *sync.Mutex

// lock takes the machine-local lock of the segment (writer, device) and returns the
// function that releases it. It returns ErrLocked (wrapped) when LockDir is not set or
// the lock file cannot be created or locked.
func (l *Ledger) lock(writer, device string) (func(), error) {
	if l.opts.LockDir == "" {
		return nil, fmt.Errorf("%w: no lock directory configured", ErrLocked)
	}
	if err := os.MkdirAll(l.opts.LockDir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: creating lock directory: %w", ErrLocked, err)
	}
	p := lockPath(l.opts.LockDir, writer, device)
	key := p
	if abs, err := filepath.Abs(p); err == nil {
		key = abs
	}
	v, _ := procLocks.LoadOrStore(key, new(sync.Mutex))
	mu := v.(*sync.Mutex)
	mu.Lock()
	fl := flock.New(p)
	if err := fl.Lock(); err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, p, err)
	}
	return func() {
		_ = fl.Unlock() // closes the descriptor, which releases the lock in any case
		mu.Unlock()
	}, nil
}

// openSegment opens path for appending and reading, creating it when missing;
// created reports whether this call made the file.
func openSegment(path string) (f *os.File, created bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o644)
	return f, false, err
}

// createSegment makes the segment path, missing when its lock was taken, and returns it
// open for appending. The new name is made durable (syncCreated) before any line in it
// matters. It fails when the file exists by now: only a sync tool can have put it there
// under the lock, and its lines must be read before the next seq is chosen.
func createSegment(root, path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, created, err := openSegment(path)
	if err != nil {
		return nil, err
	}
	if !created {
		f.Close()
		return nil, errors.New("the segment appeared while the entry was made (a sync tool delivered it): retry")
	}
	if err := syncCreated(root, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// syncCreated fsyncs the directories a new segment's name lives in: its writer
// directory, the ledger directory and the channel directory (MkdirAll may have made
// the first two).
func syncCreated(root, segment string) error {
	writerDir := filepath.Dir(segment)
	for _, d := range []string{writerDir, filepath.Dir(writerDir), root} {
		if err := fsutil.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Repair moves the torn tail of the segment of (writer, device) aside and returns the
// file it was moved to, "" when there was nothing to do (including when the segment
// does not exist). It takes the segment's lock, like Append, which calls it for every
// write.
//
// The tail is every byte after the last complete line that parses as an entry, when
// those bytes are more than blank lines: a last line without "\n", a run of NUL bytes,
// or complete lines that are not entries. It is written to <device>.torn-<n> beside the
// segment (n the first unused integer from 1) and fsynced; only then is the segment
// truncated to the last good line and fsynced. No byte is removed without a copy.
//
// Repair handles only the tail: unreadable bytes in the middle of the segment (a hole)
// and records found only in conflict copies are Restore's.
//
// Repair returns ErrBadName for a name ValidName rejects, ErrLocked when the lock
// cannot be taken, and wrapped I/O errors (after which the segment is unchanged or
// only the copy was made).
func (l *Ledger) Repair(writer, device string) (moved string, err error) {
	if err := checkNames(writer, device); err != nil {
		return "", err
	}
	unlock, err := l.lock(writer, device)
	if err != nil {
		return "", err
	}
	defer unlock()
	_, newest, _, _ := l.current(writer, device)
	moved, _, err = repairPath(newest, writer, device)
	return moved, err
}

// repairPath is Repair for a locked segment path; it also returns the segment's last
// entry of (writer, device) after repair (nil when it holds none).
func repairPath(path, writer, device string) (moved string, last *Entry, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("repairing %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return "", nil, fmt.Errorf("repairing %s: %w", path, err)
	}
	size := fi.Size()
	goodEnd, last, dirty, err := scanTail(f, size, writer, device)
	if err != nil || !dirty {
		f.Close()
		if err != nil {
			return "", nil, fmt.Errorf("repairing %s: %w", path, err)
		}
		return "", last, nil
	}
	moved, err = copyTail(f, path, goodEnd, size)
	// Close before truncating, so that no handle of ours is open on the segment while
	// it is cut (Windows is strict about that).
	f.Close()
	if err != nil {
		return "", nil, fmt.Errorf("repairing %s: %w", path, err)
	}
	if err := truncateSync(path, goodEnd); err != nil {
		return moved, nil, fmt.Errorf("repairing %s: tail copied to %s: %w", path, moved, err)
	}
	return moved, last, nil
}

// copyTail writes bytes [from, size) of src to the first unused <device>.torn-<n>
// beside the segment path, fsyncs it and its directory, and returns its name.
func copyTail(src io.ReaderAt, path string, from, size int64) (string, error) {
	for n := 1; ; n++ {
		tp := tornPath(path, n)
		out, err := os.OpenFile(tp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("copying torn tail: %w", err)
		}
		_, err = io.Copy(out, io.NewSectionReader(src, from, size-from))
		if err == nil {
			err = fsutil.Sync(out)
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = fsutil.SyncDir(filepath.Dir(tp))
		}
		if err != nil {
			// The segment still holds every byte; the partial copy is ours to drop.
			os.Remove(tp)
			return "", fmt.Errorf("copying torn tail to %s: %w", tp, err)
		}
		return tp, nil
	}
}

// truncateSync cuts path to size bytes and fsyncs it, through a handle of its own.
func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("truncating: %w", err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = fsutil.Sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("truncating to %d bytes: %w", size, err)
	}
	return nil
}

// scanHandle runs scanTail over an open segment and reports its last entry of
// (writer, device) and whether a tail needs repair.
func scanHandle(f *os.File, writer, device string) (last *Entry, dirty bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	_, last, dirty, err = scanTail(f, fi.Size(), writer, device)
	return last, dirty, err
}

// Reading backwards: the first chunk is small (a line is usually a few hundred
// bytes); each further chunk doubles, up to tailChunkMax.
const (
	tailChunkMin = 4 << 10
	tailChunkMax = 1 << 20
)

// scanTail walks the first size bytes of a segment backwards from the end and returns
// goodEnd, the offset just after the last complete line that parses as an entry (0 when
// none does); last, the last such entry of (writer, device) (nil when there is none);
// and dirty: whether the bytes after goodEnd hold anything but complete blank lines (an
// unterminated line, NULs, or lines that are not entries). It reads back only as far
// as that entry — normally one line. Entries of other segments (a file copied or
// concatenated by hand) count as good lines but are not taken for the chain's tip.
func scanTail(r io.ReaderAt, size int64, writer, device string) (goodEnd int64, last *Entry, dirty bool, err error) {
	br := &backReader{r: r, off: size, end: size, chunk: tailChunkMin}
	end := size
	if end == 0 {
		return 0, nil, false, nil
	}
	b, err := br.byteAt(end - 1)
	if err != nil {
		return 0, nil, false, err
	}
	if b != '\n' {
		dirty = true
		start, _, err := br.lineBefore(end)
		if err != nil {
			return 0, nil, false, err
		}
		end = start
	}
	found := false // goodEnd is set
	for end > 0 {
		start, line, err := br.lineBefore(end - 1)
		if err != nil {
			return 0, nil, false, err
		}
		if len(bytes.TrimSpace(line)) != 0 {
			e, perr := parseLine(line)
			switch {
			case perr != nil:
				if !found {
					dirty = true
				}
			case !found:
				found, goodEnd = true, end
				fallthrough
			default:
				if e.Writer == writer && e.Device == device {
					return goodEnd, &e, dirty, nil
				}
			}
		}
		end = start
		br.drop(end)
	}
	return goodEnd, nil, dirty, nil
}

// backReader reads a file backwards in growing chunks. buf holds the file's bytes
// [off, end).
type backReader struct {
	r     io.ReaderAt
	off   int64
	end   int64
	buf   []byte
	chunk int
}

// more extends buf one chunk towards the start of the file; io.EOF at offset 0.
func (b *backReader) more() error {
	if b.off == 0 {
		return io.EOF
	}
	n := min(int64(b.chunk), b.off)
	nb := make([]byte, int(n)+len(b.buf))
	if _, err := b.r.ReadAt(nb[:n], b.off-n); err != nil {
		return fmt.Errorf("reading backwards at %d: %w", b.off-n, err)
	}
	copy(nb[n:], b.buf)
	b.buf, b.off = nb, b.off-n
	if b.chunk < tailChunkMax {
		b.chunk *= 2
	}
	return nil
}

// byteAt returns the byte at file offset i (off <= i < end after loading).
func (b *backReader) byteAt(i int64) (byte, error) {
	for i < b.off {
		if err := b.more(); err != nil {
			return 0, err
		}
	}
	return b.buf[i-b.off], nil
}

// lineBefore returns the line that ends at file offset end (exclusive, its '\n' not
// included) and the offset where it starts: just after the previous '\n', or 0.
func (b *backReader) lineBefore(end int64) (start int64, line []byte, err error) {
	for {
		if end < b.off {
			if err := b.more(); err != nil {
				return 0, nil, err
			}
			continue
		}
		if i := bytes.LastIndexByte(b.buf[:end-b.off], '\n'); i >= 0 {
			start = b.off + int64(i) + 1
			return start, b.buf[start-b.off : end-b.off], nil
		}
		if b.off == 0 {
			return 0, b.buf[:end], nil
		}
		if err := b.more(); err != nil {
			return 0, nil, err
		}
	}
}

// drop forgets the bytes at and after file offset end.
func (b *backReader) drop(end int64) {
	if end >= b.off && end < b.end {
		b.buf = b.buf[:end-b.off]
		b.end = end
	}
}
