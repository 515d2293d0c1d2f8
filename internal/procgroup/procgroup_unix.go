//go:build !windows

package procgroup

import (
	"errors"
	"os"
	"syscall"
)

// Interrupt asks p and every process of its group to stop (SIGINT to the process
// group [Set] started it in). A p not leading its own group gets the signal alone.
func Interrupt(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGINT); err == nil {
		return nil
	}
	return p.Signal(os.Interrupt)
}

// Kill kills p and whatever is left of its process group (SIGKILL to the group, then
// to p in case the group is already gone): orphaned grandchildren must not outlive
// it. ESRCH (nothing left) is not an error.
func Kill(p *os.Process) error {
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	_ = p.Kill()
	return err
}
