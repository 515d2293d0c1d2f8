package fsbus

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/bootclock"
	"github.com/ferryhq/ferry/internal/errs"
)

// A wall-clock step (an NTP step, a VM whose clock is corrected on resume) must not
// make a live holder look silent, close a window, or expire a live run's claim: every
// decision docs/design.md §2 rule 7 leaves to an observer's clock is measured on the boot
// clock (ADR 0013).

// stepClock is a machine's wall clock and boot clock, which a test moves together
// (time passes) or apart (the wall clock is stepped).
type stepClock struct {
	wall, boot atomic.Int64 // Unix ms; ms since boot
	id         atomic.Value // boot id
}

func newStepClock() *stepClock {
	c := &stepClock{}
	c.wall.Store(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC).UnixMilli())
	c.boot.Store((3 * time.Hour).Milliseconds())
	c.id.Store("boot-1")
	return c
}

func (c *stepClock) now() time.Time { return time.UnixMilli(c.wall.Load()) }
func (c *stepClock) bootNow() bootclock.Reading {
	return bootclock.Reading{Since: time.Duration(c.boot.Load()) * time.Millisecond, ID: c.id.Load().(string)}
}

// pass lets d go by on both clocks.
func (c *stepClock) pass(d time.Duration) {
	c.wall.Add(d.Milliseconds())
	c.boot.Add(d.Milliseconds())
}

// step moves the wall clock alone.
func (c *stepClock) step(d time.Duration) { c.wall.Add(d.Milliseconds()) }

// reboot starts the boot clock again under a new id; the wall clock goes on.
func (c *stepClock) reboot(id string) {
	c.boot.Store((time.Minute).Milliseconds())
	c.id.Store(id)
}

func (c *stepClock) drive(ch *Channel) { ch.Now, ch.Boot = c.now, c.bootNow }

// TestClockStepPrimaryTake: machine B sees alice, the primary on machine A, alive;
// B's wall clock is stepped an hour forward. bob's take on B is refused — alice was
// heard from 0 s ago on B's boot clock — until 30 minutes really pass on B with no
// word from her; a reboot of B likewise restarts the quiet period.
func TestClockStepPrimaryTake(t *testing.T) {
	t.Parallel()
	clkA, clkB := newStepClock(), newStepClock()
	hA, hB := testHome(t), testHome(t)
	dirA := filepath.Join(t.TempDir(), "acme")
	cA, err := Init(hA, InitOptions{Dir: dirA, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	clkA.drive(cA)
	mA := must[*Session](t)(cA.As(fold.MasterWriter))
	if _, err := Join(cA, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := mA.Grant(GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	alice := must[*Session](t)(cA.As("alice"))
	if _, err := alice.PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	dirB := filepath.Join(t.TempDir(), "acme")
	copyTree(t, dirA, dirB)
	cB, err := Open(hB, dirB)
	if err != nil {
		t.Fatal(err)
	}
	clkB.drive(cB)
	if _, err := Join(cB, "bob", "test"); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(dirB, "ledger"), filepath.Join(dirA, "ledger"))
	if _, err := mA.Grant(GrantOptions{Agent: "bob", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(dirA, "ledger"), filepath.Join(dirB, "ledger"))
	bob := must[*Session](t)(cB.As("bob"))

	// alice works on: her heartbeat reaches B 10 minutes in.
	clkA.pass(10 * time.Minute)
	clkB.pass(10 * time.Minute)
	if err := alice.WritePresence("working", nil); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(dirA, "presence"), filepath.Join(dirB, "presence"))
	if st := bob.PrimaryStatus(primaryLoad(t, cB)); st.Liveness != Alive {
		t.Fatalf("before the step: %+v", st)
	}

	// B's wall clock jumps an hour ahead; a second passes.
	clkB.step(time.Hour)
	clkB.pass(time.Second)
	if _, err := bob.PrimaryTake(""); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "held by alice (alive") {
		t.Fatalf("take from a live holder after a wall-clock step: %v", err)
	}
	if st := bob.PrimaryStatus(primaryLoad(t, cB)); st.Holder != "alice" || st.Liveness != Alive || st.AgeS > 1 {
		t.Fatalf("after the step: %+v", st)
	}
	// 29 minutes really pass: alice is quiet, not silent.
	clkB.pass(29 * time.Minute)
	if _, err := bob.PrimaryTake(""); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "quiet, heard from 29 min ago") {
		t.Fatalf("take 29 minutes after the step: %v", err)
	}
	// B reboots: the boot clock starts again, and so does the quiet period.
	clkB.reboot("boot-2")
	clkB.pass(2 * time.Minute)
	if _, err := bob.PrimaryTake(""); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "held by alice (alive") {
		t.Fatalf("take after a reboot: %v", err)
	}
	// 31 minutes of real silence on B's boot clock: the take goes through.
	clkB.pass(31 * time.Minute)
	st, err := bob.PrimaryTake("")
	if err != nil {
		t.Fatalf("take after 31 minutes of silence: %v", err)
	}
	if st.Holder != "bob" || st.Previous != "alice" {
		t.Fatalf("after the take: %+v", st)
	}
}

