package repocheck

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCIFailsOnSkip feeds .ci/testjson.go, through which .ci/run reads the test run,
// a passing run and runs with a skipped and a failed test: only the first may pass.
func TestCIFailsOnSkip(t *testing.T) {
	root := moduleRoot(t)
	run := func(events ...string) (string, error) {
		cmd := exec.Command("go", "run", filepath.Join(root, ".ci", "testjson.go"))
		cmd.Stdin = strings.NewReader(strings.Join(events, "\n") + "\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pass := `{"Action":"pass","Package":"p","Test":"TestA"}`
	pkg := `{"Action":"pass","Package":"p","Elapsed":0.5}`
	if out, err := run(pass, pkg); err != nil || !strings.Contains(out, "ok  \tp\t0.500s") {
		t.Errorf("a passing run: %v\n%s", err, out)
	}
	skip := `{"Action":"skip","Package":"p","Test":"TestB"}`
	if out, err := run(pass, skip, pkg); err == nil || !strings.Contains(out, "p TestB") {
		t.Errorf("a run with a skip passed or did not name it: %v\n%s", err, out)
	}
	fail := `{"Action":"output","Package":"p","Test":"TestC","Output":"boom\n"}` + "\n" +
		`{"Action":"fail","Package":"p","Test":"TestC"}` + "\n" + `{"Action":"fail","Package":"p","Elapsed":0.5}`
	if out, err := run(fail); err == nil || !strings.Contains(out, "boom") || !strings.Contains(out, "FAIL\tp") {
		t.Errorf("a failing run passed or hid its output: %v\n%s", err, out)
	}
}

// TestCIShowsWhy: a build failure's compiler output, the trace of a test that never
// ended (a panic, a timeout) and a package that started and never reported all reach
// the log, and fail the run.
func TestCIShowsWhy(t *testing.T) {
	root := moduleRoot(t)
	run := func(events ...string) (string, error) {
		cmd := exec.Command("go", "run", filepath.Join(root, ".ci", "testjson.go"))
		cmd.Stdin = strings.NewReader(strings.Join(events, "\n") + "\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	build := []string{
		`{"ImportPath":"p","Action":"build-output","Output":"p/x.go:3:2: undefined: thing\n"}`,
		`{"ImportPath":"p","Action":"build-fail"}`,
		`{"Action":"start","Package":"p"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":0}`,
	}
	if out, err := run(build...); err == nil || !strings.Contains(out, "undefined: thing") {
		t.Errorf("a build failure passed or hid the compiler's words: %v\n%s", err, out)
	}
	timeout := []string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestSlow"}`,
		`{"Action":"output","Package":"p","Test":"TestSlow","Output":"panic: test timed out after 10m0s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":600}`,
	}
	if out, err := run(timeout...); err == nil || !strings.Contains(out, "test timed out") {
		t.Errorf("a timeout passed or hid its trace: %v\n%s", err, out)
	}
	silent := []string{`{"Action":"start","Package":"p"}`, `{"Action":"run","Package":"p","Test":"TestA"}`}
	if out, err := run(silent...); err == nil || !strings.Contains(out, "never reported") {
		t.Errorf("a package that never reported passed: %v\n%s", err, out)
	}
}
