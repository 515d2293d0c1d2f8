package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseSegmentName(t *testing.T) {
	for _, c := range []struct {
		name   string
		device string
		epoch  uint64
		ok     bool
	}{
		{"k3f9x2ab.jsonl", "k3f9x2ab", 0, true},
		{"k3f9x2ab.1.jsonl", "k3f9x2ab", 1, true},
		{"k3f9x2ab.42.jsonl", "k3f9x2ab", 42, true},
		{"k3f9x2ab.999999999999999999.jsonl", "k3f9x2ab", 999999999999999999, true},
		{"k3f9x2ab.0.jsonl", "", 0, false},                   // epoch 0 is the plain name
		{"k3f9x2ab.07.jsonl", "", 0, false},                  // leading zero
		{"k3f9x2ab.-1.jsonl", "", 0, false},                  // not a decimal
		{"k3f9x2ab.1e3.jsonl", "", 0, false},                 // not a decimal
		{"k3f9x2ab.1.2.jsonl", "", 0, false},                 // two dots
		{"k3f9x2ab..jsonl", "", 0, false},                    // empty epoch
		{"K3F9X2AB.1.jsonl", "", 0, false},                   // not a portable name
		{"k3f9x2ab.1.json", "", 0, false},                    // not a segment
		{"k3f9x2ab.1000000000000000000.jsonl", "", 0, false}, // 19 digits
		{"k3f9x2ab.sync-conflict-20261201-101010-ABCDEFG.jsonl", "", 0, false},
		{"k3f9x2ab.1.sync-conflict-20261201-101010-ABCDEFG.jsonl", "", 0, false},
		{"k3f9x2ab (1).jsonl", "", 0, false},
		{"k3f9x2ab.1 (1).jsonl", "", 0, false},
		{".k3f9x2ab.1.jsonl", "", 0, false},
	} {
		d, e, ok := ParseSegmentName(c.name)
		if d != c.device || e != c.epoch || ok != c.ok {
			t.Errorf("ParseSegmentName(%q) = %q, %d, %v; want %q, %d, %v", c.name, d, e, ok, c.device, c.epoch, c.ok)
		}
		if ok {
			if got := filepath.Base(EpochSegmentPath("/r", "w", d, e)); got != c.name {
				t.Errorf("EpochSegmentPath(%q, %d) names %q, want %q", d, e, got, c.name)
			}
		}
	}
	// An epoch file is no sync tool's copy (docs/format.md §10).
	for _, name := range []string{"k3f9x2ab.1.jsonl", "k3f9x2ab.12.jsonl"} {
		if _, _, ok := ParseCopyName(name); ok {
			t.Errorf("ParseCopyName(%q) takes an epoch file for a copy", name)
		}
	}
}

// fileLines returns the complete lines of the file at path (none when it is missing).
func fileLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.SplitAfter(b, []byte("\n"))
	if n := len(out); n > 0 && len(out[n-1]) == 0 {
		out = out[:n-1]
	}
	return out
}

