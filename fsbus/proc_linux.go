//go:build linux

package fsbus

import (
	"os/exec"
	"syscall"
)

// bindChild makes the kernel kill the exec'd child when its runner dies (a SIGKILLed
// `ferry run` must not leave a job running whose result nobody will submit).
func bindChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
