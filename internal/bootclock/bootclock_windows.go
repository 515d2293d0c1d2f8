//go:build windows

package bootclock

import (
	"time"

	"golang.org/x/sys/windows"
)

// GetTickCount64 counts from boot, sleep and hibernation included
// (QueryUnbiasedInterruptTime would leave them out); setting the clock leaves it.
func sinceBoot() (time.Duration, error) { return windows.DurationSinceBoot(), nil }

func bootID() string { return "" }
