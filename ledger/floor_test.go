package ledger

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// floorAt returns the floor of (writer, device) at entry e, with the offset LineEnd
// finds in the chain's own file.
func floorAt(root string, e Entry) Floor {
	return Floor{Writer: e.Writer, Device: e.Device, Seq: e.Seq, Hash: e.Hash(),
		Offset: LineEnd(SegmentPath(root, e.Writer, e.Device), e.Hash())}
}

// above returns the entries of a whole reading that a reading from floors keeps.
func above(es []Entry, floors []Floor) []string {
	var out []Entry
	for _, e := range es {
		keep := true
		for _, f := range floors {
			if f.Writer == e.Writer && f.Device == e.Device && e.Seq <= f.Seq {
				keep = false
			}
		}
		if keep {
			out = append(out, e)
		}
	}
	return hashes(out)
}

// TestFloorsReadOnlyAboveTheCut: with floors a reading parses no byte before each
// floor's offset, keeps what a whole reading keeps above the floors, goes on by appends
// through the fast path, and a saved and restored state holds only those records.
func TestFloorsReadOnlyAboveTheCut(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	a := appendN(t, l, "alpha", testDevice, "a", 40)
	b := appendN(t, l, "beta", testDevice, "b", 20)
	whole := mustRead(t, l)

	st := NewReadState()
	floors := []Floor{floorAt(root, a[29]), floorAt(root, b[9])}
	if floors[0].Offset == 0 || floors[1].Offset == 0 {
		t.Fatalf("LineEnd found no offset: %+v", floors)
	}
	st.SetFloors(floors)
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hashes(snap.Entries), above(whole.Entries, floors); !slices.Equal(got, want) {
		t.Fatalf("entries from the floors:\n got %d %v\nwant %d %v", len(got), got, len(want), want)
	}
	if len(snap.Problems) != 0 || len(snap.Floors) != 2 {
		t.Fatalf("problems %+v, floors %+v", snap.Problems, snap.Floors)
	}
	var past int64
	for _, f := range floors {
		fi, err := os.Stat(SegmentPath(root, f.Writer, f.Device))
		if err != nil {
			t.Fatal(err)
		}
		past += fi.Size() - f.Offset
	}
	if got := st.Stats().BytesRead; got != past {
		t.Errorf("read %d bytes, want the %d past the floors", got, past)
	}
	if st.Len() != 10+10 {
		t.Errorf("the state holds %d records, want the 20 above the floors", st.Len())
	}

	more := appendN(t, l, "alpha", testDevice, "a2", 3)
	snap, err = l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Stats().Appended || snap.Entries[len(snap.Entries)-1].Hash() != more[2].Hash() {
		t.Errorf("appends after the floor: fast path %v, %d entries", st.Stats().Appended, len(snap.Entries))
	}

	var saved [][]byte
	restored := reload(t, &saved, st, true)
	restored.SetFloors(floors)
	snap2, err := l.ReadIncremental(restored, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if restored.Stats().BytesRead != 0 || restored.Stats().Reset != 0 {
		t.Errorf("a restored floored state read again: %+v", restored.Stats())
	}
	if !slices.Equal(hashes(snap2.Entries), hashes(snap.Entries)) {
		t.Errorf("restored reading differs")
	}
}

// TestFloorsDropWhatWasReadBelow: a state that read whole files, given floors, reads
// each file again from its floor and keeps no record at or below it.
func TestFloorsDropWhatWasReadBelow(t *testing.T) {
	l := newTestLedger(t)
	a := appendN(t, l, "alpha", testDevice, "a", 30)
	st := NewReadState()
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	if st.Len() != 30 {
		t.Fatalf("whole reading holds %d records", st.Len())
	}
	st.SetFloors([]Floor{floorAt(l.opts.Root, a[24])})
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Len() != 5 || len(snap.Entries) != 5 || snap.Entries[0].Seq != 26 {
		t.Fatalf("after floors: %d records, %d entries", st.Len(), len(snap.Entries))
	}
	if st.Stats().Reset != 1 {
		t.Errorf("the file was not read again from its floor: %+v", st.Stats())
	}
}

// TestFloorsNeverTrustTheOffset: a floor whose offset is not the end of its entry's
// line reads the file whole and keeps the same entries; one whose entry no file holds
// is reported (KindCutMissing), and the chain above it is broken.
func TestFloorsNeverTrustTheOffset(t *testing.T) {
	l := newTestLedger(t)
	a := appendN(t, l, "alpha", testDevice, "a", 12)
	fl := floorAt(l.opts.Root, a[5])
	for name, bad := range map[string]Floor{
		"mid-line":      {Writer: fl.Writer, Device: fl.Device, Seq: fl.Seq, Hash: fl.Hash, Offset: fl.Offset - 7},
		"another entry": {Writer: fl.Writer, Device: fl.Device, Seq: fl.Seq, Hash: fl.Hash, Offset: floorAt(l.opts.Root, a[6]).Offset},
		"past the end":  {Writer: fl.Writer, Device: fl.Device, Seq: fl.Seq, Hash: fl.Hash, Offset: 1 << 40},
	} {
		st := NewReadState()
		st.SetFloors([]Floor{bad})
		snap, err := l.ReadIncremental(st, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Entries) != 6 || snap.Entries[0].Seq != 7 || len(snap.Problems) != 0 {
			t.Errorf("%s: %d entries, problems %+v", name, len(snap.Entries), snap.Problems)
		}
	}
	missing := Floor{Writer: fl.Writer, Device: fl.Device, Seq: fl.Seq, Hash: "sha256:00", Offset: fl.Offset}
	st := NewReadState()
	st.SetFloors([]Floor{missing})
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ks := kinds(snap.Problems); !slices.Contains(ks, KindBrokenChain+"@7") || !slices.Contains(ks, KindCutMissing+"@6") {
		t.Errorf("a floor no file holds: problems %v", ks)
	}
}

// TestFloorsDecideForksBelowTheCut: at a fork below the floor the branch holding the
// floor's entry counts although a whole reading keeps the other (lower hash) branch; the
// other branch's records at or below the floor add nothing and no fork, and those above
// it lose and are reported as a fork.
func TestFloorsDecideForksBelowTheCut(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	appendN(t, l, "alpha", testDevice, "a", 4)
	seg := SegmentPath(root, "alpha", testDevice)
	prefix := readFile(t, seg)
	other := t.TempDir()
	writeFile(t, SegmentPath(other, "alpha", testDevice), prefix)
	lo := openAt(t, other, &fakeClock{t: t0.Add(time.Hour), step: time.Millisecond})
	x := appendN(t, l, "alpha", testDevice, "x", 6) // seq 5..10 on each branch
	y := appendN(t, lo, "alpha", testDevice, "y", 6)
	xb, yb := readFile(t, seg), readFile(t, SegmentPath(other, "alpha", testDevice))
	if x[0].Hash() < y[0].Hash() { // the cut's branch is the one a whole reading drops
		x, y, xb, yb = y, x, yb, xb
	}
	writeFile(t, seg, xb)
	writeFile(t, filepath.Join(filepath.Dir(seg), testDevice+".sync-conflict-20261129-183000-ABCDEFG.jsonl"), yb)
	if w := mustRead(t, l); len(w.Forks) != 1 || w.Forks[0].Winner.Hash() != y[0].Hash() {
		t.Fatalf("a whole reading keeps the lower-hash branch: forks %+v", w.Forks)
	}

	fl := floorAt(root, x[2]) // seq 7
	st := NewReadState()
	st.SetFloors([]Floor{fl})
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hashes(snap.Entries), hashes(x[3:]); !slices.Equal(got, want) {
		t.Fatalf("entries above the cut: got %v, want the cut's branch %v", got, want)
	}
	if len(snap.Forks) != 1 || snap.Forks[0].Seq != 8 || snap.Forks[0].Winner.Hash() != x[3].Hash() {
		t.Fatalf("forks above the cut: %+v (problems %v)", snap.Forks, kinds(snap.Problems))
	}
	for _, e := range snap.Forks[0].Losers {
		if e.Seq <= fl.Seq {
			t.Errorf("a record at or below the cut reported as a loser: seq %d", e.Seq)
		}
	}
}

// TestFloorsCheckPrefixes: CheckPrefixes covers a floored file from its floor's line
// and finds a line changed in place above it.
func TestFloorsCheckPrefixes(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	a := appendN(t, l, "alpha", testDevice, "a", 10)
	st := NewReadState()
	st.SetFloors([]Floor{floorAt(root, a[3])})
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := st.CheckPrefixes(root); len(got) != 0 {
		t.Fatalf("an unchanged file forgotten: %v", got)
	}
	seg := SegmentPath(root, "alpha", testDevice)
	b := readFile(t, seg)
	lines := segmentLines(t, b)
	at := len(b) - len(lines[9]) - len(lines[8]) + 20 // inside line 9, neither first nor last read
	b[at] ^= 1
	writeFile(t, seg, b)
	if got := st.CheckPrefixes(root); len(got) != 1 {
		t.Fatalf("an in-place edit above the floor not found: %v", got)
	}
}

// TestFloorsCleared: a state read from floors, given none, reads its files whole again.
func TestFloorsCleared(t *testing.T) {
	l := newTestLedger(t)
	a := appendN(t, l, "alpha", testDevice, "a", 10)
	st := NewReadState()
	st.SetFloors([]Floor{floorAt(l.opts.Root, a[6])})
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	st.SetFloors(nil)
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hashes(snap.Entries), hashes(a)) || snap.Floors != nil || st.Floors() != nil {
		t.Fatalf("after clearing the floors: %d entries, floors %v", len(snap.Entries), snap.Floors)
	}
}

// TestFloorsLongLine: a floor's line longer than the 64 KiB a step reads back is found
// whole; one longer than floorLineMax makes the file read from its start.
func TestFloorsLongLine(t *testing.T) {
	l := newTestLedger(t)
	appendN(t, l, "alpha", testDevice, "a", 2)
	big, err := l.Append("alpha", testDevice, Draft{Type: "test.big", Data: []byte(`{"s":"` + strings.Repeat("x", 300<<10) + `"}`)}, testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	after := appendN(t, l, "alpha", testDevice, "b", 2)
	st := NewReadState()
	st.SetFloors([]Floor{floorAt(l.opts.Root, big)})
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hashes(snap.Entries), hashes(after)) || st.Stats().Reset != 1 || st.Stats().NewLines != 2 {
		t.Fatalf("from a long floor line: %d entries, %+v", len(snap.Entries), st.Stats())
	}
}
