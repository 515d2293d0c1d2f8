package fsbus

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestTerminalThingsReadOnFirstUse: after the owner compacts, a new process folds from
// the checkpoint without reading any chunk of terminal things; an order terminal at
// the cut is found by id and by a prefix of its id (one chunk read), listed by a
// listing of its state, and counted without any chunk read; the reading folds what
// the whole reading folds.
func TestTerminalThingsReadOnFirstUse(t *testing.T) {
	w := newLifeWorld(t)
	var done []*fold.Order
	for _, title := range []string{"one", "two", "three"} {
		o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: title}))
		done = append(done, must[*fold.Order](t)(w.alice.Cancel(o.ID, NoteOptions{})))
	}
	live := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "live"}))
	must[*fold.Order](t)(w.bob.Claim(live.ID, ""))
	if _, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	c := reopen(t, w.c)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	st := v.State
	b := st.Base()
	if b == nil || v.Snapshot.Floors == nil {
		t.Fatal("not folded from the cut")
	}
	if read, of := b.ChunksRead(); read != 0 || of != 1 {
		t.Fatalf("thing chunks read by the fold: %d of %d, want 0 of 1", read, of)
	}
	if st.Orders[done[0].ID] != nil || st.Orders[live.ID] == nil {
		t.Fatalf("State.Orders holds a terminal order or lacks the live one")
	}
	if n := st.OrderCounts()[fold.StateCancelled]; n != 3 {
		t.Fatalf("cancelled orders counted: %d", n)
	}
	if read, _ := b.ChunksRead(); read != 0 {
		t.Fatal("counting read a chunk")
	}
	o, err := st.FindOrder(strings.TrimPrefix(done[1].ID, fold.PrefixOrder)[:8])
	if err != nil || o.ID != done[1].ID || o.State != fold.StateCancelled {
		t.Fatalf("find by prefix: %+v, %v", o, err)
	}
	if read, _ := b.ChunksRead(); read != 1 {
		t.Fatalf("thing chunks read by a lookup: %d", read)
	}
	if rows := st.ListOrders(fold.OrderFilter{State: string(fold.StateCancelled)}); len(rows) != 3 {
		t.Fatalf("listing cancelled orders: %d rows", len(rows))
	}
	if rows := st.ListOrders(fold.OrderFilter{State: "active"}); len(rows) != 1 || rows[0].ID != live.ID {
		t.Fatalf("listing active orders: %+v", rows)
	}
	sameAsWhole(t, w.c, v)
}

