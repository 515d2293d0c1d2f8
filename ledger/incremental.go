package ledger

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
)

// ReadState is what an incremental reader remembers of each segment file between
// reads (docs/format.md §18): the file's identity (the hash of its first complete
// line), the byte offset just past its last complete line, that line's start and
// hash, the number of lines before the offset, and the records and malformed-line
// problems found before the offset. ReadIncremental reads only the bytes past each
// offset, after checking that the file still holds the same first and last line.
//
// A ReadState is not safe for concurrent use. Its zero value is not usable; make one
// with NewReadState. It can be saved as chunks (Chunks, TakeChanges) and restored
// (ApplyChunk), which is how fsbus keeps it in the local cache dir.
type ReadState struct {
	segs map[string]*segState // by slash-separated path relative to Root
	// dirty holds, per path changed since the last Chunks or TakeChanges, what the
	// saved copy holds of it.
	dirty map[string]mark
	stats ReadStats
	// last is the snapshot the previous unverified ReadIncremental returned, with what
	// the append-only fast path needs of it (catch-up in O(new entries)).
	last *lastRead
	// floors are where each named chain's reading starts (SetFloors).
	floors map[segKey]Floor
}

// lastRead is what ReadIncremental remembers of the snapshot it returned last.
type lastRead struct {
	snap       *Snapshot
	chainProbs []Problem           // the problems mergeResults found past the files' own
	tips       map[segKey]chainTip // the last kept record of each chain
	nprob      map[string]int      // malformed-line problems per file
	// nrec holds each file's record count when snap was taken: the records past it
	// are what the next read adds, whether this process read them or a saved state
	// applied them since (ApplyChunk 'A' chunks after RestoreLast).
	nrec map[string]int
}

// chainTip is a chain's last kept record: its seq and hash.
type chainTip struct {
	seq  uint64
	hash string
}

// ReadStats counts what the last ReadIncremental did.
type ReadStats struct {
	Files     int   // segment files listed
	Reset     int   // files read from their start again: new, truncated or replaced
	BytesRead int64 // bytes read past the remembered offsets (validation reads excluded)
	NewLines  int   // complete lines read
	// Appended reports that the snapshot extends the previous one by appends alone
	// (Snapshot.Added), merged without going over the earlier entries again.
	Appended bool
}

// mark is what a saved copy holds of a segment: its offset and how many records and
// problems; reset means it holds nothing usable (the segment started over or went).
type mark struct {
	offset      int64
	lastHash    [32]byte // the hash of the saved copy's last line
	nrec, nprob int
	reset       bool
}

// segState is one segment file's remembered reading.
type segState struct {
	// from is the offset of the first line read: 0, or the start of the floor's line
	// when floor is set (SetFloors).
	from int64
	// floor reports that the reading started at a floor: the line at from is the
	// floor's entry, checked by hash, and not one of records.
	floor bool
	// below reports that the file is one of a floored chain's own files wholly below
	// its floor (belowState): it was not read; the line at from is its last line, and
	// records is empty.
	below     bool
	firstLen  int64    // length of the first complete line read, with its '\n'; 0 when none
	firstHash [32]byte // sha256 of it
	offset    int64    // just past the last complete line read
	lastStart int64    // start of that line
	lastHash  [32]byte // sha256 of bytes [lastStart, offset)
	lines     int      // complete lines read past the first line of a floor, or from 0
	// sum is the sha256 state (encoding.BinaryMarshaler form) of bytes [from, offset):
	// CheckPrefixes compares it with the file, so a line changed in place between the
	// first and last one (same length, first and last line intact) is read again.
	sum      []byte
	records  []record
	problems []Problem // malformed lines before offset, in line order
}

// NewReadState returns an empty ReadState: the first ReadIncremental reads every file.
func NewReadState() *ReadState {
	return &ReadState{segs: map[string]*segState{}, dirty: map[string]mark{}}
}

// Stats returns what the last ReadIncremental did.
func (s *ReadState) Stats() ReadStats { return s.stats }

// Len returns the number of records remembered (every segment, duplicates included).
func (s *ReadState) Len() int {
	n := 0
	for _, g := range s.segs {
		n += len(g.records)
	}
	return n
}

