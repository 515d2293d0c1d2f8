//go:build linux

package bootclock

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func sinceBoot() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

// bootID is the kernel's random id of this boot (it never changes while the machine
// runs: read once per process).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return cleanID(string(b))
})