// TestArrivalLogCompactedAtTheCut: the first reading from a checkpoint's cut rewrites
// the arrival log without the lines of the entries at or below the cut, keeping its
// log id and numbers and marking its header; a cursor handed out before still names
// the same arrivals, a process that read the log before goes on without numbering
// anything again, and a whole reading afterwards numbers no entry at or below the cut.
func TestArrivalLogCompactedAtTheCut(t *testing.T) {
	defer func(n int) { arrivalsCompactMin = n }(arrivalsCompactMin)
	arrivalsCompactMin = 1
	w := newLifeWorld(t)
	a := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "first"}))
	must[*fold.Order](t)(w.bob.Claim(a.ID, ""))
	done := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "done"})) // terminal at the cut: its lines go
	must[*fold.Order](t)(w.alice.Cancel(done.ID, NoteOptions{}))
	if _, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	old := reopen(t, w.c)
	v0, err := old.Load()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(old.arrivalsPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.SplitN(string(before), "\n", 2)[0], " compacted 1") {
		t.Fatalf("arrival log header after the first reading from the cut: %q", strings.SplitN(string(before), "\n", 2)[0])
	}
	last0 := v0.Arrivals.Last
	cur0 := v0.Arrivals.Cursor()
	// What the next Load goes on from and the fold checkpoint keeps is a reading of the
	// log as rewritten, not of the lines it dropped.
	if rd, _, err := arrivals.Read(old.arrivalsPath()); err != nil || !reflect.DeepEqual(rd, old.lastArr) {
		t.Fatalf("the reading kept after the compaction is not of the rewritten log (%v)", err)
	}

	// A process that read the log before the compaction: compact again at epoch 2
	// under it (an order cancelled between), then it loads on.
	p := reopen(t, w.c)
	if _, err := p.Load(); err != nil {
		t.Fatal(err)
	}
	must[*fold.Order](t)(w.alice.Cancel(a.ID, NoteOptions{}))
	if r, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v, %v", r, err)
	}
	q := reopen(t, w.c)
	if _, err := q.Load(); err != nil { // whole: the epoch-2 entry is above epoch 1's cut
		t.Fatal(err)
	}
	if _, err := q.Load(); err != nil { // from epoch 2's cut: compacts the log at epoch 2
		t.Fatal(err)
	}
	v2, err := q.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v2.Arrivals.Compacted != 2 || v2.Arrivals.LogID != v0.Arrivals.LogID {
		t.Fatalf("log after epoch 2: compacted %d, id %s (was %s)", v2.Arrivals.Compacted, v2.Arrivals.LogID, v0.Arrivals.LogID)
	}
	vp, err := p.Load()
	if err != nil {
		t.Fatal(err)
	}
	if vp.Arrivals.LogID != v0.Arrivals.LogID || vp.Arrivals.Last != v2.Arrivals.Last {
		t.Fatalf("the process that read the log before: id %s, last %d; want %s, %d", vp.Arrivals.LogID, vp.Arrivals.Last, v0.Arrivals.LogID, v2.Arrivals.Last)
	}
	if n, ok := vp.Arrivals.ParseCursor(cur0); !ok || n != last0 {
		t.Fatalf("a cursor from before the compaction: %d, %v", n, ok)
	}
	// A whole reading numbers nothing at or below the cut.
	th := reopen(t, w.c)
	th.Thorough = true
	vt, err := th.Load()
	if err != nil {
		t.Fatal(err)
	}
	if vt.Snapshot.Floors != nil || vt.Arrivals.Last != v2.Arrivals.Last {
		t.Fatalf("a whole reading: floors %v, last %d, want %d", vt.Snapshot.Floors != nil, vt.Arrivals.Last, v2.Arrivals.Last)
	}
	// What is written after is new from a cursor of before.
	n := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "after"}))
	r := reopen(t, w.c)
	vr, err := r.Load()
	if err != nil {
		t.Fatal(err)
	}
	d := r.Catchup(vr, "bob", v2.Arrivals.Cursor())
	if !d.Since || len(d.Open) != 1 || d.Open[0].ID != n.ID {
		t.Fatalf("catch-up from a cursor of before: since %v, open %+v", d.Since, d.Open)
	}
}

// TestIdempotencyKeysAfterTheCut: a keyed write replayed after the owner compacted
// returns the first write's order without writing again, reading the one idempotency
// chunk that holds its key; the same key with other arguments is refused.
func TestIdempotencyKeysAfterTheCut(t *testing.T) {
	w := newLifeWorld(t)
	first := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "keyed", Key: "k-1"}))
	must[*fold.Order](t)(w.alice.Cancel(first.ID, NoteOptions{}))
	if _, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	c := reopen(t, w.c)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v.State.Base() == nil {
		t.Fatal("not folded from the checkpoint")
	}
	if _, ok := v.State.Idem.Get("alice\x00k-1"); ok {
		t.Fatal("the fold copied the state's idempotency keys")
	}
	if r, ok := v.State.IdemGet("alice\x00k-1"); !ok || r.Ref != first.ID {
		t.Fatalf("key at the cut: %+v, %v", r, ok)
	}
	n := len(v.Snapshot.Entries)
	again := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "keyed", Key: "k-1"}))
	if again.ID != first.ID {
		t.Fatalf("replay made %s, want %s", again.ID, first.ID)
	}
	if _, err := w.alice.NewOrder(NewOrderOptions{Title: "other", Key: "k-1"}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("same key, other arguments: %v", err)
	}
	v, err = reopen(t, w.c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Snapshot.Entries) != n {
		t.Fatalf("entries above the cut: %d, want %d (nothing written)", len(v.Snapshot.Entries), n)
	}
}

