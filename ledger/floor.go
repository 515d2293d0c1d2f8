package ledger

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
)

// Floor is where the reading of one (writer, device) chain starts (docs/format.md §20,
// "Reading from the cut"): the owner's checkpoint's cut point for that segment, the
// entry of hash Hash at seq Seq whose line ends at byte Offset of the segment's own file
// ledger/<writer>/<device>.jsonl. Records at or below Seq are not part of a reading with
// floors; the first record above names Hash as its prev.
type Floor struct {
	Writer, Device string
	Seq            uint64
	Hash           string
	// Offset is a hint, never trusted: the line ending there must hash to Hash, or the
	// file is read from its start. 0 reads the file from its start (the cut's entry
	// came from a conflict copy).
	Offset int64
}

// floorLineMax bounds how far before a floor's offset a reader looks for the start of
// the floor's line; a longer line makes the file read from its start.
const floorLineMax = 16 << 20

// SetFloors makes every later ReadIncremental with s read from floors: each named
// chain's records at or below its floor's seq are left out — from the segment's own file
// by starting to read past the floor's offset once the line ending there hashes to the
// floor's hash, and from conflict copies and whole reads by dropping them — and its
// first record above must name the floor's hash as prev (else KindBrokenChain). A chain
// whose floor's entry is in no file read, and whose first record above does not name
// it, is reported as KindCutMissing. A remembered
// file read from below its floor is read again from the floor, so s keeps no records at
// or below a floor. Floors replace those set before; nil reads everything again.
func (s *ReadState) SetFloors(floors []Floor) {
	m := make(map[segKey]Floor, len(floors))
	for _, f := range floors {
		m[segKey{f.Writer, f.Device}] = f
	}
	s.floors = m
	s.last = nil // the fast path's tips came from another reading
}

// Floors returns the floors set by SetFloors, sorted by writer and device (nil when
// none).
func (s *ReadState) Floors() []Floor {
	var out []Floor
	for _, f := range s.floors {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Floor) int {
		return cmp.Or(cmp.Compare(a.Writer, b.Writer), cmp.Compare(a.Device, b.Device))
	})
	return out
}

// floorOf returns the floor of the segment file rel when rel is one of a chain's own
// files (ledger/<writer>/<device>.jsonl or an epoch file <device>.<epoch>.jsonl,
// ParseSegmentName) and a floor with an offset names that chain.
func (s *ReadState) floorOf(rel string) (Floor, bool) {
	if len(s.floors) == 0 {
		return Floor{}, false
	}
	dir, name := path.Split(rel)
	writer := path.Base(dir)
	device, _, ok := ParseSegmentName(name)
	if !ok || path.Clean(dir) != path.Join(ledgerDirName, writer) {
		return Floor{}, false
	}
	f, ok := s.floors[segKey{writer, device}]
	return f, ok && f.Offset > 0
}

// floorState returns the state of file read up to fl's offset when the line ending
// there is fl's entry: its identity and last line are that line, its running hash
// covers that line only, and it holds no record. It returns nil when the file is
// shorter, the byte before the offset is not a newline, the line is longer than
// floorLineMax, or it is not fl's entry (writer, device, seq and hash).
func floorState(file *os.File, fl Floor) *segState {
	fi, err := file.Stat()
	if err != nil || fi.Size() < fl.Offset {
		return nil
	}
	start, line := lineBefore(file, fl.Offset)
	if line == nil {
		return nil
	}
	e, err := parseLine(line[:len(line)-1])
	if err != nil || e.Hash() != fl.Hash || e.Writer != fl.Writer || e.Device != fl.Device || e.Seq != fl.Seq {
		return nil
	}
	sum := sha256.Sum256(line)
	h := sha256.New()
	h.Write(line)
	g := &segState{from: start, firstLen: int64(len(line)), firstHash: sum, offset: fl.Offset,
		lastStart: start, lastHash: sum, floor: true}
	g.sum, _ = h.(encoding.BinaryMarshaler).MarshalBinary()
	return g
}

// belowState returns the state of one of fl's chain's own files that holds nothing
// above fl, left unread: its last line is an entry of fl's chain at a seq below
// fl.Seq. A chain's files hold its records in seq order, each file after the one of
// the epoch before (docs/format.md §21), so every line before the last one is below fl
// too: a frozen file of an older epoch costs one line's read, whatever its size. Its
// identity is that line, checked again by the next reading. It returns nil, and the
// file is read, when the file does not end in such a line.
func belowState(file *os.File, fl Floor) *segState {
	fi, err := file.Stat()
	if err != nil || fi.Size() == 0 {
		return nil
	}
	start, line := lineBefore(file, fi.Size())
	if line == nil {
		return nil
	}
	e, err := parseLine(line[:len(line)-1])
	if err != nil || e.Writer != fl.Writer || e.Device != fl.Device || e.Seq >= fl.Seq {
		return nil
	}
	sum := sha256.Sum256(line)
	h := sha256.New()
	h.Write(line)
	g := &segState{from: start, firstLen: int64(len(line)), firstHash: sum, offset: fi.Size(),
		lastStart: start, lastHash: sum, below: true}
	g.sum, _ = h.(encoding.BinaryMarshaler).MarshalBinary()
	return g
}

