package recheck

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/internal/errs"
)

// compacted is a channel whose owner compacted a cancelled order and an open one, with alice and bob members and wendy a worker; thing is the chunk file
// of the terminal things.
func compacted(t *testing.T) (c *fsbus.Channel, ss map[string]*fsbus.Session, thing string) {
	t.Helper()
	clock := &atomic.Int64{}
	clock.Store(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC).UnixMilli())
	c, ss = fsbustest.Channel(t, fsbustest.Options{Levels: map[string]string{"alice": "member", "bob": "member", "wendy": "worker"},
		Now: func() time.Time { return time.UnixMilli(clock.Add(1000)) }})
	o, err := ss["alice"].NewOrder(fsbus.NewOrderOptions{Title: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss["alice"].Cancel(o.ID, fsbus.NoteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ss["bob"].NewOrder(fsbus.NewOrderOptions{Title: "two"}); err != nil {
		t.Fatal(err)
	}
	if r, err := ss[fold.MasterWriter].Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Entry == "" {
		t.Fatalf("compact: %+v %v", r, err)
	}
	chunks, _ := filepath.Glob(filepath.Join(c.Root, "checkpoints", "chunks", "*.json"))
	for _, p := range chunks {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), `{"asks":`) {
			thing = p
		}
	}
	if thing == "" {
		t.Fatalf("no chunk of terminal things among %v", chunks)
	}
	return c, ss, thing
}

func opener(t *testing.T, c *fsbus.Channel) func() (*fsbus.Channel, error) {
	return func() (*fsbus.Channel, error) { return fsbustest.Reopen(t, c), nil }
}

// flip changes one byte of the file p and returns its bytes as they were.
func flip(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	old := append([]byte(nil), b...)
	b[len(b)/2] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return old
}

func standing(t *testing.T, c *fsbus.Channel) []fold.StandingDispute {
	t.Helper()
	c = fsbustest.Reopen(t, c)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	return c.Status(v).Disputes
}

func TestRecheckMatchIsKeptOnce(t *testing.T) {
	c, _, _ := compacted(t)
	r, err := Run(opener(t, c), "alice")
	if err != nil || r == nil || r.Outcome != Match || r.Entry != "" || r.Rules != fold.RulesVersion || r.Epoch != 1 {
		t.Fatalf("recheck of a good checkpoint: %+v, %v", r, err)
	}
	if k := Kept(reloaded(t, c)); k == nil || *k != *r {
		t.Fatalf("kept result %+v, want %+v", k, r)
	}
	// Final for this checkpoint: the next long-running process does not fold it again.
	if r, err := Run(opener(t, c), "bob"); err != nil || r != nil {
		t.Fatalf("second recheck: %+v, %v", r, err)
	}
	if ds := standing(t, c); len(ds) != 0 {
		t.Fatalf("disputes of a good checkpoint: %+v", ds)
	}
}

