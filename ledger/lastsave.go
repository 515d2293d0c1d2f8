package ledger

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

// Saving the last snapshot (a new process catches up in O(new entries)).
//
// ReadIncremental's fast path extends the snapshot it returned last by the records
// appended since. A process that opens a saved ReadState has no last snapshot, so its
// first read merges every record again. SaveLast writes the last snapshot as
// references to the state's own records — per file its path, record and problem
// counts and the hash of its last record then; per entry its file and record index —
// and RestoreLast rebuilds it from a state replayed from saved chunks, so that the
// first read of a new process takes the fast path too. Records that chunks applied
// after the saved snapshot ('A' chunks) are what that read adds.
//
// Encoding (uvarints, strings as a uvarint length and the bytes):
//
//	files: count, then per file path, nrec, nprob, hash of record nrec-1 ("" when 0)
//	entries: count, then per entry file index and record index
//	forks: count, then per fork the winner's and each loser's (file, record) index
//	chain problems: the JSON of []Problem
//	chain tips: count, then per chain writer, device, seq and hash of its last record

// Last returns the snapshot the last unverified ReadIncremental returned (or
// RestoreLast restored), nil when there is none: the one SaveLast would save.
func (s *ReadState) Last() *Snapshot {
	if s.last == nil {
		return nil
	}
	return s.last.snap
}

// SaveLast returns the last snapshot an unverified ReadIncremental returned, encoded
// for RestoreLast, or nil when there is none (none read yet, or the last read was
// verified, or something since made the next read merge everything).
func (s *ReadState) SaveLast() []byte {
	lr := s.last
	if lr == nil {
		return nil
	}
	paths := make([]string, 0, len(lr.nrec))
	for p := range lr.nrec {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	type ref struct{ file, rec int }
	at := map[string]ref{}
	b := binary.AppendUvarint(nil, uint64(len(paths)))
	for fi, p := range paths {
		g, n := s.segs[p], lr.nrec[p]
		if g == nil || len(g.records) < n {
			return nil
		}
		for ri := range n {
			if h := g.records[ri].e.Hash(); h != "" {
				if _, dup := at[h]; !dup {
					at[h] = ref{fi, ri}
				}
			}
		}
		last := ""
		if n > 0 {
			last = g.records[n-1].e.Hash()
		}
		b = appendStr(b, p)
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(lr.nprob[p]))
		b = appendStr(b, last)
	}
	put := func(e *Entry) bool {
		r, ok := at[e.Hash()]
		b = binary.AppendUvarint(b, uint64(r.file))
		b = binary.AppendUvarint(b, uint64(r.rec))
		return ok
	}
	b = binary.AppendUvarint(b, uint64(len(lr.snap.Entries)))
	for i := range lr.snap.Entries {
		if !put(&lr.snap.Entries[i]) {
			return nil
		}
	}
	b = binary.AppendUvarint(b, uint64(len(lr.snap.Forks)))
	for i := range lr.snap.Forks {
		f := &lr.snap.Forks[i]
		if !put(&f.Winner) {
			return nil
		}
		b = binary.AppendUvarint(b, uint64(len(f.Losers)))
		for j := range f.Losers {
			if !put(&f.Losers[j]) {
				return nil
			}
		}
	}
	probs, err := json.Marshal(lr.chainProbs)
	if err != nil {
		return nil
	}
	b = appendStr(b, string(probs))
	// The chain tips, so a restore need not go over every entry for them.
	tips := make([]segKey, 0, len(lr.tips))
	for k := range lr.tips {
		tips = append(tips, k)
	}
	slices.SortFunc(tips, func(x, y segKey) int { return cmp.Or(cmp.Compare(x.writer, y.writer), cmp.Compare(x.device, y.device)) })
	b = binary.AppendUvarint(b, uint64(len(tips)))
	for _, k := range tips {
		b = appendStr(b, k.writer)
		b = appendStr(b, k.device)
		b = binary.AppendUvarint(b, lr.tips[k].seq)
		b = appendStr(b, lr.tips[k].hash)
	}
	return b
}

