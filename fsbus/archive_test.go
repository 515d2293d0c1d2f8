package fsbus_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// archiveWorld is an ownerWorld past two epochs, with alice's chain in three files
// (epochs 0, 1 and 2) and the orders written before, between and after.
func archiveWorld(t *testing.T) (*ownerWorld, []string) {
	w := newOwnerWorld(t)
	ids := []string{w.order("before")}
	w.twoEpochs()
	ids = append(ids, w.order("after"))
	if n := len(ledger.ChainFiles(w.c.Root, "alice", w.c.Device)); n != 3 {
		t.Fatalf("alice's chain has %d files, want 3", n)
	}
	return w, ids
}

// loadAll loads the channel in a new process, from the cut and whole, and fails on
// any problem, fork or checkpoint problem; it returns the whole reading's order ids.
func loadAll(t *testing.T, w *ownerWorld) []string {
	t.Helper()
	var ids [2][]string
	for i, thorough := range []bool{false, true} {
		ch := fsbustest.Reopen(t, w.c)
		ch.Thorough = thorough
		v, err := ch.Load()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range v.Snapshot.Problems {
			t.Errorf("thorough %v: %s %s seq %d: %s", thorough, p.Kind, p.Path, p.Seq, p.Detail)
		}
		if len(v.Snapshot.Forks) != 0 {
			t.Errorf("thorough %v: forks %+v", thorough, v.Snapshot.Forks)
		}
		cf := ch.OwnerCheckpoint()
		if cf == nil || len(cf.Chain) == 0 {
			t.Fatalf("thorough %v: no counting checkpoint", thorough)
		}
		for _, p := range cf.Problems {
			t.Errorf("thorough %v: checkpoint problem %s: %s", thorough, p.Kind, p.Detail)
		}
		for _, r := range v.State.ListOrders(fold.OrderFilter{}) {
			ids[i] = append(ids[i], r.ID)
		}
		slices.Sort(ids[i])
	}
	if !slices.Equal(ids[0], ids[1]) {
		t.Errorf("a reading from the cut holds orders %v, a whole one %v", ids[0], ids[1])
	}
	return ids[1]
}

// TestFrozenFilesMoveAfterTheGrace: a writer's frozen files wholly at or below the cut
// of a counting checkpoint stay until this machine has seen it count for
// policy.archive_grace_s, then move whole to archive/ledger/ (docs/format.md §21); every
// reader folds the same orders without a problem, the chain goes on in its newest
// file, and the owner's `compact`-time move takes the master's frozen file too.
func TestFrozenFilesMoveAfterTheGrace(t *testing.T) {
	w, _ := archiveWorld(t)
	alice := w.ss["alice"]
	before := loadAll(t, w)
	files := ledger.ChainFiles(w.c.Root, "alice", w.c.Device)
	frozen := map[string][]byte{}
	for _, f := range files[:2] {
		frozen[f] = readArchived(t, f)
	}

	if moved, err := alice.MoveFrozen(false); err != nil || len(moved) != 0 {
		t.Fatalf("within the grace: moved %v, %v", moved, err)
	}
	w.clock.Add((fold.DefaultArchiveGraceS - 3600) * 1000)
	if moved, err := alice.MoveFrozen(false); err != nil || len(moved) != 0 {
		t.Fatalf("an hour before the grace ends: moved %v, %v", moved, err)
	}
	w.clock.Add(2 * 3600 * 1000)
	moved, err := alice.MoveFrozen(false)
	if err != nil || len(moved) != 2 {
		t.Fatalf("after the grace: moved %v, %v; want alice's two frozen files", moved, err)
	}
	for f, b := range frozen {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is still in the live folder: %v", f, err)
		}
		if !slices.Contains(moved, "archive/ledger/alice/"+filepath.Base(f)) {
			t.Errorf("%s is not among the files moved: %v", f, moved)
		}
		if got := readArchived(t, ledger.ArchivePath(w.c.Root, f)); !bytes.Equal(got, b) {
			t.Errorf("the archive copy of %s differs", f)
		}
	}
	if after := loadAll(t, w); !slices.Equal(after, before) {
		t.Fatalf("orders after the move %v, before %v", after, before)
	}

	// The chain goes on in its newest file; the next load still has no problem.
	tip, err := ledger.ChainTip(w.c.Root, "alice", w.c.Device)
	if err != nil || tip == nil {
		t.Fatal(tip, err)
	}
	id := w.order("later")
	// A new process of alice's, reading whole, writes on too: the records that left
	// count as held for her high-water mark (docs/format.md §10).
	for _, thorough := range []bool{true, false} {
		ch := fsbustest.Reopen(t, w.c)
		ch.Thorough = thorough
		s, err := ch.As("alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.NewOrder(fsbus.NewOrderOptions{Title: "new process"}); err != nil {
			t.Fatalf("thorough %v: a new process's write after the move: %v", thorough, err)
		}
	}
	if e, _ := ledger.ChainTip(w.c.Root, "alice", w.c.Device); e == nil || e.Seq != tip.Seq+3 {
		t.Fatalf("alice's next entry %+v does not follow her tip %d", e, tip.Seq)
	}
	if ids := loadAll(t, w); !slices.Contains(ids, id) {
		t.Fatalf("the order written after the move is not folded: %v", ids)
	}

	// The owner moves the master's frozen file (it holds the first checkpoint's
	// entry); a whole reading then finds the counting chain from the newest heads.
	master := ledger.ChainFiles(w.c.Root, fold.MasterWriter, w.c.Device)
	if len(master) < 2 {
		t.Fatalf("the master's chain has %d files", len(master))
	}
	if _, err := alice.MoveFrozen(true); err == nil {
		t.Fatal("a member moved every chain's files")
	}
	moved, err = w.owner("").MoveFrozen(true)
	if err != nil || !slices.Contains(moved, "archive/ledger/master/"+filepath.Base(master[0])) {
		t.Fatalf("the owner moved %v, %v; want the master's %s", moved, err, master[0])
	}
	loadAll(t, w)
	if r, err := w.owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 3 {
		t.Fatalf("compacting after the move: %+v %v", r, err)
	}
	loadAll(t, w)
}

