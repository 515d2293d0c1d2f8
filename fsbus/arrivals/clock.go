package arrivals

import (
	"time"
)

// Every decision docs/design.md §2 rule 7 leaves to an observer's clock — a holder silent, so
// the primary role may be taken over; an execution or queue window closed, so the
// order expires — is measured from a sighting: when this machine first saw something.
// A sighting is a Stamp, a reading of two clocks: the wall clock, and the OS boot
// clock (internal/bootclock), which no setting of the wall clock moves. Elapsed
// time is measured on the boot clock; a wall-clock step (an NTP step, a VM whose clock
// is corrected on resume) cannot make a live holder look silent (ADR 0013,
// docs/format.md §18 "Clock steps").

// Stamp is when this machine saw something, on both of its clocks.
type Stamp struct {
	Wall int64 // Unix ms on the wall clock
	Boot int64 // ms on the boot clock, since the boot BootID names
	// BootID names the boot Boot counts from ("-" when the OS names none). "" means
	// there was no boot clock reading (the OS has none): elapsed time from such a
	// stamp is measured on the wall clock alone.
	BootID string
}

// maxClockStep is how far the wall clock may move against the boot clock (wall time
// minus boot time) between a sighting and now before the sighting counts as made
// before a clock step (ADR 0013). NTP slews both clocks at one rate; only a step
// moves one against the other.
const maxClockStep = 2 * time.Second

// NoBootID is the boot id of a boot clock whose OS names no boot: a reboot still shows
// as wall time minus boot time jumping by the length of the previous boot.
const NoBootID = "-"

// sameClock reports whether s and t were read on one boot with no clock step between
// them: the same boot id, and wall minus boot time within MaxClockStep.
func (s Stamp) sameClock(t Stamp) bool {
	if s.BootID == "" || s.BootID != t.BootID {
		return false
	}
	d := (s.Wall - s.Boot) - (t.Wall - t.Boot)
	return max(d, -d) <= maxClockStep.Milliseconds()
}

// Since is the time elapsed from sighting s to now (the receiver): on the boot clock
// when both were read on one boot with no step between them; 0 when a step or a
// reboot came between (the sighting counts from now: the quiet period restarts at the
// first observation after the step); on the wall clock when either has no boot clock
// reading. Never negative.
func (now Stamp) Since(s Stamp) time.Duration {
	var ms int64
	switch {
	case s.BootID == "" || now.BootID == "":
		ms = now.Wall - s.Wall
	case now.sameClock(s):
		ms = now.Boot - s.Boot
	}
	return max(time.Duration(ms)*time.Millisecond, 0)
}

// At is sighting s as a time on the wall clock of now: now's wall time minus the time
// elapsed since s (Since). Deadlines and ages computed from it hold across a step.
func (now Stamp) At(s Stamp) time.Time {
	return time.UnixMilli(now.Wall).Add(-now.Since(s))
}

// Time is the wall clock reading of s.
func (s Stamp) Time() time.Time { return time.UnixMilli(s.Wall) }

// Later reports whether s was seen after t: by the boot clock on one boot (it never
// goes back), else by the wall clock.
func (s Stamp) Later(t Stamp) bool {
	if s.BootID != "" && s.BootID == t.BootID {
		return s.Boot > t.Boot
	}
	return s.Wall > t.Wall
}

// OnClock returns s re-based onto the clock of now: s itself when it was read with no
// step or reboot since, else now (the first observation after the step). A stamp
// without a boot reading is adopted as read on now's clock (its age stays what the wall
// clock says: how records written before boot stamps are read).
func (now Stamp) OnClock(s Stamp) Stamp {
	switch {
	case now.BootID == "":
		return s
	case s.BootID == "":
		return Stamp{Wall: s.Wall, Boot: s.Wall - (now.Wall - now.Boot), BootID: now.BootID}
	case now.sameClock(s):
		return s
	}
	return now
}
