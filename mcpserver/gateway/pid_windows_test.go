//go:build windows

package gateway_test

import "os"

// pidAlive reports whether a process with this pid exists: on Windows FindProcess
// opens it, which fails once it is gone.
func pidAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
