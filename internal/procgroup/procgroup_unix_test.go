//go:build !windows

package procgroup

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestKillEndsTheGroup: a child that leaves a background process behind; Kill ends
// both, so nothing of the group is left.
func TestKillEndsTheGroup(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & wait")
	Set(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if err := Kill(cmd.Process); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has a member after Kill", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The group is gone: Kill again is no error (ESRCH).
	if err := Kill(cmd.Process); err != nil {
		t.Fatalf("Kill of an ended group: %v", err)
	}
}

// TestInterruptReachesTheGroup: the SIGINT sent to the group ends the child.
func TestInterruptReachesTheGroup(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60")
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
