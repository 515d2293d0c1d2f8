package ledger

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// frozenChain writes 10 entries of the test chain, rolls over to epoch 1 and writes 3
// more, and returns the ledger, the frozen file and the entries.
func frozenChain(t *testing.T) (*Ledger, string, []Entry) {
	t.Helper()
	l := newTestLedger(t)
	a := appendN(t, l, testWriter, testDevice, "a", 10)
	l.SetEpoch(1)
	b := appendN(t, l, testWriter, testDevice, "b", 3)
	return l, SegmentPath(l.opts.Root, testWriter, testDevice), append(a, b...)
}

// TestMoveFrozenFile: a frozen file wholly at or below the cut moves to archive/ byte
// for byte; a reading from the cut then holds the same entries without a problem
// (its first record above names the cut), a whole reading's gap below the cut is
// dropped by AnchorCut and nothing else, and the chain goes on.
func TestMoveFrozenFile(t *testing.T) {
	l, frozen, es := frozenChain(t)
	root := l.opts.Root
	before, err := os.ReadFile(frozen)
	if err != nil {
		t.Fatal(err)
	}
	cutAt := es[9] // the frozen file's last entry
	fl := Floor{Writer: testWriter, Device: testDevice, Seq: cutAt.Seq, Hash: cutAt.Hash(), Offset: int64(len(before))}
	st := NewReadState()
	st.SetFloors([]Floor{fl})
	want, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	moved, reason, err := l.MoveFrozen(testWriter, testDevice, frozen, cutAt.Seq)
	if err != nil || reason != "" {
		t.Fatalf("MoveFrozen: %q, %v", reason, err)
	}
	if moved != filepath.Join(root, "archive", "ledger", testWriter, testDevice+".jsonl") {
		t.Fatalf("moved to %s", moved)
	}
	if got, _ := os.ReadFile(moved); !bytes.Equal(got, before) {
		t.Fatal("the archive file does not hold the frozen file's bytes")
	}
	if _, err := os.Stat(frozen); !os.IsNotExist(err) {
		t.Fatalf("the frozen file is still in the live folder: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(moved)); len(ents) != 1 {
		t.Fatalf("the archive directory holds %v", ents)
	}

	for _, fresh := range []bool{false, true} {
		rs := st
		if fresh {
			rs = NewReadState()
			rs.SetFloors([]Floor{fl})
		}
		snap, err := l.ReadIncremental(rs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Problems) != 0 {
			t.Fatalf("reading from the cut (fresh %v): problems %+v", fresh, snap.Problems)
		}
		if !slices.Equal(hashes(snap.Entries), hashes(want.Entries)) {
			t.Fatalf("reading from the cut (fresh %v): %d entries, want %d", fresh, len(snap.Entries), len(want.Entries))
		}
	}
	whole := mustRead(t, l)
	if len(whole.Problems) != 1 || whole.Problems[0].Kind != KindBrokenChain || whole.Problems[0].Seq != cutAt.Seq+1 {
		t.Fatalf("a whole reading reports %+v, want the gap below the cut", whole.Problems)
	}
	if got := AnchorCut(whole.Problems, whole.Entries, []Floor{fl}); len(got) != 0 {
		t.Fatalf("AnchorCut kept %+v", got)
	}
	// A floor the chain is not anchored to keeps the gap.
	other := fl
	other.Hash = es[8].Hash()
	if got := AnchorCut(whole.Problems, whole.Entries, []Floor{other}); len(got) != 1 {
		t.Fatalf("AnchorCut with a floor of another hash kept %+v", got)
	}
	next := appendN(t, l, testWriter, testDevice, "c", 1)[0]
	if next.Seq != es[len(es)-1].Seq+1 || next.Prev != es[len(es)-1].Hash() {
		t.Fatalf("the chain goes on at seq %d prev %s", next.Seq, next.Prev)
	}
	// Moving it again finds nothing to move.
	if _, reason, err := l.MoveFrozen(testWriter, testDevice, frozen, cutAt.Seq); err != nil || reason != "missing" {
		t.Fatalf("a second move: %q, %v", reason, err)
	}
}

// TestAnchorCutKeepsGapsAbove: a gap above the cut, or a broken prev link, is not the
// archive's doing and stays.
func TestAnchorCutKeepsGapsAbove(t *testing.T) {
	e := func(seq uint64, prev string) Entry {
		return Entry{Writer: testWriter, Device: testDevice, Seq: seq, Prev: prev, HLC: "x"}
	}
	cut := e(5, "p4")
	fl := Floor{Writer: testWriter, Device: testDevice, Seq: 5, Hash: cut.Hash()}
	entries := []Entry{e(6, cut.Hash()), e(9, "p8")}
	probs := []Problem{
		{Kind: KindBrokenChain, Writer: testWriter, Device: testDevice, Seq: 6}, // the gap below the cut
		{Kind: KindBrokenChain, Writer: testWriter, Device: testDevice, Seq: 9}, // a gap above it
		{Kind: KindBrokenChain, Writer: "beta", Device: testDevice, Seq: 3},     // another chain
		{Kind: KindMalformed, Writer: testWriter, Device: testDevice, Seq: 6},   // another kind
		{Kind: KindBrokenChain, Writer: testWriter, Device: testDevice, Seq: 1}, // seq 1 names a prev
	}
	got := AnchorCut(probs, entries, []Floor{fl})
	if len(got) != 4 || slices.ContainsFunc(got, func(p Problem) bool { return p.Seq == 6 && p.Kind == KindBrokenChain }) {
		t.Fatalf("AnchorCut kept %+v", got)
	}
}

// TestFrozenRefuses: a file stays when it is the chain's newest, when the newer file
// holds no entry yet, when a record is above the cut, and when it ends in a torn line,
// holds a NUL, a malformed line or another chain's line; nothing is changed.
func TestFrozenRefuses(t *testing.T) {
	t.Run("newest", func(t *testing.T) {
		l := newTestLedger(t)
		es := appendN(t, l, testWriter, testDevice, "a", 3)
		checkStays(t, l, SegmentPath(l.opts.Root, testWriter, testDevice), es[2].Seq, "no newer file")
	})
	t.Run("newer file empty", func(t *testing.T) {
		l := newTestLedger(t)
		es := appendN(t, l, testWriter, testDevice, "a", 3)
		if err := os.WriteFile(EpochSegmentPath(l.opts.Root, testWriter, testDevice, 1), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		checkStays(t, l, SegmentPath(l.opts.Root, testWriter, testDevice), es[2].Seq, "no newer file")
	})
	t.Run("above the cut", func(t *testing.T) {
		l, frozen, es := frozenChain(t)
		checkStays(t, l, frozen, es[8].Seq, "above the cut")
	})
	t.Run("not a file of the chain", func(t *testing.T) {
		l, frozen, es := frozenChain(t)
		checkStays(t, l, filepath.Join(filepath.Dir(frozen), testDevice+" (1).jsonl"), es[9].Seq, "not a file of the chain")
	})
	for name, tail := range map[string]string{
		"torn":          `{"v":1`,
		"NUL":           "\x00\x00\n",
		"malformed":     "not json\n",
		"another chain": "",
	} {
		t.Run(name, func(t *testing.T) {
			l, frozen, es := frozenChain(t)
			add := []byte(tail)
			if name == "another chain" {
				o := appendN(t, l, "beta", testDevice, "x", 1)[0]
				c, err := o.Canonical()
				if err != nil {
					t.Fatal(err)
				}
				add = append(c, '\n')
			}
			f, err := os.OpenFile(frozen, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(add); err != nil {
				t.Fatal(err)
			}
			f.Close()
			checkStays(t, l, frozen, es[9].Seq, "")
		})
	}
}

// checkStays moves file at floorSeq and checks that it is refused with a reason
// holding want (any reason when want is ""), and that nothing changed.
func checkStays(t *testing.T, l *Ledger, file string, floorSeq uint64, want string) {
	t.Helper()
	before, _ := os.ReadFile(file)
	moved, reason, err := l.MoveFrozen(testWriter, testDevice, file, floorSeq)
	if err != nil || moved != "" || reason == "" || !strings.Contains(reason, want) {
		t.Fatalf("MoveFrozen(%s): moved %q, reason %q, %v; want a reason holding %q", filepath.Base(file), moved, reason, err, want)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Fatal("the file changed")
	}
	if _, err := os.Stat(filepath.Join(l.opts.Root, "archive")); !os.IsNotExist(err) {
		t.Fatalf("archive/ was made: %v", err)
	}
}

// TestMoveFrozenFaults: a fault at any step of the move leaves the frozen file in the
// live folder, or gone with the archive holding its bytes, and no temp file; the next
// call finishes the move.
func TestMoveFrozenFaults(t *testing.T) {
	steps := []struct {
		op     fsutil.Op
		target bool // the step is the archive file's, else the frozen file's
	}{
		{fsutil.OpCreate, true}, {fsutil.OpWrite, true}, {fsutil.OpSync, true}, {fsutil.OpRename, true},
		{fsutil.OpSyncDir, true}, {fsutil.OpReadBack, true}, {fsutil.OpRemove, false}, {fsutil.OpSyncDir, false},
	}
	for _, s := range steps {
		name := string(s.op)
		if !s.target {
			name += " of the frozen file"
		}
		t.Run(name, func(t *testing.T) {
			l, frozen, es := frozenChain(t)
			before, _ := os.ReadFile(frozen)
			target := ArchivePath(l.opts.Root, frozen)
			on := frozen
			if s.target {
				on = target
			}
			restore := fsutil.SetFault(func(op fsutil.Op, path string) error {
				if op == s.op && path == on {
					return syscall.EIO
				}
				return nil
			})
			_, _, err := l.MoveFrozen(testWriter, testDevice, frozen, es[9].Seq)
			restore()
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("MoveFrozen with %s failing: %v", name, err)
			}
			live, _ := os.ReadFile(frozen)
			arch, _ := os.ReadFile(target)
			if !bytes.Equal(live, before) && !bytes.Equal(arch, before) {
				t.Fatal("after the fault neither the live folder nor the archive holds the file")
			}
			if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) > 1 {
				t.Fatalf("the archive directory holds %v", ents)
			}
			moved, reason, err := l.MoveFrozen(testWriter, testDevice, frozen, es[9].Seq)
			if s.op == fsutil.OpSyncDir && !s.target {
				// The unlink happened; only its directory fsync failed.
				if err != nil || reason != "missing" {
					t.Fatalf("after a failed directory fsync: %q, %v", reason, err)
				}
			} else if err != nil || moved != target {
				t.Fatalf("the next move: %q, %q, %v", moved, reason, err)
			}
			if got, _ := os.ReadFile(target); !bytes.Equal(got, before) {
				t.Fatal("the archive file does not hold the frozen file's bytes")
			}
			if _, err := os.Stat(frozen); !os.IsNotExist(err) {
				t.Fatal("the frozen file is still there")
			}
		})
	}
}

// TestMoveFrozenTargetDiffers: an archive file of that name holding other bytes stops
// the move; the frozen file stays.
func TestMoveFrozenTargetDiffers(t *testing.T) {
	l, frozen, es := frozenChain(t)
	target := ArchivePath(l.opts.Root, frozen)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(frozen)
	if _, _, err := l.MoveFrozen(testWriter, testDevice, frozen, es[9].Seq); err == nil || !strings.Contains(err.Error(), "other bytes") {
		t.Fatalf("MoveFrozen over another archive file: %v", err)
	}
	if after, _ := os.ReadFile(frozen); !bytes.Equal(before, after) {
		t.Fatal("the frozen file changed")
	}
}

// TestMoveFrozenChain: of a chain's three files, the two frozen ones wholly at or below
// the cut move, oldest first; the newest stays whatever the cut; a cut inside the
// second file moves the first only.
func TestMoveFrozenChain(t *testing.T) {
	for _, tc := range []struct {
		cutIndex int // index into the chain's 15 entries
		want     int
	}{{14, 2}, {12, 2}, {11, 1}, {4, 0}} {
		l := newTestLedger(t)
		es := appendN(t, l, testWriter, testDevice, "a", 10)
		l.SetEpoch(1)
		es = append(es, appendN(t, l, testWriter, testDevice, "b", 3)...)
		l.SetEpoch(2)
		es = append(es, appendN(t, l, testWriter, testDevice, "c", 2)...)
		moved, err := l.MoveFrozenChain(testWriter, testDevice, es[tc.cutIndex].Seq)
		if err != nil || len(moved) != tc.want {
			t.Fatalf("cut at seq %d: moved %v, %v; want %d files", es[tc.cutIndex].Seq, moved, err, tc.want)
		}
		if tip, err := ChainTip(l.opts.Root, testWriter, testDevice); err != nil || tip == nil || tip.Hash() != es[14].Hash() {
			t.Fatalf("cut at seq %d: the chain's tip is %+v, %v", es[tc.cutIndex].Seq, tip, err)
		}
	}
	l := newTestLedger(t)
	if _, err := l.MoveFrozenChain("../x", testDevice, 1); err == nil {
		t.Fatal("a bad writer name was taken")
	}
}

// TestArchiveDirs: a whole reading of an archived chain takes its files from the
// channel's archive/ and from the folders SetArchiveDirs names (where `ferry archive
// move` took them), a name the channel's archive/ holds being read once; ArchivedChains
// lists the chains in either; a folder that does not exist adds nothing.
func TestArchiveDirs(t *testing.T) {
	l := newTestLedger(t)
	es := appendN(t, l, testWriter, testDevice, "a", 4)
	l.SetEpoch(1)
	es = append(es, appendN(t, l, testWriter, testDevice, "b", 3)...)
	l.SetEpoch(2)
	es = append(es, appendN(t, l, testWriter, testDevice, "c", 2)...)
	root := l.opts.Root
	moved, err := l.MoveFrozenChain(testWriter, testDevice, es[6].Seq)
	if err != nil || len(moved) != 2 {
		t.Fatalf("moved %v, %v", moved, err)
	}
	// The oldest file leaves the channel folder for an outside archive folder.
	out := filepath.Join(t.TempDir(), "old")
	oldest := filepath.Join(out, "ledger", testWriter, filepath.Base(moved[0]))
	if err := os.MkdirAll(filepath.Dir(oldest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved[0], oldest); err != nil {
		t.Fatal(err)
	}
	// And a copy of the second stays in both: it is read once.
	b, _ := os.ReadFile(moved[1])
	if err := os.WriteFile(filepath.Join(filepath.Dir(oldest), filepath.Base(moved[1])), b, 0o644); err != nil {
		t.Fatal(err)
	}
	chain := []Chain{{testWriter, testDevice}}
	l.SetArchived(chain)
	if snap := mustRead(t, l); len(snap.Problems) != 1 || snap.Problems[0].Seq != es[4].Seq {
		t.Fatalf("without the outside folder: problems %+v, want the gap below seq %d", snap.Problems, es[4].Seq)
	}
	l.SetArchiveDirs([]string{filepath.Join(t.TempDir(), "none"), out})
	snap := mustRead(t, l)
	if len(snap.Problems) != 0 || !slices.Equal(hashes(snap.Entries), hashes(es)) {
		t.Fatalf("with the outside folder: %d entries (want %d), problems %+v", len(snap.Entries), len(es), snap.Problems)
	}
	var paths []string
	for _, p := range listArchived(l.archiveRoots(), chain) {
		paths = append(paths, p.rel)
	}
	wantPaths := []string{"archive/ledger/" + testWriter + "/" + filepath.Base(moved[1]), filepath.ToSlash(oldest)}
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("files read %v, want %v", paths, wantPaths)
	}
	if got := l.ArchivedChains(); !slices.Equal(got, chain) {
		t.Fatalf("ArchivedChains = %v", got)
	}
	if err := os.RemoveAll(filepath.Join(root, "archive")); err != nil {
		t.Fatal(err)
	}
	l.SetArchiveDirs(nil)
	if got := l.ArchivedChains(); len(got) != 0 {
		t.Fatalf("ArchivedChains with no archive = %v", got)
	}
}

// TestMoveRefusesLinks: a move never writes through, or unlinks beside, a symbolic
// link someone placed in the folder (archive/ pointing elsewhere, a writer directory
// that is a link, an archive target that is the file itself): it returns an error and
// the frozen file stays where it is, whole.
func TestMoveRefusesLinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		link func(t *testing.T, root, frozen string)
	}{
		{"archive is a link", func(t *testing.T, root, _ string) {
			if err := os.Symlink(t.TempDir(), filepath.Join(root, "archive")); err != nil {
				t.Fatal(err)
			}
		}},
		{"archive's writer directory is a link back to ledger", func(t *testing.T, root, frozen string) {
			if err := os.MkdirAll(filepath.Join(root, "archive", "ledger"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Dir(frozen), filepath.Join(root, "archive", "ledger", testWriter)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, frozen, es := frozenChain(t)
			before := readFile(t, frozen)
			tc.link(t, l.opts.Root, frozen)
			if _, _, err := l.MoveFrozen(testWriter, testDevice, frozen, es[9].Seq); err == nil {
				t.Fatal("the move went through a link")
			}
			if got := readFile(t, frozen); !bytes.Equal(got, before) {
				t.Fatal("the frozen file changed")
			}
		})
	}
	// MoveArchived into an outside folder that is a link to the archive itself.
	l, frozen, es := frozenChain(t)
	moved, reason, err := l.MoveFrozen(testWriter, testDevice, frozen, es[9].Seq)
	if err != nil || reason != "" {
		t.Fatal(reason, err)
	}
	before := readFile(t, moved)
	out := filepath.Join(t.TempDir(), "out")
	if err := os.Symlink(filepath.Join(l.opts.Root, "archive"), out); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.MoveArchived(testWriter, testDevice, moved, out, es[9].Seq); err == nil {
		t.Fatal("an archived file was moved onto itself")
	}
	if got := readFile(t, moved); !bytes.Equal(got, before) {
		t.Fatal("the archived file is gone or changed")
	}
}
