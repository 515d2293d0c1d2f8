//go:build !linux && !windows

package fsbus

import (
	"os/exec"
	"syscall"
)

// bindChild starts the exec'd file in its own process group, so a stop reaches every
// process it started. Without a parent-death signal the file may outlive a killed
// runner; its output then goes nowhere and recovery releases its order (docs/runs.md).
func bindChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
