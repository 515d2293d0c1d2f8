package arrivals

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// Log is this machine's arrival log (docs/design.md §2 "The local arrival log,
// cursors and sightings"): every entry it ingests gets the next local arrival number
// and the local time it was first seen. Cursors name arrival numbers, so an old entry
// arriving late is still new; sightings (when this machine last saw each writer change)
// come from the same log. The log lives in the cache dir and is rebuildable from the
// channel at any time.
//
// One log per channel directory, like the index (two directories of one
// project on one machine — two clones, a copy — receive files apart, so one's
// arrivals must not number entries the other has not read):
//
//	<cache>/channels/<project>/arrivals-<first 16 hex of sha256(channel root)>.log
//
// File format: a header line "ferry-arrivals 1 <log id>", then one line
// per entry: "<n> <entry hash> <first seen, Unix ms> <writer>", and clock lines
// "clock <Unix ms> <boot clock ms> <boot id>" (ADR 0013): the entry lines after a clock
// line were stamped on the clocks it names. A new clock line is written, before any
// other line, whenever this machine's clocks no longer match the last one (a reboot,
// or wall time minus boot time moved by more than MaxClockStep): what was seen before
// it counts as seen at it (the first observation after the step).
type Log struct {
	LogID string
	// Compacted is the epoch of the owner's checkpoint at whose cut the log was
	// compacted (Compact), 0 when it never was.
	Compacted int
	Last      uint64                // highest arrival number
	recs      fold.Layered[arrival] // entry hash → its arrival
	Sighting  map[string]Stamp      // writer → when this machine last saw it change
	// latest is each writer's newest line (highest number); clocks counts the clock
	// lines read, clock is the last of them.
	latest map[string]arrival
	clocks int
	clock  Stamp
	// missedAt, when set (missed), is one less than the lowest arrival number another
	// process logged, while the Load that made this Arrivals read the segments, for an
	// entry that reading did not hold (Complete).
	missedAt uint64
	missed   bool
	// below is the highest arrival number a compaction dropped (a "below" line).
	below uint64
}

// arrival is one line of the log: the arrival number, when the entry was first seen
// (Unix ms) and its writer; ep is the number of clock lines before it.
type arrival struct {
	n      uint64
	ms     int64
	writer string
	ep     int
}

// stampOf is when this machine saw r, on both clocks: on the clocks of the last clock
// line when r was logged after it, else at that clock line (r was seen before a clock
// step or a reboot). Lines logged before the first clock line (by an older binary)
// count as logged after it; with no clock line at all, r has no boot reading.
func (a *Log) stampOf(r arrival) Stamp {
	if a.clocks == 0 {
		return Stamp{Wall: r.ms}
	}
	if max(r.ep, 1) < a.clocks {
		return a.clock
	}
	return Stamp{Wall: r.ms, Boot: r.ms - (a.clock.Wall - a.clock.Boot), BootID: a.clock.BootID}
}

// sightings is the Sighting map of the log as read: each writer's newest line.
func (a *Log) sightings() map[string]Stamp {
	m := make(map[string]Stamp, len(a.latest))
	for w, r := range a.latest {
		m[w] = a.stampOf(r)
	}
	return m
}

// SeenStamp is when this machine first saw an entry, on both clocks (ok false if
// never): what windows are measured from.
func (a *Log) SeenStamp(hash string) (Stamp, bool) {
	r, ok := a.recs.Get(hash)
	if !ok {
		return Stamp{}, false
	}
	return a.stampOf(r), true
}

// StampOwn is an entry this device wrote at HLC physical time ms (Unix ms, this
// machine's wall clock then), on both clocks: on the last clock line's clocks when
// written after it by the wall clock, else at that clock line. A backward step can
// place an entry after the line that it preceded; it then counts as seen later, never
// earlier.
func (a *Log) StampOwn(ms int64) Stamp {
	if a.clocks == 0 {
		return Stamp{Wall: ms}
	}
	if ms < a.clock.Wall {
		return a.clock
	}
	return Stamp{Wall: ms, Boot: ms - (a.clock.Wall - a.clock.Boot), BootID: a.clock.BootID}
}

