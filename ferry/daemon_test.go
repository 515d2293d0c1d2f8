package main

// `ferry daemon` with real processes (docs/runs.md "`ferry daemon`"): one daemon per
// agent per machine (a flock lease, contended by two real daemons), crash-safe (a
// daemon killed mid-run leaves a run a restart settles), --status naming the lease
// owner and the journal.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonConfigFile writes a daemon config for runner into dir and returns its path.
func (f *runFixture) daemonConfigFile(dir string) string {
	f.t.Helper()
	cfg := `# the daemon of the tests
poll = "100ms"
beat = "200ms"
queue = "off"

[[handler]]
agent = "runner"
task = "*"
exec = ` + strconv.Quote(f.job) + `
env = ["FERRY_TEST_JOB_DIR", "FERRY_TEST_JOB_MODE"]
`
	p := filepath.Join(dir, "daemon.toml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

type daemonStatusOut struct {
	Agent   string `json:"agent"`
	Running bool   `json:"running"`
	Owner   *struct {
		PID int `json:"pid"`
	} `json:"owner"`
	Runs    []struct{ Run, Order string } `json:"runs"`
	Journal struct {
		Exists bool `json:"exists"`
		Events int  `json:"events"`
		Bad    int  `json:"bad_lines"`
		Done   int  `json:"done"`
	} `json:"journal"`
}

func (f *runFixture) daemonStatus(cfg string) daemonStatusOut {
	f.t.Helper()
	var rows []daemonStatusOut
	out := f.must("daemon", "--config", cfg, "--status", "--project", "rp", "--json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		f.t.Fatalf("daemon --status: %v\n%s", err, out)
	}
	return rows[0]
}

// TestDaemonLeaseAndCrashRecovery: daemon A takes runner's lease and starts a run
// that blocks; daemon B, a second real process for the same agent, exits with a
// conflict naming A's pid; --status names A as the owner and its live run. A is
// killed (SIGKILL): the lease dies with it, --status says no daemon runs, and
// `ferry daemon --once` takes the lease, settles the dead run (release with a note)
// and completes the order on a fresh claim.
func TestDaemonLeaseAndCrashRecovery(t *testing.T) {
	runjobBuild() // built while the tests before the parallel ones run
	t.Parallel()
	f := newRunFixture(t)
	cfg := f.daemonConfigFile(t.TempDir())
	id := f.order("daemon work")

	a := f.command("daemon", "--config", cfg, "--project", "rp")
	a.Env = append(a.Env, "FERRY_TEST_JOB_DIR="+f.jobDir, "FERRY_TEST_JOB_MODE=block-first")
	var seA bytes.Buffer
	a.Stderr = &seA
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Process.Kill(); a.Wait() })
	waitFile(t, filepath.Join(f.jobDir, "started-"+id), "daemon A's run to start")
	run1 := strings.TrimSpace(waitFile(t, filepath.Join(f.jobDir, "attempt-"+id), "the run id"))

	so, se, code := f.ferry("daemon", "--config", cfg, "--project", "rp", "--once")
	if code != 5 || !strings.Contains(se, "pid "+strconv.Itoa(a.Process.Pid)) || !strings.Contains(se, "already runs") {
		t.Fatalf("second daemon: exit %d\n%s%s", code, so, se)
	}
	st := f.daemonStatus(cfg)
	if !st.Running || st.Owner == nil || st.Owner.PID != a.Process.Pid || len(st.Runs) != 1 || st.Runs[0].Run != run1 {
		t.Fatalf("status while A runs: %+v", st)
	}
	text := f.must("daemon", "--config", cfg, "--status", "--project", "rp")
	if !strings.Contains(text, "daemon running, pid "+strconv.Itoa(a.Process.Pid)) {
		t.Errorf("status text does not name the owner:\n%s", text)
	}

	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	if st := f.daemonStatus(cfg); st.Running || len(st.Runs) != 0 {
		t.Fatalf("status after A died: %+v", st)
	}

	b := f.command("daemon", "--config", cfg, "--project", "rp", "--once", "--json")
	b.Env = append(b.Env, "FERRY_TEST_JOB_DIR="+f.jobDir, "FERRY_TEST_JOB_MODE=block-first")
	var soB, seB bytes.Buffer
	b.Stdout, b.Stderr = &soB, &seB
	if err := b.Run(); err != nil {
		t.Fatalf("daemon --once after the crash: %v\n%s%s", err, soB.String(), seB.String())
	}
	var res []struct{ Order, Outcome string }
	if err := json.Unmarshal(soB.Bytes(), &res); err != nil || len(res) != 1 || res[0].Order != id || res[0].Outcome != "submitted" {
		t.Fatalf("daemon --once: %v %+v\n%s", err, res, seB.String())
	}
	o := f.show(id)
	want := []string{"order.create", "order.claim", "order.release", "order.claim", "order.submit"}
	if !slices.Equal(o.types(), want) || !strings.Contains(o.History[2].Note, run1) {
		t.Fatalf("history %v; release note %q", o.types(), o.History[2].Note)
	}
	st = f.daemonStatus(cfg)
	if st.Running || !st.Journal.Exists || st.Journal.Bad != 0 || st.Journal.Done != 1 {
		t.Errorf("status after recovery: %+v", st)
	}
	f.must("ledger", "verify", "--project", "rp")
}

