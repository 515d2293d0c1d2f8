//go:build !windows

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunInterruptReleasesClaim: SIGINT (Ctrl-C) to a `ferry run` whose file is
// running stops the file, releases the order with a note saying so, removes the run
// record and exits 0. (Windows has no SIGINT to send to another process; the kill
// path of TestRunKilledMidRunIsRecovered covers a stopped runner there.)
func TestRunInterruptReleasesClaim(t *testing.T) {
	runjobBuild() // built while the tests before the parallel ones run
	t.Parallel()
	f := newRunFixture(t)
	id := f.order("long job")
	cmd := f.runCmd("block", "--grace", "2s")
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	child, _ := strconv.Atoi(waitFile(t, filepath.Join(f.jobDir, "started-"+id), "the file to start"))
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ferry run after SIGINT: %v\n%s", err, se.String())
		}
	case <-time.After(mcpDeadline):
		t.Fatalf("ferry run did not stop on SIGINT\n%s", se.String())
	}
	o := f.show(id)
	last := o.History[len(o.History)-1]
	if o.State != "open" || last.Type != "order.release" || !strings.Contains(last.Note, "interrupted") {
		t.Fatalf("after SIGINT: %s, last %s %q", o.State, last.Type, last.Note)
	}
	if err := syscall.Kill(child, 0); err == nil {
		t.Errorf("the file (pid %d) still runs after its runner stopped", child)
	}
	if left, _ := filepath.Glob(filepath.Join(f.home, "cache", "channels", "rp", "runs", "runner", "*.json")); len(left) != 0 {
		t.Errorf("run records left: %v", left)
	}
}
