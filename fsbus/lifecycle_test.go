package fsbus

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// The order life cycle (docs/format.md §14) — windows measured on this machine, expiry written
// only by the entitled party's own machine, the release cap, deps, retire.

// lifeWorld is a channel with the owner, alice (author), bob and carol (members) and
// otto (orchestrator), on a clock the test moves.
type lifeWorld struct {
	c                               *Channel
	clock                           *atomic.Int64 // Unix ms
	master, alice, bob, carol, otto *Session
}

func newLifeWorld(t *testing.T) *lifeWorld {
	t.Helper()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	w := &lifeWorld{c: c, clock: &atomic.Int64{}}
	w.clock.Store(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC).UnixMilli())
	c.Now = w.now
	if w.master, err = c.As(fold.MasterWriter); err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		name, level string
		s           **Session
	}{{"alice", "member", &w.alice}, {"bob", "member", &w.bob}, {"carol", "member", &w.carol}, {"otto", "orchestrator", &w.otto}} {
		if _, err := Join(c, a.name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.master.Grant(GrantOptions{Agent: a.name, Level: a.level}); err != nil {
			t.Fatal(err)
		}
		if *a.s, err = c.As(a.name); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *lifeWorld) now() time.Time       { return time.UnixMilli(w.clock.Load()) }
func (w *lifeWorld) pass(d time.Duration) { w.clock.Add(d.Milliseconds()) }

func (w *lifeWorld) order(t *testing.T, id string) *fold.Order {
	t.Helper()
	v, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	return v.State.Order(id)
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func settled(t *testing.T, s *Session) []string {
	t.Helper()
	done, err := s.SettleWindows()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range done {
		ids = append(ids, o.ID)
	}
	return ids
}

// TestSettleWindowsExecution: the execution window runs 4 h from the claim as this
// machine saw it, is renewed by progress and extend, is capped by the lifetime, and
// is closed only by the holder's SettleWindows — once.
func TestSettleWindowsExecution(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Port the parser"}))
	must[*fold.Order](t)(w.bob.Claim(o.ID, ""))

	w.pass(3 * time.Hour)
	for _, s := range []*Session{w.alice, w.bob, w.carol, w.master} {
		if got := settled(t, s); got != nil {
			t.Fatalf("%s expired %v before the window closed", s.Name, got)
		}
	}
	must[*fold.Order](t)(w.bob.Progress(o.ID, NoteOptions{Note: "halfway"})) // renews: 4 h from now
	w.pass(3 * time.Hour)
	must[*fold.Order](t)(w.bob.Extend(o.ID, NoteOptions{Note: "tests are slow"})) // renews again
	w.pass(4*time.Hour - time.Second)
	if got := settled(t, w.bob); got != nil {
		t.Fatalf("expired %v one second before the renewed window closed", got)
	}
	// Everyone else's clock says the window passed long ago: they write nothing.
	w.pass(2 * time.Second)
	for _, s := range []*Session{w.alice, w.carol, w.otto, w.master} {
		if got := settled(t, s); got != nil {
			t.Fatalf("%s expired %v: only the holder closes an execution window", s.Name, got)
		}
	}
	if st := w.order(t, o.ID).State; st != fold.StateClaimed {
		t.Fatalf("state %s before the holder settled", st)
	}
	if got := settled(t, w.bob); len(got) != 1 || got[0] != o.ID {
		t.Fatalf("holder settled %v, want [%s]", got, o.ID)
	}
	got := w.order(t, o.ID)
	last := got.History[len(got.History)-1]
	if got.State != fold.StateTimedOut || last.Type != fold.TypeOrderExpire || last.By != "bob" {
		t.Fatalf("after settling: %s, last %+v", got.State, last)
	}
	// Idempotent: a second pass writes nothing.
	before := len(must[*View](t)(w.c.Load()).Snapshot.Entries)
	if got := settled(t, w.bob); got != nil {
		t.Fatalf("second pass expired %v", got)
	}
	if after := len(must[*View](t)(w.c.Load()).Snapshot.Entries); after != before {
		t.Fatalf("second pass wrote %d entries", after-before)
	}
	// Extend after the window closed: the holder no longer holds it.
	if _, err := w.bob.Extend(o.ID, NoteOptions{}); !errs.Is(err, errs.Denied) {
		t.Fatalf("extend of an expired claim: %v", err)
	}

	// The lifetime caps renewals: a claim renewed every 3 h still ends 24 h after it.
	must[*fold.Order](t)(w.carol.Claim(o.ID, ""))
	for i := 0; i < 7; i++ { // 21 h of renewals
		w.pass(3 * time.Hour)
		ext := must[*fold.Order](t)(w.carol.Extend(o.ID, NoteOptions{}))
		// Only the extend the lifetime cut says so, with the deadline.
		capped := len(ext.Warnings) == 1 && strings.HasPrefix(ext.Warnings[0], "capped at lifetime") &&
			strings.Contains(ext.Warnings[0], w.now().Add(3*time.Hour).UTC().Format(time.RFC3339))
		if capped != (i == 6) || (i < 6 && len(ext.Warnings) > 0) {
			t.Fatalf("extend at %d h: warnings %q", 3*(i+1), ext.Warnings)
		}
		if got := settled(t, w.carol); got != nil {
			t.Fatalf("expired at %d h, before the lifetime", 3*(i+1))
		}
	}
	v := must[*View](t)(w.c.Load())
	win, ok := w.c.Window(v, v.State.Order(o.ID))
	if !ok || !win.Deadline.Equal(win.Cap) || win.Deadline.Sub(w.now()) != 3*time.Hour {
		t.Fatalf("window %+v ok %v: want the 24 h cap, 3 h from now", win, ok)
	}
	w.pass(3 * time.Hour)
	if _, err := w.carol.Extend(o.ID, NoteOptions{}); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "closed at") {
		t.Fatalf("extend past the lifetime: %v", err)
	}
	if got := settled(t, w.carol); len(got) != 1 {
		t.Fatalf("lifetime reached: settled %v", got)
	}
}

// TestSettleWindowsQueueAndPolicy: a queue window (channel policy, or the order's own
// windows) is closed only by its author's machine; the channel's execution window
// applies when set, the order's own value over it.
func TestSettleWindowsQueueAndPolicy(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	w.c.Config.Policy.QueueWindowS = 3600
	w.c.Config.Policy.ExecWindowS = 600
	q := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Nobody wants this"}))
	w.pass(time.Hour)
	for _, s := range []*Session{w.bob, w.otto, w.master} {
		if got := settled(t, s); got != nil {
			t.Fatalf("%s expired %v: only the author closes a queue window", s.Name, got)
		}
	}
	if got := settled(t, w.alice); len(got) != 1 || got[0] != q.ID {
		t.Fatalf("author settled %v", got)
	}
	if o := w.order(t, q.ID); o.State != fold.StateTimedOut || o.History[len(o.History)-1].By != "alice" {
		t.Fatalf("queue expiry: %+v", o)
	}

	// The channel's execution window (10 min) applies.
	x := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Quick one"}))
	must[*fold.Order](t)(w.bob.Claim(x.ID, ""))
	w.pass(11 * time.Minute)
	if got := settled(t, w.bob); len(got) != 1 || got[0] != x.ID {
		t.Fatalf("channel exec window: settled %v", got)
	}

	// An order's own windows override the channel's.
	ws := w.c.Config.Policy.Windows(&fold.Order{Contract: fold.Contract{Windows: &fold.Windows{ExecS: 7200}}})
	if ws != (fold.Windows{ExecS: 7200, LifetimeS: fold.DefaultLifetimeS, QueueS: 3600}) {
		t.Fatalf("windows: %+v", ws)
	}
	if ws := (fold.Policy{}).Windows(&fold.Order{}); ws != (fold.Windows{ExecS: fold.DefaultExecWindowS, LifetimeS: fold.DefaultLifetimeS}) {
		t.Fatalf("default windows: %+v", ws)
	}
}

// TestSettleWindowsOnlyTheClaimingMachine: the holder's key on a second machine (its
// own device and clock) never expires a claim made on the first.
func TestSettleWindowsOnlyTheClaimingMachine(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Rebuild the index"}))
	must[*fold.Order](t)(w.bob.Claim(o.ID, ""))

	hb := testHome(t)
	if err := os.MkdirAll(filepath.Dir(hb.keyPath("acme", "bob")), 0o700); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(w.c.Home.keyPath("acme", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hb.keyPath("acme", "bob"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cb, err := Open(hb, w.c.Root)
	if err != nil {
		t.Fatal(err)
	}
	cb.Now = w.now
	bobB := must[*Session](t)(cb.As("bob"))
	if bobB.Device == w.bob.Device {
		t.Fatal("the second home has the same device id")
	}
	w.pass(5 * time.Hour) // machine B first sees the claim now: its own window is fresh
	if got := settled(t, bobB); got != nil {
		t.Fatalf("machine B expired %v", got)
	}
	w.pass(5 * time.Hour) // by B's clock the window passed too: still not B's claim
	if got := settled(t, bobB); got != nil {
		t.Fatalf("machine B expired %v after its window passed", got)
	}
	if got := settled(t, w.bob); len(got) != 1 {
		t.Fatalf("machine A settled %v", got)
	}
}

// TestReleaseCapDeclineReassign: three releases, the fourth refused (and kept refused
// across a fail and a new claim); decline by the offeree only; reassignment of a
// claimed order by its author and by an orchestrator, not by another member.
func TestReleaseCapDeclineReassign(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Flaky test"}))
	for i, s := range []*Session{w.bob, w.carol, w.bob} {
		must[*fold.Order](t)(s.Claim(o.ID, ""))
		if got := must[*fold.Order](t)(s.Release(o.ID, NoteOptions{})); got.State != fold.StateOpen || got.Releases != i+1 {
			t.Fatalf("release %d: %s, releases %d", i+1, got.State, got.Releases)
		}
	}
	must[*fold.Order](t)(w.bob.Claim(o.ID, ""))
	if _, err := w.bob.Release(o.ID, NoteOptions{}); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "released 3 times") {
		t.Fatalf("fourth release: %v", err)
	}
	if _, err := w.bob.Fail(o.ID, NoteOptions{Note: "  "}); !errs.Is(err, errs.Invalid) {
		t.Fatalf("fail without a reason: %v", err)
	}
	if _, err := w.carol.Fail(o.ID, NoteOptions{Note: "not mine"}); !errs.Is(err, errs.Denied) {
		t.Fatalf("fail by a non-holder: %v", err)
	}
	must[*fold.Order](t)(w.bob.Fail(o.ID, NoteOptions{Note: "flakes on CI only"}))
	must[*fold.Order](t)(w.carol.Claim(o.ID, ""))
	if _, err := w.carol.Release(o.ID, NoteOptions{}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("release after the cap, new holder: %v", err)
	}

	d := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Docs", To: "bob"}))
	if _, err := w.carol.Decline(d.ID, NoteOptions{}); !errs.Is(err, errs.Denied) {
		t.Fatalf("decline by another agent: %v", err)
	}
	if _, err := w.bob.Release(d.ID, NoteOptions{}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("release of an offer: %v", err)
	}
	if got := must[*fold.Order](t)(w.bob.Decline(d.ID, NoteOptions{Note: "busy"})); got.State != fold.StateOpen || got.Releases != 0 || got.History[len(got.History)-1].Act != "decline" {
		t.Fatalf("decline: %+v", got)
	}
	if _, err := w.bob.Decline(d.ID, NoteOptions{}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("decline of an open order: %v", err)
	}

	must[*fold.Order](t)(w.bob.Claim(d.ID, ""))
	if _, err := w.carol.Offer(d.ID, OfferOptions{To: "carol"}); !errs.Is(err, errs.Denied) {
		t.Fatalf("reassign by a member who is not the author: %v", err)
	}
	if got := must[*fold.Order](t)(w.alice.Offer(d.ID, OfferOptions{To: "carol"})); got.State != fold.StateOffered || got.Holder != "" || got.History[len(got.History)-1].Act != "reassign" {
		t.Fatalf("reassign by the author: %+v", got)
	}
	if _, err := w.bob.Submit(d.ID, SubmitOptions{Reference: "commit:abc"}); !errs.Is(err, errs.Denied) {
		t.Fatalf("submit by the old holder: %v", err)
	}
	must[*fold.Order](t)(w.carol.Claim(d.ID, ""))
	if got := must[*fold.Order](t)(w.otto.Offer(d.ID, OfferOptions{To: "bob"})); got.OfferedTo != "bob" {
		t.Fatalf("reassign by an orchestrator: %+v", got)
	}
}

// TestDependenciesReady: an order is claimable only once every dependency is
// accepted; Ready and ListOrders(Ready) agree with the claim refusal.
func TestDependenciesReady(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	a := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Schema"}))
	b := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Migration", Deps: []string{a.ID}}))
	ready := func() map[string]bool {
		m := map[string]bool{}
		for _, r := range must[*View](t)(w.c.Load()).State.ListOrders(fold.OrderFilter{Ready: true}) {
			m[r.ID] = true
		}
		return m
	}
	if r := ready(); !r[a.ID] || r[b.ID] {
		t.Fatalf("ready %v", r)
	}
	_, err := w.bob.Claim(b.ID, "")
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "waits for "+a.ID) {
		t.Fatalf("claim of a not-ready order: %v", err)
	}
	must[*fold.Order](t)(w.bob.Claim(a.ID, ""))
	must[*fold.Order](t)(w.bob.Submit(a.ID, SubmitOptions{Reference: "commit:1"}))
	if r := ready(); r[b.ID] {
		t.Fatal("ready before the dependency is accepted")
	}
	must[*fold.Order](t)(w.alice.Review(a.ID, "accept", NoteOptions{}))
	if r := ready(); !r[b.ID] || r[a.ID] {
		t.Fatalf("ready after accept %v", r)
	}
	must[*fold.Order](t)(w.carol.Claim(b.ID, ""))
}

// TestCancelledDependency: an order cannot be dispatched to wait
// for a cancelled order; one whose dependency is cancelled later is blocked for good —
// not ready, its claim refused saying so — and the fold leaves it where it was.
func TestCancelledDependency(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	a := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "A"}))
	b := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "B", Deps: []string{a.ID}}))
	must[*fold.Order](t)(w.alice.Cancel(a.ID, NoteOptions{}))
	v := must[*View](t)(w.c.Load())
	before := v.State.Entries
	_, err := w.alice.NewOrder(NewOrderOptions{Title: "C", Deps: []string{a.ID}})
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), a.ID+" was cancelled") {
		t.Fatalf("dispatch waiting for a cancelled order: %v", err)
	}
	v = must[*View](t)(w.c.Load())
	if v.State.Entries != before {
		t.Fatal("a refused dispatch wrote")
	}
	ob := v.State.Order(b.ID)
	if ob.State != fold.StateOpen || v.State.Ready(ob) {
		t.Fatalf("order on a cancelled dependency: %s ready=%v", ob.State, v.State.Ready(ob))
	}
	if why := v.State.BlockedForGood(ob); !strings.Contains(why, "dependency "+a.ID+" was cancelled: cancel or re-dispatch this order") {
		t.Fatalf("blocked: %q", why)
	}
	for _, r := range v.State.ListOrders(fold.OrderFilter{Ready: true}) {
		if r.ID == b.ID {
			t.Fatal("listed as ready")
		}
	}
	if _, err := w.bob.Claim(b.ID, ""); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "blocked for good") {
		t.Fatalf("claim of a blocked order: %v", err)
	}
	if why := v.State.BlockedForGood(v.State.Order(a.ID)); why != "" {
		t.Fatalf("an order without dependencies is blocked: %q", why)
	}
}