// TestAskReplayAfterTheCut: an ask raise and answer replayed with their keys after the
// owner compacted return the ask answered at the cut, without writing again.
func TestAskReplayAfterTheCut(t *testing.T) {
	w := newLifeWorld(t)
	opt := AskRaiseOptions{Title: "ship it?", Recommendation: "yes", Key: "k1"}
	a := must[*fold.Ask](t)(w.alice.AskRaise(opt))
	must[*fold.Ask](t)(w.master.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{Key: "m1"}))
	if _, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	c := reopen(t, w.c)
	alice := must[*Session](t)(c.As("alice"))
	if got, err := alice.AskRaise(opt); err != nil || got.ID != a.ID {
		t.Fatalf("raise replay: %+v, %v", got, err)
	}
	master := must[*Session](t)(c.As(fold.MasterWriter))
	if got, err := master.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{Key: "m1"}); err != nil || got.ID != a.ID || got.State != fold.AskApproved {
		t.Fatalf("answer replay: %+v, %v", got, err)
	}
	v, err := reopen(t, w.c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if v.State.Base() == nil || len(v.Snapshot.Entries) != 1 {
		t.Fatalf("above the cut: %d entries (the checkpoint entry alone), base %v", len(v.Snapshot.Entries), v.State.Base() != nil)
	}
}

// TestIdempotencyChunkMissingAtWrite: with the idempotency chunk that may hold a key
// not here (sync in progress), a keyed write is refused as retry_needed instead of
// being written as new, and goes through as a replay once the chunk is back.
func TestIdempotencyChunkMissingAtWrite(t *testing.T) {
	w := newLifeWorld(t)
	first := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "keyed", Key: "k-1"}))
	must[*fold.Order](t)(w.alice.Cancel(first.ID, NoteOptions{}))
	if _, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	chunks, _ := filepath.Glob(filepath.Join(w.c.Root, "checkpoints", "chunks", "*"))
	var gone string
	var body []byte
	for _, p := range chunks {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), `{"idem":`) {
			gone, body = p, b
		}
	}
	if gone == "" {
		t.Fatal("no idempotency chunk")
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	c := reopen(t, w.c)
	alice := must[*Session](t)(c.As("alice"))
	if o, err := alice.NewOrder(NewOrderOptions{Title: "keyed", Key: "k-1"}); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("keyed write with its chunk gone: %+v, %v", o, err)
	}
	if err := os.WriteFile(gone, body, 0o644); err != nil {
		t.Fatal(err)
	}
	alice = must[*Session](t)(reopen(t, w.c).As("alice"))
	if o := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "keyed", Key: "k-1"})); o.ID != first.ID {
		t.Fatalf("replay once the chunk is back: %s, want %s", o.ID, first.ID)
	}
}

// TestArrivalLogCompactionKeepsWhatOthersLogged: a compaction by a process whose
// reading is older than the log keeps the lines other processes logged since: every
// entry above the cut keeps its one number, and a catch-up from a cursor of before
// shows each new order once.
func TestArrivalLogCompactionKeepsWhatOthersLogged(t *testing.T) {
	defer func(n int) { arrivalsCompactMin = n }(arrivalsCompactMin)
	arrivalsCompactMin = 1 << 30 // no compaction until the stale one below
	w, _ := compactedWorld(t)
	a := reopen(t, w.c)
	vA, err := a.Load()
	if err != nil || vA.Snapshot.Floors == nil {
		t.Fatalf("A: floors %v, %v", vA != nil && vA.Snapshot.Floors != nil, err)
	}
	curA := vA.Arrivals.Cursor()
	o1 := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "o1"}))
	o2 := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "o2"}))
	b := reopen(t, w.c)
	vB, err := b.Load()
	if err != nil {
		t.Fatal(err)
	}
	var h1 string
	for i := range vB.Snapshot.Entries {
		if e := &vB.Snapshot.Entries[i]; e.Ref == o1.ID && h1 == "" {
			h1 = e.Hash()
		}
	}
	n1, curB := vB.Arrivals.Number(h1), vB.Arrivals.Cursor()
	arrivalsCompactMin = 1
	a.compactArrivals(vA.Snapshot, vA.Arrivals) // A's reading is older than B's lines
	if raw, err := os.ReadFile(a.arrivalsPath()); err != nil || !strings.Contains(string(raw), h1) {
		t.Fatalf("o1's line (number %d) dropped: %v", n1, err)
	}
	vB2, err := b.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := vB2.Arrivals.Number(h1); got != n1 {
		t.Fatalf("B: o1 numbered %d, want %d", got, n1)
	}
	seen := map[string]int{}
	for _, o := range b.Catchup(vB2, "bob", curA).Open {
		seen[o.ID]++
	}
	if seen[o1.ID] != 1 || seen[o2.ID] != 1 {
		t.Fatalf("catch-up from A's cursor: %v", seen)
	}
	r := reopen(t, w.c)
	vr, err := r.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := vr.Arrivals.Number(h1); got != n1 {
		t.Fatalf("a new process: o1 numbered %d, want %d", got, n1)
	}
	for _, o := range r.Catchup(vr, "bob", curB).Open {
		if o.ID == o1.ID {
			t.Fatal("o1 shown again from a cursor after it")
		}
	}
}