// Number returns the arrival number of an entry hash (0 if not ingested).
func (a *Log) Number(hash string) uint64 {
	r, _ := a.recs.Get(hash)
	return r.n
}

// Ingested calls fn for every entry this machine has ingested: its hash, writer and
// arrival number (doctor's check that no record read here has vanished since).
func (a *Log) Ingested(fn func(hash, writer string, n uint64)) {
	a.recs.All(func(h string, r arrival) { fn(h, r.writer, r.n) })
}

// Seen returns when this machine first saw an entry, on its wall clock then (zero time
// if never): for display and for comparing with HLCs; decisions use seenStamp.
func (a *Log) Seen(hash string) time.Time {
	r, ok := a.recs.Get(hash)
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(r.ms)
}

const arrivalsHeader = "ferry-arrivals 1 "

// compactedHeader starts the header of a log compacted at an owner's checkpoint,
// "ferry-arrivals 2 <log id> compacted <epoch>": a binary that reads only version 1
// takes it for a log without a header and rebuilds its own, rather than misreading the
// log id.
const compactedHeader = "ferry-arrivals 2 "

// compactedMark follows the log id in a compacted log's header.
const compactedMark = " compacted "

// parseHeader returns the log id and compaction epoch of a header line (without its
// newline); ok is false for a line that is not an arrival log's header.
func parseHeader(head string) (id string, compacted int, ok bool) {
	rest, v1 := strings.CutPrefix(head, arrivalsHeader)
	if !v1 {
		if rest, ok = strings.CutPrefix(head, compactedHeader); !ok {
			return "", 0, false
		}
	}
	id, mark, marked := strings.Cut(rest, compactedMark)
	if marked == v1 {
		return "", 0, false // version 1 has no mark, version 2 has one
	}
	if marked {
		n, err := strconv.Atoi(mark)
		if err != nil || n < 1 {
			return "", 0, false
		}
		compacted = n
	}
	if id == "" || strings.ContainsAny(id, " .") {
		return "", 0, false
	}
	return id, compacted, true
}

// arrivalsBelow starts the line a compaction writes after the header, "below <n>": n
// is the highest arrival number of a line it dropped (Log.Below). Two fields, so a
// binary that predates it skips it as a line it cannot parse.
const arrivalsBelow = "below"

// arrivalsClock starts a clock line of the arrival log. Its first field is no number,
// so a binary that predates clock lines skips it as a line it cannot parse.
const arrivalsClock = "clock"

// arrivalsRead is the arrival log as this process last read it (a Load reads
// only the lines appended since, not the whole log).
type Reading struct {
	Log    *Log   `json:"-"` // as read; its Sighting map is not kept (sightings)
	header string // the header line, with its newline
	offset int64  // just past the last complete line read
	last   []byte // that line, with its newline (the header when no line)
}

