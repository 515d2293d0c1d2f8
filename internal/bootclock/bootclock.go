// Package bootclock reads this machine's boot clock: the time since the OS booted,
// which counts time asleep and which no setting of the wall clock moves (an NTP step,
// `date -s`, a VM's clock corrected on resume), and an id of the boot it counts from.
//
//	r, err := bootclock.Read()
//	// r.Since: time since boot; r.ID: names this boot ("" when the OS names none)
//
// fsbus stamps every sighting with it beside the wall clock, so the time elapsed since
// a sighting is measured on a clock a wall-clock step cannot forge (docs/adr/0013).
//
// Per OS: Linux CLOCK_BOOTTIME and /proc/sys/kernel/random/boot_id; macOS
// CLOCK_MONOTONIC (which, there, counts sleep) and the kern.bootsessionuuid sysctl
// (kern.boottime where that is missing); Windows GetTickCount64 (counts sleep and
// hibernation) with no id; other Unix systems CLOCK_MONOTONIC with no id. A caller
// without an id still sees a reboot: the boot clock starts again near 0, so wall time
// minus boot time jumps by the length of the previous boot.
package bootclock

import (
	"strings"
	"sync"
	"time"
)

// Reading is one reading of the boot clock.
type Reading struct {
	Since time.Duration // time since boot
	ID    string        // the boot's id; "" when the OS names none
}

// Read returns the boot clock now. Its error is the OS's; callers then have no boot
// clock and fall back to the wall clock alone.
func Read() (Reading, error) {
	since, err := sinceBoot()
	if err != nil {
		return Reading{}, err
	}
	return Reading{Since: since, ID: bootID()}, nil
}

// cleanID keeps an id to the characters of a UUID, so it is one field of a text line.
func cleanID(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		}
		if b.Len() >= 64 {
			break
		}
	}
	return b.String()
}

// At returns the boot clock as it reads when the wall clock reads wall, taking this
// boot's start on the wall clock as read once per process: a caller that sets its own
// wall clock moves the boot clock by exactly as much as it moves the wall clock.
func At(wall time.Time) (Reading, error) {
	b, err := start()
	if err != nil {
		return Reading{}, err
	}
	return Reading{Since: wall.Sub(b.wall), ID: b.id}, nil
}

// boot is when this boot began on the wall clock, and its id.
type boot struct {
	wall time.Time
	id   string
}

// start reads this boot's start, once per process.
var start = sync.OnceValues(func() (boot, error) {
	r, err := Read()
	return boot{time.Now().Add(-r.Since), r.ID}, err
})
