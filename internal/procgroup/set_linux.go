//go:build linux

package procgroup

import (
	"os/exec"
	"syscall"
)

// Set makes cmd, when started, lead a process group of its own and has the kernel
// kill it when its parent dies (the parent-death signal reaches cmd only, not its own
// children). Fields of an existing cmd.SysProcAttr other than these are kept.
func Set(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