// lineBefore returns the line (with its '\n') that ends at byte end of file and its
// start offset, or nil when the byte before end is not '\n' or the line is longer than
// floorLineMax.
func lineBefore(file *os.File, end int64) (int64, []byte) {
	if end <= 0 {
		return 0, nil
	}
	const step = 64 << 10
	last := make([]byte, 1)
	if _, err := file.ReadAt(last, end-1); err != nil || last[0] != '\n' {
		return 0, nil
	}
	start, lo := int64(-1), end-1 // the line's start; lo: what is searched lies below
	for start < 0 {
		if lo == 0 {
			start = 0
			break
		}
		if end-lo >= floorLineMax {
			return 0, nil
		}
		n := min(int64(step), lo)
		chunk := make([]byte, n)
		if _, err := file.ReadAt(chunk, lo-n); err != nil && err != io.EOF {
			return 0, nil
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			start = lo - n + int64(i) + 1
		}
		lo -= n
	}
	line := make([]byte, end-start)
	if _, err := file.ReadAt(line, start); err != nil && err != io.EOF {
		return 0, nil
	}
	return start, line
}

// cutMissing is the problem of a floor whose entry no file read holds.
func cutMissing(fl Floor) Problem {
	return Problem{Path: path.Join(ledgerDirName, fl.Writer, fl.Device+segmentExt), Kind: KindCutMissing,
		Writer: fl.Writer, Device: fl.Device, Seq: fl.Seq,
		Detail: fmt.Sprintf("the owner's checkpoint's cut names seq %d (%s) ending at byte %d, and no file holds it", fl.Seq, fl.Hash, fl.Offset)}
}

// AttestedEntry is an entry known only by an owner's checkpoint's cut: its writer,
// device, seq and hash, with no data and no signature. It stands as a chain's tip when
// the chain's last record is at or below the cut and left the reading.
func AttestedEntry(writer, device string, seq uint64, hash string) Entry {
	return Entry{Writer: writer, Device: device, Seq: seq, hash: hash}
}

// AnchorCut returns probs without the seq gaps that a reading not started from floors
// reports where the records at or below a floor are not in the folder (docs/format.md
// §21 "Records at or below a cut"): for a chain with a floor, a KindBrokenChain
// problem of a record at or below the floor's seq + 1 whose predecessor seq entries
// lack is dropped when the chain is anchored to the floor — entries (the reading's
// kept records) hold the floor's entry, or the chain's record at the floor's seq + 1
// names the floor's hash as prev. A broken prev link, and any gap above the floor,
// stay. probs is not modified; the result may share its backing array.
func AnchorCut(probs []Problem, entries []Entry, floors []Floor) []Problem {
	if len(floors) == 0 {
		return probs
	}
	fl := make(map[segKey]Floor, len(floors))
	for _, f := range floors {
		fl[segKey{f.Writer, f.Device}] = f
	}
	type chain struct {
		seqs     map[uint64]bool
		anchored bool
	}
	chains := map[segKey]*chain{}
	for i := range probs {
		p := &probs[i]
		k := segKey{p.Writer, p.Device}
		if _, ok := fl[k]; ok && p.Kind == KindBrokenChain && chains[k] == nil {
			chains[k] = &chain{seqs: map[uint64]bool{}}
		}
	}
	if len(chains) == 0 {
		return probs
	}
	for i := range entries {
		e := &entries[i]
		k := segKey{e.Writer, e.Device}
		c := chains[k]
		if c == nil {
			continue
		}
		c.seqs[e.Seq] = true
		f := fl[k]
		if (e.Seq == f.Seq && e.Hash() == f.Hash) || (e.Seq == f.Seq+1 && e.Prev == f.Hash) {
			c.anchored = true
		}
	}
	out := make([]Problem, 0, len(probs))
	for _, p := range probs {
		k := segKey{p.Writer, p.Device}
		if c := chains[k]; c != nil && c.anchored && p.Kind == KindBrokenChain && p.Seq <= fl[k].Seq+1 && p.Seq > 1 && !c.seqs[p.Seq-1] {
			continue
		}
		out = append(out, p)
	}
	return out
}
