//go:build windows

package fsbus

import (
	"os/exec"
	"syscall"
)

// bindChild starts the exec'd file in a new process group (CREATE_NEW_PROCESS_GROUP),
// so a console Ctrl-C meant for the runner does not reach it directly: the runner
// decides when it stops. Its own children are not tracked on Windows (no job object):
// the WaitDelay bounds how long they can hold the output pipes (docs/runs.md).
func bindChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