// VerifyFunc checks e's signature against pub for the project; it may cache results
// by entry hash (the hash covers the signature, so a cached result never vouches for
// other bytes). Nil means Entry.VerifySig.
type VerifyFunc func(e *Entry, pub ed25519.PublicKey, project string) bool

// ReadIncremental is Read (keys == nil) or ReadVerified (keys != nil) that remembers
// each segment file in st and, on the next call with the same st, reads only the bytes
// past the last complete line it read. Before trusting what it remembers of a file it
// re-reads that file's first and last remembered lines and compares their hashes; a
// file that is shorter than the remembered offset, or whose lines differ (truncated,
// replaced, rewritten by a sync tool), is read again from its start. A file no longer
// listed is forgotten. The Snapshot is the one Read or ReadVerified would return for
// the same files — entries, forks and problems alike (TestIncrementalMatchesRead).
// verify replaces Entry.VerifySig when not nil. It returns the errors of Read, and an
// error when keys is set and Options.Project is empty; st is then unchanged for the
// files not yet read.
func (l *Ledger) ReadIncremental(st *ReadState, keys KeyFunc, verify VerifyFunc) (*Snapshot, error) {
	if keys != nil {
		if err := l.checkVerify(keys); err != nil {
			return nil, err
		}
	}
	files, err := l.listFiles()
	if err != nil {
		return nil, err
	}
	st.stats = ReadStats{Files: len(files)}
	listed := make(map[string]bool, len(files))
	for _, f := range files {
		listed[f.rel] = true
	}
	forgot := false
	for rel := range st.segs {
		if !listed[rel] {
			delete(st.segs, rel)
			st.dirty[rel] = mark{reset: true}
			forgot = true
		}
	}
	before := make([]int, len(files)) // records of each file before reading on
	for i, f := range files {
		if g := st.segs[f.rel]; g != nil {
			before[i] = len(g.records)
		} else {
			before[i] = -1
		}
	}
	tails, resets, err := st.readAll(files)
	if err != nil {
		return nil, err
	}
	restarted := false // a file known before was read from its start again
	for i := range files {
		restarted = restarted || (resets[i] && before[i] >= 0)
	}
	if keys == nil && !forgot && !restarted && st.last != nil {
		if snap := st.appended(files, tails); snap != nil {
			return snap, nil
		}
	}
	results := make([]segResult, len(files))
	nfile := 0
	var held map[segKey]bool // chains whose floor's entry a file read from it holds
	for i, f := range files {
		g := st.segs[f.rel]
		if g.floor {
			if fl, ok := st.floorOf(f.rel); ok {
				if held == nil {
					held = map[segKey]bool{}
				}
				held[segKey{fl.Writer, fl.Device}] = true
			}
		}
		res := segResult{records: g.records, problems: g.problems}
		if tails[i] != nil {
			res.problems = append(slices.Clip(res.problems), *tails[i])
		}
		nfile += len(res.problems)
		results[i] = res
	}
	snap := mergeResults(results, keys, l.opts.Project, verify, st.floors, held)
	st.last = nil
	if keys == nil {
		st.remember(snap, files, nfile)
	}
	return snap, nil
}

// remember keeps what the fast path of the next ReadIncremental needs of snap: each
// chain's tip, the chain problems and each file's malformed-line count. nfile is the
// number of snap.Problems that came from the files (mergeResults puts them first).
func (st *ReadState) remember(snap *Snapshot, files []segFile, nfile int) {
	lr := &lastRead{snap: snap, chainProbs: slices.Clone(snap.Problems[nfile:]),
		tips: map[segKey]chainTip{}, nprob: make(map[string]int, len(files)), nrec: make(map[string]int, len(files))}
	for i := range snap.Entries {
		e := &snap.Entries[i]
		k := segKey{e.Writer, e.Device}
		if t, ok := lr.tips[k]; !ok || e.Seq > t.seq {
			lr.tips[k] = chainTip{e.Seq, e.Hash()}
		}
	}
	for _, f := range files {
		lr.nprob[f.rel] = len(st.segs[f.rel].problems)
		lr.nrec[f.rel] = len(st.segs[f.rel].records)
	}
	st.last = lr
}

