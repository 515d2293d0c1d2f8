package fsbus

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// TestFromTheCutForkedCheckpoint: the epoch-2 checkpoint entry loses a fork of
// the master's segment (a conflict copy holds another master-signed entry at its seq,
// of lower hash). The whole reading counts epoch 2 (WithForkedCheckpoints), and so
// does a process reading from epoch 1's cut: it sees the loser among the forks,
// reads whole and folds from epoch 2.
func TestFromTheCutForkedCheckpoint(t *testing.T) {
	w, a := compactedWorld(t)
	c, alice, m := w.c, w.alice, w.master
	if v, err := reopen(t, c).Load(); err != nil || v.Snapshot.Floors == nil { // epoch 1 seen
		t.Fatalf("epoch 1: %v", err)
	}
	seen1 := mustReadFile(t, c.epochSeenPath()) // a machine that has seen epoch 1 count
	must[*fold.Order](t)(alice.Cancel(a.ID, NoteOptions{}))
	if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v, %v", r, err)
	}
	// The master's segment and its epoch-2 checkpoint line.
	seg := c.Ledger.CurrentPath(fold.MasterWriter, m.Device) // its newest file, holding the newest checkpoint line
	raw := mustReadFile(t, seg)
	lines := bytes.SplitAfter(raw, []byte("\n"))
	var cp ledger.Entry
	idx := -1
	for i, l := range lines {
		if len(l) == 0 {
			continue
		}
		e, err := ledger.ParseLine(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == fold.TypeCheckpoint {
			var d fold.CheckpointData
			json.Unmarshal(e.Data, &d)
			if d.Epoch == 2 {
				cp, idx = e, i
			}
		}
	}
	if idx < 0 {
		t.Fatal("no epoch-2 checkpoint line")
	}
	// A rival at the checkpoint's seq, signed by the master, of lower hash.
	var rival ledger.Entry
	for n := 0; ; n++ {
		rival = ledger.Entry{V: cp.V, Writer: cp.Writer, Device: cp.Device, Seq: cp.Seq, HLC: cp.HLC, Prev: cp.Prev,
			Type: "x.forged", Data: json.RawMessage(`{"n":` + strings.Repeat("1", n%5+1) + `}`), Idem: strings.Repeat("r", n+1)}
		if err := rival.Sign(m.Signer, c.Project()); err != nil {
			t.Fatal(err)
		}
		if rival.Hash() < cp.Hash() {
			break
		}
	}
	line, err := rival.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	conflict := bytes.Join(lines[:idx], nil)
	conflict = append(append(conflict, line...), '\n')
	writeTestFile(t, strings.TrimSuffix(seg, ".jsonl")+".sync-conflict-20261129-101010-ABCDEFG.jsonl", conflict)

	writeTestFile(t, c.epochSeenPath(), seen1)
	p := reopen(t, c)
	v, err := p.Load()
	if err != nil {
		t.Fatal(err)
	}
	whole := wholeLoad(t, c)
	wb := whole.State.Base()
	pb := v.State.Base()
	t.Logf("whole: base epoch %v; from the cut: base epoch %v floors %v miss %v", wb != nil && wb.Epoch == 2, pb != nil && pb.Epoch == 2, v.Snapshot.Floors != nil, p.floored.Miss)
	if (wb == nil) != (pb == nil) || (wb != nil && wb.Epoch != pb.Epoch) {
		t.Errorf("whole reading folds from epoch %d, the reading from the cut from epoch %d", wb.Epoch, pb.Epoch)
	}
	sameAsWhole(t, c, v)
}

