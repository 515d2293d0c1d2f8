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