// TestFoldCheckpointFromTheCut: a process that folded from the owner's checkpoint
// leaves the fold checkpoint (ADR 0011) of that fold, and the next process restores it:
// it folds nothing, reads no thing chunk until a terminal thing is asked for, finds
// that thing, and then folds only what other processes append (a new order and its
// claim). Each of these states is the whole reading's. A new checkpoint makes the next
// Load fold from its cut whole.
func TestFoldCheckpointFromTheCut(t *testing.T) {
	w := newLifeWorld(t)
	done := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "done"}))
	must[*fold.Order](t)(w.alice.Cancel(done.ID, NoteOptions{}))
	live := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "live"}))
	must[*fold.Order](t)(w.bob.Claim(live.ID, ""))
	if _, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	first := reopen(t, w.c)
	if _, err := first.Load(); err != nil {
		t.Fatal(err)
	}
	if first.folds.full != 1 || first.folds.fromCheckpoint != 0 {
		t.Fatalf("first process: %+v, want one full fold", first.folds)
	}
	c := reopen(t, w.c)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.folds.fromCheckpoint != 1 || c.folds.full != 0 {
		t.Fatalf("second process: %+v, want its fold restored", c.folds)
	}
	b := v.State.Base()
	if b == nil || v.Snapshot.Floors == nil {
		t.Fatal("the restored fold is not from the cut")
	}
	if cf := c.OwnerCheckpoint(); cf == nil || cf.Used < 0 || cf.Chain[cf.Used].Data.Epoch != 1 {
		t.Fatalf("owner's checkpoint after the restore: %+v", cf)
	}
	if o, err := v.State.FindOrder(live.ID); err != nil || o.ID != live.ID {
		t.Fatalf("live order by its whole id: %+v, %v", o, err)
	}
	if read, of := b.ChunksRead(); read != 0 || of != 1 {
		t.Fatalf("thing chunks read by the restored fold and a live order's lookup: %d of %d, want 0 of 1", read, of)
	}
	if o := v.State.Order(done.ID); o == nil || o.State != fold.StateCancelled {
		t.Fatalf("terminal order after the restore: %+v", o)
	}
	if read, _ := b.ChunksRead(); read != 1 {
		t.Fatalf("thing chunks read by one lookup: %d", read)
	}
	sameAsWhole(t, w.c, v)

	next := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "next"}))
	must[*fold.Order](t)(w.bob.Claim(next.ID, ""))
	if v, err = c.Load(); err != nil {
		t.Fatal(err)
	}
	if c.folds.delta != 1 || c.folds.full != 0 {
		t.Fatalf("after two appends: %+v, want them folded alone", c.folds)
	}
	if o := v.State.Order(next.ID); o == nil || o.State != fold.StateClaimed {
		t.Fatalf("order claimed above the cut: %+v", o)
	}
	sameAsWhole(t, w.c, v)

	must[*fold.Order](t)(w.alice.Cancel(live.ID, NoteOptions{}))
	if r, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v, %v", r, err)
	}
	if v, err = c.Load(); err != nil {
		t.Fatal(err)
	}
	if c.folds.full != 1 {
		t.Fatalf("after a new checkpoint: %+v, want a full fold", c.folds)
	}
	sameAsWhole(t, w.c, v)
}