// appended is the fast path of ReadIncremental: when every file only grew
// or is new, no new line is malformed, and each new record continues its chain (seq one past the
// chain's tip and prev naming the tip's hash, or seq 1 of a new chain), the snapshot
// is the last one plus the new records, merged without going over the earlier
// entries. It returns nil when any of that does not hold (a duplicate, a fork, a gap):
// the caller then merges everything, which gives the same snapshot.
func (st *ReadState) appended(files []segFile, tails []*Problem) *Snapshot {
	lr := st.last
	added := []Entry{} // not nil: nil means "merged from scratch"
	for _, f := range files {
		g := st.segs[f.rel]
		from, known := lr.nrec[f.rel]
		n := lr.nprob[f.rel]
		if !known { // a new file: every record is new
			from, n = 0, 0
		}
		if len(g.problems) != n || len(g.records) < from {
			return nil
		}
		for _, r := range g.records[from:] {
			added = append(added, r.e)
		}
	}
	// Chain continuity, per chain in seq order.
	slices.SortFunc(added, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Writer, b.Writer), cmp.Compare(a.Device, b.Device), cmp.Compare(a.Seq, b.Seq))
	})
	tips := map[segKey]chainTip{}
	for i := range added {
		e := &added[i]
		k := segKey{e.Writer, e.Device}
		t, ok := tips[k]
		if !ok {
			t, ok = lr.tips[k]
		}
		if fl, floored := st.floors[k]; !ok && floored {
			t, ok = chainTip{fl.Seq, fl.Hash}, true
		}
		switch {
		case !ok && e.Seq == 1 && e.Prev == "":
		case ok && e.Seq == t.seq+1 && e.Prev == t.hash:
		default:
			return nil
		}
		tips[k] = chainTip{e.Seq, e.Hash()}
	}
	slices.SortFunc(added, compareEntries)
	base := lr.snap
	snap := &Snapshot{Forks: base.Forks, Floors: base.Floors, Below: base.Below, Added: added, Base: base, MaxHLC: base.MaxHLC}
	if len(added) == 0 {
		snap.Entries = base.Entries
	} else if n := len(base.Entries); n == 0 || compareEntries(base.Entries[n-1], added[0]) < 0 {
		// Past every earlier entry: append. The backing array may be shared with base,
		// which never looks past its own length.
		snap.Entries = append(base.Entries, added...)
	} else {
		snap.Entries = mergeSorted(base.Entries, added)
	}
	if n := len(snap.Entries); n > 0 {
		snap.MaxHLC, _ = ParseHLC(snap.Entries[n-1].HLC)
	}
	snap.Problems = []Problem{}
	for i, f := range files {
		snap.Problems = append(snap.Problems, st.segs[f.rel].problems...)
		if tails[i] != nil {
			snap.Problems = append(snap.Problems, *tails[i])
		}
	}
	snap.Problems = append(snap.Problems, lr.chainProbs...)
	for k, t := range tips {
		lr.tips[k] = t
	}
	clear(lr.nrec)
	for _, f := range files {
		lr.nprob[f.rel] = len(st.segs[f.rel].problems)
		lr.nrec[f.rel] = len(st.segs[f.rel].records)
	}
	lr.snap = snap
	st.stats.Appended = true
	return snap
}

