package main

// Unattended runs with real processes (docs/runs.md, "Dead workers"):
// a real `ferry run` is killed mid-run and a second one recovers its order; a failing
// file gives its order back with a cleaned stderr tail; Ctrl-C releases the running
// claim; heavy orders go through a fake job queue that records its arguments.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// runjobBuild starts the build of testdata/runjob (the FILE the tests run), built once.
func runjobBuild() *build { return startBuild("runjob", "./testdata/runjob") }

// runFixture is a machine with a channel "rp": boss (member, dispatches) and runner
// (member, runs), the ferry binary and the runjob file.
type runFixture struct {
	*mcpMachine
	job    string // the runjob executable
	jobDir string // where runjob leaves its marks
}

func newRunFixture(t *testing.T) *runFixture {
	t.Helper()
	m := newMCPMachine(t, ferryExe(t))
	m.channel("rp", "boss", "runner")
	f := &runFixture{mcpMachine: m, jobDir: t.TempDir()}
	f.job = runjobBuild().wait(t)
	return f
}

// order dispatches an order as boss and returns its id.
func (f *runFixture) order(title string, extra ...string) string {
	f.t.Helper()
	var row struct {
		ID string `json:"id"`
	}
	out := f.must(append([]string{"order", "new", title, "--as", "boss", "--project", "rp", "--json"}, extra...)...)
	if err := json.Unmarshal([]byte(out), &row); err != nil || row.ID == "" {
		f.t.Fatalf("order new: %v\n%s", err, out)
	}
	return row.ID
}

// runCmd is an unstarted `ferry run --as runner` with runjob in mode.
func (f *runFixture) runCmd(mode string, extra ...string) *exec.Cmd {
	args := append([]string{"run", "--as", "runner", "--project", "rp", "--exec", f.job,
		"--env", "FERRY_TEST_JOB_DIR", "--env", "FERRY_TEST_JOB_MODE", "--poll", "100ms", "--beat", "200ms"}, extra...)
	cmd := f.command(args...)
	cmd.Env = append(cmd.Env, "FERRY_TEST_JOB_DIR="+f.jobDir, "FERRY_TEST_JOB_MODE="+mode)
	return cmd
}

// runOnce runs `ferry run --once --json` to the end and returns its result.
func (f *runFixture) runOnce(mode string, extra ...string) (res runOnceOut, stderr string) {
	f.t.Helper()
	cmd := f.runCmd(mode, append([]string{"--once", "--json"}, extra...)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		f.t.Fatalf("ferry run --once: %v\n%s%s", err, so.String(), se.String())
	}
	if err := json.Unmarshal(so.Bytes(), &res); err != nil {
		f.t.Fatalf("ferry run --once output: %v\n%s", err, so.String())
	}
	return res, se.String()
}

type runOnceOut struct {
	Ran    bool `json:"ran"`
	Result *struct {
		Run     string `json:"run"`
		Order   string `json:"order"`
		Via     string `json:"via"`
		Outcome string `json:"outcome"`
		Exit    int    `json:"exit"`
		Note    string `json:"note"`
		Ref     string `json:"reference"`
	} `json:"result"`
}

type shownOrder struct {
	State   string `json:"state"`
	Holder  string `json:"holder"`
	History []struct {
		Type string `json:"type"`
		By   string `json:"by"`
		Note string `json:"note"`
	} `json:"history"`
	Result *struct {
		Reference string `json:"reference"`
		Note      string `json:"note"`
	} `json:"result"`
}

func (f *runFixture) show(id string) shownOrder {
	f.t.Helper()
	var o shownOrder
	if err := json.Unmarshal([]byte(f.must("order", "show", id, "--project", "rp", "--json")), &o); err != nil {
		f.t.Fatal(err)
	}
	return o
}

func (o shownOrder) types() []string {
	var out []string
	for _, h := range o.History {
		out = append(out, h.Type)
	}
	return out
}

// waitFile polls for a file until the deadline and returns its content.
func waitFile(t *testing.T, path string, what string) string {
	t.Helper()
	deadline := time.Now().Add(mcpDeadline)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (%s)", what, path)
	return ""
}