// ingestArrivals brings the arrival log of the channel up to date and appends the
// entries it has not seen, under the machine-local flock arrivals.lock. added, when
// not nil, is what is new since the last Load of this process (ledger.Snapshot.Added):
// only those are looked up, as long as the log is still the one read then. A damaged
// log is moved aside and rebuilt (cursors into it then fall back to a bounded digest).
// The Arrivals returned is the caller's: later Loads never change it.
//
// size0 is the log's size when the Load began, before it read the segments (-1: no
// log then): lines past it were logged by other processes meanwhile, and those naming
// an entry this Load did not read hold Complete below them.
//
// The log is path, in dir, locked with lockDir's arrivals.lock; last is the log as this
// process last read it (nil: not yet), and the log as this call leaves it is returned
// beside the Arrivals (last again when the log could not be locked; nil when appending
// to it failed, so the next call reads it whole). now is this machine's clocks.
//
// below, when not nil, reports the entries at or below the cut of the owner's
// checkpoint the Load folded from: in a log compacted at a checkpoint (Compact) they
// get no arrival number, since their lines left it.
func Ingest(dir, lockDir, path string, last *Reading, now Stamp, all, added []ledger.Entry, incremental bool, size0 int64, below func(*ledger.Entry) bool) (*Log, *Reading, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, last, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, last, fmt.Errorf("locking arrival log: %w", err)
	}
	lk := flock.New(filepath.Join(lockDir, "arrivals.lock"))
	if err := lk.Lock(); err != nil {
		return nil, last, fmt.Errorf("locking arrival log: %w", err)
	}
	defer lk.Unlock()
	adoptLegacyArrivals(dir, path)
	var rd *Reading
	rewritten := false
	if last != nil {
		rd, rewritten = readArrivalsFrom(path, last)
	}
	entries := all
	if rd != nil && incremental {
		entries = added
	}
	torn := false
	if rd == nil {
		var err error
		rd, torn, err = Read(path)
		if err == nil && rd != nil && last != nil && incremental && rd.Log.LogID == last.Log.LogID && rd.Log.Compacted > last.Log.Compacted {
			// Compacted since this process read it: every entry it read before has its
			// number, or was at or below the cut and left the log.
			entries = added
		}
		if rewritten && err == nil {
			// Shorter than, or different from, what this process read under the same
			// log id (a crash restored an old copy, a hand edit): arrival numbers it
			// handed out may now name other entries. A new log makes every cursor
			// into the old one fall back to a digest instead of skipping entries.
			err = errArrivalsRewritten
		}
		if err != nil {
			aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().UnixNano())
			if rerr := fsutil.Rename(path, aside); rerr != nil {
				return nil, last, fmt.Errorf("moving damaged arrival log aside: %w", rerr)
			}
			rd = nil
		}
	} else {
		torn = rd.tornAfter(path)
	}
	var buf bytes.Buffer
	if rd == nil {
		id := fold.RandomBase32(8)
		rd = &Reading{Log: &Log{LogID: id, latest: map[string]arrival{}}, header: arrivalsHeader + id + "\n"}
		buf.WriteString(rd.header)
		torn = false
	}
	a := *rd.Log
	a.latest = cloneLatest(rd.Log.latest)
	a.missed = false
	if size0 >= 0 && buf.Len() == 0 { // the log read goes on from the one there at size0
		a.missedAt, a.missed = lateMissed(path, size0, rd.offset, entries)
	}
	stamp := now
	if stamp.BootID != "" && (a.clocks == 0 || !stamp.sameClock(a.clock)) {
		// A reboot or a clock step since the last clock line (or none yet): what was
		// seen before counts from now (ADR 0013).
		fmt.Fprintf(&buf, "%s %d %d %s\n", arrivalsClock, stamp.Wall, stamp.Boot, stamp.BootID)
		a.clocks++
		a.clock = stamp
	}
	wall := stamp.Wall
	add := map[string]arrival{}
	for i := range entries {
		e := &entries[i]
		h := e.Hash()
		if _, ok := a.recs.Get(h); ok {
			continue
		}
		if a.Compacted > 0 && below != nil && below(e) {
			continue
		}
		if _, ok := add[h]; ok {
			continue
		}
		a.Last++
		r := arrival{a.Last, wall, e.Writer, a.clocks}
		add[h] = r
		a.latest[e.Writer] = r
		fmt.Fprintf(&buf, "%d %s %d %s\n", a.Last, h, wall, e.Writer)
	}
	a.recs = a.recs.With(add)
	if buf.Len() > 0 {
		out := buf.Bytes()
		if torn {
			out = append([]byte{'\n'}, out...)
		}
		end, err := fsutil.Append(path, out, fsutil.AppendOptions{Create: true, Perm: 0o644})
		if err != nil {
			return nil, nil, fmt.Errorf("appending to the arrival log: %w", err)
		}
		last = &Reading{Log: &a, header: rd.header, offset: end, last: lastLine(out)}
	} else {
		last = &Reading{Log: &a, header: rd.header, offset: rd.offset, last: rd.last}
	}
	ret := a
	ret.Sighting = a.sightings()
	return &ret, last, nil
}