// mergeSorted merges two slices sorted by compareEntries into a new one.
func mergeSorted(a, b []Entry) []Entry {
	out := make([]Entry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if compareEntries(a[i], b[j]) <= 0 {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// readAll brings every file's state up to date, concurrently, and returns each file's
// torn-tail problem (nil when its reading ended cleanly).
func (st *ReadState) readAll(files []segFile) ([]*Problem, []bool, error) {
	type out struct {
		g     *segState
		reset bool
		torn  *Problem
		n     int64
		lines int
		err   error
	}
	outs := make([]out, len(files))
	work := func(i int) {
		f := files[i]
		var fl *Floor
		if v, ok := st.floorOf(f.rel); ok {
			fl = &v
		}
		g, reset, torn, n, lines, err := advance(f, st.segs[f.rel], fl)
		outs[i] = out{g, reset, torn, n, lines, err}
	}
	workers := min(runtime.GOMAXPROCS(0), len(files))
	if workers <= 1 {
		for i := range files {
			work(i)
		}
	} else {
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range next {
					work(i)
				}
			})
		}
		for i := range files {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	tails := make([]*Problem, len(files))
	resets := make([]bool, len(files))
	for i, f := range files {
		o := outs[i]
		if o.err != nil {
			return nil, nil, o.err
		}
		resets[i] = o.reset
		old := st.segs[f.rel]
		st.segs[f.rel] = o.g
		switch {
		case o.reset:
			st.stats.Reset++
			st.dirty[f.rel] = mark{reset: true}
		case o.lines > 0:
			if _, ok := st.dirty[f.rel]; !ok {
				st.dirty[f.rel] = mark{offset: old.offset, lastHash: old.lastHash, nrec: len(old.records), nprob: len(old.problems)}
			}
		}
		st.stats.BytesRead += o.n
		st.stats.NewLines += o.lines
		tails[i] = o.torn
	}
	return tails, resets, nil
}

// advance reads file f past what g remembers (from its start when g is nil or no
// longer matches the file; from fl, when not nil, once the line ending at its offset is
// its entry and g did not start there) and returns the new state, whether it started
// over, the torn-tail problem, the bytes read and the complete lines read. g is not
// modified.
func advance(f segFile, g *segState, fl *Floor) (ng *segState, reset bool, torn *Problem, n int64, lines int, err error) {
	file, err := os.Open(f.abs)
	if errors.Is(err, fs.ErrNotExist) {
		return &segState{}, g != nil, nil, 0, 0, nil
	}
	if err != nil {
		return nil, false, nil, 0, 0, fmt.Errorf("reading %s: %w", f.abs, err)
	}
	defer file.Close()
	if fl != nil && (g == nil || !g.floor || g.from+g.firstLen != fl.Offset) {
		if fg := floorState(file, *fl); fg != nil {
			g, reset = fg, true // read past the floor; what g held below it is dropped
		} else if bg := belowState(file, *fl); bg != nil {
			same := g != nil && g.below && g.offset == bg.offset && g.lastHash == bg.lastHash
			return bg, !same, nil, bg.offset - bg.from, 0, nil
		} else if g != nil && (g.floor || g.below) {
			g = nil // started at another floor, and this one does not check: read it whole
		}
	} else if fl == nil && g != nil && (g.floor || g.below) {
		g = nil // started at a floor no longer set: read it whole
	}
	if g != nil && (!g.matches(file) || (g.sum == nil && g.offset > 0)) {
		g = nil // changed, or remembered without its running hash: read it whole
	}
	if g == nil {
		g, reset = &segState{}, true
	} else if !reset {
		c := *g
		c.records = slices.Clip(g.records)
		c.problems = slices.Clip(g.problems)
		g = &c
	}
	if _, err := file.Seek(g.offset, io.SeekStart); err != nil {
		return nil, false, nil, 0, 0, fmt.Errorf("reading %s: %w", f.abs, err)
	}
	// The running hash of every byte up to the offset (CheckPrefixes).
	h := sha256.New()
	if g.sum != nil {
		if h.(encoding.BinaryUnmarshaler).UnmarshalBinary(g.sum) != nil {
			h.Reset() // cannot happen for a state MarshalBinary made; CheckPrefixes then reads it again
		}
	}
	defer func() {
		if ng != nil {
			ng.sum, _ = h.(encoding.BinaryMarshaler).MarshalBinary()
		}
	}()
	// The loop mirrors readSegment line for line, so problems read the same.
	br := readBuffer(file, g.offset)
	var long []byte
	off := g.offset
	for lineNo := g.lines + 1; ; lineNo++ {
		line, rerr := readLine(br, &long)
		n += int64(len(line))
		if len(line) == 0 && rerr == io.EOF {
			break
		}
		if rerr != nil && rerr != io.EOF {
			return nil, false, nil, 0, 0, fmt.Errorf("reading %s: %w", f.abs, rerr)
		}
		if i := bytes.IndexByte(line, 0); i >= 0 {
			p, err := nulProblem(f.rel, lineNo, off+int64(i), line[i:], br)
			if err != nil {
				return nil, false, nil, 0, 0, fmt.Errorf("reading %s: %w", f.abs, err)
			}
			torn = &p
			break
		}
		if rerr == io.EOF {
			torn = &Problem{Path: f.rel, Line: lineNo, Kind: KindTorn,
				Detail: fmt.Sprintf("last line (%d bytes at offset %d) has no newline: not arrived yet", len(line), off)}
			break
		}
		h.Write(line)
		sum := sha256.Sum256(line)
		if off == 0 {
			g.firstLen, g.firstHash = int64(len(line)), sum
		}
		g.lastStart, g.lastHash = off, sum
		off += int64(len(line))
		g.offset, g.lines = off, lineNo
		lines++
		body := line[:len(line)-1]
		if len(bytes.TrimSpace(body)) == 0 {
			continue
		}
		e, perr := parseLine(body)
		if perr != nil {
			g.problems = append(g.problems, Problem{Path: f.rel, Line: lineNo, Kind: KindMalformed, Detail: perr.Error()})
			continue
		}
		g.records = append(g.records, record{e: e, path: f.rel, line: lineNo})
	}
	return g, reset, torn, n, lines, nil
}

// matches reports whether file still holds the first and last line g remembers at
// their offsets.
func (g *segState) matches(file *os.File) bool {
	if g.offset == 0 {
		return true
	}
	fi, err := file.Stat()
	if err != nil || fi.Size() < g.offset {
		return false
	}
	check := func(at, n int64, want [32]byte) bool {
		buf := make([]byte, n)
		if _, err := file.ReadAt(buf, at); err != nil {
			return false
		}
		return sha256.Sum256(buf) == want
	}
	return check(g.from, g.firstLen, g.firstHash) && check(g.lastStart, g.offset-g.lastStart, g.lastHash)
}

// mergeResults is the merge of Read and ReadVerified over per-file results in listing
// order, with verify for signature checks (nil: checkSig). Ledger.read and
// ReadIncremental both merge through it, so the two readings cannot differ.
//
// With floors (SetFloors), a floored chain's records at or below its floor are left
// out (the floor's own record marks the chain held), the chain is resolved from the
// floor's entry, and a chain that holds neither its floor's entry nor a first record
// above it naming that entry as prev gets a KindCutMissing problem; held names the
// chains a file read from its floor holds.
func mergeResults(results []segResult, keys KeyFunc, project string, verify VerifyFunc, floors map[segKey]Floor, held map[segKey]bool) *Snapshot {
	snap := &Snapshot{Entries: []Entry{}, Problems: []Problem{}, Forks: []Fork{}}
	chains := map[segKey]map[uint64][]*record{}
	seen := map[string]bool{}
	for _, res := range results {
		snap.Problems = append(snap.Problems, res.problems...)
		for i := range res.records {
			r := &res.records[i]
			h := r.e.Hash()
			if seen[h] {
				continue
			}
			seen[h] = true
			if fl, ok := floors[segKey{r.e.Writer, r.e.Device}]; ok && r.e.Seq <= fl.Seq {
				if r.e.Seq == fl.Seq && h == fl.Hash {
					if held == nil {
						held = map[segKey]bool{}
					}
					held[segKey{fl.Writer, fl.Device}] = true
				} else {
					snap.Below++
				}
				continue
			}
			if keys != nil && !checkSigWith(r, keys, project, verify, &snap.Problems) {
				continue
			}
			k := segKey{r.e.Writer, r.e.Device}
			if chains[k] == nil {
				chains[k] = map[uint64][]*record{}
			}
			chains[k][r.e.Seq] = append(chains[k][r.e.Seq], r)
		}
	}
	keysSorted := make([]segKey, 0, len(chains))
	for k := range chains {
		keysSorted = append(keysSorted, k)
	}
	slices.SortFunc(keysSorted, func(a, b segKey) int {
		return cmp.Or(cmp.Compare(a.writer, b.writer), cmp.Compare(a.device, b.device))
	})
	for _, k := range keysSorted {
		var fl *Floor
		if f, ok := floors[k]; ok {
			fl = &f
		}
		kept, forks, probs := resolve(k, chains[k], fl)
		if fl != nil && len(kept) > 0 && kept[0].e.Seq == fl.Seq+1 && kept[0].e.Prev == fl.Hash {
			// The first record above names the floor's entry: the chain holds it
			// although no file here does (its file left the folder, docs/format.md §21).
			if held == nil {
				held = map[segKey]bool{}
			}
			held[k] = true
		}
		for _, r := range kept {
			snap.Entries = append(snap.Entries, r.e)
		}
		snap.Forks = append(snap.Forks, forks...)
		snap.Problems = append(snap.Problems, probs...)
	}
	if len(floors) > 0 {
		snap.Floors = make([]Floor, 0, len(floors))
		for k, fl := range floors {
			snap.Floors = append(snap.Floors, fl)
			if !held[k] {
				snap.Problems = append(snap.Problems, cutMissing(fl))
			}
		}
		slices.SortFunc(snap.Floors, func(a, b Floor) int {
			return cmp.Or(cmp.Compare(a.Writer, b.Writer), cmp.Compare(a.Device, b.Device))
		})
	}
	slices.SortFunc(snap.Entries, compareEntries)
	if n := len(snap.Entries); n > 0 {
		snap.MaxHLC, _ = ParseHLC(snap.Entries[n-1].HLC)
	}
	return snap
}

// checkSigWith is checkSig with verify in place of Entry.VerifySig when not nil.
func checkSigWith(r *record, keys KeyFunc, project string, verify VerifyFunc, probs *[]Problem) bool {
	if verify == nil {
		return checkSig(r, keys, project, probs)
	}
	pub, ok := keys(&r.e)
	if !ok {
		*probs = append(*probs, chainProblem(r, KindUnknownKey, fmt.Sprintf("no key is bound to writer %s", r.e.Writer)))
		return true
	}
	if !verify(&r.e, pub, project) {
		// Same text as checkSig: the error VerifySig gives for this entry.
		err := r.e.VerifySig(pub, project)
		if err == nil {
			err = ErrBadSignature
		}
		*probs = append(*probs, chainProblem(r, KindBadSignature, fmt.Sprintf("entry %s: %v", r.e.Hash(), err)))
		return false
	}
	return true
}

// Chunk encoding. A chunk is one segment's state or a part of it, as bytes:
//
//	kind byte: 'S' (start: the segment's state replaces any earlier one) or 'A'
//	           (append: applies only when the segment's offset equals from)
//	path, from, fromHash (the last line's hash at from), firstLen, firstHash, offset, lastStart, lastHash, lines,
//	records: count, then per record line number, raw canonical line, hash text
//	problems: count, then per problem line number and detail (kind malformed)
//
// 'F' (forget) carries only the path. Integers are uvarints, strings and byte runs
// a uvarint length then the bytes.

// CheckPrefixes reads every remembered segment file from where its reading started (its
// start, or its floor's line) up to the offset read and compares the bytes' sha256 with the running hash kept while reading them.
// A file whose bytes differ — a line changed in place where the first and last line
// checks of ReadIncremental cannot see it — is forgotten, so the next ReadIncremental
// reads it whole again (and its changed records are verified again). It returns the
// slash paths forgotten. It reads every byte the state covers: callers run it when a
// process opens a saved state and now and then in a long-running one (fsbus: once a
// minute), not on every read. Files that cannot be opened are left to ReadIncremental.
func (s *ReadState) CheckPrefixes(root string) []string {
	var forgot []string
	for rel, g := range s.segs {
		if g.offset == 0 {
			continue
		}
		if !g.prefixMatches(filepath.Join(root, filepath.FromSlash(rel))) {
			delete(s.segs, rel)
			s.dirty[rel] = mark{reset: true}
			forgot = append(forgot, rel)
		}
	}
	if len(forgot) > 0 {
		s.last = nil
	}
	slices.Sort(forgot)
	return forgot
}

// prefixMatches reports whether the file at path still holds, in bytes [from, offset),
// what g's running hash covers (true when the file cannot be read: not this check's
// finding).
func (g *segState) prefixMatches(path string) bool {
	want := sha256.New()
	if g.sum == nil || want.(encoding.BinaryUnmarshaler).UnmarshalBinary(g.sum) != nil {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	got := sha256.New()
	if _, err := f.Seek(g.from, io.SeekStart); err != nil {
		return false
	}
	if _, err := io.CopyN(got, f, g.offset-g.from); err != nil {
		return false // shorter than the offset: changed
	}
	return bytes.Equal(got.Sum(nil), want.Sum(nil))
}

// Chunks returns the whole state as 'S' chunks, one per segment, sorted by path, and
// clears the change tracking.
func (s *ReadState) Chunks() [][]byte {
	paths := make([]string, 0, len(s.segs))
	for p := range s.segs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([][]byte, 0, len(paths))
	for _, p := range paths {
		out = append(out, encodeChunk('S', p, s.segs[p], mark{}))
	}
	clear(s.dirty)
	return out
}

// ClearChanges clears the change tracking: the saved copy holds all of s (a state
// just replayed from it).
func (s *ReadState) ClearChanges() { clear(s.dirty) }

// TakeChanges returns the chunks that bring a saved copy of the state (the chunks of
// earlier Chunks and TakeChanges calls) up to date with s, and clears the tracking.
func (s *ReadState) TakeChanges() [][]byte {
	paths := make([]string, 0, len(s.dirty))
	for p := range s.dirty {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var out [][]byte
	for _, p := range paths {
		m := s.dirty[p]
		g, ok := s.segs[p]
		switch {
		case !ok:
			out = append(out, encodeForget(p))
		case m.reset:
			out = append(out, encodeChunk('S', p, g, mark{}))
		default:
			out = append(out, encodeChunk('A', p, g, m))
		}
	}
	clear(s.dirty)
	return out
}

// ErrChunk is returned (wrapped) by ApplyChunk for bytes that are not a chunk.
var ErrChunk = errors.New("ledger: damaged read-state chunk")

// ApplyChunk replays one chunk of Chunks or TakeChanges into s. An 'A' chunk whose
// start does not meet the segment's current offset (written by another process from
// an older state) is skipped: the next ReadIncremental reads those bytes itself. It
// returns ErrChunk (wrapped) when the bytes do not decode; s is then unchanged.
// Records are trusted as they were read: the caller keeps chunks where only this
// machine writes and checks their integrity (fsbus checksums each chunk). The records
// share b's memory (their lines and strings): b must not be changed after the call.
func (s *ReadState) ApplyChunk(b []byte) error {
	d := decoder{b: b}
	kind := d.byte()
	path := d.str()
	if kind == 'F' {
		if d.err != nil || len(d.b) != 0 {
			return fmt.Errorf("%w: forget chunk", ErrChunk)
		}
		delete(s.segs, path)
		s.forgetLast(path)
		return nil
	}
	if kind != 'S' && kind != 'A' {
		return fmt.Errorf("%w: kind %q", ErrChunk, kind)
	}
	from := int64(d.uint())
	var fromHash [32]byte
	copy(fromHash[:], d.bytes(32))
	var g segState
	g.firstLen = int64(d.uint())
	copy(g.firstHash[:], d.bytes(32))
	g.offset = int64(d.uint())
	g.lastStart = int64(d.uint())
	copy(g.lastHash[:], d.bytes(32))
	g.lines = int(d.uint())
	g.from = int64(d.uint())
	switch d.byte() {
	case 0:
	case 1:
		g.floor = true
	case 2:
		g.below = true
	default:
		d.err = ErrChunk
	}
	if sum := d.bytes(int(d.uint())); len(sum) > 0 {
		g.sum = bytes.Clone(sum)
	}
	nrec := d.uint()
	if nrec > uint64(len(d.b)) {
		return fmt.Errorf("%w: %d records in %d bytes", ErrChunk, nrec, len(d.b))
	}
	g.records = make([]record, 0, nrec)
	for range nrec {
		line := int(d.uint())
		raw := d.bytes(int(d.uint()))
		hash := d.str()
		if d.err != nil {
			break
		}
		e, err := trustedEntry(raw, hash)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrChunk, err)
		}
		g.records = append(g.records, record{e: e, path: path, line: line})
	}
	nprob := d.uint()
	if nprob > uint64(len(d.b)) {
		return fmt.Errorf("%w: %d problems in %d bytes", ErrChunk, nprob, len(d.b))
	}
	for range nprob {
		line := int(d.uint())
		g.problems = append(g.problems, Problem{Path: path, Line: line, Kind: KindMalformed, Detail: d.str()})
	}
	if d.err != nil || len(d.b) != 0 {
		return fmt.Errorf("%w: %s chunk of %s", ErrChunk, string(kind), path)
	}
	if kind == 'A' {
		old, ok := s.segs[path]
		if !ok || old.offset != from || old.lastHash != fromHash {
			return nil
		}
		g.records = append(old.records, g.records...)
		g.problems = append(old.problems, g.problems...)
	} else {
		s.forgetLast(path) // the segment started over: the restored snapshot no longer holds
	}
	s.segs[path] = &g
	return nil
}

// forgetLast drops the restored last snapshot when it covers path: that segment was
// read again from its start since (an 'S' or 'F' chunk).
func (s *ReadState) forgetLast(path string) {
	if s.last != nil {
		if _, ok := s.last.nrec[path]; ok {
			s.last = nil
		}
	}
}

// trustedEntry rebuilds an entry from its canonical line and hash as a read recorded
// them, without canonicalizing or hashing again. Lines of the usual shape are decoded
// by parseTrusted, over raw's memory; others by unmarshalEntry, whose error it returns.
func trustedEntry(raw []byte, hash string) (Entry, error) {
	if e, ok := parseTrusted(raw); ok {
		e.hash = hash
		return e, nil
	}
	return unmarshalEntry(raw, hash)
}

// unmarshalEntry is trustedEntry by json.Unmarshal, for any line; it returns
// json.Unmarshal's error.
func unmarshalEntry(raw []byte, hash string) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return Entry{}, err
	}
	if string(e.Data) == "null" {
		e.Data = nil
	}
	e.raw, e.hash = raw, hash
	return e, nil
}

