//go:build linux

package mcpserver

import "syscall"

// setDeathSignal has the kernel send the child SIGKILL when ferry dies (even by
// SIGKILL, when nothing of ferry's can clean up). Only the child: what it started
// itself is ended by killGroup on the normal paths.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