// TestReadyFor: the ready list for an agent leaves out orders
// offered to another agent; a state filter is checked.
func TestReadyFor(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	mine := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "For bob", To: "bob"}))
	theirs := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "For carol", To: "carol"}))
	open := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Open"}))
	v := must[*View](t)(w.c.Load())
	ids := func(f fold.OrderFilter) string {
		var out []string
		for _, r := range v.State.ListOrders(f) {
			out = append(out, r.ID)
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	want := []string{mine.ID, open.ID}
	sort.Strings(want)
	if got := ids(fold.OrderFilter{Ready: true, For: "bob"}); got != strings.Join(want, " ") {
		t.Fatalf("ready for bob: %s (carol's offer %s must be left out)", got, theirs.ID)
	}
	if got := ids(fold.OrderFilter{Ready: true}); len(strings.Fields(got)) != 3 {
		t.Fatalf("ready for anyone: %s", got)
	}
	for _, ok := range []string{"", "active", "open", "pointer_stale", "validation_failed", "accepted"} {
		if err := fold.CheckStateFilter(ok); err != nil {
			t.Fatalf("state %q: %v", ok, err)
		}
	}
	if err := fold.CheckStateFilter("bogus"); !errs.Is(err, errs.Invalid) || !strings.Contains(errOf(err).Hint, "pointer_stale") {
		t.Fatalf("bogus state: %v", err)
	}
	if err := fold.CheckStateFilter("ready"); !errs.Is(err, errs.Invalid) || !strings.Contains(errOf(err).Hint, "--ready") {
		t.Fatalf("state ready: %v", err)
	}
}

// TestRetire: the agent itself or the master retires it and every claim and offer it
// had is released by a signed entry; another agent cannot, and the fold ignores such
// a retire or a retirement release for an agent that is not retired.
func TestRetire(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	a := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "A"}))
	b := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "B", To: "bob"}))
	c := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "C"}))
	must[*fold.Order](t)(w.bob.Claim(a.ID, ""))
	must[*fold.Order](t)(w.carol.Claim(c.ID, ""))

	if _, err := w.otto.Retire("bob"); !errs.Is(err, errs.Denied) {
		t.Fatalf("retire by another agent: %v", err)
	}
	// Written anyway (a modified binary): the fold gives it no effect.
	e := appendRaw(t, w.otto, fold.TypeAgentRetire, "bob", fold.EntryData{})
	v := must[*View](t)(w.c.Load())
	if v.State.Agents["bob"].Retired || !hasIgnored(v.State, e.Hash(), "only the master retires others") {
		t.Fatal("another agent's retire counted")
	}
	// A retirement release for an agent not retired counts for nothing.
	x := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "X"}))
	x = must[*fold.Order](t)(w.otto.Claim(x.ID, ""))
	r := appendRaw(t, w.master, fold.TypeOrderRelease, x.ID, fold.EntryData{Basis: x.Head, Agent: "otto"})
	v = must[*View](t)(w.c.Load())
	if v.State.Order(x.ID).Holder != "otto" || !hasIgnored(v.State, r.Hash(), "not retired") {
		t.Fatal("a retirement release for an agent not retired counted")
	}

	ids := must[[]string](t)(w.bob.Retire("bob"))
	if len(ids) != 2 || !strings.Contains(strings.Join(ids, " "), a.ID) || !strings.Contains(strings.Join(ids, " "), b.ID) {
		t.Fatalf("bob's retire released %v", ids)
	}
	if o := w.order(t, a.ID); o.State != fold.StateOpen || o.History[len(o.History)-1].Act != "retirement" || o.Releases != 0 {
		t.Fatalf("after retire: %+v", o)
	}
	if o := w.order(t, b.ID); o.State != fold.StateOpen {
		t.Fatalf("offer after retire: %s", o.State)
	}
	if _, err := w.bob.Claim(a.ID, ""); !errs.Is(err, errs.Denied) {
		t.Fatalf("claim by a retired agent: %v", err)
	}
	if ids := must[[]string](t)(w.bob.Retire("bob")); ids != nil {
		t.Fatalf("second retire released %v", ids)
	}
	ids = must[[]string](t)(w.master.Retire("carol"))
	if len(ids) != 1 || ids[0] != c.ID {
		t.Fatalf("master's retire released %v", ids)
	}
	if o := w.order(t, c.ID); o.State != fold.StateOpen || o.History[len(o.History)-1].By != fold.MasterWriter {
		t.Fatalf("after the master's retire: %+v", o)
	}
	if _, err := w.master.Retire("nobody"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("retire of an unknown agent: %v", err)
	}
}