func encodeForget(path string) []byte {
	b := []byte{'F'}
	return appendStr(b, path)
}

// encodeChunk encodes g whole ('S'), or what it holds past m ('A').
func encodeChunk(kind byte, path string, g *segState, m mark) []byte {
	recs, probs := g.records[m.nrec:], g.problems[m.nprob:]
	b := []byte{kind}
	b = appendStr(b, path)
	b = binary.AppendUvarint(b, uint64(m.offset))
	b = append(b, m.lastHash[:]...)
	b = binary.AppendUvarint(b, uint64(g.firstLen))
	b = append(b, g.firstHash[:]...)
	b = binary.AppendUvarint(b, uint64(g.offset))
	b = binary.AppendUvarint(b, uint64(g.lastStart))
	b = append(b, g.lastHash[:]...)
	b = binary.AppendUvarint(b, uint64(g.lines))
	b = binary.AppendUvarint(b, uint64(g.from))
	switch {
	case g.floor:
		b = append(b, 1)
	case g.below:
		b = append(b, 2)
	default:
		b = append(b, 0)
	}
	b = appendStr(b, string(g.sum))
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(r.line))
		b = appendStr(b, string(r.e.raw))
		b = appendStr(b, r.e.Hash())
	}
	b = binary.AppendUvarint(b, uint64(len(probs)))
	for _, p := range probs {
		b = binary.AppendUvarint(b, uint64(p.Line))
		b = appendStr(b, p.Detail)
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads the chunk encoding; the first failure sticks in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrChunk
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = ErrChunk
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.err = ErrChunk
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) str() string { return string(d.bytes(int(d.uint()))) }
