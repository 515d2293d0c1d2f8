//go:build !linux && !windows

package mcpserver

import "syscall"

// setDeathSignal does nothing outside Linux: there is no parent-death signal; a ferry
// killed with SIGKILL leaves its children running.
func setDeathSignal(*syscall.SysProcAttr) {}
