//go:build windows

package procgroup

import (
	"os"
	"os/exec"
	"syscall"
)

// Set makes cmd, when started, lead a new process group (CREATE_NEW_PROCESS_GROUP),
// so a console Ctrl-C meant for its parent does not reach it directly. Fields of an
// existing cmd.SysProcAttr are kept; CreationFlags gets the flag added.
func Set(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= syscall.CREATE_NEW_PROCESS_GROUP
}

// Interrupt stops p: Windows has no SIGINT for another process, so it is killed.
func Interrupt(p *os.Process) error { return p.Kill() }

// Kill kills p; its own children are not tracked on Windows.
func Kill(p *os.Process) error { return p.Kill() }
