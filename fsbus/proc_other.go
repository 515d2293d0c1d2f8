//go:build !linux

package fsbus

import "os/exec"

// bindChild does nothing here: on systems without a parent-death signal a child may
// outlive a killed runner; its output then goes nowhere and recovery releases its order
// (docs/runs.md).
func bindChild(cmd *exec.Cmd) {}