// TestRetiredWritesNothing: after its retirement (by itself or
// by the master) an agent's every write is refused, naming the retirement, and a
// hand-written entry after it counts for nothing in the fold; its entries before the
// retirement keep counting.
func TestRetiredWritesNothing(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	own := must[*fold.Order](t)(w.bob.NewOrder(NewOrderOptions{Title: "Bob's own"}))
	carols := must[*fold.Order](t)(w.carol.NewOrder(NewOrderOptions{Title: "Carol's own"}))
	must[[]string](t)(w.bob.Retire("bob"))
	must[[]string](t)(w.master.Retire("carol"))
	for name, s := range map[string]*Session{"bob": w.bob, "carol": w.carol} {
		checks := map[string]error{}
		_, checks["new"] = s.NewOrder(NewOrderOptions{Title: "After"})
		_, checks["talk"] = s.TalkSend(TalkSendOptions{To: "alice", Body: "hello"})
		_, checks["cancel"] = s.Cancel(map[string]string{"bob": own.ID, "carol": carols.ID}[name], NoteOptions{})
		_, checks["offer"] = s.Offer(map[string]string{"bob": own.ID, "carol": carols.ID}[name], OfferOptions{To: "alice"})
		for what, err := range checks {
			if !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "retired") {
				t.Fatalf("%s %s after retirement: %v", name, what, err)
			}
			if e := errOf(err); !strings.Contains(e.Hint, "new agent name") || strings.Contains(e.Hint, "ferry grant") {
				t.Fatalf("%s %s hint: %q", name, what, e.Hint)
			}
		}
		// Retirement is final: the master's grant is refused, naming a new name, and
		// writes nothing.
		before := len(must[*View](t)(w.c.Load()).Snapshot.Entries)
		_, err := w.master.Grant(GrantOptions{Agent: name, Level: "orchestrator"})
		if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "agent "+name+" is retired") ||
			!strings.Contains(errOf(err).Hint, "ferry join --as "+name+"-2") {
			t.Fatalf("grant to retired %s: %v", name, err)
		}
		if after := len(must[*View](t)(w.c.Load()).Snapshot.Entries); after != before {
			t.Fatalf("a refused grant wrote %d entries", after-before)
		}
	}
	// Written anyway (a modified binary): the fold counts neither cancel; the orders
	// each wrote before retiring still count.
	v := must[*View](t)(w.c.Load())
	eb := appendRaw(t, w.bob, fold.TypeOrderCancel, own.ID, fold.EntryData{Basis: v.State.Order(own.ID).Head})
	ec := appendRaw(t, w.carol, fold.TypeOrderCancel, carols.ID, fold.EntryData{Basis: v.State.Order(carols.ID).Head})
	v = must[*View](t)(w.c.Load())
	for _, c := range []struct {
		id   string
		hash string
	}{{own.ID, eb.Hash()}, {carols.ID, ec.Hash()}} {
		if o := v.State.Order(c.id); o == nil || o.State != fold.StateOpen {
			t.Fatalf("order %s after a cancel written past retirement: %+v", c.id, o)
		}
		if !hasIgnored(v.State, c.hash, "was retired") {
			t.Fatalf("cancel of %s after retirement not listed as ignored: %+v", c.id, v.State.Ignored)
		}
	}
}

