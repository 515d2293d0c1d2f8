package fsbus

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// runTeam is a channel with boss (member) and runner (member) on one machine.
func runTeam(t *testing.T) (boss, runner *Session) {
	t.Helper()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "rt"), Project: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.As(fold.MasterWriter)
	for _, a := range []string{"boss", "runner"} {
		if _, err := Join(c, a, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Grant(GrantOptions{Agent: a, Level: "member"}); err != nil {
			t.Fatal(err)
		}
	}
	boss, _ = c.As("boss")
	runner, _ = c.As("runner")
	return boss, runner
}

// plainOrder dispatches an order with a title only and returns its id.
func plainOrder(t *testing.T, s *Session, title string) string {
	t.Helper()
	return must[*fold.Order](t)(s.NewOrder(NewOrderOptions{Title: title})).ID
}

// TestRunRegistry: a run holds its order's lock (a second run of the order on this
// machine is a conflict), its claim is the run's, the presence file names it while it
// lives; a run unlocked without End is dead though its pid lives (a reused pid), and
// ForgetRun removes it.
func TestRunRegistry(t *testing.T) {
	t.Parallel()
	boss, runner := runTeam(t)
	id := plainOrder(t, boss, "registered")
	run, err := runner.BeginRun(id, BeginRunOptions{Exec: "/bin/true", Via: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runner.BeginRun(id, BeginRunOptions{Exec: "/bin/true", Via: "direct"}); !errs.Is(err, errs.Conflict) {
		t.Errorf("a second run of one order on this machine: %v", err)
	}
	o, err := run.Claim()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := runner.Load()
	if e := v.Entry(o.Claim); e == nil || e.Idem != RunKeyPrefix+run.Rec.Run || run.Rec.Claim != o.Claim {
		t.Errorf("the run's claim entry: %+v, record %+v", e, run.Rec)
	}
	if lr := runner.Home.LiveRuns(runner.Project(), "runner"); len(lr) != 1 || lr[0].Run != run.Rec.Run {
		t.Errorf("live runs: %+v", lr)
	}
	if err := runner.WritePresence("", nil); err != nil {
		t.Fatal(err)
	}
	v, _ = runner.Load()
	if p := v.PresenceOf("runner"); p == nil || len(p.Running) != 1 || p.Running[0].Run != run.Rec.Run || p.Running[0].PID != os.Getpid() || !slices.Contains(p.Runs, id) {
		t.Errorf("presence: %+v", p)
	}
	run.Unlock()
	recs := runner.Home.RunRecords(runner.Project(), "runner")
	if len(recs) != 1 || runner.Home.RunAlive(runner.Project(), recs[0]) || !runner.Home.HasRunRecord(runner.Project(), RunRecord{Agent: "runner", Run: run.Rec.Run}) {
		t.Fatalf("an unlocked run with a live pid: records %+v", recs)
	}
	runner.Home.ForgetRun(runner.Project(), recs[0])
	if recs := runner.Home.RunRecords(runner.Project(), "runner"); len(recs) != 0 || runner.Home.HasRunRecord(runner.Project(), RunRecord{Agent: "runner", Run: run.Rec.Run}) {
		t.Errorf("after ForgetRun: %+v", recs)
	}
}
