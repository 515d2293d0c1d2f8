//go:build !linux && !windows

package procgroup

import (
	"os/exec"
	"syscall"
)

// Set makes cmd, when started, lead a process group of its own. There is no
// parent-death signal here: cmd may outlive a parent killed with SIGKILL. Fields of an
// existing cmd.SysProcAttr other than Setpgid are kept.
func Set(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}
