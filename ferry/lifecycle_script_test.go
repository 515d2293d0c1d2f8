package main

import (
	"os"
	"strconv"
	"time"
)

// testClockEnv moves the clock of a ferry process run by a journey this many seconds
// ahead of the real one (issue 6: hours pass on one machine). Read only by the test
// binary standing in for ferry.
const testClockEnv = "FERRY_TEST_CLOCK_AHEAD_S"

func init() {
	if s := os.Getenv(testClockEnv); s != "" {
		ahead, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			panic(testClockEnv + ": " + err.Error())
		}
		testClock = func() time.Time { return time.Now().Add(time.Duration(ahead) * time.Second) }
	}
}