// TestFoldWrongWriterCountsForNothing (property): an order.expire or order.release
// (and order.fail, order.extend) naming the current head, written by a party the
// level table does not entitle, counts for nothing — the order's state, holder and
// head are those before it — while the entitled party's same entry moves the order.
func TestFoldWrongWriterCountsForNothing(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	rnd := propSeed(t)
	writers := []*Session{w.alice, w.bob, w.carol, w.otto, w.master}
	for i := 0; i < propIters(40); i++ {
		o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "case"}))
		// A random starting state: open, offered to bob, or claimed by bob.
		switch rnd.Intn(3) {
		case 1:
			o = must[*fold.Order](t)(w.alice.Offer(o.ID, OfferOptions{To: "bob"}))
		case 2:
			o = must[*fold.Order](t)(w.bob.Claim(o.ID, ""))
		}
		typ, d := fold.TypeOrderRelease, fold.EntryData{Basis: o.Head}
		switch rnd.Intn(4) {
		case 1:
			typ, d.Window = fold.TypeOrderExpire, WindowExecution
		case 2:
			typ, d.Window = fold.TypeOrderExpire, WindowQueue
		case 3:
			typ, d.Note = fold.TypeOrderFail, "reason"
		}
		s := writers[rnd.Intn(len(writers))]
		entitled := false
		switch {
		case typ == fold.TypeOrderRelease && o.State == fold.StateClaimed, typ == fold.TypeOrderFail && o.State == fold.StateClaimed,
			typ == fold.TypeOrderExpire && d.Window == WindowExecution && o.State == fold.StateClaimed:
			entitled = s.Name == o.Holder
		case typ == fold.TypeOrderRelease && o.State == fold.StateOffered:
			entitled = s.Name == o.OfferedTo
		case typ == fold.TypeOrderExpire && d.Window == WindowQueue && o.State != fold.StateClaimed:
			entitled = s.Name == o.Author
		}
		e := appendRaw(t, s, typ, o.ID, d)
		got := w.order(t, o.ID)
		if entitled {
			if got.Head != e.Hash() {
				t.Fatalf("case %d: %s by entitled %s on %s did not count", i, typ, s.Name, o.State)
			}
			continue
		}
		if got.Head != o.Head || got.State != o.State || got.Holder != o.Holder {
			t.Fatalf("case %d: %s (%s) by %s on a %s order counted: now %s head %s", i, typ, d.Window, s.Name, o.State, got.State, got.Head)
		}
	}
	// An extend naming a claim that is not the writer's own never renews it.
	o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "extend"}))
	o = must[*fold.Order](t)(w.bob.Claim(o.ID, ""))
	appendRaw(t, w.carol, fold.TypeOrderExtend, o.ID, fold.EntryData{Claim: o.Claim})
	if got := w.order(t, o.ID); len(got.Progress) != 0 {
		t.Fatalf("another agent's extend counted: %+v", got.Progress)
	}
}

