//go:build windows

package mcpserver

import "os/exec"

// setProcessGroup does nothing on Windows: there is no process group to kill at once
// (a job object would be needed); killGroup kills the child alone.
func setProcessGroup(cmd *exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