// TestNoMoveWhileDisputed: a standing dispute of the newest checkpoint keeps every
// frozen file where it is; once withdrawn, they move.
func TestNoMoveWhileDisputed(t *testing.T) {
	w, _ := archiveWorld(t)
	alice := w.ss["alice"]
	top := w.top()
	d := fold.Dispute{Epoch: top.Data.Epoch, Hash: top.Entry.Hash(), Rules: fold.RulesVersion, First: "o-x"}
	if e, err := alice.Dispute(d, false); err != nil || e.Seq == 0 {
		t.Fatalf("dispute: %+v %v", e, err)
	}
	w.clock.Add((fold.DefaultArchiveGraceS + 60) * 1000)
	if moved, err := alice.MoveFrozen(false); err != nil || len(moved) != 0 {
		t.Fatalf("with a dispute standing: moved %v, %v", moved, err)
	}
	if e, err := alice.Dispute(d, true); err != nil || e.Seq == 0 {
		t.Fatalf("withdrawal: %+v %v", e, err)
	}
	if moved, err := alice.MoveFrozen(false); err != nil || len(moved) != 2 {
		t.Fatalf("after the withdrawal: moved %v, %v", moved, err)
	}
}

// TestFirstWriteMovesFrozenFiles: a writer's first write of a process moves its frozen
// files once the grace has passed, with policy.archive_grace_s shortening the grace.
func TestFirstWriteMovesFrozenFiles(t *testing.T) {
	w, _ := archiveWorld(t)
	if _, err := w.owner("").SetPolicy([]fold.PolicyAssign{{Key: "archive_grace_s", Value: "60"}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Add(120 * 1000)
	ch := fsbustest.Reopen(t, w.c)
	s, err := ch.As("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewOrder(fsbus.NewOrderOptions{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	if n := len(ledger.ChainFiles(w.c.Root, "alice", w.c.Device)); n != 1 {
		t.Fatalf("after the first write alice's chain has %d files in the live folder", n)
	}
	if ents, err := os.ReadDir(filepath.Join(w.c.Root, "archive", "ledger", "alice")); err != nil || len(ents) != 2 {
		t.Fatalf("archive/ledger/alice: %v %v", ents, err)
	}
	loadAll(t, w)
}

func readArchived(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompactMovesEveryChain: past the grace, `ferry compact` moves the frozen files of
// every chain the cut names (alice's here, whose newer file proves she appends there)
// and lists the chains with no file of the checkpoint's epoch (the master's, before
// this compaction writes its entry).
func TestCompactMovesEveryChain(t *testing.T) {
	w, _ := archiveWorld(t)
	w.clock.Add((fold.DefaultArchiveGraceS + 60) * 1000)
	w.order("above the cut") // settled by the time the owner compacts
	r, err := w.owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true})
	if err != nil || r.Entry == "" {
		t.Fatalf("compact: %+v %v", r, err)
	}
	var alice int
	for _, f := range r.Archived {
		if filepath.Dir(f) == "archive/ledger/alice" {
			alice++
		}
	}
	if alice != 2 {
		t.Errorf("compact moved %v: want alice's two frozen files", r.Archived)
	}
	if want := fold.MasterWriter + "/" + w.c.Device; !slices.Contains(r.Waiting, want) {
		t.Errorf("compact lists %v as waiting: want %s", r.Waiting, want)
	}
	loadAll(t, w)
}

// TestArchiveReadWhenNoCutCovers: once files have moved to archive/, a checkpoint that
// stops counting (here: its heads are gone from the folder) leaves their records
// covered by no cut; a whole reading then reads them from archive/ledger/ (docs/format.md
// §21 "When a checkpoint stops counting") and folds every order, with no gap reported
// for the chain. Without archive/ the gap is reported.
func TestArchiveReadWhenNoCutCovers(t *testing.T) {
	w, ids := archiveWorld(t)
	w.clock.Add((fold.DefaultArchiveGraceS + 60) * 1000)
	if moved, err := w.ss["alice"].MoveFrozen(false); err != nil || len(moved) != 2 {
		t.Fatalf("moved %v, %v; want alice's two frozen files", moved, err)
	}
	cps := filepath.Join(w.c.Root, "checkpoints")
	if err := os.Rename(cps, cps+".gone"); err != nil {
		t.Fatal(err)
	}
	load := func() ([]string, []ledger.Problem) {
		ch := fsbustest.Reopen(t, w.c)
		ch.Thorough = true
		v, err := ch.Load()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range v.State.ListOrders(fold.OrderFilter{}) {
			got = append(got, r.ID)
		}
		var gaps []ledger.Problem
		for _, p := range v.Snapshot.Problems {
			if p.Kind == ledger.KindBrokenChain && p.Writer == "alice" {
				gaps = append(gaps, p)
			}
		}
		return got, gaps
	}
	got, gaps := load()
	for _, id := range ids {
		if !slices.Contains(got, id) {
			t.Errorf("order %s is not folded once no checkpoint counts: %v", id, got)
		}
	}
	if len(gaps) != 0 {
		t.Errorf("alice's chain reads with gaps although archive/ holds them: %+v", gaps)
	}
	// With archive/ gone too, the records are in no file: the gap is reported.
	arch := filepath.Join(w.c.Root, "archive")
	if err := os.Rename(arch, arch+".gone"); err != nil {
		t.Fatal(err)
	}
	if _, gaps := load(); len(gaps) == 0 {
		t.Error("with archive/ gone, alice's chain reads with no gap")
	}
}

// verifyFindings runs Verify in a new process of w's channel (on another machine, a
// home of its own, with h not nil), with archive folders dirs, and returns its
// findings as "check level path detail" lines.
func verifyFindings(t *testing.T, w *ownerWorld, h *fsbus.Home, dirs ...string) []string {
	t.Helper()
	ch := fsbustest.Reopen(t, w.c)
	if h != nil {
		var err error
		if ch, err = fsbus.Open(h, w.c.Root); err != nil {
			t.Fatal(err)
		}
		ch.Now, ch.Boot = w.c.Now, w.c.Boot
	}
	ch.Thorough = true
	if err := ch.SetArchiveDirs(dirs); err != nil {
		t.Fatal(err)
	}
	v, err := ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	r, err := ch.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Check+" "+f.Level+" "+f.Path+" "+f.Detail)
	}
	return out
}

