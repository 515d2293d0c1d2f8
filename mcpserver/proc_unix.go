//go:build !windows

package mcpserver

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd the leader of a process group of its own, so that killGroup
// ends whatever it spawned too (a wrapper script's children, npx's node).
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
}

// killGroup sends SIGKILL to the process group of cmd (started with setProcessGroup),
// then to cmd itself in case the group is already gone.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