// TestAutoSettle: a write of a session with AutoSettle first closes its writer's due
// windows under the same lock; another writer's AutoSettle closes nothing of others.
func TestAutoSettle(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Long job"}))
	must[*fold.Order](t)(w.bob.Claim(o.ID, ""))
	w.pass(5 * time.Hour)
	var aliceExpired, bobExpired []string
	w.alice.AutoSettle = func(ids []string) { aliceExpired = append(aliceExpired, ids...) }
	w.bob.AutoSettle = func(ids []string) { bobExpired = append(bobExpired, ids...) }
	must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Another"}))
	if len(aliceExpired) != 0 || w.order(t, o.ID).State != fold.StateClaimed {
		t.Fatalf("the author's write expired %v", aliceExpired)
	}
	if _, err := w.bob.Extend(o.ID, NoteOptions{}); !errs.Is(err, errs.Denied) {
		t.Fatalf("extend after the window passed: %v", err)
	}
	if len(bobExpired) != 1 || bobExpired[0] != o.ID || w.order(t, o.ID).State != fold.StateTimedOut {
		t.Fatalf("holder's write expired %v; state %s", bobExpired, w.order(t, o.ID).State)
	}
}

// TestPolicyWindowsSigned: a channel.toml carrying the window keys, signed by the
// master, opens and its values apply; the keys stay out of files that do not set them.
func TestPolicyWindowsSigned(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(c.Root, "channel.toml")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "window") || strings.Contains(string(raw), "lifetime") {
		t.Fatalf("init wrote window keys:\n%s", raw)
	}
	cfg := c.Config
	cfg.Policy.ExecWindowS, cfg.Policy.LifetimeS, cfg.Policy.QueueWindowS = 600, 7200, 300
	k, err := h.LoadKey("acme", fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cfg.signingBody()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sig, err = ledger.SignDomain(k, channelDomain, cfg.Project, body); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "exec_window_s = 600") {
		t.Fatalf("encoded:\n%s", buf.String())
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(h, c.Root)
	if err != nil {
		t.Fatalf("a signed channel.toml with window keys: %v", err)
	}
	if ws := c2.Config.Policy.Windows(&fold.Order{}); ws != (fold.Windows{ExecS: 600, LifetimeS: 7200, QueueS: 300}) {
		t.Fatalf("windows %+v", ws)
	}
	// Edited after signing: refused like any other key.
	if err := os.WriteFile(p, bytes.Replace(buf.Bytes(), []byte("exec_window_s = 600"), []byte("exec_window_s = 60000"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(h, c.Root); !errs.Is(err, errs.Invalid) {
		t.Fatalf("edited window key: %v", err)
	}
}
