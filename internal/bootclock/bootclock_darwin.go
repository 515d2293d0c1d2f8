//go:build darwin

package bootclock

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// On macOS CLOCK_MONOTONIC is mach_continuous_time: it goes on while the machine
// sleeps (CLOCK_UPTIME_RAW is the one that stops), and setting the clock leaves it.
func sinceBoot() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

var bootID = sync.OnceValue(func() string {
	if s, err := unix.Sysctl("kern.bootsessionuuid"); err == nil && cleanID(s) != "" {
		return cleanID(s)
	}
	if tv, err := unix.SysctlTimeval("kern.boottime"); err == nil {
		return "boottime-" + strconv.FormatInt(int64(tv.Sec), 10) + "." + strconv.FormatInt(int64(tv.Usec), 10)
	}
	return ""
})