// TestEpochFilesContinueTheChain: once SetEpoch names a newer epoch, the next append
// starts that epoch's file and the chain goes on in it — seq and prev across files —
// while the older file is left as it was; an empty newest file takes its tip from the
// next older one; a lower epoch set later never sends the chain back.
func TestEpochFilesContinueTheChain(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	first := appendN(t, l, testWriter, testDevice, "a", 5)
	own := SegmentPath(root, testWriter, testDevice)
	before := readFile(t, own)

	l.SetEpoch(1)
	if got, want := l.CurrentPath(testWriter, testDevice), EpochSegmentPath(root, testWriter, testDevice, 1); got != want {
		t.Fatalf("CurrentPath = %s, want %s", got, want)
	}
	next := appendN(t, l, testWriter, testDevice, "b", 3)
	if next[0].Seq != 6 || next[0].Prev != first[4].Hash() {
		t.Fatalf("the epoch file's first entry is seq %d prev %s; want seq 6 after %s", next[0].Seq, next[0].Prev, first[4].Hash())
	}
	if !bytes.Equal(readFile(t, own), before) {
		t.Fatal("the frozen file changed")
	}
	if n := len(fileLines(t, EpochSegmentPath(root, testWriter, testDevice, 1))); n != 3 {
		t.Fatalf("epoch 1's file holds %d lines, want 3", n)
	}

	// An empty file of a newer epoch (made by another process of the writer, or by a
	// sync tool) is the newest: the chain goes on in it from the older file's tip.
	e4 := EpochSegmentPath(root, testWriter, testDevice, 4)
	if err := os.WriteFile(e4, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := l.Append(testWriter, testDevice, draft("c", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 9 || e.Prev != next[2].Hash() || len(fileLines(t, e4)) != 1 {
		t.Fatalf("after an empty newest file: seq %d prev %s, %d lines in it", e.Seq, e.Prev, len(fileLines(t, e4)))
	}
	l.SetEpoch(2) // a checkpoint stopped counting: the chain stays in its newest file
	e2, err := l.Append(testWriter, testDevice, draft("c", 1), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(EpochSegmentPath(root, testWriter, testDevice, 2)); !os.IsNotExist(err) || len(fileLines(t, e4)) != 2 || e2.Seq != 10 {
		t.Fatalf("a lower epoch sent the chain back (stat %v, %d lines in epoch 4's file, seq %d)", err, len(fileLines(t, e4)), e2.Seq)
	}

	snap := mustRead(t, l)
	if len(snap.Entries) != 10 || len(snap.Problems) != 0 || len(snap.Forks) != 0 {
		t.Fatalf("a whole reading: %d entries, problems %+v, forks %+v", len(snap.Entries), snap.Problems, snap.Forks)
	}
	if tip, err := ChainTip(root, testWriter, testDevice); err != nil || tip == nil || tip.Hash() != e2.Hash() {
		t.Fatalf("ChainTip = %v, %v; want seq 10", tip, err)
	}
	// Restore finds nothing to do: the older files are the chain's own, not copies.
	r, err := l.Restore(testWriter, testDevice, testKey.Public())
	if err != nil || r.Changed() {
		t.Fatalf("Restore over epoch files: %+v, %v", r, err)
	}
}

// TestEpochRollOverRepairsTheTornTail: the newest file's torn tail is moved aside
// before the chain goes on in a new epoch's file, so the frozen file ends in a
// complete line.
func TestEpochRollOverRepairsTheTornTail(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	first := appendN(t, l, testWriter, testDevice, "a", 3)
	own := SegmentPath(root, testWriter, testDevice)
	f, err := os.OpenFile(own, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"v":1,"writer":"claude-co`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l.SetEpoch(1)
	e, err := l.Append(testWriter, testDevice, draft("b", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 4 || e.Prev != first[2].Hash() {
		t.Fatalf("after the repair: seq %d prev %s", e.Seq, e.Prev)
	}
	if b := readFile(t, own); !bytes.HasSuffix(b, []byte("}\n")) || len(fileLines(t, own)) != 3 {
		t.Fatalf("the frozen file was not repaired: %q", b[max(0, len(b)-40):])
	}
	if _, err := os.Stat(tornPath(own, 1)); err != nil {
		t.Fatalf("no copy of the torn tail: %v", err)
	}
	if snap := mustRead(t, l); len(snap.Entries) != 4 || len(snap.Problems) != 0 {
		t.Fatalf("%d entries, problems %+v", len(snap.Entries), snap.Problems)
	}
}

// TestEpochRestoreKeepsOlderFiles: with a conflict copy in the writer directory the
// append restores the chain, but records the chain's older epoch files hold are not
// copied into the newest one; records only the copy holds are.
func TestEpochRestoreKeepsOlderFiles(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	appendN(t, l, testWriter, testDevice, "a", 5)
	own := SegmentPath(root, testWriter, testDevice)
	l.SetEpoch(1)
	appendN(t, l, testWriter, testDevice, "b", 2)
	e1 := EpochSegmentPath(root, testWriter, testDevice, 1)
	// A copy of the whole old file, and one of epoch 1's file with a record it lost.
	if err := os.WriteFile(filepath.Join(filepath.Dir(own), testDevice+".sync-conflict-20261201-101010-ABCDEFG.jsonl"), readFile(t, own), 0o644); err != nil {
		t.Fatal(err)
	}
	lost := appendN(t, l, testWriter, testDevice, "c", 1)[0]
	kept := readFile(t, e1)
	if err := os.WriteFile(filepath.Join(filepath.Dir(own), testDevice+".1 (1).jsonl"), kept, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e1, kept[:bytes.LastIndexByte(kept[:len(kept)-1], '\n')+1], 0o644); err != nil { // rolled back one line
		t.Fatal(err)
	}
	e, err := l.Append(testWriter, testDevice, draft("d", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 9 || e.Prev != lost.Hash() {
		t.Fatalf("after the restore: seq %d prev %s; want seq 9 after %s", e.Seq, e.Prev, lost.Hash())
	}
	var seqs []uint64
	for _, ln := range fileLines(t, e1) {
		en, err := ParseLine(bytes.TrimSuffix(ln, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, en.Seq)
	}
	if !slices.Equal(seqs, []uint64{6, 7, 8, 9}) {
		t.Fatalf("epoch 1's file holds seqs %v, want 6 7 8 9 (nothing of the older file)", seqs)
	}
	if len(fileLines(t, own)) != 5 {
		t.Fatalf("the frozen file has %d lines", len(fileLines(t, own)))
	}
}

// TestFloorsSkipFrozenFiles: with a floor in a newer epoch file, the chain's older
// files are not read past their last line; with the floor in the older file, the
// newer one is read whole. Both give a whole reading's entries above the floor, and a
// saved state goes on without reading the frozen file again.
func TestFloorsSkipFrozenFiles(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	a := appendN(t, l, testWriter, testDevice, "a", 40)
	l.SetEpoch(1)
	b := appendN(t, l, testWriter, testDevice, "b", 20)
	appendN(t, l, "beta", testDevice, "x", 4)
	whole := mustRead(t, l)
	own := SegmentPath(root, testWriter, testDevice)
	e1 := EpochSegmentPath(root, testWriter, testDevice, 1)
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	ownLines := fileLines(t, own)
	lastLine := int64(len(ownLines[len(ownLines)-1]))

	for _, c := range []struct {
		name  string
		at    Entry
		bytes int64 // segment bytes the reading reads
	}{
		{"the floor in the epoch file", b[9], 0},
		{"the floor in the older file", a[29], 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl := Floor{Writer: c.at.Writer, Device: c.at.Device, Seq: c.at.Seq, Hash: c.at.Hash(),
				Offset: ChainLineEnd(root, c.at.Writer, c.at.Device, c.at.Hash())}
			if fl.Offset == 0 {
				t.Fatal("ChainLineEnd found no offset")
			}
			want := lastLine + size(e1) - fl.Offset // the older file's last line, the rest of the epoch file
			if c.at.Seq <= 40 {
				want = size(own) - fl.Offset + size(e1)
			}
			want += size(EpochSegmentPath(root, "beta", testDevice, 1)) // a new chain starts in the epoch's file
			st := NewReadState()
			st.SetFloors([]Floor{fl})
			snap, err := l.ReadIncremental(st, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, w := hashes(snap.Entries), above(whole.Entries, []Floor{fl}); !slices.Equal(got, w) {
				t.Fatalf("entries from the floor: got %d, want %d", len(got), len(w))
			}
			if len(snap.Problems) != 0 {
				t.Fatalf("problems %+v", snap.Problems)
			}
			if got := st.Stats().BytesRead; got != want {
				t.Errorf("read %d bytes, want %d", got, want)
			}
			more := appendN(t, l, testWriter, testDevice, "c", 2)
			var saved [][]byte
			restored := reload(t, &saved, st, true)
			restored.SetFloors([]Floor{fl})
			snap2, err := l.ReadIncremental(restored, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if restored.Stats().Reset != 0 {
				t.Errorf("a restored state read a file again: %+v", restored.Stats())
			}
			if n := len(snap2.Entries); n == 0 || snap2.Entries[n-1].Hash() != more[1].Hash() {
				t.Errorf("the appends after the floor are not read")
			}
			whole = mustRead(t, l)
			if got, w := hashes(snap2.Entries), above(whole.Entries, []Floor{fl}); !slices.Equal(got, w) {
				t.Fatalf("restored reading: got %d, want %d", len(got), len(w))
			}
		})
	}
}

// TestFloorsReadAFrozenFileAboveTheFloor: an older file whose last line is above the
// floor (an old build appended to it after the rollover) is read, never skipped.
func TestFloorsReadAFrozenFileAboveTheFloor(t *testing.T) {
	l := newTestLedger(t)
	root := l.opts.Root
	appendN(t, l, testWriter, testDevice, "a", 10)
	l.SetEpoch(1)
	b := appendN(t, l, testWriter, testDevice, "b", 5)
	// A copy of epoch 1's lines appended to the older file by hand: its last line is
	// now above the floor.
	own := SegmentPath(root, testWriter, testDevice)
	f, err := os.OpenFile(own, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(readFile(t, EpochSegmentPath(root, testWriter, testDevice, 1))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fl := Floor{Writer: testWriter, Device: testDevice, Seq: b[1].Seq, Hash: b[1].Hash(),
		Offset: LineEnd(EpochSegmentPath(root, testWriter, testDevice, 1), b[1].Hash())}
	st := NewReadState()
	st.SetFloors([]Floor{fl})
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(own); st.Stats().BytesRead < fi.Size() {
		t.Errorf("the older file was not read whole: %d bytes read", st.Stats().BytesRead)
	}
	if len(snap.Entries) != 3 || len(snap.Problems) != 0 {
		t.Fatalf("%d entries, problems %+v", len(snap.Entries), snap.Problems)
	}
}