// adoptLegacyArrivals moves the log of an older binary — one per project,
// <state dir>/arrivals.log — to path, this channel directory's log, when path does
// not exist yet (ADR 0012): its log id, cursors, first-seen times and sightings go on.
// The first directory of the project to load after the upgrade takes it; another
// starts a log of its own. Under arrivals.lock. A failure leaves both as they were.
func adoptLegacyArrivals(dir, path string) {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	legacy := filepath.Join(dir, "arrivals.log")
	if _, err := os.Stat(legacy); err != nil {
		return
	}
	_ = fsutil.Rename(legacy, path)
}

// lateMissed returns one less than the lowest arrival number logged at or past byte
// size0 (by another process, while the caller read the segments) for an entry not
// among entries, and whether there is one. entries is what the caller read that a late line may name — an entry the
// caller's previous reading held was logged before size0 — so ingestArrivals passes
// the new ones alone when it reads on incrementally. end is the offset just past the
// last complete line read.
func lateMissed(path string, size0, end int64, entries []ledger.Entry) (uint64, bool) {
	if size0 >= end {
		return 0, false
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	// A line that size0 cuts was being logged then: late too. Lines are about 100
	// bytes: read from a little before size0, or from the start if no line ends there.
	start := max(size0-4096, 0)
	b := make([]byte, end-start)
	if _, err := f.ReadAt(b, start); err != nil {
		return 0, false
	}
	if i := bytes.LastIndexByte(b[:size0-start], '\n'); i >= 0 || start == 0 {
		b = b[i+1:]
	} else {
		return lateMissed(path, 0, end, entries) // every line counts as late: safe
	}
	late := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		fs := strings.Fields(line)
		if len(fs) != 4 {
			continue
		}
		if n, err := strconv.ParseUint(fs[0], 10, 64); err == nil {
			late[fs[1]] = n
		}
	}
	for i := range entries {
		delete(late, entries[i].Hash())
	}
	var at uint64
	missed := false
	for _, n := range late {
		if n > 0 && (!missed || n-1 < at) {
			at, missed = n-1, true
		}
	}
	return at, missed
}

// readArrivals reads the whole log: nil (and no error) when there is none, an error
// when it has no header. torn reports that it ends inside a line.
func Read(path string) (rd *Reading, torn bool, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	head, rest, ok := bytes.Cut(raw, []byte("\n"))
	id, compacted, good := parseHeader(string(head))
	if !ok || !good {
		return nil, false, fmt.Errorf("arrival log %s has no header", path)
	}
	a := &Log{LogID: id, Compacted: compacted, latest: map[string]arrival{}}
	recs := map[string]arrival{}
	n := parseArrivals(a, rest, recs)
	a.recs = fold.Layered[arrival]{Base: recs}
	off := int64(len(head)+1) + int64(n)
	return &Reading{Log: a, header: string(head) + "\n", offset: off, last: lastLine(raw[:off])}, off < int64(len(raw)), nil
}

// errArrivalsRewritten marks an arrival log that no longer holds what this process read
// from it under the same log id.
var errArrivalsRewritten = errors.New("arrival log was rewritten under its log id")

// readArrivalsFrom reads what was appended to the log since prev was read. It returns
// nil when the caller must read the file whole: it is missing or has another header
// (another process started a new log), or — rewritten — it no longer holds, under the
// same header, the bytes prev read up to its offset (shorter, or its last line differs).
func readArrivalsFrom(path string, prev *Reading) (rd *Reading, rewritten bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	head := make([]byte, len(prev.header))
	if _, err := f.ReadAt(head, 0); err != nil || string(head) != prev.header {
		return nil, false
	}
	if fi.Size() < prev.offset {
		return nil, true
	}
	if n := int64(len(prev.last)); n > 0 {
		at := make([]byte, n)
		if _, err := f.ReadAt(at, prev.offset-n); err != nil || !bytes.Equal(at, prev.last) {
			return nil, true
		}
	}
	if fi.Size() == prev.offset {
		return prev, false
	}
	more := make([]byte, fi.Size()-prev.offset)
	if _, err := f.ReadAt(more, prev.offset); err != nil {
		return nil, false
	}
	a := *prev.Log
	a.latest = cloneLatest(prev.Log.latest)
	recs := map[string]arrival{}
	n := parseArrivals(&a, more, recs)
	a.recs = a.recs.With(recs)
	last := prev.last
	if n > 0 {
		last = lastLine(more[:n])
	}
	return &Reading{Log: &a, header: prev.header, offset: prev.offset + int64(n), last: last}, false
}

