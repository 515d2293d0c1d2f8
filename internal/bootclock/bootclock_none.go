//go:build !unix && !windows

package bootclock

import (
	"errors"
	"time"
)

func sinceBoot() (time.Duration, error) { return 0, errors.New("no boot clock on this OS") }

func bootID() string { return "" }
