package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/procgroup"
)

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// runTeam is a channel with boss (member) and runner (member) on one machine.
func runTeam(t *testing.T) (boss, runner *fsbus.Session) {
	t.Helper()
	_, ss := fsbustest.Channel(t, fsbustest.Options{Project: "rt", Levels: map[string]string{"boss": "member", "runner": "member"}})
	return ss["boss"], ss["runner"]
}

// plainOrder dispatches an order with a title only and returns its id.
func plainOrder(t *testing.T, s *fsbus.Session, title string) string {
	t.Helper()
	return must[*fold.Order](t)(s.NewOrder(fsbus.NewOrderOptions{Title: title})).ID
}

// runjob is ferry/testdata/runjob built once per test binary into a folder of its
// own, which TestMain removes.
var runjob struct {
	once      sync.Once
	dir, path string
	err       error
}

// TestMain runs the tests, then removes the runjob build they share.
func TestMain(m *testing.M) {
	code := m.Run()
	if runjob.dir != "" {
		if err := os.RemoveAll(runjob.dir); err != nil && code == 0 {
			fmt.Fprintln(os.Stderr, "removing the runjob build:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// buildRunjob puts ferry/testdata/runjob (built once per test binary) into dir under
// name and returns its path: a hard link where it can, so no file is open for writing
// while another goroutine starts a process, else a copy.
func buildRunjob(t *testing.T, dir, name string) string {
	t.Helper()
	runjob.once.Do(func() {
		goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
		if err != nil {
			goBin = "go"
		}
		if runjob.dir, runjob.err = os.MkdirTemp("", "runner-test-runjob-"); runjob.err != nil {
			return
		}
		runjob.path = filepath.Join(runjob.dir, exeName("runjob"))
		if out, err := exec.Command(goBin, "build", "-o", runjob.path, "../../ferry/testdata/runjob").CombinedOutput(); err != nil {
			runjob.err = fmt.Errorf("go build runjob: %v\n%s", err, out)
		}
	})
	if runjob.err != nil {
		t.Fatal(runjob.err)
	}
	bin := filepath.Join(dir, exeName(name))
	if os.Link(runjob.path, bin) == nil {
		return bin
	}
	src, err := os.ReadFile(runjob.path)
	if err == nil {
		err = os.WriteFile(bin, src, 0o755)
	}
	if err != nil {
		t.Fatalf("copying runjob to %s: %v", bin, err)
	}
	return bin
}

// exeName is name with the executable suffix of the OS the tests run on.
func exeName(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// newTestRunner is a runner for runner running job with FERRY_TEST_JOB_DIR and
// FERRY_TEST_JOB_MODE passed by name.
func newTestRunner(t *testing.T, s *fsbus.Session, job string, q Queue) *Runner {
	r := &Runner{S: s, Queue: q, Workdir: t.TempDir(),
		Pick: func(*fold.Order, Spec) *Handler {
			return &Handler{Exec: job, Env: []string{"FERRY_TEST_JOB_DIR", "FERRY_TEST_JOB_MODE", "FERRY_TEST_JOB_OUTPUT"}}
		}}
	if _, err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRunnerHeavyOrderThroughQueue: with a fake snifrig on PATH (it records its
// arguments), a heavy order runs as `snifrig run --name <order-id> -- FILE` and an
// ordinary one directly; the file reads heavy, hints and task from stdin; Via says
// the same; FERRY_QUEUE_CMD=off turns the queue off and a queue program that does not
// exist is refused by name.
func TestRunnerHeavyOrderThroughQueue(t *testing.T) {
	boss, runner := runTeam(t)
	bin := t.TempDir()
	job := buildRunjob(t, bin, "runjob")
	buildRunjob(t, bin, "snifrig")
	jobDir := t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(EnvQueueCmd, "")
	t.Setenv("FERRY_TEST_JOB_DIR", jobDir)
	t.Setenv("FERRY_TEST_JOB_MODE", "ok")

	heavy := must[*fold.Order](t)(boss.NewOrder(fsbus.NewOrderOptions{Title: "train the model", Heavy: true, Task: "gpu-train",
		Hints: &fold.Hints{Cores: 8, RAMGB: 32, GPUMemGB: 24, ExpectedMinutes: 90}})).ID
	light := must[*fold.Order](t)(boss.NewOrder(fsbus.NewOrderOptions{Title: "lint"})).ID

	q, err := ResolveQueue("", "")
	if err != nil || q.Source != "default" || len(q.Argv) != 5 {
		t.Fatalf("queue %+v, %v", q, err)
	}
	v, _ := runner.Load()
	if via := q.Via(v.State.Order(heavy)); !strings.Contains(via, "run --name "+heavy+" --") {
		t.Errorf("run_via of the heavy order: %q", via)
	}
	if spec := SpecOf(v.State.Order(light)); spec.Heavy || spec.Hints != nil {
		t.Errorf("spec of an ordinary order: %+v", spec)
	}
	if spec := SpecOf(v.State.Order(heavy)); spec.Hints == nil || spec.Hints.Cores != 8 || spec.Hints.GPUMemGB != 24 || spec.Task != "gpu-train" {
		t.Errorf("spec of the heavy order: %+v", spec)
	}

	r := newTestRunner(t, runner, job, q)
	done := map[string]*Result{}
	for range 2 {
		res, err := r.RunOne(context.Background())
		if err != nil || res == nil || res.Outcome != "submitted" {
			t.Fatalf("run: %+v, %v", res, err)
		}
		done[res.Order] = res
	}
	if res, _ := r.RunOne(context.Background()); res != nil {
		t.Fatalf("a third run with nothing ready: %+v", res)
	}
	logged, _ := os.ReadFile(filepath.Join(jobDir, "queue.log"))
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	var args []string
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &args) != nil {
		t.Fatalf("queue.log (one heavy run expected): %q", logged)
	}
	if want := []string{"run", "--name", heavy, "--", job}; !slices.Equal(args, want) {
		t.Errorf("snifrig got %q, want %q", args, want)
	}
	if h := done[heavy]; h.Via == "direct" || !strings.Contains(h.Note, "heavy=true task=gpu-train") {
		t.Errorf("heavy run: %+v", h)
	}
	if l := done[light]; l.Via != "direct" || !strings.Contains(l.Note, "heavy=false") {
		t.Errorf("light run: %+v", l)
	}

	t.Setenv(EnvQueueCmd, "off")
	if q, err := ResolveQueue("", ""); err != nil || q.Argv != nil {
		t.Errorf("FERRY_QUEUE_CMD=off: %+v %v", q, err)
	}
	t.Setenv(EnvQueueCmd, "no-such-queue-program --x")
	if _, err := ResolveQueue("", ""); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "no-such-queue-program") {
		t.Errorf("a missing queue program: %v", err)
	}
	if q, err := ResolveQueue("snifrig go --id {order} --", "flag"); err != nil || q.Source != "flag" {
		t.Errorf("a queue from a flag: %+v %v", q, err)
	} else if argv, via := q.Wrap("o-1", true, "/f"); !slices.Equal(argv, []string{"snifrig", "go", "--id", "o-1", "--", "/f"}) || via != "snifrig go --id o-1 --" {
		t.Errorf("wrap: %q %q", argv, via)
	}
}

// TestRunnerFailureAndEnvironment: a file that exits 3 gives its order back with a
// note of its exit code and the cleaned tail of its stderr (no terminal escapes,
// within the note limit); the runner does not retry it, nor does a new runner on
// this machine (the journal) until the order moves on; inspect counts the retries and
// shows the last note. The file
// sees only PATH, HOME and their kin, the variables named, FERRY_ORDER_ID and
// FERRY_RUN_ID, and runs in the workspace.
func TestRunnerFailureAndEnvironment(t *testing.T) {
	boss, runner := runTeam(t)
	job := buildRunjob(t, t.TempDir(), "runjob")
	jobDir := t.TempDir()
	t.Setenv("FERRY_TEST_JOB_DIR", jobDir)
	t.Setenv("FERRY_TEST_JOB_MODE", "fail")
	t.Setenv("RUNTEST_SECRET", "must not leak")
	id := plainOrder(t, boss, "flaky")

	r := newTestRunner(t, runner, job, Queue{})
	res, err := r.RunOne(context.Background())
	if err != nil || res == nil || res.Outcome != "failed" || res.Exit != 3 {
		t.Fatalf("failing run: %+v %v", res, err)
	}
	v, _ := runner.Load()
	o := v.State.Order(id)
	rel := o.History[len(o.History)-1]
	switch {
	case o.State != fold.StateFailed || rel.Type != fold.TypeOrderFail:
		t.Fatalf("after the failure: %s, last %s", o.State, rel.Type)
	case !strings.Contains(rel.Note, "exit 3") || !strings.Contains(rel.Note, "the last words") || !strings.Contains(rel.Note, res.Run):
		t.Errorf("fail reason: %q", rel.Note)
	case strings.Contains(rel.Note, "\x1b") || len(rel.Note) > fsbus.MaxNote:
		t.Errorf("fail reason holds an escape or is %d bytes", len(rel.Note))
	}
	if res, _ := r.RunOne(context.Background()); res != nil {
		t.Errorf("the runner retried the failed order: %+v", res)
	}
	if res, _ := newTestRunner(t, runner, job, Queue{}).RunOne(context.Background()); res != nil {
		t.Errorf("a new runner retried the order that failed here: %+v", res)
	}
	// Once the order moves on (its author offers it to runner again), it is retried.
	if _, err := boss.Offer(id, fsbus.OfferOptions{To: "runner"}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.RunOne(context.Background()); err != nil || res == nil || res.Order != id {
		t.Errorf("after a new offer the order was not retried: %+v %v", res, err)
	}
	v, _ = runner.Load()
	rows := Inspect(runner.Channel, v, "", false)
	if len(rows) != 1 || rows[0].Retries != 2 || !strings.Contains(rows[0].LastError, "exit 3") || rows[0].AgeS < 0 {
		t.Errorf("inspect: %+v", rows)
	}

	env, _ := os.ReadFile(filepath.Join(jobDir, res.Run+".env"))
	got := string(env)
	for _, want := range []string{"\nFERRY_TEST_JOB_DIR\n", "FERRY_ORDER_ID", "FERRY_RUN_ID", "order=" + id, "cwd=" + r.Workdir} {
		if !strings.Contains("\n"+got, want) {
			t.Errorf("the file's environment lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "RUNTEST_SECRET") || strings.Contains(got, "FERRY_HOME") {
		t.Errorf("the file saw a variable it was not given:\n%s", got)
	}
}

// TestRecoverOrphansAndLiveRuns: a claim this machine made under a run key whose run
// has no record (a crash between claim and record) is released at start-up with a
// note; a claim made by hand (no run key) and a live run of this process are left
// alone.
func TestRecoverOrphansAndLiveRuns(t *testing.T) {
	boss, runner := runTeam(t)
	orphan := plainOrder(t, boss, "orphan")
	manual := plainOrder(t, boss, "manual")
	live := plainOrder(t, boss, "live")
	if _, err := runner.Claim(orphan, fsbus.RunKeyPrefix+"run-gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := runner.Claim(manual, ""); err != nil {
		t.Fatal(err)
	}
	run, err := runner.BeginRun(live, fsbus.BeginRunOptions{Exec: "/bin/true", Via: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Claim(); err != nil {
		t.Fatal(err)
	}
	recs, err := Recover(runner)
	if err != nil || len(recs) != 1 || recs[0].Order != orphan || recs[0].Action != "released" {
		t.Fatalf("recoveries %+v, %v", recs, err)
	}
	v, _ := runner.Load()
	if o := v.State.Order(orphan); o.State != fold.StateOpen || !strings.Contains(o.History[len(o.History)-1].Note, "orphan claim of run run-gone") {
		t.Errorf("orphan: %s %+v", o.State, o.History)
	}
	for _, id := range []string{manual, live} {
		if o := v.State.Order(id); o.State != fold.StateClaimed {
			t.Errorf("%s was touched: %s", id, o.State)
		}
	}
	if lr := runner.Home.LiveRuns(runner.Project(), "runner"); len(lr) != 1 || lr[0].Run != run.Rec.Run {
		t.Errorf("live runs: %+v", lr)
	}
	// The presence names the live run.
	if err := runner.WritePresence("", nil); err != nil {
		t.Fatal(err)
	}
	v, _ = runner.Load()
	if p := v.PresenceOf("runner"); p == nil || len(p.Running) != 1 || p.Running[0].Run != run.Rec.Run || p.Running[0].PID != os.Getpid() || !slices.Contains(p.Runs, live) {
		t.Errorf("presence: %+v", p)
	}
	run.End()
	if lr := runner.Home.LiveRuns(runner.Project(), "runner"); len(lr) != 0 {
		t.Errorf("live runs after End: %+v", lr)
	}
}

// TestRecoverFailsAfterReleaseCap: an orphan run claim on an order already released
// MaxReleases times cannot be released again; recovery fails it with its note instead,
// so a runner that keeps crashing never leaves the order held.
func TestRecoverFailsAfterReleaseCap(t *testing.T) {
	boss, runner := runTeam(t)
	id := plainOrder(t, boss, "crashes often")
	for i := range fold.MaxReleases {
		must[*fold.Order](t)(runner.Claim(id, ""))
		must[*fold.Order](t)(runner.Release(id, fsbus.NoteOptions{Note: fmt.Sprintf("attempt %d", i)}))
	}
	must[*fold.Order](t)(runner.Claim(id, fsbus.RunKeyPrefix+"run-capped"))
	recs, err := Recover(runner)
	if err != nil || len(recs) != 1 || recs[0].Action != "failed" {
		t.Fatalf("recoveries %+v, %v", recs, err)
	}
	v, _ := runner.Load()
	o := v.State.Order(id)
	note := o.History[len(o.History)-1].Note
	if o.State != fold.StateFailed || o.Holder != "" || !strings.Contains(note, "failed instead") {
		t.Fatalf("after recovery: %s holder %q %+v", o.State, o.Holder, o.History[len(o.History)-1])
	}
	// The note says what was done, once: not "released for a new attempt".
	if strings.Contains(note, "released for a new attempt") || recs[0].Note != note {
		t.Errorf("the fail note contradicts itself or the report: %q, reported %q", note, recs[0].Note)
	}
}

// TestLeaseConflictNamesOwner: a second lease for one agent is a conflict naming the
// first owner's pid; after Release it is free.
func TestLeaseConflictNamesOwner(t *testing.T) {
	h := fsbustest.Home(t)
	l, err := TakeLease(h, "p", "a", "cfg.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TakeLease(h, "p", "a", "other.toml"); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lease: %v", err)
	}
	if ow, held := ReadLeaseOwner(h, "p", "a"); !held || ow == nil || ow.Config != "cfg.toml" {
		t.Errorf("owner %+v held %v", ow, held)
	}
	l.Release()
	l2, err := TakeLease(h, "p", "a", "other.toml")
	if err != nil {
		t.Fatalf("lease after release: %v", err)
	}
	l2.Release()
}

// TestRunOutputCleaning: results and notes from a file's output.
func TestRunOutputCleaning(t *testing.T) {
	for _, c := range []struct{ out, ref, note string }{
		{"  abc123\n", "abc123", ""},
		{"\n\nbranch x\nline 1\n\x1b[31mred\x1b[0m\n", "branch x", "line 1\nred"},
		{"ref\x07bell\r\nnote\r\n", "ref bell", "note"},
		{"\xff\xfe bad\n", "\uFFFD bad", ""},
	} {
		ref, note := parseResult(c.out, false)
		if ref != c.ref || note != c.note {
			t.Errorf("parseResult(%q) = %q, %q; want %q, %q", c.out, ref, note, c.ref, c.note)
		}
	}
	ref, _ := parseResult(strings.Repeat("é", 400), false)
	if len(ref) > fsbus.MaxReference || !strings.HasPrefix(ref, "é") {
		t.Errorf("long reference: %d bytes", len(ref))
	}
	if n := fitNote(strings.Repeat("x", 5000)); len(n) > fsbus.MaxNote {
		t.Errorf("fitNote: %d bytes", len(n))
	}
	if err := CheckEnvNames([]string{"GOOD_1", "A=B"}); !errs.Is(err, errs.Invalid) {
		t.Errorf("NAME=VALUE accepted: %v", err)
	}
}

// TestJournalHealthAndRotation: a missing journal is healthy and empty; a damaged line
// and a torn tail are counted, never fatal; past MaxJournal the journal moves to
// .journal.old and a new one begins.
func TestJournalHealthAndRotation(t *testing.T) {
	_, runner := runTeam(t)
	h, p := runner.Home, runner.Project()
	if jh, err := ReadJournal(h, p, "runner"); err != nil || jh.Exists || jh.Events != 0 {
		t.Fatalf("no journal: %+v %v", jh, err)
	}
	Journal(runner, JournalEvent{Event: "done", Order: "o-1", Outcome: "submitted"})
	path := journalPath(h, p, "runner")
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("not json\n{\"event\":\"done\",\"outc")
	f.Close()
	jh, err := ReadJournal(h, p, "runner")
	if err != nil || jh.Events != 1 || jh.Done != 1 || jh.Bad != 2 {
		t.Fatalf("damaged journal: %+v %v", jh, err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", MaxJournal+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	Journal(runner, JournalEvent{Event: "start"})
	if fi, err := os.Stat(path + ".old"); err != nil || fi.Size() != MaxJournal+1 {
		t.Fatalf("rotated journal: %v", err)
	}
	if jh, _ := ReadJournal(h, p, "runner"); jh.Events != 1 || jh.Bad != 0 || jh.Last.Event != "start" {
		t.Errorf("new journal: %+v", jh)
	}
}

// TestDeadRunDetection: a run record whose lock nobody holds is dead even when its
// pid names a live process (a reused pid), and Recover releases its claim with a
// note naming the run and pid.
func TestDeadRunDetection(t *testing.T) {
	boss, runner := runTeam(t)
	id := plainOrder(t, boss, "reused pid")
	run, err := runner.BeginRun(id, fsbus.BeginRunOptions{Exec: "/bin/true", Via: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Claim(); err != nil {
		t.Fatal(err)
	}
	run.Unlock() // its supervisor is gone; its pid (this process) lives on
	if live := runner.Home.LiveRuns(runner.Project(), "runner"); len(live) != 0 {
		t.Fatalf("a record without its lock counted as live: %+v", live)
	}
	recs, err := Recover(runner)
	if err != nil || len(recs) != 1 || recs[0].Action != "released" || !strings.Contains(recs[0].Note, run.Rec.Run+" (pid "+strconv.Itoa(os.Getpid())+") died") {
		t.Fatalf("recoveries: %+v %v", recs, err)
	}
	if runner.Home.HasRunRecord(runner.Project(), fsbus.RunRecord{Agent: "runner", Run: run.Rec.Run}) {
		t.Error("the dead run's record is still there")
	}
	v, _ := runner.Load()
	if o := v.State.Order(id); o.State != fold.StateOpen {
		t.Errorf("the dead run's order: %s", o.State)
	}
	// Idempotent: a second recovery finds nothing.
	if recs, err := Recover(runner); err != nil || len(recs) != 0 {
		t.Errorf("second recovery: %+v %v", recs, err)
	}
}

// TestRunnerChecksPointersInWorkdir: a runner checks an
// order's file pointers in its --workdir, where the file runs, not in the process's
// current directory: a workdir whose file differs from the dispatch is refused as
// stale (nothing claimed), one that matches is claimed and submitted.
func TestRunnerChecksPointersInWorkdir(t *testing.T) {
	boss, runner := runTeam(t)
	job := buildRunjob(t, t.TempDir(), "runjob")
	t.Setenv("FERRY_TEST_JOB_DIR", t.TempDir())
	t.Setenv("FERRY_TEST_JOB_MODE", "ok")
	good, changed := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(good, "f.txt"), []byte("orig\n"), 0o644)
	os.WriteFile(filepath.Join(changed, "f.txt"), []byte("changed\n"), 0o644)
	boss.Workspace = good
	id := must[*fold.Order](t)(boss.NewOrder(fsbus.NewOrderOptions{Title: "edit f", Pointers: []string{"f.txt"}})).ID

	r := newTestRunner(t, runner, job, Queue{})
	r.Workdir = changed
	if res, err := r.RunOne(context.Background()); err != nil || res != nil {
		t.Fatalf("a stale workdir ran the order: %+v %v", res, err)
	}
	v, _ := runner.Load()
	if o := v.State.Order(id); o.State != fold.StateOpen {
		t.Fatalf("after the stale refusal: %s", o.State)
	}
	r2 := newTestRunner(t, runner, job, Queue{})
	r2.Workdir = good
	res, err := r2.RunOne(context.Background())
	if err != nil || res == nil || res.Outcome != "submitted" || res.Order != id {
		t.Fatalf("a matching workdir: %+v %v", res, err)
	}
}

// TestRunnersOfOneAgentShareNoOrder: four runners of one agent on one
// machine, each with its own Session, pass at once over one open order: exactly one
// runs the file and submits; the others find nothing ready. A run whose claim comes
// back held by the agent under another claim (a claim by hand) is refused as not its.
func TestRunnersOfOneAgentShareNoOrder(t *testing.T) {
	boss, runner := runTeam(t)
	job := buildRunjob(t, t.TempDir(), "runjob")
	jobDir := t.TempDir()
	t.Setenv("FERRY_TEST_JOB_DIR", jobDir)
	t.Setenv("FERRY_TEST_JOB_MODE", "ok")
	id := plainOrder(t, boss, "one only")
	const n = 4
	runners := make([]*Runner, n)
	for i := range runners {
		s, err := runner.As("runner")
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = newTestRunner(t, s, job, Queue{})
	}
	results := make(chan *Result, n)
	errCh := make(chan error, n)
	start := make(chan struct{})
	for _, r := range runners {
		go func(r *Runner) {
			<-start
			res, err := r.RunOne(context.Background())
			results <- res
			errCh <- err
		}(r)
	}
	close(start)
	ran := 0
	for range n {
		if err := <-errCh; err != nil {
			t.Errorf("runner: %v", err)
		}
		if res := <-results; res != nil {
			ran++
			if res.Outcome != "submitted" || res.Order != id {
				t.Errorf("run: %+v", res)
			}
		}
	}
	execs, _ := filepath.Glob(filepath.Join(jobDir, "run-*.env"))
	if ran != 1 || len(execs) != 1 {
		t.Fatalf("%d runs reported, the file ran %d times; want 1 and 1", ran, len(execs))
	}

	hand := plainOrder(t, boss, "by hand")
	must[*fold.Order](t)(runner.Claim(hand, ""))
	run, err := runner.BeginRun(hand, fsbus.BeginRunOptions{Exec: job, Via: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Claim(); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "under another claim") {
		t.Errorf("a run claiming an order held by hand: %v", err)
	}
	if _, err := runner.BeginRun(hand, fsbus.BeginRunOptions{Exec: job, Via: "direct"}); !errs.Is(err, errs.Conflict) {
		t.Errorf("a second run of one order on this machine: %v", err)
	}
	run.End()
}

// runAsync runs one pass of r in the background; the channel gets its result.
func runAsync(ctx context.Context, r *Runner) chan *Result {
	ch := make(chan *Result, 1)
	go func() {
		res, err := r.RunOne(ctx)
		if err != nil {
			res = &Result{Outcome: "error: " + err.Error()}
		}
		ch <- res
	}()
	return ch
}

// waitRun waits for a pass started by runAsync. The bound only turns a hung runner
// into a failure: a runner held by the grandchild would wait a whole minute.
func waitRun(t *testing.T, ch chan *Result, what string) *Result {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(40 * time.Second):
		t.Fatalf("%s: the runner did not return", what)
		return nil
	}
}

// waitMark waits for a file the job writes and returns its content.
func waitMark(t *testing.T, path string) string {
	t.Helper()
	for range 3000 {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

// pidGone waits for a killed process to be gone (it is reaped by its new parent a
// moment after the kill); false when it still runs after ten seconds.
func pidGone(pid int) bool {
	for range 1000 {
		if !procgroup.Alive(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestRunEndsWithItsProcessGroup: a file that leaves a child behind — one
// holding its stdout and stderr, ignoring SIGINT — never holds the runner: a file that
// exits 0 is submitted, and a stopped runner interrupts, then kills the group after
// Grace, releasing the order. The child does not outlive its run (Unix: the process
// group is killed; Windows only bounds the wait).
func TestRunEndsWithItsProcessGroup(t *testing.T) {
	boss, runner := runTeam(t)
	job := buildRunjob(t, t.TempDir(), "runjob")
	for _, mode := range []string{"spawn-exit", "spawn-block"} {
		jobDir := t.TempDir()
		t.Setenv("FERRY_TEST_JOB_DIR", jobDir)
		t.Setenv("FERRY_TEST_JOB_MODE", mode)
		id := plainOrder(t, boss, mode)
		r := newTestRunner(t, runner, job, Queue{})
		r.Grace = time.Second
		ctx, cancel := context.WithCancel(context.Background())
		ch := runAsync(ctx, r)
		if mode == "spawn-block" {
			waitMark(t, filepath.Join(jobDir, "started-"+id))
			cancel()
		}
		res := waitRun(t, ch, mode)
		cancel()
		want, state := "submitted", fold.StateSubmitted
		if mode == "spawn-block" {
			want, state = "interrupted", fold.OrderState(string(fold.StateOpen))
		}
		if res == nil || res.Outcome != want || res.Order != id {
			t.Fatalf("%s: %+v", mode, res)
		}
		v, _ := runner.Load()
		if o := v.State.Order(id); o.State != state {
			t.Errorf("%s: order %s, want %s", mode, o.State, state)
		}
		gc, _ := strconv.Atoi(waitMark(t, filepath.Join(jobDir, "grandchild")))
		if runtime.GOOS != "windows" && !pidGone(gc) {
			if p, err := os.FindProcess(gc); err == nil {
				p.Kill()
			}
			t.Errorf("%s: the file's child (pid %d) outlived its run", mode, gc)
		}
		if lr := runner.Home.LiveRuns(runner.Project(), "runner"); len(lr) != 0 {
			t.Errorf("%s: live runs left: %+v", mode, lr)
		}
	}
}

// TestRunSchemaOrders: an order with a result schema takes the file's
// stdout as its structured result — one JSON value (reference run:<id>), or a
// reference line then the JSON; a result the schema refuses keeps the claim and runs
// the file again with the refusal in its input, until the ladder's end records
// validation_failed; stdout that is no JSON fails the run with a note saying so.
func TestRunSchemaOrders(t *testing.T) {
	boss, runner := runTeam(t)
	job := buildRunjob(t, t.TempDir(), "runjob")
	jobDir := t.TempDir()
	t.Setenv("FERRY_TEST_JOB_DIR", jobDir)
	t.Setenv("FERRY_TEST_JOB_MODE", "json")
	schema := json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`)
	order := func(title string) string {
		return must[*fold.Order](t)(boss.NewOrder(fsbus.NewOrderOptions{Title: title, Schema: schema})).ID
	}
	r := newTestRunner(t, runner, job, Queue{})
	cases := []struct{ out, outcome, ref, note string }{
		{`{"n": 3}`, "submitted", "run:", ""},
		{"abc123\n{\"n\": 4}", "submitted", "abc123", ""},
		{`{"n": "three"}`, string(fold.StateValidationFailed), "run:", ""},
		{"all done, n is 3", "failed", "", "stdout is not a JSON value"},
	}
	for i, c := range cases {
		id := order(fmt.Sprint("schema case ", i))
		t.Setenv("FERRY_TEST_JOB_OUTPUT", c.out)
		res, err := r.RunOne(context.Background())
		if err != nil || res == nil || res.Order != id || res.Outcome != c.outcome {
			t.Fatalf("%q: %+v %v", c.out, res, err)
		}
		if !strings.HasPrefix(res.Ref, c.ref) || !strings.Contains(res.Note, c.note) {
			t.Errorf("%q: reference %q note %q", c.out, res.Ref, res.Note)
		}
		v, _ := runner.Load()
		o := v.State.Order(id)
		switch c.outcome {
		case "submitted":
			if o.State != fold.StateSubmitted || o.Result == nil || o.Result.Reference != res.Ref {
				t.Errorf("%q: %s %+v", c.out, o.State, o.Result)
			}
		case string(fold.StateValidationFailed):
			refusals, _ := os.ReadFile(filepath.Join(jobDir, "refused-"+id))
			if o.State != fold.StateValidationFailed || o.SchemaFailures != contract.SchemaAttempts-1 || strings.Count(string(refusals), "does not match the schema") != contract.SchemaAttempts-1 {
				t.Errorf("%q: %s, %d schema failures; the file was told:\n%s", c.out, o.State, o.SchemaFailures, refusals)
			}
		case "failed":
			if o.State != fold.StateFailed {
				t.Errorf("%q: %s", c.out, o.State)
			}
		}
	}
}

// TestRunReworksChangesRequested: an order its runner submitted and a
// reviewer sent back with changes is run again by the runner under the same claim,
// the review's note in the file's input, and submitted again.
func TestRunReworksChangesRequested(t *testing.T) {
	boss, runner := runTeam(t)
	job := buildRunjob(t, t.TempDir(), "runjob")
	jobDir := t.TempDir()
	t.Setenv("FERRY_TEST_JOB_DIR", jobDir)
	t.Setenv("FERRY_TEST_JOB_MODE", "ok")
	id := plainOrder(t, boss, "needs a second pass")
	r := newTestRunner(t, runner, job, Queue{})
	if res, err := r.RunOne(context.Background()); err != nil || res == nil || res.Outcome != "submitted" {
		t.Fatalf("first run: %+v %v", res, err)
	}
	v, _ := runner.Load()
	claim := v.State.Order(id).Claim
	must[*fold.Order](t)(boss.Review(id, "changes", fsbus.NoteOptions{Note: "add the tests"}))
	res, err := r.RunOne(context.Background())
	if err != nil || res == nil || res.Outcome != "submitted" || res.Order != id {
		t.Fatalf("rework: %+v %v", res, err)
	}
	if note, _ := os.ReadFile(filepath.Join(jobDir, "review-"+id)); string(note) != "add the tests" {
		t.Errorf("the file was given the review note %q", note)
	}
	v, _ = runner.Load()
	if o := v.State.Order(id); o.State != fold.StateSubmitted || o.Claim != claim {
		t.Errorf("after the rework: %s, claim %s (was %s)", o.State, o.Claim, claim)
	}
	if res, _ := r.RunOne(context.Background()); res != nil {
		t.Errorf("a third pass ran again: %+v", res)
	}
}

// TestRunMessages: an order reassigned while its file runs ends the
// run as taken_away, saying the result was not submitted, and writes nothing; a file
// that prints nothing fails its order with a note saying just that.
func TestRunMessages(t *testing.T) {
	boss, runner := runTeam(t)
	job := buildRunjob(t, t.TempDir(), "runjob")
	jobDir := t.TempDir()
	t.Setenv("FERRY_TEST_JOB_DIR", jobDir)
	t.Setenv("FERRY_TEST_JOB_MODE", "gate")
	id := plainOrder(t, boss, "moves on")
	r := newTestRunner(t, runner, job, Queue{})
	ch := runAsync(context.Background(), r)
	waitMark(t, filepath.Join(jobDir, "started-"+id))
	must[*fold.Order](t)(boss.Offer(id, fsbus.OfferOptions{To: "boss"}))
	os.WriteFile(filepath.Join(jobDir, "gate-"+id), []byte("go"), 0o644)
	res := waitRun(t, ch, "reassigned")
	if res == nil || res.Outcome != "taken_away" || !strings.Contains(res.Note, "reassigned or taken away") || !strings.Contains(res.Note, "not submitted") {
		t.Fatalf("reassigned during the run: %+v", res)
	}
	v, _ := runner.Load()
	if o := v.State.Order(id); o.State != fold.StateOffered || o.History[len(o.History)-1].Type != fold.TypeOrderOffer {
		t.Errorf("the runner wrote after the reassignment: %s %+v", o.State, o.History[len(o.History)-1])
	}
	if lr := runner.Home.LiveRuns(runner.Project(), "runner"); len(lr) != 0 {
		t.Errorf("live runs left: %+v", lr)
	}

	t.Setenv("FERRY_TEST_JOB_MODE", "silent")
	id = plainOrder(t, boss, "says nothing")
	res, err := r.RunOne(context.Background())
	if err != nil || res == nil || res.Outcome != "failed" || res.Order != id {
		t.Fatalf("silent file: %+v %v", res, err)
	}
	if want := "run " + res.Run + ": no result: the file printed nothing on stdout"; res.Note != want {
		t.Errorf("note %q, want %q", res.Note, want)
	}
}

// TestInspectIdleFromArrival: inspect's idle time runs from when this
// machine saw the order's newest entry — an entry written here counts from its
// writing, though this machine's arrival log ingests it only at its next read — so a
// claim made 90 s before the next read shows 90 s idle, not 0.
func TestInspectIdleFromArrival(t *testing.T) {
	boss, runner := runTeam(t)
	clock := time.Now()
	boss.Now = func() time.Time { return clock }
	runner.Now = func() time.Time { return clock }
	id := plainOrder(t, boss, "waits")
	clock = clock.Add(10 * time.Second)
	must[*fold.Order](t)(runner.Claim(id, ""))
	clock = clock.Add(90 * time.Second)
	v, err := runner.Load()
	if err != nil {
		t.Fatal(err)
	}
	rows := Inspect(runner.Channel, v, "", false)
	if len(rows) != 1 || rows[0].IdleS != 90 || rows[0].AgeS != 100 {
		t.Fatalf("inspect: %+v (want idle 90 s, age 100 s)", rows)
	}
}

// TestPauseRunnerTakesNothing: while paused, a runner's loop claims no order and looks
// at none (it keeps its presence, saying so); RunOne and a --once loop answer paused;
// after resume it picks again (docs/format.md §18).
func TestPauseRunnerTakesNothing(t *testing.T) {
	boss, runner := runTeam(t)
	id := plainOrder(t, boss, "wait for resume")
	var picked atomic.Int32
	r := &Runner{S: runner, Workdir: t.TempDir(), Beat: time.Millisecond,
		Pick: func(*fold.Order, Spec) *Handler { picked.Add(1); return nil }}
	if _, err := runner.Home.Pause("", "maintenance", time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Loop(ctx, 20*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	if n := picked.Load(); n != 0 {
		t.Fatalf("a paused runner looked at %d orders", n)
	}
	v, err := runner.Load()
	if err != nil {
		t.Fatal(err)
	}
	if o := v.State.Order(id); o.State != fold.StateOpen {
		t.Fatalf("order %s is %s while the runner was paused", id, o.State)
	}
	if p := v.PresenceOf(runner.Name); p == nil || !strings.Contains(p.Doing, "paused") {
		t.Fatalf("presence while paused: %+v", p)
	}
	if _, err := r.Loop(context.Background(), time.Millisecond, true); !errs.Is(err, errs.Paused) {
		t.Fatalf("--once while paused: %v, want paused", err)
	}
	if _, err := r.RunOne(context.Background()); !errs.Is(err, errs.Paused) || !strings.Contains(err.Error(), "ferry resume") {
		t.Fatalf("RunOne while paused: %v", err)
	}
	if _, err := runner.Home.Resume(""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Loop(context.Background(), time.Millisecond, true); err != nil || picked.Load() == 0 {
		t.Fatalf("after resume: %v, picked %d", err, picked.Load())
	}
}

// TestInspectAgeAfterTheCut: after the owner's checkpoint, a live order's entries at
// or below the cut are the state's lines, not in a reading from the cut; its age and
// idle time still come from when this machine saw them.
func TestInspectAgeAfterTheCut(t *testing.T) {
	clock := time.Now()
	c, ss := fsbustest.Channel(t, fsbustest.Options{Project: "rt", Levels: map[string]string{"boss": "member", "runner": "member"}, Now: func() time.Time { return clock }})
	id := plainOrder(t, ss["boss"], "waits")
	clock = clock.Add(10 * time.Second)
	must[*fold.Order](t)(ss["runner"].Claim(id, ""))
	if _, err := fsbustest.Reopen(t, c).Load(); err != nil { // this machine sees the claim
		t.Fatal(err)
	}
	if r, err := ss[fold.MasterWriter].Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Entry == "" {
		t.Fatalf("compact: %+v %v", r, err)
	}
	clock = clock.Add(90 * time.Second)
	ch := fsbustest.Reopen(t, c)
	v, err := ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	if cf := ch.OwnerCheckpoint(); cf == nil || cf.Used < 0 {
		t.Fatal("not folded from the checkpoint")
	}
	rows := Inspect(ch, v, "", false)
	if len(rows) != 1 || rows[0].AgeS != 100 || rows[0].IdleS != 90 {
		t.Fatalf("inspect after the cut: %+v (want age 100 s, idle 90 s)", rows)
	}
}