// TestFromTheCutFinality: a fork at the cut's seq of alice's segment whose other
// branch has the lower hash. The whole reading notes in State.Finality that the cut
// decided it (forkFinality); a reading from the cut that read records at or below the
// cut (the conflict copy) reads whole, so it notes the same.
func TestFromTheCutFinality(t *testing.T) {
	w, _ := compactedWorld(t)
	c, alice := w.c, w.alice
	v0, err := reopen(t, c).Load()
	if err != nil || v0.Snapshot.Floors == nil {
		t.Fatalf("epoch 1: %v", err)
	}
	pt, ok := fold.Cut(v0.State.Base().Cut).At("alice", alice.Device)
	if !ok {
		t.Fatal("no cut point for alice")
	}
	seg := filepath.Join(c.Root, "ledger", "alice", alice.Device+".jsonl")
	lines := bytes.SplitAfter(mustReadFile(t, seg), []byte("\n"))
	var at ledger.Entry
	idx := -1
	for i, l := range lines {
		if len(l) == 0 {
			continue
		}
		e, err := ledger.ParseLine(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq == pt.Seq {
			at, idx = e, i
		}
	}
	var rival ledger.Entry
	for n := 0; ; n++ {
		rival = ledger.Entry{V: at.V, Writer: at.Writer, Device: at.Device, Seq: at.Seq, HLC: at.HLC, Prev: at.Prev,
			Type: "x.forged", Data: json.RawMessage(`{}`), Idem: strings.Repeat("r", n+1)}
		if err := rival.Sign(alice.Signer, c.Project()); err != nil {
			t.Fatal(err)
		}
		if rival.Hash() < at.Hash() {
			break
		}
	}
	line, _ := rival.Canonical()
	conflict := append(bytes.Join(lines[:idx], nil), append(line, '\n')...)
	writeTestFile(t, strings.TrimSuffix(seg, ".jsonl")+".sync-conflict-20261129-101010-ABCDEFG.jsonl", conflict)

	p := reopen(t, c)
	v, err := p.Load()
	if err != nil {
		t.Fatal(err)
	}
	whole := wholeLoad(t, c)
	t.Logf("floors %v miss %v; finality from the cut %q, whole %q", v.Snapshot.Floors != nil, p.floored.Miss, v.State.Finality, whole.State.Finality)
	if strings.Join(v.State.Finality, "|") != strings.Join(whole.State.Finality, "|") {
		t.Errorf("Finality differs: from the cut %q, whole %q", v.State.Finality, whole.State.Finality)
	}
	sameAsWhole(t, c, v)
}

// TestFromTheCutForgedRival: a process reading from epoch 2's cut; the owner
// compacts epoch 3; a peer plants, at the epoch-3 checkpoint's seq, a line of lower
// hash with a bad signature. The process reads whole and folds what the whole reading
// folds, never the records above the cut alone.
func TestFromTheCutForgedRival(t *testing.T) {
	w, a := compactedWorld(t)
	c, alice, m := w.c, w.alice, w.master
	must[*fold.Order](t)(alice.Cancel(a.ID, NoteOptions{}))
	b := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "second"}))
	if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v, %v", r, err)
	}
	reopen(t, c).Load() // records epoch 2 seen
	if v, err := reopen(t, c).Load(); err != nil || v.Snapshot.Floors == nil {
		t.Fatalf("epoch 2: %v", err)
	}
	seen2 := mustReadFile(t, c.epochSeenPath())
	must[*fold.Order](t)(alice.Cancel(b.ID, NoteOptions{}))
	w.pass(time.Minute)
	if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 3 {
		t.Fatalf("third compact: %+v, %v", r, err)
	}
	seg := c.Ledger.CurrentPath(fold.MasterWriter, m.Device) // its newest file, holding the newest checkpoint line
	lines := bytes.SplitAfter(mustReadFile(t, seg), []byte("\n"))
	var cp ledger.Entry
	idx := -1
	for i, l := range lines {
		if len(l) == 0 {
			continue
		}
		e, err := ledger.ParseLine(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		var d fold.CheckpointData
		if e.Type == fold.TypeCheckpoint && json.Unmarshal(e.Data, &d) == nil && d.Epoch == 3 {
			cp, idx = e, i
		}
	}
	if idx < 0 {
		t.Fatal("no epoch-3 checkpoint line")
	}
	var rival ledger.Entry
	for n := 0; ; n++ {
		rival = ledger.Entry{V: cp.V, Writer: cp.Writer, Device: cp.Device, Seq: cp.Seq, HLC: cp.HLC, Prev: cp.Prev,
			Type: "x.forged", Data: json.RawMessage(`{}`), Idem: strings.Repeat("r", n+1)}
		if err := rival.Sign(alice.Signer, c.Project()); err != nil { // not the master's key
			t.Fatal(err)
		}
		if rival.Hash() < cp.Hash() {
			break
		}
	}
	line, _ := rival.Canonical()
	conflict := append(bytes.Join(lines[:idx], nil), append(line, '\n')...)
	writeTestFile(t, strings.TrimSuffix(seg, ".jsonl")+".sync-conflict-20261129-101010-ABCDEFG.jsonl", conflict)

	writeTestFile(t, c.epochSeenPath(), seen2)
	p := reopen(t, c)
	v, err := p.Load()
	if err != nil {
		t.Fatal(err)
	}
	whole := wholeLoad(t, c)
	t.Logf("floors %v miss %v; orders from the cut %d, whole %d; base %v", v.Snapshot.Floors != nil, p.floored.Miss, len(v.State.Orders), len(whole.State.Orders), v.State.Base() != nil)
	sameAsWhole(t, c, v)
}

// TestWriteAfterTheCut: a writer whose last record is at or below the cut writes
// again, from a process reading from the cut and from a whole reading.
func TestWriteAfterTheCut(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(map[bool]string{false: "from the cut", true: "whole"}[whole], func(t *testing.T) {
			w, a := compactedWorld(t)
			c, alice, m := w.c, w.alice, w.master
			must[*fold.Order](t)(alice.Cancel(a.ID, NoteOptions{}))
			b := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "second"}))
			if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
				t.Fatalf("second compact: %+v, %v", r, err)
			}
			if whole {
				t.Setenv(envNoIndex, "1")
			}
			c2 := reopen(t, c)
			c2.Load()
			bob2, err := c2.As("bob")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bob2.Claim(b.ID, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}
