package main

import (
	"strings"
	"testing"
)

// TestReleaseBinaryIgnoresClockVariables: the clock variables the journeys use
// (FERRY_TEST_CLOCK_AHEAD_S, FERRY_TEST_WALL_STEP_S) are read by the test binary only
// (lifecycle_script_test.go). The real binary, built as a release is (releaseBuild),
// given both 5 hours ahead, still sees alice, the primary, alive: bob's take is
// refused. No variable moves the clocks a released ferry measures liveness and
// windows on (ADR 0013).
func TestReleaseBinaryIgnoresClockVariables(t *testing.T) {
	rel := releaseBuild() // built while the tests before the parallel ones run
	t.Parallel()
	m := newMCPMachine(t, rel.wait(t))
	m.channel("acme", "alice", "bob")
	m.must("grant", "alice", "--level", "orchestrator", "--project", "acme")
	m.must("grant", "bob", "--level", "orchestrator", "--project", "acme")
	m.must("--as", "alice", "primary", "take", "--project", "acme")
	m.must("primary", "status", "--project", "acme") // this machine has seen alice's take
	cmd := m.command("--as", "bob", "primary", "take", "--project", "acme")
	cmd.Env = append(cmd.Env, testClockEnv+"=18000", testWallStepEnv+"=18000")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "primary is held by alice (alive, heard from") {
		t.Fatalf("the release binary with %s and %s set: %v\n%s", testClockEnv, testWallStepEnv, err, out)
	}
}