// TestRunKilledMidRunIsRecovered: a real `ferry run` process claims an order and
// starts the file; the test kills the runner with SIGKILL (TerminateProcess on
// Windows) while the file runs. A second `ferry run` finds the dead run in the run
// registry (its lock is free, its pid gone), releases the order with a signed note
// naming the run, claims it afresh and completes it: create, claim, release, claim,
// submit — every step in the ledger, which still verifies.
func TestRunKilledMidRunIsRecovered(t *testing.T) {
	runjobBuild() // built while the tests before the parallel ones run
	t.Parallel()
	f := newRunFixture(t)
	id := f.order("build the thing")

	first := f.runCmd("block-first")
	var se1 bytes.Buffer
	first.Stderr = &se1
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Process.Kill(); first.Wait() })
	waitFile(t, filepath.Join(f.jobDir, "started-"+id), "the first run's file to start")
	run1 := strings.TrimSpace(waitFile(t, filepath.Join(f.jobDir, "attempt-"+id), "the first run id"))

	// While it runs: the order is held, the registry names the run and the runner's
	// pid, and the heartbeat put the run into the runner's presence file.
	if o := f.show(id); o.State != "claimed" || o.Holder != "runner" {
		t.Fatalf("while running: state %s holder %s", o.State, o.Holder)
	}
	rec := filepath.Join(f.home, "cache", "channels", "rp", "runs", "runner", run1+".json")
	var rr struct {
		PID   int    `json:"pid"`
		Order string `json:"order"`
		Claim string `json:"claim"`
	}
	if err := json.Unmarshal([]byte(waitFile(t, rec, "the run record")), &rr); err != nil || rr.PID != first.Process.Pid || rr.Order != id || rr.Claim == "" {
		t.Fatalf("run record %+v (err %v); runner pid %d", rr, err, first.Process.Pid)
	}
	deadline := time.Now().Add(mcpDeadline)
	for {
		pres, _ := filepath.Glob(filepath.Join(f.home, "..", "sync", "rp", "presence", "runner.*.json"))
		if len(pres) == 1 {
			if b, _ := os.ReadFile(pres[0]); strings.Contains(string(b), `"run":"`+run1+`"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runner's presence never named run %s (files %v)", run1, pres)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()

	res, se := f.runOnce("block-first")
	if !res.Ran || res.Result.Outcome != "submitted" || res.Result.Order != id || res.Result.Run == run1 {
		t.Fatalf("second run: %+v\n%s", res.Result, se)
	}
	if !strings.Contains(se, "recovered "+id) {
		t.Errorf("the second runner did not say it recovered %s:\n%s", id, se)
	}
	o := f.show(id)
	want := []string{"order.create", "order.claim", "order.release", "order.claim", "order.submit"}
	if !slices.Equal(o.types(), want) {
		t.Fatalf("history %v, want %v", o.types(), want)
	}
	rel := o.History[2]
	if rel.By != "runner" || !strings.Contains(rel.Note, run1) || !strings.Contains(rel.Note, "died") {
		t.Errorf("recovery release: by %s note %q", rel.By, rel.Note)
	}
	if o.State != "submitted" || o.Result == nil || o.Result.Reference != "ref-"+id {
		t.Errorf("after recovery: state %s result %+v", o.State, o.Result)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(rec), "*.json")); len(left) != 0 {
		t.Errorf("run records left behind: %v", left)
	}
	f.must("ledger", "verify", "--project", "rp")
}

// scriptRunjob is the `runjob` command of the testscript journeys: the file `ferry
// run --exec runjob` runs. It reads the order on stdin and prints "ref-<id>" and the
// title; with RUNJOB_FAIL set (passed with --env) it writes to stderr and exits 4;
// with RUNJOB_STDOUT set (passed with --env) it prints that and nothing else.
func scriptRunjob() {
	var in struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		os.Stderr.WriteString("runjob: " + err.Error() + "\n")
		os.Exit(2)
	}
	if out, ok := os.LookupEnv("RUNJOB_STDOUT"); ok {
		os.Stdout.WriteString(out)
		return
	}
	if os.Getenv("RUNJOB_FAIL") != "" {
		os.Stderr.WriteString("compiler says: \x1b[1mno\x1b[0m\n")
		os.Exit(4)
	}
	os.Stdout.WriteString("ref-" + in.ID + "\ndone: " + in.Title + "\n")
}
