//go:build unix && !linux && !darwin

package bootclock

import (
	"time"

	"golang.org/x/sys/unix"
)

func sinceBoot() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

func bootID() string { return "" }
