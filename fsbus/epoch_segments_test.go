package fsbus_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/ledger"
)

// TestWritersRollOverAtACountingCheckpoint: once a load has folded a counting
// checkpoint, a writer's next entry starts its chain's file of that epoch
// (docs/format.md §21) — seq and prev going on from the older file, which is left as
// it was — and a new process, reading from the cut or whole, folds every order.
func TestWritersRollOverAtACountingCheckpoint(t *testing.T) {
	w := newOwnerWorld(t)
	dir := filepath.Join(w.c.Root, "ledger", "alice")
	file := func(epoch uint64) string { return ledger.EpochSegmentPath(w.c.Root, "alice", w.c.Device, epoch) }
	lines := func(p string) int {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}

	ids := []string{w.order("before")}
	w.twoEpochs() // alice writes "one" before epoch 1, "two" after it, before epoch 2
	ids = append(ids, w.order("after"))
	frozen, err := os.ReadFile(file(0))
	if err != nil {
		t.Fatal(err)
	}
	if n0, n1, n2 := lines(file(0)), lines(file(1)), lines(file(2)); n0 == 0 || n1 != 1 || n2 != 1 {
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("alice's files hold %d, %d and %d lines (want some, 1 and 1): %v", n0, n1, n2, names)
	}
	tip, err := ledger.ChainTip(w.c.Root, "alice", w.c.Device)
	if err != nil || tip == nil || tip.Seq != uint64(lines(file(0))+2) {
		t.Fatalf("alice's tip %+v, %v: want seq %d, after every line of the older files", tip, err, lines(file(0))+2)
	}
	if _, err := os.Stat(ledger.EpochSegmentPath(w.c.Root, fold.MasterWriter, w.c.Device, 1)); err != nil {
		t.Errorf("the master's second checkpoint did not start its epoch 1 file: %v", err)
	}

	for _, thorough := range []bool{false, true} {
		ch := fsbustest.Reopen(t, w.c)
		ch.Thorough = thorough
		v, err := ch.Load()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range v.Snapshot.Problems {
			t.Errorf("thorough %v: %s %s: %s", thorough, p.Kind, p.Path, p.Detail)
		}
		if len(v.Snapshot.Forks) != 0 {
			t.Errorf("thorough %v: forks %+v", thorough, v.Snapshot.Forks)
		}
		if o := v.State.Orders[ids[1]]; o == nil {
			t.Errorf("thorough %v: the order written after the roll-over is not folded", thorough)
		}
		if cf := ch.OwnerCheckpoint(); cf == nil || len(cf.Chain) != 2 {
			t.Errorf("thorough %v: the counting chain is %+v", thorough, cf)
		}
	}
	if b, _ := os.ReadFile(file(0)); !bytes.Equal(b, frozen) {
		t.Error("alice's frozen file changed")
	}
	// The owner's next checkpoint names a cut in alice's newest file; a claim there
	// still goes on in it.
	if r, err := w.owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 3 {
		t.Fatalf("epoch 3: %+v %v", r, err)
	}
	w.order("third")
	if lines(file(3)) != 1 || lines(file(2)) != 1 {
		t.Errorf("after epoch 3: %d lines in epoch 3's file, %d in epoch 2's", lines(file(3)), lines(file(2)))
	}
}

// TestNewProcessRollsOverFromTheFoldCheckpoint: a writer's new process that starts
// from the machine's fold checkpoint (not a whole fold) after the owner's compaction
// still goes on in the newest counting epoch's file (docs/format.md §21 "Rolling
// over"), compaction after compaction.
func TestNewProcessRollsOverFromTheFoldCheckpoint(t *testing.T) {
	w := newOwnerWorld(t)
	w.order("before")
	for epoch := 1; epoch <= 3; epoch++ {
		if r, err := w.owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != epoch {
			t.Fatalf("epoch %d: %+v %v", epoch, r, err)
		}
		// A reader's whole fold saves the fold checkpoint the writer's process starts from.
		if _, err := fsbustest.Reopen(t, w.c).Load(); err != nil {
			t.Fatal(err)
		}
		s, err := fsbustest.Reopen(t, w.c).As("alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.NewOrder(fsbus.NewOrderOptions{Title: "after"}); err != nil {
			t.Fatal(err)
		}
		files := ledger.ChainFiles(w.c.Root, "alice", w.c.Device)
		if _, e, _ := ledger.ParseSegmentName(filepath.Base(files[len(files)-1])); e != uint64(epoch) {
			t.Fatalf("after epoch %d alice wrote into %v", epoch, files)
		}
	}
}
