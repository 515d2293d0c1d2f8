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
