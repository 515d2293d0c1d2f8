package fsbus_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// ownerWorld is a channel with alice a member and the master's key on this machine,
// whose clock moves 1 s at each reading, for the tests of moving the compactor.
type ownerWorld struct {
	t     *testing.T
	c     *fsbus.Channel
	ss    map[string]*fsbus.Session
	clock *atomic.Int64
}

func newOwnerWorld(t *testing.T) *ownerWorld {
	w := &ownerWorld{t: t, clock: &atomic.Int64{}}
	w.clock.Store(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC).UnixMilli())
	w.c, w.ss = fsbustest.Channel(t, fsbustest.Options{Levels: map[string]string{"alice": "member"},
		Now: func() time.Time { return time.UnixMilli(w.clock.Add(1000)) }})
	return w
}

// order is alice's new order's id.
func (w *ownerWorld) order(title string) string {
	w.t.Helper()
	o, err := w.ss["alice"].NewOrder(fsbus.NewOrderOptions{Title: title})
	if err != nil {
		w.t.Fatal(err)
	}
	return o.ID
}

// owner is the master on device ("" this machine's own).
func (w *ownerWorld) owner(device string) *fsbus.Session {
	w.t.Helper()
	ch := fsbustest.Reopen(w.t, w.c)
	if device != "" {
		ch.Device = device
	}
	s, err := ch.As(fold.MasterWriter)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// chain is the counting chain of a new process (thorough: reading whole).
func (w *ownerWorld) chain(thorough bool) []fold.Counting {
	w.t.Helper()
	ch := fsbustest.Reopen(w.t, w.c)
	ch.Thorough = thorough
	if _, err := ch.Load(); err != nil {
		w.t.Fatal(err)
	}
	cf := ch.OwnerCheckpoint()
	if cf == nil || len(cf.Chain) == 0 {
		w.t.Fatal("no counting checkpoint")
	}
	return cf.Chain
}

// top is the newest counting checkpoint.
func (w *ownerWorld) top() fold.Counting {
	w.t.Helper()
	ch := w.chain(false)
	return ch[len(ch)-1]
}

// chainFiles holds every own file of one (writer, device) chain (docs/format.md §21)
// by path: what a test puts back to play a machine the later files have not reached.
type chainFiles map[string][]byte

// readChain reads the own files of (writer, device)'s chain under root.
func readChain(t *testing.T, root, writer, device string) chainFiles {
	t.Helper()
	dir := filepath.Join(root, "ledger", writer)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := chainFiles{}
	for _, e := range ents {
		if d, _, ok := ledger.ParseSegmentName(e.Name()); ok && d == device {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Join(dir, e.Name())] = b
		}
	}
	return out
}