// cloneLatest copies a latest map (never nil).
func cloneLatest(m map[string]arrival) map[string]arrival {
	if m == nil {
		return map[string]arrival{}
	}
	return maps.Clone(m)
}

// lastLine returns a copy of the last complete line of b (b ends with '\n').
func lastLine(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	i := bytes.LastIndexByte(b[:len(b)-1], '\n')
	return bytes.Clone(b[i+1:])
}

// tornAfter reports whether the log ends inside a line past rd's offset.
func (rd *Reading) tornAfter(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > rd.offset
}

// parseArrivals parses the complete lines of b into recs and a (Last, latest, the
// clock lines) and returns how many bytes they span. A line that does not parse (a
// torn tail left by a crash, completed by a later append's leading newline) names no
// arrival: skipped.
func parseArrivals(a *Log, b []byte, recs map[string]arrival) int {
	used := 0
	for {
		i := bytes.IndexByte(b[used:], '\n')
		if i < 0 {
			return used
		}
		line := string(b[used : used+i])
		used += i + 1
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == arrivalsBelow {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				a.below = max(a.below, n)
			}
			continue
		}
		if len(f) != 4 {
			continue
		}
		if f[0] == arrivalsClock {
			wall, err1 := strconv.ParseInt(f[1], 10, 64)
			boot, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 == nil && err2 == nil {
				a.clocks++
				a.clock = Stamp{Wall: wall, Boot: boot, BootID: f[3]}
			}
			continue
		}
		n, err1 := strconv.ParseUint(f[0], 10, 64)
		ms, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || !strings.HasPrefix(f[1], "sha256:") {
			continue
		}
		r := arrival{n, ms, f[3], a.clocks}
		recs[f[1]] = r
		if n > a.Last {
			a.Last = n
		}
		if n >= a.latest[f[3]].n {
			a.latest[f[3]] = r
		}
	}
}

// loadArrivals reads the log at path (nil when there is none).
func Load(path string) (*Log, error) {
	rd, _, err := Read(path)
	if rd == nil || err != nil {
		return nil, err
	}
	rd.Log.Sighting = rd.Log.sightings()
	return rd.Log, nil
}

// Below returns the highest arrival number of an entry this log numbered that a view
// cannot serve from a cursor: the highest a compaction dropped (Compact: entries at or
// below an owner's checkpoint's cut), and among the lines still logged the highest up
// to Complete whose entry held reports the view does not hold (read from the cut, the
// view lacks those at or below it). A cursor below it is compacted: what changed after
// it may be in entries the view does not hold (docs/format.md §21 "Compacted cursors").
func (a *Log) Below(held func(hash string) bool) uint64 {
	out, upTo := a.below, a.Complete()
	a.recs.All(func(h string, r arrival) {
		if r.n <= upTo && r.n > out && !held(h) {
			out = r.n
		}
	})
	return out
}

// Compacts reports whether a cursor at arrival number n is below what a view reading
// snap can serve (Below, with snap's entries and fork losers held).
func (a *Log) Compacts(n uint64, snap *ledger.Snapshot) bool {
	if n >= a.Last {
		return false
	}
	held := make(map[string]bool, len(snap.Entries))
	for i := range snap.Entries {
		held[snap.Entries[i].Hash()] = true
	}
	for _, f := range snap.Forks {
		for i := range f.Losers {
			held[f.Losers[i].Hash()] = true
		}
	}
	return n < a.Below(func(h string) bool { return held[h] })
}

