//go:build linux

package fsbus

import (
	"os/exec"
	"syscall"
)

// bindChild starts the exec'd file in its own process group, so a stop reaches every
// process it started (interrupt and killGroup signal the group), and makes the kernel
// kill the file when its runner dies (a SIGKILLed `ferry run` must not leave a job
// running whose result nobody will submit). The parent-death signal reaches the file
// only, not its own children (docs/runs.md).
func bindChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