// put makes the chain's own files under root be cf: each written back, any other
// removed.
func (cf chainFiles) put(t *testing.T, root, writer, device string) {
	t.Helper()
	for p := range readChain(t, root, writer, device) {
		if _, ok := cf[p]; !ok {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p, b := range cf {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompactorTakeOverAndHandOver: another owner device's `ferry compact --take-over`
// is refused while the compactor wrote within the settle time, and on the compactor
// itself; once the compactor has been silent that long it writes the next checkpoint,
// whose head names it, and the old compactor is refused. A policy.compactor set since
// the last checkpoint hands the compactor over at the next one; a value that is no
// device id is refused. Before the first checkpoint, policy.compactor names the only
// device that may write it.
func TestCompactorTakeOverAndHandOver(t *testing.T) {
	w := newOwnerWorld(t)
	c, clock, order, owner, top := w.c, w.clock, w.order, w.owner, w.top
	old, elsewhere := c.Device, "d-elsewhere"

	order("one")
	if _, err := owner(elsewhere).Compact(fsbus.CompactOptions{TakeOver: true, SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Invalid || !strings.Contains(err.Error(), "nothing to take over") {
		t.Fatalf("a take-over before any checkpoint: %v", err)
	}
	// A device that never wrote as the owner cannot be named.
	if _, err := owner("").SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: "banana"}}); errs.CategoryOf(err) != errs.Invalid || !strings.Contains(err.Error(), "no owner device") {
		t.Fatalf("policy compactor naming no owner device: %v", err)
	}
	// elsewhere writes as the owner once, so it can be named.
	if _, err := owner(elsewhere).SetPolicy([]fold.PolicyAssign{{Key: "quiet_after_s", Value: "301"}}); err != nil {
		t.Fatal(err)
	}
	// Before the first checkpoint, policy.compactor names the only device that may write it.
	if _, err := owner("").SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: elsewhere}}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Denied || !strings.Contains(err.Error(), elsewhere) {
		t.Fatalf("a first compact on a device policy.compactor does not name: %v", err)
	}
	if _, err := owner("").SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: old}}); err != nil {
		t.Fatal(err)
	}
	if r, err := owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 1 {
		t.Fatalf("first compact: %+v %v", r, err)
	}
	order("two")
	if _, err := owner("").Compact(fsbus.CompactOptions{TakeOver: true, SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Invalid || !strings.Contains(err.Error(), "compactor already") {
		t.Fatalf("a take-over on the compactor: %v", err)
	}
	if _, err := owner(elsewhere).Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Denied || !strings.Contains(err.Error(), "--take-over") {
		t.Fatalf("compact on another device: %v", err)
	}
	// The compactor wrote its checkpoint entry a moment ago: not gone.
	if _, err := owner(elsewhere).Compact(fsbus.CompactOptions{TakeOver: true, Force: true}); errs.CategoryOf(err) != errs.Conflict || !strings.Contains(err.Error(), "within the settle time") {
		t.Fatalf("a take-over from a compactor seen within the settle time: %v", err)
	}
	// --settle 0s shortens what the cut covers, not the take-over's wait.
	if _, err := owner(elsewhere).Compact(fsbus.CompactOptions{TakeOver: true, SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Conflict {
		t.Fatalf("a take-over with --settle 0s from a compactor seen a moment ago: %v", err)
	}
	clock.Add((25 * time.Hour).Milliseconds())
	r, err := owner(elsewhere).Compact(fsbus.CompactOptions{TakeOver: true, Force: true})
	if err != nil || r.Epoch != 2 || r.Entry == "" {
		t.Fatalf("a take-over from a compactor silent for the settle time: %+v %v", r, err)
	}
	if k := top(); k.Data.Epoch != 2 || !k.Data.TakeOver || k.Head.Compactor != elsewhere || k.Entry.Device != elsewhere {
		t.Fatalf("after the take-over the newest checkpoint is epoch %d on %s, take_over %v, naming compactor %s", k.Data.Epoch, k.Entry.Device, k.Data.TakeOver, k.Head.Compactor)
	}
	ch := fsbustest.Reopen(t, c)
	if v, err := ch.Load(); err != nil || fold.PolicyCompactorOf(v.State) != elsewhere || slices.Contains(ch.EffectivePolicy(v).Unknown, fold.PolicyCompactor) {
		t.Fatalf("the policy after the take-over names %q (%v), want %s, a key this binary knows", fold.PolicyCompactorOf(v.State), err, elsewhere)
	}
	order("three")
	if _, err := owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Denied || !strings.Contains(err.Error(), elsewhere) {
		t.Fatalf("the old compactor after the take-over: %v", err)
	}

	// A hand-over by policy, back to the first device.
	if _, err := owner(elsewhere).SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: "no such/device"}}); errs.CategoryOf(err) != errs.Invalid {
		t.Fatalf("policy compactor that is no device id: %v", err)
	}
	if _, err := owner(elsewhere).SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: old}}); err != nil {
		t.Fatal(err)
	}
	if r, err := owner(elsewhere).Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 3 {
		t.Fatalf("compact covering the hand-over: %+v %v", r, err)
	}
	if k := top(); k.Head.Compactor != old || k.Data.TakeOver {
		t.Fatalf("after the hand-over the head names compactor %s (take_over %v), want %s", k.Head.Compactor, k.Data.TakeOver, old)
	}
	order("four")
	if r, err := owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 4 {
		t.Fatalf("compact on the device handed to: %+v %v", r, err)
	}
	// The policy.set below the cut no longer moves it: epoch 4's head names its writer.
	if k := top(); k.Head.Compactor != old {
		t.Fatalf("epoch 4 names compactor %s", k.Head.Compactor)
	}
}