// TestClockStepWindows: a wall-clock step of 5 hours on the holder's machine closes no
// execution window (4 h) and, on the author's, no queue window (1 h): each runs from
// the first observation after the step, and closes once its length has passed on the
// boot clock. A deadline shown is now plus what is left on the boot clock.
func TestClockStepWindows(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	clk := newStepClock()
	clk.drive(w.c)
	w.c.Config.Policy.QueueWindowS = 3600
	q := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Nobody wants this"}))
	o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Port the parser"}))
	must[*fold.Order](t)(w.bob.Claim(o.ID, ""))
	clk.pass(30 * time.Minute)
	if got := settled(t, w.bob); got != nil {
		t.Fatalf("expired %v before any step", got)
	}

	clk.step(5 * time.Hour)
	for _, s := range []*Session{w.bob, w.alice} {
		if got := settled(t, s); got != nil {
			t.Errorf("%s expired %v after a wall-clock step", s.Name, got)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	v := must[*View](t)(w.c.Load())
	if win, ok := w.c.Window(v, v.State.Order(o.ID)); !ok || win.Deadline.Sub(clk.now()) != 4*time.Hour {
		t.Fatalf("execution window after the step: %+v %v, want a deadline 4 h from now", win, ok)
	}
	// The queue window runs an hour from the step.
	clk.pass(time.Hour - time.Second)
	if got := settled(t, w.alice); got != nil {
		t.Fatalf("queue window closed %v before an hour passed", got)
	}
	clk.pass(time.Second)
	if got := settled(t, w.alice); len(got) != 1 || got[0] != q.ID {
		t.Fatalf("queue window an hour after the step: settled %v", got)
	}
	// The execution window, 4 h from the step.
	clk.pass(3*time.Hour - time.Second)
	if got := settled(t, w.bob); got != nil {
		t.Fatalf("execution window closed %v before 4 h passed", got)
	}
	clk.pass(time.Second)
	if got := settled(t, w.bob); len(got) != 1 || got[0] != o.ID {
		t.Fatalf("execution window 4 h after the step: settled %v", got)
	}
}

// TestClockStepLiveRun: a `ferry run` holding an order on this machine (its run lock
// held, its claim the run's) is not taken for a dead worker when the wall clock jumps
// 5 hours: its own renewal (extend) goes through, and the order commands of its agent
// on this machine, which settle windows first, expire nothing.
func TestClockStepLiveRun(t *testing.T) {
	t.Parallel()
	boss, runner := runTeam(t)
	clk := newStepClock()
	clk.drive(runner.Channel)
	id := plainOrder(t, boss, "long build")
	run, err := runner.BeginRun(id, BeginRunOptions{Exec: "/bin/true", Via: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.End()
	must[*fold.Order](t)(run.Claim())
	clk.pass(time.Hour)
	if err := run.Beat("running " + id); err != nil {
		t.Fatal(err)
	}

	clk.step(5 * time.Hour)
	runner.AutoSettle = func([]string) {}
	if _, err := runner.Extend(id, NoteOptions{Note: "run " + run.Rec.Run + " is still running"}); err != nil {
		t.Fatalf("the live run's renewal after a wall-clock step: %v", err)
	}
	if got := settled(t, runner); got != nil {
		t.Fatalf("expired %v: the live run's claim after a wall-clock step", got)
	}
	if o := must[*View](t)(runner.Load()).State.Order(id); o.State != fold.StateClaimed || o.Holder != "runner" || o.Claim != run.Rec.Claim {
		t.Fatalf("order after the step: %s held by %s", o.State, o.Holder)
	}
	if lr := runner.Home.LiveRuns(runner.Project(), "runner"); len(lr) != 1 || lr[0].Run != run.Rec.Run {
		t.Fatalf("the live run after a wall-clock step: live runs %+v", lr)
	}
}

// TestClockStepArrivalLog: the arrival log of an older binary (no clock lines) is read
// as before — numbers, cursors and first-seen times kept, a sighting's age from the
// wall clock — and gains a clock line at the next Load; a clock step appends another,
// before which every sighting counts from the step.
func TestClockStepArrivalLog(t *testing.T) {
	t.Parallel()
	c, clk, _ := primaryWorld(t, map[string]string{"alice": "orchestrator"})
	sc := newStepClock()
	sc.wall.Store(clk.now().UnixMilli())
	sc.drive(c)
	v := primaryLoad(t, c)
	p := c.arrivalsPath()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Strip the clock lines: the log an older binary wrote.
	var legacy []string
	for _, l := range strings.SplitAfter(string(raw), "\n") {
		if !strings.HasPrefix(l, "clock ") {
			legacy = append(legacy, l)
		}
	}
	if len(legacy) == len(strings.SplitAfter(string(raw), "\n")) {
		t.Fatalf("no clock line in the log:\n%s", raw)
	}
	if err := os.WriteFile(p, []byte(strings.Join(legacy, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := arrivals.Load(p)
	if err != nil || old.LogID != v.Arrivals.LogID || old.Last != v.Arrivals.Last {
		t.Fatalf("legacy log: %+v %v", old, err)
	}
	// The fold checkpoint remembers the log as read: a new process would take the
	// shorter file for a rewritten log. An older binary wrote no such checkpoint.
	cps, _ := filepath.Glob(filepath.Join(c.Home.StateDir(c.Project()), "fold-*.bin"))
	for _, f := range cps {
		os.Remove(f)
	}
	sc.pass(10 * time.Minute)
	n := reopened(t, c)
	sc.drive(n)
	v2 := primaryLoad(t, n)
	if v2.Arrivals.LogID != v.Arrivals.LogID || v2.Arrivals.Cursor() != v.Arrivals.Cursor() {
		t.Fatalf("legacy log not read as before: %s, was %s", v2.Arrivals.Cursor(), v.Arrivals.Cursor())
	}
	if l, age := n.Liveness(v2, "alice"); l != Quiet || age != 600 {
		t.Fatalf("alice on the legacy log: %s %d s, want quiet 600 s", l, age)
	}
	clocks := func() int {
		b, _ := os.ReadFile(p)
		return strings.Count(string(b), "\nclock ")
	}
	if clocks() != 1 {
		t.Fatalf("after the upgrade: %d clock lines, want 1", clocks())
	}
	sc.step(-time.Hour) // backward, too: a step either way restarts the quiet period
	v3 := primaryLoad(t, n)
	if clocks() != 2 {
		t.Fatalf("after a step: %d clock lines, want 2", clocks())
	}
	if l, age := n.Liveness(v3, "alice"); l != Alive || age != 0 {
		t.Fatalf("alice after the step: %s %d s, want alive 0 s", l, age)
	}
	sc.pass(20 * time.Minute)
	primaryLoad(t, n)
	if clocks() != 2 {
		t.Fatalf("time passing wrote a clock line: %d", clocks())
	}
}

// TestStampSince: elapsed time on the boot clock, a step of more than MaxClockStep or a
// reboot restarting it, the wall clock alone without boot readings.
func TestStampSince(t *testing.T) {
	t.Parallel()
	at := arrivals.Stamp{Wall: 1_000_000, Boot: 500_000, BootID: "b"}
	for _, c := range []struct {
		name string
		now  arrivals.Stamp
		want time.Duration
	}{
		{"time passes", arrivals.Stamp{Wall: 1_060_000, Boot: 560_000, BootID: "b"}, time.Minute},
		{"slewed by 2 s", arrivals.Stamp{Wall: 1_062_000, Boot: 560_000, BootID: "b"}, time.Minute},
		{"stepped 2.001 s ahead", arrivals.Stamp{Wall: 1_062_001, Boot: 560_000, BootID: "b"}, 0},
		{"stepped an hour ahead", arrivals.Stamp{Wall: 4_660_000, Boot: 560_000, BootID: "b"}, 0},
		{"stepped back", arrivals.Stamp{Wall: 60_000, Boot: 560_000, BootID: "b"}, 0},
		{"rebooted", arrivals.Stamp{Wall: 1_060_000, Boot: 60_000, BootID: "c"}, 0},
		{"no boot clock now", arrivals.Stamp{Wall: 1_060_000}, time.Minute},
	} {
		if got := c.now.Since(at); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := (arrivals.Stamp{Wall: 1_060_000, Boot: 1, BootID: "b"}).Since(arrivals.Stamp{Wall: 1_000_000}); got != time.Minute {
		t.Errorf("a sighting without a boot reading: %v, want the wall clock's 1m0s", got)
	}
}