// errorsIn returns the lines of findings at level error.
func errorsIn(findings []string) []string {
	var out []string
	for _, f := range findings {
		if strings.Contains(f, " error ") {
			out = append(out, f)
		}
	}
	return out
}

// TestVerifyAfterTheMove: `ferry ledger verify` after frozen files moved reads them
// from archive/ and folds every checkpoint again: no finding. Once archive/ has left
// the folder (`ferry archive move DIR`), verify reports the history below the cut as
// absent, no error, on a machine that never read it; one that did warns that they
// may have left with the archive, while a live file cut short stays an error. With --archive DIR verify checks every chain from its first entry and every
// checkpoint's state again, and a file missing from DIR is a broken chain.
func TestVerifyAfterTheMove(t *testing.T) {
	w, _ := archiveWorld(t)
	w.clock.Add((fold.DefaultArchiveGraceS + 60) * 1000)
	if moved, err := w.owner("").MoveFrozen(true); err != nil || len(moved) != 3 {
		t.Fatalf("moved %v, %v; want alice's two frozen files and the master's", moved, err)
	}
	other := fsbustest.Home(t)
	verifyFindings(t, w, other) // the other machine reads the live folder first
	if f := verifyFindings(t, w, nil); len(f) != 0 {
		t.Fatalf("verify with archive/ in the folder: %q", f)
	}
	out := filepath.Join(t.TempDir(), "old")
	if err := os.Rename(filepath.Join(w.c.Root, "archive"), out); err != nil {
		t.Fatal(err)
	}
	f := verifyFindings(t, w, other)
	if e := errorsIn(f); len(e) != 0 {
		t.Fatalf("verify with the archive gone, on a machine that never read it: errors %q", e)
	}
	if !slices.ContainsFunc(f, func(s string) bool { return strings.Contains(s, "absent") }) {
		t.Errorf("verify with the archive gone does not say the history is absent: %q", f)
	}
	f = verifyFindings(t, w, nil)
	if e := errorsIn(f); len(e) != 0 {
		t.Errorf("verify with the archive gone, on the machine that read it: errors %q", e)
	}
	if !slices.ContainsFunc(f, func(s string) bool {
		return strings.HasPrefix(s, "vanished warning ledger/alice") && strings.Contains(s, "ferry archive move")
	}) {
		t.Errorf("verify with the archive gone, on the machine that read it, does not warn that alice's records left: %q", f)
	}
	for _, h := range []*fsbus.Home{nil, other} {
		if f := verifyFindings(t, w, h, out); len(f) != 0 {
			t.Fatalf("verify --archive: %q", f)
		}
	}
	first := filepath.Join(out, "ledger", "alice", w.c.Device+".jsonl")
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	e := errorsIn(verifyFindings(t, w, other, out))
	if !slices.ContainsFunc(e, func(s string) bool { return strings.HasPrefix(s, ledger.KindBrokenChain) }) {
		t.Fatalf("verify --archive with alice's first file gone: errors %q, want a broken chain", e)
	}
	ch := fsbustest.Reopen(t, w.c)
	if err := ch.SetArchiveDirs([]string{first}); err == nil {
		t.Fatal("a missing archive folder was taken")
	}
	// A live file cut short loses the record this machine read last: that stays an
	// error, archive or not (here alice's own segment: lost, which vanished defers to).
	live := ledger.ChainFiles(w.c.Root, "alice", w.c.Device)[0]
	b := readArchived(t, live)
	cut := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	if err := os.WriteFile(live, b[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	if e := errorsIn(verifyFindings(t, w, nil)); !slices.ContainsFunc(e, func(s string) bool {
		return strings.HasPrefix(s, "vanished error ledger/alice") || strings.HasPrefix(s, "lost error  ledger/alice/")
	}) {
		t.Fatalf("alice's live file cut short: errors %q, want alice's records lost", e)
	}
	if e := errorsIn(verifyFindings(t, w, other)); !slices.ContainsFunc(e, func(s string) bool { return strings.HasPrefix(s, "vanished error ledger/alice") }) {
		t.Fatalf("alice's live file cut short, on another machine: errors %q, want alice's records vanished", e)
	}
}

// TestArchiveMove: `ferry archive move DIR` (the owner only) takes the files of
// archive/ledger/ that the newest counting cut covers and that were archived at least
// policy.archive_grace_s ago out of the folder into DIR/ledger/, byte for byte; a file
// archived within the grace stays, as does everything while a dispute stands; a DIR
// inside the channel folder is refused; every reader folds the same orders after.
func TestArchiveMove(t *testing.T) {
	w, _ := archiveWorld(t)
	before := loadAll(t, w)
	w.clock.Add((fold.DefaultArchiveGraceS + 60) * 1000)
	moved, err := w.owner("").MoveFrozen(true)
	if err != nil || len(moved) != 3 {
		t.Fatalf("moved %v, %v", moved, err)
	}
	out := filepath.Join(t.TempDir(), "old")
	owner := w.owner("")
	if _, _, err := w.ss["alice"].ArchiveMove(out); !errs.Is(err, errs.Denied) {
		t.Fatalf("a member's archive move: %v", err)
	}
	if _, _, err := owner.ArchiveMove(filepath.Join(w.c.Root, "memory", "old")); !errs.Is(err, errs.Invalid) {
		t.Fatalf("an archive move into the channel folder: %v", err)
	}
	back := filepath.Join(t.TempDir(), "back")
	if err := os.Symlink(w.c.Root, back); err != nil {
		t.Fatal(err)
	}
	if _, _, err := owner.ArchiveMove(filepath.Join(back, "old")); !errs.Is(err, errs.Invalid) {
		t.Fatalf("an archive move through a link into the channel folder: %v", err)
	}
	// Archived just now (on the test's clock): every file stays.
	now := time.UnixMilli(w.clock.Load())
	var files []string
	for _, m := range moved {
		p := filepath.Join(w.c.Root, filepath.FromSlash(m))
		files = append(files, p)
		if err := os.Chtimes(p, now, now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	got, stays, err := owner.ArchiveMove(out)
	if err != nil || len(got) != 0 || len(stays) != 3 || !strings.Contains(stays[0], "less than policy.archive_grace_s ago") {
		t.Fatalf("within the grace: moved %v, stays %q, %v", got, stays, err)
	}
	old := now.Add(-(fold.DefaultArchiveGraceS + 60) * time.Second)
	bytesOf := map[string][]byte{}
	for _, p := range files {
		bytesOf[filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p)] = readArchived(t, p)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// A standing dispute keeps them.
	top := w.top()
	d := fold.Dispute{Epoch: top.Data.Epoch, Hash: top.Entry.Hash(), Rules: fold.RulesVersion, First: "o-x"}
	if _, err := w.ss["alice"].Dispute(d, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.owner("").ArchiveMove(out); !errs.Is(err, errs.Conflict) {
		t.Fatalf("with a dispute standing: %v", err)
	}
	if _, err := w.ss["alice"].Dispute(d, true); err != nil {
		t.Fatal(err)
	}
	got, stays, err = w.owner("").ArchiveMove(out)
	if err != nil || len(got) != 3 || len(stays) != 0 {
		t.Fatalf("past the grace: moved %v, stays %q, %v", got, stays, err)
	}
	for _, p := range got {
		rel, _ := filepath.Rel(filepath.Join(out, "ledger"), p)
		if b := readArchived(t, p); !bytes.Equal(b, bytesOf[filepath.ToSlash(rel)]) {
			t.Errorf("%s does not hold the archived file's bytes", p)
		}
	}
	for _, p := range files {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still in archive/: %v", p, err)
		}
	}
	if after := loadAll(t, w); !slices.Equal(after, before) {
		t.Fatalf("orders after the archive left %v, before %v", after, before)
	}
	if f := verifyFindings(t, w, nil, out); len(f) != 0 {
		t.Fatalf("verify --archive after the move: %q", f)
	}
}

// TestArchiveMoveWithoutCheckpoint: with no owner's checkpoint nothing in archive/ is
// covered: conflict, and nothing moves.
func TestArchiveMoveWithoutCheckpoint(t *testing.T) {
	w := newOwnerWorld(t)
	if _, _, err := w.owner("").ArchiveMove(t.TempDir()); !errs.Is(err, errs.Conflict) {
		t.Fatalf("archive move with no checkpoint: %v", err)
	}
}
