package main

import (
	"os"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/internal/bootclock"
)

// testClockEnv moves both clocks of a ferry process run by a journey this many seconds
// ahead of the real ones (hours pass on one machine); testWallStepEnv moves
// its wall clock alone that many seconds (a clock step, ADR 0013: an NTP step, a VM's
// clock corrected on resume). Read only by the test binary standing in for ferry.
const (
	testClockEnv    = "FERRY_TEST_CLOCK_AHEAD_S"
	testWallStepEnv = "FERRY_TEST_WALL_STEP_S"
)

func init() {
	ahead, step := testSeconds(testClockEnv), testSeconds(testWallStepEnv)
	if ahead == 0 && step == 0 {
		return
	}
	testClock = func() time.Time { return time.Now().Add(ahead + step) }
	testBoot = func() bootclock.Reading {
		r, err := bootclock.Read()
		if err != nil {
			panic("reading the boot clock: " + err.Error())
		}
		r.Since += ahead
		return r
	}
}

// testSeconds reads a number of seconds from the environment variable name (0 when unset).
func testSeconds(name string) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(name + ": " + err.Error())
	}
	return time.Duration(n) * time.Second
}