// TestLateCompactorCheckpointReadersAgree: the compactor A, partitioned, writes epoch
// 2; meanwhile B takes over epoch 2 and writes epoch 3. When A's epoch 2 arrives, a
// reader from the cut of B's 3 sees a checkpoint entry that is not its basis and
// reads whole, so it counts the same chain as a whole reader: A's 2, the compactor's
// own winning over the take-over.
func TestLateCompactorCheckpointReadersAgree(t *testing.T) {
	w := newOwnerWorld(t)
	c, clock, order, owner, chainOf := w.c, w.clock, w.order, w.owner, w.chain
	A, B := c.Device, "d-b"
	seen := filepath.Join(c.Home.ConfigDir, "checkpoints", "acme")

	order("one")
	if r, err := owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 1 {
		t.Fatalf("epoch 1: %+v %v", r, err)
	}
	chainOf(false) // this machine has seen epoch 1 count
	before := readChain(t, c.Root, fold.MasterWriter, A)
	seenBefore, _ := os.ReadFile(seen)
	order("two")
	// A, partitioned, writes epoch 2: its entry and head do not reach B.
	if r, err := owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("A's epoch 2: %+v %v", r, err)
	}
	after := readChain(t, c.Root, fold.MasterWriter, A)
	heads, _ := filepath.Glob(filepath.Join(c.Root, "checkpoints", "2-*"))
	if len(heads) != 1 {
		t.Fatal(heads)
	}
	before.put(t, c.Root, fold.MasterWriter, A)
	if err := os.Rename(heads[0], heads[0]+".away"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(seen, seenBefore, 0o644)

	// B, a day later, takes over (epoch 2) and compacts again (epoch 3).
	clock.Add((25 * time.Hour).Milliseconds())
	if r, err := owner(B).Compact(fsbus.CompactOptions{TakeOver: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("B's take-over: %+v %v", r, err)
	}
	order("three")
	if r, err := owner(B).Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 3 {
		t.Fatalf("B's epoch 3: %+v %v", r, err)
	}
	if ch := chainOf(false); ch[len(ch)-1].Data.Epoch != 3 {
		t.Fatalf("before A's epoch 2 arrives: top epoch %d", ch[len(ch)-1].Data.Epoch)
	}

	// A's epoch 2 arrives.
	after.put(t, c.Root, fold.MasterWriter, A)
	if err := os.Rename(heads[0]+".away", heads[0]); err != nil {
		t.Fatal(err)
	}
	// A fresh machine (no epoch seen): floored reader vs whole reader.
	os.Remove(seen)
	bins, _ := filepath.Glob(filepath.Join(c.Home.StateDir("acme"), "fold-*.bin"))
	for _, b := range bins {
		os.Remove(b) // no ADR 0011 fold checkpoint: the reading from the cut is folded afresh
	}
	floored := chainOf(false)
	os.Remove(seen)
	whole := chainOf(true)
	ft, wt := floored[len(floored)-1], whole[len(whole)-1]
	t.Logf("floored reader: top epoch %d on %s; whole reader: top epoch %d on %s", ft.Data.Epoch, ft.Entry.Device, wt.Data.Epoch, wt.Entry.Device)
	if ft.Entry.Hash() != wt.Entry.Hash() {
		t.Fatalf("a reader from the cut and a whole reader disagree on the newest counting checkpoint: %d/%s vs %d/%s",
			ft.Data.Epoch, ft.Entry.Device, wt.Data.Epoch, wt.Entry.Device)
	}
}

// TestTakeOverOutlivesAStalePolicyCompactor: the compactor handed over to Y by policy,
// Y gone, Z takes over; Z's take-over writes policy.compactor = Z, so a later change of
// another policy key (a policy.set carries the whole table) does not hand the
// compactor back to Y.
func TestTakeOverOutlivesAStalePolicyCompactor(t *testing.T) {
	w := newOwnerWorld(t)
	c, clock, order, owner, top := w.c, w.clock, w.order, w.owner, w.top
	X, Y, Z := c.Device, "d-y", "d-z"
	compact := func(dev string, opt fsbus.CompactOptions, epoch int) {
		t.Helper()
		if r, err := owner(dev).Compact(opt); err != nil || r.Epoch != epoch {
			t.Fatalf("compact on %s: %+v %v", dev, r, err)
		}
	}
	now0 := fsbus.CompactOptions{SettleSet: true, Force: true}
	order("one")
	compact(X, now0, 1)
	// A planned hand-over to Y, an owner machine that has written here.
	if _, err := owner(Y).SetPolicy([]fold.PolicyAssign{{Key: "quiet_after_s", Value: "301"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner(X).SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: Y}}); err != nil {
		t.Fatal(err)
	}
	compact(X, now0, 2)
	if k := top(); k.Head.Compactor != Y {
		t.Fatalf("hand-over: %s", k.Head.Compactor)
	}
	order("two")
	compact(Y, now0, 3)
	top() // this machine sees Y's entries
	// Y is gone for good; a day later Z takes over.
	clock.Add((25 * time.Hour).Milliseconds())
	order("three")
	compact(Z, fsbus.CompactOptions{TakeOver: true, Force: true}, 4)
	if k := top(); k.Head.Compactor != Z {
		t.Fatalf("after the take-over the compactor is %s", k.Head.Compactor)
	}
	// The owner changes an unrelated policy key on Z.
	if _, err := owner(Z).SetPolicy([]fold.PolicyAssign{{Key: "compact_entries", Value: "100"}}); err != nil {
		t.Fatal(err)
	}
	order("four")
	compact(Z, now0, 5)
	if k := top(); k.Head.Compactor != Z {
		t.Fatalf("an unrelated policy change handed the compactor back to the gone device %s (want %s)", k.Head.Compactor, Z)
	}
}

// problemsOf is the checkpoint problems of a new process reading whole.
func (w *ownerWorld) problemsOf() []fold.CheckpointProblem {
	w.t.Helper()
	ch := fsbustest.Reopen(w.t, w.c)
	ch.Thorough = true
	if _, err := ch.Load(); err != nil {
		w.t.Fatal(err)
	}
	cf := ch.OwnerCheckpoint()
	if cf == nil {
		return nil
	}
	return cf.Problems
}

// away moves the head directory of the checkpoint of epoch out of the folder and
// returns a function that puts it back: a head that has not arrived.
func (w *ownerWorld) away(epoch int) func() {
	w.t.Helper()
	heads, _ := filepath.Glob(filepath.Join(w.c.Root, "checkpoints", fmt.Sprintf("%d-*", epoch)))
	if len(heads) != 1 {
		w.t.Fatalf("heads of epoch %d: %v", epoch, heads)
	}
	if err := os.Rename(heads[0], heads[0]+".away"); err != nil {
		w.t.Fatal(err)
	}
	return func() {
		if err := os.Rename(heads[0]+".away", heads[0]); err != nil {
			w.t.Fatal(err)
		}
	}
}

// TestTakeOverReplacesACheckpointThatNeverArrived: the compactor A writes epoch 2 and
// is lost before its head syncs, so epoch 2 stays pending everywhere else. B's
// take-over is refused while A's entry is younger than the settle time; after it, B
// writes epoch 2 naming A's as replaced, and B's counts — also once A's head arrives
// after all, for a reader from the cut and a whole one alike. A is then refused, B
// compacts on.
func TestTakeOverReplacesACheckpointThatNeverArrived(t *testing.T) {
	w := newOwnerWorld(t)
	c, clock, order, owner, top, chainOf := w.c, w.clock, w.order, w.owner, w.top, w.chain
	A, B := c.Device, "d-b"
	now0 := fsbus.CompactOptions{SettleSet: true, Force: true}

	order("one")
	if r, err := owner(A).Compact(now0); err != nil || r.Epoch != 1 {
		t.Fatalf("epoch 1: %+v %v", r, err)
	}
	top() // this machine (B's, in this test) has seen epoch 1 count
	seen := filepath.Join(c.Home.ConfigDir, "checkpoints", "acme")
	seenBefore, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	order("two")
	r, err := owner(A).Compact(now0)
	if err != nil || r.Epoch != 2 {
		t.Fatalf("A's epoch 2: %+v %v", r, err)
	}
	lost := r.Entry
	// A remembers its epoch 2 as seen; B, the machine reading here from now on, never saw it.
	if err := os.WriteFile(seen, seenBefore, 0o644); err != nil {
		t.Fatal(err)
	}
	back := w.away(2)
	if k := top(); k.Data.Epoch != 1 {
		t.Fatalf("with epoch 2's head away the newest counting checkpoint is epoch %d", k.Data.Epoch)
	}
	if _, err := owner(B).Compact(fsbus.CompactOptions{TakeOver: true, Force: true}); errs.CategoryOf(err) != errs.Conflict {
		t.Fatalf("a take-over while the pending checkpoint's entry is younger than the settle time: %v", err)
	}
	clock.Add((25 * time.Hour).Milliseconds())
	r, err = owner(B).Compact(fsbus.CompactOptions{TakeOver: true, Force: true})
	if err != nil || r.Epoch != 2 || r.Replaces != lost {
		t.Fatalf("B's take-over past the pending epoch 2: %+v %v (want replaces %s)", r, err, lost)
	}
	if k := top(); k.Data.Epoch != 2 || k.Entry.Device != B || k.Data.Replaces != lost || k.Head.Compactor != B {
		t.Fatalf("after the take-over the newest checkpoint is epoch %d on %s replacing %q, compactor %s", k.Data.Epoch, k.Entry.Device, k.Data.Replaces, k.Head.Compactor)
	}

	// A's head arrives after all: B's epoch 2 still counts, on every reading.
	back()
	for _, thorough := range []bool{false, true} {
		ch := chainOf(thorough)
		if k := ch[len(ch)-1]; k.Entry.Hash() != r.Entry {
			t.Fatalf("thorough %v: with A's head here the newest counting checkpoint is epoch %d on %s (%s), want B's %s", thorough, k.Data.Epoch, k.Entry.Device, k.Entry.Hash(), r.Entry)
		}
	}
	if ps := w.problemsOf(); !slices.ContainsFunc(ps, func(p fold.CheckpointProblem) bool { return p.Hash == lost && p.Kind == "replaced" }) {
		t.Fatalf("A's replaced checkpoint is not reported as replaced: %+v", ps)
	}
	order("three")
	if _, err := owner(A).Compact(now0); errs.CategoryOf(err) != errs.Denied || !strings.Contains(err.Error(), B) {
		t.Fatalf("the lost compactor back after the take-over: %v", err)
	}
	if r, err := owner(B).Compact(now0); err != nil || r.Epoch != 3 || r.Replaces != "" {
		t.Fatalf("B compacts on: %+v %v", r, err)
	}
}

// TestCompactPastItsOwnLostFiles: on the compactor, a head lost after this machine saw
// its checkpoint count is a rolled-back folder, refused after the settle time too;
// on a restored owner home that never saw it count, the compaction after the settle
// time replaces it. A chunk of the newest counting checkpoint lost blocks compaction
// until a recomputation (`ferry ledger verify`, `doctor`, the background recheck)
// restores it from the history here; the checkpoint is never replaced for it.
func TestCompactPastItsOwnLostFiles(t *testing.T) {
	w := newOwnerWorld(t)
	clock, order, owner, top := w.clock, w.order, w.owner, w.top
	seen := filepath.Join(w.c.Home.ConfigDir, "checkpoints", "acme")
	now0 := fsbus.CompactOptions{SettleSet: true, Force: true}
	compact := func(epoch int) *fold.CompactResult {
		t.Helper()
		r, err := owner("").Compact(now0)
		if err != nil || r.Epoch != epoch {
			t.Fatalf("compact: %+v %v (want epoch %d)", r, err, epoch)
		}
		return r
	}
	order("one")
	compact(1)

	// The head of epoch 2 is lost after this machine saw epoch 2 count.
	order("two")
	lost := compact(2).Entry
	if k := top(); k.Entry.Hash() != lost {
		t.Fatal("epoch 2 does not count")
	}
	w.away(2)
	for range 2 {
		if _, err := owner("").Compact(now0); errs.CategoryOf(err) != errs.Conflict || !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("compact while the head of epoch 2, seen counting here, is away: %v", err)
		}
		clock.Add((25 * time.Hour).Milliseconds())
	}
	// A restored owner home never saw it count: its compaction replaces it, once the
	// entry has been here for the settle time.
	if err := os.Remove(seen); err != nil {
		t.Fatal(err)
	}
	order("three")
	r := compact(2)
	if r.Replaces != lost {
		t.Fatalf("the compact past the lost head replaces %q, want %s", r.Replaces, lost)
	}
	if k := top(); k.Entry.Hash() != r.Entry || k.Data.Replaces != lost {
		t.Fatalf("the newest counting checkpoint is %s (replaces %q), want %s", k.Entry.Hash(), k.Data.Replaces, r.Entry)
	}

	// A chunk of epoch 3's state, new at 3, is lost.
	order("four")
	r3 := compact(3)
	chunk := removeNewChunk(t, w.c.Root, top())
	if chunk == "" {
		t.Fatal("epoch 3 wrote no chunk of its own")
	}
	clock.Add((25 * time.Hour).Milliseconds())
	if _, err := owner("").Compact(now0); errs.CategoryOf(err) != errs.Conflict {
		t.Fatalf("compact while epoch 3's state does not load: %v", err)
	}
	ch := fsbustest.Reopen(t, w.c)
	v, err := ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	probs, d, err := ch.Recheck(v)
	if err != nil || d != nil {
		t.Fatalf("recheck: %+v %v", d, err)
	}
	if _, err := os.Stat(chunk); err != nil {
		t.Fatalf("the recheck did not restore the lost chunk: %v (problems %+v)", err, probs)
	}
	order("five")
	if r := compact(4); r.Replaces != "" {
		t.Fatalf("the compact after the chunk's restoration replaces %s", r.Replaces)
	}
	if k := top(); k.Data.Basis != r3.Entry {
		t.Fatalf("epoch 4 names basis %s, want epoch 3's %s", k.Data.Basis, r3.Entry)
	}
}

