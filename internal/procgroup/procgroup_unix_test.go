//go:build !windows

package procgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillEndsTheGroup: a child that leaves a background process behind; Kill ends
// both, so nothing of the group is left.
func TestKillEndsTheGroup(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	Set(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The background sleep is running once its pid is printed.
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the background pid: %v", err)
	}
	bg, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("background pid %q: %v", line, err)
	}
	pgid := cmd.Process.Pid
	if err := Kill(cmd.Process); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for running(bg) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(bg, syscall.SIGKILL)
			t.Fatalf("the background sleep %d of group %d still runs after Kill", bg, pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The group is gone: Kill again is no error (ESRCH).
	if err := Kill(cmd.Process); err != nil {
		t.Fatalf("Kill of an ended group: %v", err)
	}
}

// TestInterruptStopsTheChild: the SIGINT sent to the child's group ends it. (A shell's
// background jobs ignore SIGINT, so the child is sleep itself, not a shell.)
func TestInterruptStopsTheChild(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	Set(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Kill(cmd.Process) }()
	if err := Interrupt(cmd.Process); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("child still running 5 s after Interrupt")
	}
}

// TestSetKeepsSysProcAttr: Set adds its fields to a SysProcAttr the caller set.
func TestSetKeepsSysProcAttr(t *testing.T) {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: false, Noctty: true}
	Set(cmd)
	if !cmd.SysProcAttr.Noctty || !cmd.SysProcAttr.Setpgid {
		t.Fatalf("SysProcAttr = %+v, want Noctty kept and Setpgid set", *cmd.SysProcAttr)
	}
}

// running reports whether pid is a process that has not ended: on Linux a zombie
// (ended, waiting for whoever reaps orphans) is not running.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	if runtime.GOOS != "linux" {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	return !bytes.HasPrefix(bytes.TrimSpace(rest), []byte("Z"))
}
