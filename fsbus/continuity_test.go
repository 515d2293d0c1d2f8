package fsbus

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Writer continuity (docs/adr/0007-writer-continuity.md).

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// visible reports whether a fresh reading of the channel through c holds order id.
func visible(t *testing.T, c *Channel, id string) bool {
	t.Helper()
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	return v.State.Order(id) != nil
}

// A cloned home: two homes copied from one (same key, same device) forked the master's
// chain. Afterwards every write from either home must count: the home whose record
// lost the fork is told once (retry_needed, naming the cloned device id), and its
// retry chains onto the kept branch; the other home writes on at once.
func TestClonedHomeForkedChainWritesCount(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	homeA := &Home{ConfigDir: filepath.Join(root, "a", "config"), CacheDir: filepath.Join(root, "a", "cache")}
	dir := filepath.Join(root, "ch")
	cA, err := Init(homeA, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	sA, err := cA.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sA.NewOrder(NewOrderOptions{Title: "before the copy"}); err != nil {
		t.Fatal(err)
	}
	homeB := &Home{ConfigDir: filepath.Join(root, "b", "config"), CacheDir: filepath.Join(root, "b", "cache")}
	copyTree(t, filepath.Join(root, "a"), filepath.Join(root, "b"))
	cB, err := Open(homeB, dir)
	if err != nil {
		t.Fatal(err)
	}
	if cB.Device != cA.Device {
		t.Fatalf("the copied home has device %s, want %s", cB.Device, cA.Device)
	}
	sB, err := cB.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}

	// Each home writes against the same starting file; the sync tool keeps A's version
	// as a conflict copy and B's as the segment.
	seg := ledger.SegmentPath(dir, fold.MasterWriter, cA.Device)
	base := mustReadFile(t, seg)
	oa, err := sA.NewOrder(NewOrderOptions{Title: "from A"})
	if err != nil {
		t.Fatal(err)
	}
	aVersion := mustReadFile(t, seg)
	if err := os.WriteFile(seg, base, 0o644); err != nil {
		t.Fatal(err)
	}
	ob, err := sB.NewOrder(NewOrderOptions{Title: "from B"})
	if err != nil {
		t.Fatal(err)
	}
	copyPath := strings.TrimSuffix(seg, ".jsonl") + ".sync-conflict-20261129-101010-ABCDEFG.jsonl"
	if err := os.WriteFile(copyPath, aVersion, 0o644); err != nil {
		t.Fatal(err)
	}

	// Which home's record readers keep decides who is told.
	winner, loser := sA, sB
	wonID, lostID := oa.ID, ob.ID
	if !visible(t, cA, oa.ID) {
		winner, loser, wonID, lostID = sB, sA, ob.ID, oa.ID
	}
	if visible(t, cA, lostID) || !visible(t, cA, wonID) {
		t.Fatalf("after the fork readers should keep exactly one of %s, %s", wonID, lostID)
	}

	o, err := winner.NewOrder(NewOrderOptions{Title: "winner after the fork"})
	if err != nil {
		t.Fatalf("the home that won the fork: %v", err)
	}
	if !visible(t, cA, o.ID) || !visible(t, cB, o.ID) {
		t.Fatal("a write reported as done is not counted by readers")
	}

	_, err = loser.NewOrder(NewOrderOptions{Title: "loser after the fork"})
	var fe *errs.Error
	if !errors.As(err, &fe) || fe.Category != errs.RetryNeeded || !strings.Contains(fe.Message, "lost a fork") ||
		!strings.Contains(fe.Hint, "device") || !strings.Contains(fe.Hint, loser.Device) {
		t.Fatalf("the home that lost the fork: %v, want retry_needed naming the lost fork and the shared device id", err)
	}
	o2, err := loser.NewOrder(NewOrderOptions{Title: "loser after the fork"})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	for _, id := range []string{o.ID, o2.ID} {
		if !visible(t, cA, id) || !visible(t, cB, id) {
			t.Fatalf("order %s, reported as dispatched, is not counted by readers", id)
		}
	}
	// Both homes wrote on past the fork: doctor lists it as resolved history, a
	// warning with both lines, not an error that fails every run.
	v, err := cA.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := cA.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	forks := 0
	for _, f := range rep.Findings {
		if f.Check != verify.CheckFork {
			continue
		}
		forks++
		if f.Level != verify.LevelWarning || !strings.HasPrefix(f.Detail, "resolved") || len(f.Lines) < 2 {
			t.Errorf("a fork the writer has written past: %s %s (%d lines)", f.Level, f.Detail, len(f.Lines))
		}
	}
	if forks == 0 {
		t.Fatal("doctor does not list the fork at all")
	}
}

