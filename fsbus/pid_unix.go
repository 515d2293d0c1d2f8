//go:build !windows

package fsbus

import (
	"errors"
	"os"
	"syscall"
)

// pidAlive reports whether a process with this pid exists: signal 0 checks without
// signalling (EPERM means it exists under another user).
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// interrupt asks a run's file and every process of its group to stop (SIGINT to the
// process group bindChild started it in); the runner kills the group after a grace
// period. A file not leading its own group gets the signal alone.
func interrupt(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGINT); err == nil {
		return nil
	}
	return p.Signal(os.Interrupt)
}

// killGroup kills a run's file and whatever is left of its process group (SIGKILL to
// the group): orphaned grandchildren must not outlive their run. ESRCH (nothing left)
// is not an error.
func killGroup(p *os.Process) error {
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	_ = p.Kill()
	return err
}
