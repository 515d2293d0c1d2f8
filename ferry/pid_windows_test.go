//go:build windows

package main

import "os"

// pidRunning reports whether a process with this pid exists: on Windows FindProcess
// opens it, which fails once it is gone.
func pidRunning(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