// A moved segment, through the write path: the segment moved to a conflict-copy name; the
// next write continues the chain and the writer's earlier entries keep counting.
func TestWriteAfterSegmentBecameCopy(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	dir := filepath.Join(t.TempDir(), "ch")
	c, err := Init(h, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.NewOrder(NewOrderOptions{Title: "first"})
	if err != nil {
		t.Fatal(err)
	}
	seg := ledger.SegmentPath(dir, fold.MasterWriter, c.Device)
	if err := os.Rename(seg, strings.TrimSuffix(seg, ".jsonl")+" (conflicted copy 2026-11-29).jsonl"); err != nil {
		t.Fatal(err)
	}
	second, err := s.NewOrder(NewOrderOptions{Title: "second"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Snapshot.Forks) != 0 || v.State.Order(first.ID) == nil || v.State.Order(second.ID) == nil {
		t.Fatalf("forks %d, first counted %v, second counted %v", len(v.Snapshot.Forks), v.State.Order(first.ID) != nil, v.State.Order(second.ID) != nil)
	}
}

// A hole, through the write path: NULs inserted in the middle of the segment (no
// record destroyed). With or without this machine's cache the next write moves the
// damaged part aside, appends the hidden records again and counts.
func TestWriteRepairsHoleInOwnSegment(t *testing.T) {
	t.Parallel()
	for _, dropCache := range []bool{false, true} {
		h := testHome(t)
		dir := filepath.Join(t.TempDir(), "ch")
		c, err := Init(h, InitOptions{Dir: dir, Project: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.As(fold.MasterWriter)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, title := range []string{"one", "two", "three"} {
			o, err := s.NewOrder(NewOrderOptions{Title: title})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, o.ID)
		}
		seg := ledger.SegmentPath(dir, fold.MasterWriter, c.Device)
		b := mustReadFile(t, seg)
		lines := strings.SplitAfter(string(b), "\n")
		cut := len(strings.Join(lines[:len(lines)-3], "")) // before the last two records
		holed := string(b[:cut]) + strings.Repeat("\x00", 100) + string(b[cut:])
		if err := os.WriteFile(seg, []byte(holed), 0o644); err != nil {
			t.Fatal(err)
		}
		if dropCache {
			if err := os.RemoveAll(h.CacheDir); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := c.Verify(mustLoad(t, c))
		if err != nil || rep.Ledger.OK() {
			t.Fatalf("verify of a holed segment: %v, ok %v; want a problem", err, err == nil && rep.Ledger.OK())
		}
		o, err := s.NewOrder(NewOrderOptions{Title: "after the hole"})
		if err != nil {
			t.Fatalf("cache dropped %v: %v", dropCache, err)
		}
		for _, id := range append(ids, o.ID) {
			if !visible(t, c, id) {
				t.Fatalf("cache dropped %v: order %s is not counted", dropCache, id)
			}
		}
		if got := mustReadFile(t, strings.TrimSuffix(seg, ".jsonl")+".torn-1"); string(got) != holed[cut:] {
			t.Fatalf("the damaged part was not kept whole")
		}
	}
}

func mustLoad(t *testing.T, c *Channel) *View {
	t.Helper()
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