// Cursor returns an opaque token naming the arrival number up to which this view
// holds everything (Complete): a catch-up or watch going on from it misses nothing, even
// an entry another process logged while this view's Load was reading the segments
// without it (every message delivered).
func (a *Log) Cursor() string { return fmt.Sprintf("%s.%d", a.LogID, a.Complete()) }

// Complete returns the highest arrival number up to which the view holds every entry the
// log numbers: Last, or less when another process logged entries while the view's
// Load read the segments, and that reading missed them (they are new to the next
// Load). Entries of the view numbered above Seen may be reported again from a cursor
// at Seen — a repeat, never a loss.
func (a *Log) Complete() uint64 {
	if a.missed && a.missedAt < a.Last {
		return a.missedAt
	}
	return a.Last
}

// FromHere reports whether cur is a cursor of this log (one a view of this channel
// directory handed out since the log began): a cursor from another machine, another
// copy of the channel, or a log rebuilt since is not (docs/design.md §2 "The local
// arrival log, cursors and sightings").
func (a *Log) FromHere(cur string) bool {
	_, ok := a.ParseCursor(cur)
	return ok
}

// ParseCursor returns the arrival number a cursor names, or ok=false when the cursor is
// from another machine, a lost log, or malformed: callers then fall back to a bounded
// digest, never an error (docs/design.md §2).
func (a *Log) ParseCursor(cur string) (uint64, bool) {
	id, num, found := strings.Cut(cur, ".")
	if !found || id != a.LogID {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > a.Last {
		return 0, false
	}
	return n, true
}

// Compact rewrites the log at path without the lines of the entries at or below the
// cut of the owner's checkpoint of epoch (docs/format.md §20 "Reading from the cut"):
// it keeps the log id and the arrival number of every line it keeps, every clock line,
// the lines of the entries keep names (those read above the cut), every line numbered
// above upTo, each writer's newest line and the highest-numbered one (sightings, Last
// and every cursor stay good), and marks the header with epoch. upTo is the Complete of
// a reading from the cut: it holds every entry the log numbers up to upTo, so a line
// up to it that names none of its records is of a record at or below the cut. It does nothing, and reports 0, when the log is missing,
// already compacted at epoch or later, or would drop fewer than minDrop lines (fewer are
// not worth a rewrite).
// Under arrivals.lock; the new log is written to a temp file, fsync'd and renamed over
// the old one (fsutil.WriteFile). A process holding the old log reads the new one
// whole at its next Load and numbers only what it had not read (Ingest).
func Compact(lockDir, path string, epoch, minDrop int, upTo uint64, keep func(hash string) bool) (int, error) {
	lk := flock.New(filepath.Join(lockDir, "arrivals.lock"))
	if err := lk.Lock(); err != nil {
		return 0, fmt.Errorf("locking arrival log: %w", err)
	}
	defer lk.Unlock()
	rd, _, err := Read(path)
	if rd == nil || err != nil || rd.Log.Compacted >= epoch {
		return 0, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	newest := map[uint64]bool{rd.Log.Last: true}
	for _, r := range rd.Log.latest {
		newest[r.n] = true
	}
	body := raw[len(rd.header):rd.offset]
	var kept []byte
	dropped, below := 0, rd.Log.below
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		line := body[:i+1]
		body = body[i+1:]
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == arrivalsBelow {
			continue // written again below, as the highest
		}
		if len(f) == 4 && f[0] != arrivalsClock {
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err == nil && n <= upTo && !keep(f[1]) && !newest[n] {
				dropped++
				below = max(below, n)
				continue
			}
		}
		kept = append(kept, line...)
	}
	if dropped < minDrop {
		return 0, nil
	}
	out := fmt.Appendf(nil, "%s%s%s%d\n%s %d\n", compactedHeader, rd.Log.LogID, compactedMark, epoch, arrivalsBelow, below)
	out = append(out, kept...)
	if err := fsutil.WriteFile(path, out, 0o644); err != nil {
		return 0, fmt.Errorf("rewriting the arrival log: %w", err)
	}
	return dropped, nil
}