// RestoreLast makes the snapshot SaveLast encoded the last one of s again, so the
// next ReadIncremental extends it by what was appended since. Call it after applying
// the chunks saved with it (and any saved later). It returns the snapshot, or
// ErrChunk (wrapped) — leaving s without a last snapshot, so the next read merges
// everything — when the bytes do not decode or do not match s: a file it names is
// missing, holds fewer records, or its record at the saved count has another hash
// (the segment was read again from its start since).
func (s *ReadState) RestoreLast(b []byte) (*Snapshot, error) {
	s.last = nil
	d := decoder{b: b}
	nfile := d.uint()
	if nfile > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d files in %d bytes", ErrChunk, nfile, len(d.b))
	}
	lr := &lastRead{tips: map[segKey]chainTip{}, nprob: make(map[string]int, nfile), nrec: make(map[string]int, nfile)}
	recs := make([][]record, 0, nfile)
	for range nfile {
		p, n, np, last := d.str(), int(d.uint()), int(d.uint()), d.str()
		if d.err != nil {
			return nil, fmt.Errorf("%w: saved snapshot files", ErrChunk)
		}
		g := s.segs[p]
		if g == nil || len(g.records) < n || len(g.problems) < np || (n > 0 && g.records[n-1].e.Hash() != last) || (n == 0 && last != "") {
			return nil, fmt.Errorf("%w: saved snapshot does not match %s", ErrChunk, p)
		}
		lr.nrec[p], lr.nprob[p] = n, np
		recs = append(recs, g.records[:n])
	}
	get := func() (Entry, bool) {
		fi, ri := d.uint(), d.uint()
		if d.err != nil || fi >= uint64(len(recs)) || ri >= uint64(len(recs[fi])) {
			return Entry{}, false
		}
		return recs[fi][ri].e, true
	}
	nent := d.uint()
	if nent > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrChunk, nent, len(d.b))
	}
	snap := &Snapshot{Entries: make([]Entry, 0, nent), Forks: []Fork{}}
	for range nent {
		e, ok := get()
		if !ok {
			return nil, fmt.Errorf("%w: saved snapshot entry", ErrChunk)
		}
		snap.Entries = append(snap.Entries, e)
	}
	nfork := d.uint()
	if nfork > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d forks in %d bytes", ErrChunk, nfork, len(d.b))
	}
	for range nfork {
		w, ok := get()
		nl := d.uint()
		if !ok || nl > uint64(len(d.b)) {
			return nil, fmt.Errorf("%w: saved snapshot fork", ErrChunk)
		}
		f := Fork{Writer: w.Writer, Device: w.Device, Seq: w.Seq, Winner: w}
		for range nl {
			l, ok := get()
			if !ok {
				return nil, fmt.Errorf("%w: saved snapshot fork", ErrChunk)
			}
			f.Losers = append(f.Losers, l)
		}
		snap.Forks = append(snap.Forks, f)
	}
	probs := d.bytes(int(d.uint()))
	if d.err != nil || json.Unmarshal(probs, &lr.chainProbs) != nil {
		return nil, fmt.Errorf("%w: saved snapshot problems", ErrChunk)
	}
	ntip := d.uint()
	if ntip > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d chain tips in %d bytes", ErrChunk, ntip, len(d.b))
	}
	for range ntip {
		k := segKey{d.str(), d.str()}
		lr.tips[k] = chainTip{d.uint(), d.str()}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, fmt.Errorf("%w: saved snapshot chain tips", ErrChunk)
	}
	// Merged order, one entry per (writer, device, seq): HLC text is fixed-width, so
	// comparing it as text is comparing the clocks.
	for i := 1; i < len(snap.Entries); i++ {
		if compareEntries(snap.Entries[i-1], snap.Entries[i]) >= 0 {
			return nil, fmt.Errorf("%w: saved snapshot is not in merged order", ErrChunk)
		}
	}
	if n := len(snap.Entries); n > 0 {
		snap.MaxHLC, _ = ParseHLC(snap.Entries[n-1].HLC)
	}
	// Problems as a read would list them before torn tails: each file's malformed
	// lines, then the chain problems. The next read lists its own.
	paths := make([]string, 0, len(lr.nrec))
	for p := range lr.nrec {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	snap.Problems = []Problem{}
	for _, p := range paths {
		snap.Problems = append(snap.Problems, s.segs[p].problems[:lr.nprob[p]]...)
	}
	snap.Problems = append(snap.Problems, lr.chainProbs...)
	// The floors the saved reading started from are the ones set now: a caller that
	// restores a reading from floors sets them first (SetFloors drops the last snapshot).
	snap.Floors = s.Floors()
	lr.snap = snap
	s.last = lr
	return snap, nil
}
