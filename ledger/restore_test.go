package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Writer continuity (docs/adr/0007-writer-continuity.md).

// lineOffsets returns the byte offset where each line of b starts.
func lineOffsets(b []byte) []int {
	offs := []int{0}
	for i, c := range b {
		if c == '\n' && i+1 < len(b) {
			offs = append(offs, i+1)
		}
	}
	return offs
}

// checkWhole checks that Read keeps exactly want (by hash) for the test chain plus
// last, with no fork, and that last follows want's tip.
func checkWhole(t *testing.T, l *Ledger, want []Entry, last Entry) {
	t.Helper()
	if last.Seq != uint64(len(want))+1 || last.Prev != want[len(want)-1].Hash() {
		t.Fatalf("new entry is seq %d prev %s, want seq %d after %s", last.Seq, last.Prev, len(want)+1, want[len(want)-1].Hash())
	}
	s := mustRead(t, l)
	if len(s.Forks) != 0 {
		t.Fatalf("forks %+v", s.Forks)
	}
	if got, w := hashes(s.Entries), hashes(append(want[:len(want):len(want)], last)); !equal(got, w) {
		t.Fatalf("readers keep %v, want %v", got, w)
	}
	checkChain(t, s.Entries)
}

// A moved segment: the segment was moved to a conflict-copy name; the next append must
// continue after the copy's records, not start again at seq 1.
func TestAppendContinuesFromConflictCopy(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	old := appendN(t, l, testWriter, testDevice, "a", 4)
	copyName := filepath.Join(filepath.Dir(seg), testDevice+" (conflicted copy 2026-11-29).jsonl")
	if err := os.Rename(seg, copyName); err != nil {
		t.Fatal(err)
	}
	e, err := l.Append(testWriter, testDevice, draft("b", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, old, e)
	// The main segment holds the whole chain again, the copy's records verbatim.
	if got := segmentLines(t, readFile(t, seg)); len(got) != 5 || !bytes.Equal(got[3], segmentLines(t, readFile(t, copyName))[3]) {
		t.Fatalf("segment holds %d lines, want the copy's 4 then the new one", len(got))
	}
}

// A rolled-back segment: the segment was rolled back to 2 lines and a copy holds 4.
func TestAppendCompletesRolledBackSegment(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	old := appendN(t, l, testWriter, testDevice, "a", 4)
	full := readFile(t, seg)
	writeFile(t, filepath.Join(filepath.Dir(seg), testDevice+".sync-conflict-20261129-101010-ABCDEFG.jsonl"), full)
	writeFile(t, seg, full[:lineOffsets(full)[2]])
	e, err := l.Append(testWriter, testDevice, draft("b", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, old, e)
	// A second append keeps chaining (the copy is still there: nothing is appended twice).
	e2, err := l.Append(testWriter, testDevice, draft("b", 1), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, append(old, e), e2)
	if n := len(segmentLines(t, readFile(t, seg))); n != 6 {
		t.Fatalf("segment holds %d lines, want 6", n)
	}
}

// A cloned home: two homes with one device id forked the chain; whichever branch the main
// file holds, the next append must chain onto the branch readers keep.
func TestAppendChainsOntoForkWinner(t *testing.T) {
	t.Parallel()
	for _, mainHoldsWinner := range []bool{false, true} {
		l := newTestLedger(t)
		seg := SegmentPath(l.Root(), testWriter, testDevice)
		common := appendN(t, l, testWriter, testDevice, "a", 2)
		base := readFile(t, seg)
		x, err := l.Append(testWriter, testDevice, draft("x", 0), testKey, HLC{})
		if err != nil {
			t.Fatal(err)
		}
		withX := readFile(t, seg)
		writeFile(t, seg, base)
		y, err := l.Append(testWriter, testDevice, draft("y", 0), testKey, HLC{})
		if err != nil {
			t.Fatal(err)
		}
		withY := readFile(t, seg)
		win, winFile, loseFile := x, withX, withY
		if y.Hash() < x.Hash() {
			win, winFile, loseFile = y, withY, withX
		}
		mainFile, copyFile := loseFile, winFile
		if mainHoldsWinner {
			mainFile, copyFile = winFile, loseFile
		}
		writeFile(t, seg, mainFile)
		writeFile(t, filepath.Join(filepath.Dir(seg), testDevice+".sync-conflict-20261129-101010-ABCDEFG.jsonl"), copyFile)

		e, err := l.Append(testWriter, testDevice, draft("after", 0), testKey, HLC{})
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != 4 || e.Prev != win.Hash() {
			t.Fatalf("main holds winner %v: new entry seq %d prev %s, want seq 4 after the winner %s", mainHoldsWinner, e.Seq, e.Prev, win.Hash())
		}
		s := mustRead(t, l)
		if !equal(hashes(s.Entries), hashes([]Entry{common[0], common[1], win, e})) {
			t.Fatalf("main holds winner %v: readers keep %v", mainHoldsWinner, hashes(s.Entries))
		}
	}
}

// A hole: a NUL run in the middle of the segment that destroyed no record: Restore
// moves everything from it aside and appends the records after it again.
func TestRestoreHoleKeepsRecordsAfter(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	old := appendN(t, l, testWriter, testDevice, "a", 5)
	full := readFile(t, seg)
	cut := lineOffsets(full)[2]
	holed := append(append(append([]byte{}, full[:cut]...), bytes.Repeat([]byte{0}, 300)...), full[cut:]...)
	writeFile(t, seg, holed)

	s := mustRead(t, l)
	if len(s.Entries) != 2 || len(s.Problems) != 1 || s.Problems[0].Kind != KindHole {
		t.Fatalf("before: %d entries, problems %+v; want 2 and one hole", len(s.Entries), s.Problems)
	}
	rep, err := l.Verify(keysFor(testKey))
	if err != nil || rep.OK() {
		t.Fatalf("verify of a holed segment: ok %v, err %v; want a problem", rep != nil && rep.OK(), err)
	}

	r, err := l.Restore(testWriter, testDevice, testKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	if r.Moved != strings.TrimSuffix(seg, ".jsonl")+".torn-1" || len(r.Appended) != 3 || r.Appended[0] != 3 {
		t.Fatalf("restored %+v, want the damaged part in .torn-1 and seqs 3-5 appended", r)
	}
	if got := readFile(t, r.Moved); !bytes.Equal(got, holed[cut:]) {
		t.Fatalf("torn file holds %d bytes, want the %d from the hole on", len(got), len(holed)-cut)
	}
	if got := readFile(t, seg); !bytes.Equal(got, full) {
		t.Fatalf("segment after restore differs from the undamaged one:\n%s", got)
	}
	e, err := l.Append(testWriter, testDevice, draft("b", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, old, e)
	rep, err = l.Verify(keysFor(testKey))
	if err != nil || !rep.OK() {
		t.Fatalf("verify after restore: %+v, %v", rep, err)
	}
}

// A hole that destroyed a record: the hole took seq 3. Restore moves the damaged part
// aside, appends seq 4 and 5 again (readers count them and report the gap) and names
// seq 3 as missing; once another machine's copy is put in the writer directory, the
// next append restores seq 3 without a fork and still follows seq 5.
func TestRestoreHoleDestroyedRecord(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	old := appendN(t, l, testWriter, testDevice, "a", 5)
	full := readFile(t, seg)
	offs := lineOffsets(full)
	holed := bytes.Clone(full)
	for i := offs[2]; i < offs[3]; i++ { // line 3 and its newline
		holed[i] = 0
	}
	writeFile(t, seg, holed)

	r, err := l.Restore(testWriter, testDevice, testKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	if r.Moved == "" || !slices.Equal(r.Missing, []uint64{3}) || !slices.Equal(r.Appended, []uint64{4, 5}) || r.Tip.Hash() != old[4].Hash() {
		t.Fatalf("restored %+v, want seq 3 missing, 4 and 5 appended, tip seq 5", r)
	}
	if !bytes.Equal(readFile(t, r.Moved), holed[offs[2]:]) {
		t.Fatal("the damaged part was not kept whole")
	}
	s := mustRead(t, l)
	if got, want := hashes(s.Entries), hashes([]Entry{old[0], old[1], old[3], old[4]}); !equal(got, want) {
		t.Fatalf("readers keep %v, want seqs 1, 2, 4, 5", got)
	}
	if k := kinds(s.Problems); len(k) != 1 || !strings.HasPrefix(k[0], KindBrokenChain) {
		t.Fatalf("problems %v, want the gap reported", k)
	}
	// Nothing more to do: a second restore changes nothing and still names the gap.
	if r, err = l.Restore(testWriter, testDevice, testKey.Public()); err != nil || r.Changed() || !slices.Equal(r.Missing, []uint64{3}) {
		t.Fatalf("second restore: %+v, %v", r, err)
	}

	writeFile(t, filepath.Join(filepath.Dir(seg), testDevice+" (restored).jsonl"), full)
	e, err := l.Append(testWriter, testDevice, draft("b", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, old, e)
	// Seq 3 was appended below the tip, so the tip's line follows it again: the fast
	// path (last line) chains right once the copy is gone.
	if err := os.Remove(filepath.Join(filepath.Dir(seg), testDevice+" (restored).jsonl")); err != nil {
		t.Fatal(err)
	}
	e2, err := l.Append(testWriter, testDevice, draft("b", 1), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, append(old, e), e2)
}

// A fork inside the segment itself, the losing record last: Restore appends the
// winner's line again so that the next Append (which reads the last line) follows it.
func TestRestoreForkInSegmentLoserLast(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	common := appendN(t, l, testWriter, testDevice, "a", 2)
	base := readFile(t, seg)
	x, err := l.Append(testWriter, testDevice, draft("x", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	withX := readFile(t, seg)
	writeFile(t, seg, base)
	y, err := l.Append(testWriter, testDevice, draft("y", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	withY := readFile(t, seg)
	win, winLine, loseLine := x, withX[len(base):], withY[len(base):]
	if y.Hash() < x.Hash() {
		win, winLine, loseLine = y, withY[len(base):], withX[len(base):]
	}
	writeFile(t, seg, append(append(bytes.Clone(base), winLine...), loseLine...))
	if _, err := l.Restore(testWriter, testDevice, testKey.Public()); err != nil {
		t.Fatal(err)
	}
	e, err := l.Append(testWriter, testDevice, draft("after", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 4 || e.Prev != win.Hash() {
		t.Fatalf("new entry seq %d prev %s, want seq 4 after the winner %s", e.Seq, e.Prev, win.Hash())
	}
	if s := mustRead(t, l); !equal(hashes(s.Entries), hashes([]Entry{common[0], common[1], win, e})) {
		t.Fatalf("readers keep %v", hashes(s.Entries))
	}
}

// A hole is reported the same by the incremental reader.
func TestReadIncrementalReportsHole(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	appendN(t, l, testWriter, testDevice, "a", 3)
	full := readFile(t, seg)
	cut := lineOffsets(full)[1]
	writeFile(t, seg, append(append(bytes.Clone(full[:cut]), 0, 0, 0, '\n'), full[cut:]...))
	s, err := l.ReadIncremental(NewReadState(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Problems) != 1 || s.Problems[0].Kind != KindHole || s.Problems[0].Line != 2 {
		t.Fatalf("problems %+v, want one hole at line 2", s.Problems)
	}
}
