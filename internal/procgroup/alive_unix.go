//go:build !windows

package procgroup

import (
	"errors"
	"os"
	"syscall"
)

// Alive reports whether a process with this pid exists: signal 0 checks without
// signalling (EPERM means it exists under another user).
func Alive(pid int) bool {
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