// removeNewChunk removes a core chunk of k's state that the previous checkpoint's
// head does not name, and returns its path ("" when none).
func removeNewChunk(t *testing.T, root string, k fold.Counting) string {
	t.Helper()
	var prev fold.Head
	if len(k.Head.Previous) > 0 {
		e, err := ledger.ParseLine(k.Head.Previous)
		if err != nil {
			t.Fatal(err)
		}
		var d fold.CheckpointData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(fold.HeadPath(d.Epoch, d.Head))))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &prev); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range k.Head.State {
		if !slices.ContainsFunc(prev.State, func(p fold.ChunkRef) bool { return p.Hash == ref.Hash }) {
			p := filepath.Join(root, filepath.FromSlash(fold.ChunkPath(ref.Hash)))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	return ""
}

// TestTakeOverAfterATakeOverNamesItsDevice: A compacts, B takes over (and writes the
// policy.set naming B), B is gone too; C's take-over names C in its head, not the B
// that B's policy.set above the cut names, so C's next compaction is its own.
func TestTakeOverAfterATakeOverNamesItsDevice(t *testing.T) {
	w := newOwnerWorld(t)
	clock, order, owner, top := w.clock, w.order, w.owner, w.top
	B, C := "d-b", "d-c"
	order("one")
	if r, err := owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 1 {
		t.Fatalf("epoch 1: %+v %v", r, err)
	}
	top()
	clock.Add((25 * time.Hour).Milliseconds())
	order("two")
	if r, err := owner(B).Compact(fsbus.CompactOptions{TakeOver: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("B's take-over: %+v %v", r, err)
	}
	if k := top(); k.Head.Compactor != B {
		t.Fatalf("B's take-over names %s", k.Head.Compactor)
	}
	clock.Add((25 * time.Hour).Milliseconds())
	order("three")
	if r, err := owner(C).Compact(fsbus.CompactOptions{TakeOver: true, Force: true}); err != nil || r.Epoch != 3 {
		t.Fatalf("C's take-over: %+v %v", r, err)
	}
	if k := top(); k.Head.Compactor != C {
		t.Fatalf("C's take-over after B's names compactor %s, want %s", k.Head.Compactor, C)
	}
	order("four")
	if r, err := owner(C).Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 4 {
		t.Fatalf("C's own compaction after its take-over: %+v %v", r, err)
	}
}