func reloaded(t *testing.T, c *fsbus.Channel) *fsbus.Channel {
	t.Helper()
	c = fsbustest.Reopen(t, c)
	if _, err := c.Load(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRecheckTamperedChunkDisputes: a chunk changed on this machine makes the recheck
// write a signed dispute, which stops the owner's compact and shows in the status; a
// second recheck writes no second one; once the chunk is repaired the next recheck
// withdraws it and the owner compacts again.
func TestRecheckTamperedChunkDisputes(t *testing.T) {
	c, ss, thing := compacted(t)
	good := flip(t, thing)
	r, err := Run(opener(t, c), "alice")
	if err != nil || r == nil || r.Outcome != Dispute || r.Entry == "" || !strings.Contains(r.First, "does not load") {
		t.Fatalf("recheck of a tampered chunk: %+v, %v", r, err)
	}
	ds := standing(t, c)
	if len(ds) != 1 || ds[0].Writer != "alice" || ds[0].Entry != r.Entry || ds[0].Epoch != 1 || ds[0].Hash != r.Checkpoint {
		t.Fatalf("standing disputes: %+v (result %+v)", ds, r)
	}
	if k := Kept(reloaded(t, c)); k == nil || k.Outcome != Dispute {
		t.Fatalf("kept: %+v", k)
	}
	// A dispute is folded again at the next start, and not written twice.
	r2, err := Run(opener(t, c), "alice")
	if err != nil || r2 == nil || r2.Outcome != Dispute || r2.Entry != "" {
		t.Fatalf("second recheck of a tampered chunk: %+v, %v", r2, err)
	}
	if ds := standing(t, c); len(ds) != 1 {
		t.Fatalf("standing disputes after a second recheck: %+v", ds)
	}
	// The owner compacts nothing on a disputed state, --force or not.
	if _, err := ss["bob"].NewOrder(fsbus.NewOrderOptions{Title: "three"}); err != nil {
		t.Fatal(err)
	}
	m, err := fsbustest.Reopen(t, c).As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Conflict || !strings.Contains(err.Error(), "disputed") || !strings.Contains(err.Error(), "alice") {
		t.Fatalf("compact over a dispute: %v", err)
	}
	// Repaired: the next recheck matches and withdraws alice's dispute.
	if err := os.WriteFile(thing, good, 0o644); err != nil {
		t.Fatal(err)
	}
	r3, err := Run(opener(t, c), "alice")
	if err != nil || r3 == nil || r3.Outcome != Match || r3.Entry == "" {
		t.Fatalf("recheck after the repair: %+v, %v", r3, err)
	}
	if ds := standing(t, c); len(ds) != 0 {
		t.Fatalf("standing after the withdrawal: %+v", ds)
	}
	if r, err := m.Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Entry == "" || r.Epoch != 2 {
		t.Fatalf("compact after the withdrawal: %+v, %v", r, err)
	}
}

// TestRecheckWorkerAndRevokedDisputer: a worker cannot write a dispute (member level):
// the result says so and nothing is written; a member's dispute stops standing once
// the owner revokes the member.
func TestRecheckWorkerAndRevokedDisputer(t *testing.T) {
	c, ss, thing := compacted(t)
	flip(t, thing)
	r, err := Run(opener(t, c), "wendy")
	if err != nil || r == nil || r.Outcome != Dispute || r.Entry != "" || !strings.Contains(r.Detail, "not written") || !strings.Contains(r.Detail, "member") {
		t.Fatalf("a worker's recheck of a tampered chunk: %+v, %v", r, err)
	}
	if ds := standing(t, c); len(ds) != 0 {
		t.Fatalf("a worker's dispute stands: %+v", ds)
	}
	if r, err := Run(opener(t, c), "bob"); err != nil || r == nil || r.Entry == "" {
		t.Fatalf("bob's recheck: %+v, %v", r, err)
	}
	if ds := standing(t, c); len(ds) != 1 || ds[0].Writer != "bob" {
		t.Fatalf("bob's dispute: %+v", ds)
	}
	if _, err := ss[fold.MasterWriter].Revoke("bob"); err != nil {
		t.Fatal(err)
	}
	if ds := standing(t, c); len(ds) != 0 {
		t.Fatalf("a revoked writer's dispute stands: %+v", ds)
	}
}

// TestRecheckOneProcessAtATime: while another process holds recheck.lock, Run does
// nothing and keeps nothing; with no checkpoint in the folder it folds nothing.
func TestRecheckOneProcessAtATime(t *testing.T) {
	c, _, _ := compacted(t)
	top := reloaded(t, c).OwnerCheckpoint().Chain[0].Entry.Hash()
	p := Path(c, top)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	lk := flock.New(filepath.Join(filepath.Dir(p), "recheck.lock"))
	if err := lk.Lock(); err != nil {
		t.Fatal(err)
	}
	r, err := Run(opener(t, c), "alice")
	if err != nil || r != nil {
		t.Fatalf("recheck while another process holds the lock: %+v, %v", r, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("a result was kept: %v", err)
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	if r, err := Run(opener(t, c), "alice"); err != nil || r == nil || r.Outcome != Match {
		t.Fatalf("recheck once the lock is free: %+v, %v", r, err)
	}

	plain, _ := fsbustest.Channel(t, fsbustest.Options{Levels: map[string]string{"alice": "member"}})
	if r, err := Run(opener(t, plain), "alice"); err != nil || r != nil {
		t.Fatalf("recheck of a channel with no checkpoint: %+v, %v", r, err)
	}
}

// TestRecheckWithdrawsForEveryWriterOfTheMachine: alice's process disputes; once the
// chunk is repaired, bob's process on the same machine finds the match and withdraws
// alice's dispute too, before it keeps the match as final.
func TestRecheckWithdrawsForEveryWriterOfTheMachine(t *testing.T) {
	c, _, thing := compacted(t)
	good := flip(t, thing)
	if r, err := Run(opener(t, c), "alice"); err != nil || r == nil || r.Outcome != Dispute || r.Entry == "" {
		t.Fatalf("alice's recheck of a tampered chunk: %+v, %v", r, err)
	}
	if err := os.WriteFile(thing, good, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Run(opener(t, c), "bob")
	if err != nil || r == nil || r.Outcome != Match || r.Entry == "" {
		t.Fatalf("bob's recheck after the repair: %+v, %v", r, err)
	}
	if ds := standing(t, c); len(ds) != 0 {
		t.Fatalf("alice's dispute outlives the machine's match: %+v", ds)
	}
	if k := Kept(reloaded(t, c)); k == nil || k.Outcome != Match {
		t.Fatalf("kept: %+v", k)
	}
}

// TestRecheckFilesNotArrivedArePending: an object file of a thing at or below the cut
// that has not arrived is pending: no dispute, no result kept. A chunk only partly
// written (empty, or NUL bytes where a sync tool preallocated it) is restored from the
// history here, byte for byte, and the recheck matches.
func TestRecheckFilesNotArrivedArePending(t *testing.T) {
	c, _, thing := compacted(t)
	orders, err := filepath.Glob(filepath.Join(c.Root, "orders", "*.json"))
	if err != nil || len(orders) != 2 {
		t.Fatalf("order objects: %v %v", orders, err)
	}
	aside := t.TempDir()
	for _, p := range orders {
		if err := os.Rename(p, filepath.Join(aside, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Run(opener(t, c), "alice")
	if err != nil || r == nil || r.Outcome != Pending || r.Entry != "" || !strings.Contains(r.Detail, "has not arrived") {
		t.Fatalf("recheck with order objects not arrived: %+v, %v", r, err)
	}
	for _, p := range orders {
		if err := os.Rename(filepath.Join(aside, filepath.Base(p)), p); err != nil {
			t.Fatal(err)
		}
	}
	good, err := os.ReadFile(thing)
	if err != nil {
		t.Fatal(err)
	}
	for i, torn := range [][]byte{{}, make([]byte, len(good))} {
		if i > 0 { // a kept match is not rechecked: a channel of its own
			c, _, thing = compacted(t)
			if good, err = os.ReadFile(thing); err != nil {
				t.Fatal(err)
			}
			torn = make([]byte, len(good))
		}
		if err := os.WriteFile(thing, torn, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Run(opener(t, c), "alice")
		if err != nil || r == nil || r.Outcome != Match {
			t.Fatalf("recheck of a chunk of %d bytes %q…: %+v, %v", len(torn), torn[:min(len(torn), 4)], r, err)
		}
		if ds := standing(t, c); len(ds) != 0 {
			t.Fatalf("a dispute over a chunk only partly here: %+v", ds)
		}
		if back, err := os.ReadFile(thing); err != nil || !bytes.Equal(back, good) {
			t.Fatalf("the chunk of %d bytes was not restored: %v", len(torn), err)
		}
	}
}

// TestRecheckNamesTheNewestCheckpoint: a dispute names the newest counting checkpoint,
// and a dispute of an older one is not written.
func TestRecheckNamesTheNewestCheckpoint(t *testing.T) {
	c, ss, thing := compacted(t)
	if _, err := ss["bob"].NewOrder(fsbus.NewOrderOptions{Title: "three"}); err != nil {
		t.Fatal(err)
	}
	if r, err := ss[fold.MasterWriter].Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v, %v", r, err)
	}
	chain := reloaded(t, c).OwnerCheckpoint().Chain
	if len(chain) != 2 {
		t.Fatalf("chain of %d", len(chain))
	}
	old := fold.Dispute{Epoch: 1, Hash: chain[0].Entry.Hash(), Rules: fold.RulesVersion, First: "o-1"}
	if e, err := ss["alice"].Dispute(old, false); err != nil || e.Seq != 0 {
		t.Fatalf("a dispute of epoch 1 under epoch 2: %+v, %v", e, err)
	}
	flip(t, thing) // the epoch-1 chunk of terminal things, which epoch 2 shares or follows
	r, err := Run(opener(t, c), "alice")
	if err != nil || r == nil || r.Outcome != Dispute || r.Entry == "" {
		t.Fatalf("recheck: %+v, %v", r, err)
	}
	ds := standing(t, c)
	if len(ds) != 1 || ds[0].Epoch != 2 || ds[0].Hash != chain[1].Entry.Hash() {
		t.Fatalf("standing: %+v; want alice's dispute of epoch 2 (%s)", ds, chain[1].Entry.Hash())
	}
}