// TestDaemonNothingReady: --once with no ready order exits 0 and says so; the lease is
// free afterwards (a second --once runs too).
func TestDaemonNothingReady(t *testing.T) {
	runjobBuild() // built while the tests before the parallel ones run
	t.Parallel()
	f := newRunFixture(t)
	cfg := f.daemonConfigFile(t.TempDir())
	for range 2 {
		if out := f.must("daemon", "--config", cfg, "--project", "rp", "--once"); !strings.Contains(out, "no order ready for runner") {
			t.Fatalf("daemon --once with nothing to do: %q", out)
		}
	}
}

// TestDaemonCompactsAutomatically: a real `ferry daemon` on the compactor device, with
// policy compact_entries 2 and a settle time of 1 s, writes the owner's next
// checkpoint once two settled entries lie above the cut, and says so, although a
// seated writer is idle; `ledger verify` is clean afterwards.
func TestDaemonCompactsAutomatically(t *testing.T) {
	runjobBuild()
	t.Parallel()
	f := newRunFixture(t)
	cfg := f.daemonConfigFile(t.TempDir())
	ch := filepath.Join(f.dir, "sync", "rp")
	f.order("before the cut")
	f.must("compact", "--settle", "0s", "--force", "--project", "rp")
	f.must("policy", "set", "compact_entries=2", "settle_s=1", "--project", "rp")
	f.order("one")
	f.order("two")

	d := f.command("daemon", "--config", cfg, "--project", "rp")
	d.Env = append(d.Env, "FERRY_TEST_JOB_DIR="+f.jobDir, "FERRY_TEST_JOB_MODE=block-first")
	var se syncBuffer
	d.Stderr = &se
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Kill(); d.Wait() })
	deadline := time.Now().Add(mcpDeadline)
	for {
		if heads, _ := filepath.Glob(filepath.Join(ch, "checkpoints", "2-*", "head.json")); len(heads) == 1 && strings.Contains(se.String(), "compacted") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no automatic compaction within %s; daemon said:\n%s", mcpDeadline, se.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// boss, seated and not seen to advance within the settle time once it is idle,
	// does not stop it (whether it is named depends on when the daemon looked).
	if !strings.Contains(se.String(), "the owner's checkpoint of epoch 2") || !strings.Contains(se.String(), "compact_entries 2") {
		t.Fatalf("daemon log:\n%s", se.String())
	}
	// Stopped (SIGTERM), it finishes what it writes; then the ledger verifies.
	if err := d.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err != nil {
		t.Fatalf("daemon after SIGTERM: %v\n%s", err, se.String())
	}
	f.must("ledger", "verify", "--project", "rp")
}

// TestAutoCompactBackoff: after a failed automatic compaction the next try waits one
// beat, then twice as long after each further failure, never more than an hour; a try
// that does not fail resets it to every beat.
func TestAutoCompactBackoff(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	b := &backoff{beat: 10 * time.Second}
	if !b.due(t0) {
		t.Fatal("the first try is not due")
	}
	now := t0
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second} {
		b.fail(now)
		if b.due(now.Add(want-time.Millisecond)) || !b.due(now.Add(want)) {
			t.Fatalf("failure %d: next try at %v, want %v later", i+1, b.next.Sub(now), want)
		}
		now = now.Add(want)
	}
	for range 20 {
		b.fail(now)
		now = b.next
	}
	if b.fail(now); b.next.Sub(now) != time.Hour {
		t.Fatalf("the wait grew to %v, want at most an hour", b.next.Sub(now))
	}
	b.ok()
	if !b.due(now) {
		t.Fatal("after a try that did not fail the next is not due at once")
	}
	if b.fail(now); b.next.Sub(now) != 10*time.Second {
		t.Fatalf("after a reset the first failure waits %v, want one beat", b.next.Sub(now))
	}
}
