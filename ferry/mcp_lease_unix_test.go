//go:build unix

package main

// The MCP session lease outlives what users delete (docs/mcp.md "One session per
// agent"): a purge of the cache dir, or of the lease file itself, while a real `ferry
// mcp serve` runs never lets a second server in under the same name. Unix only: there
// a file that a process holds open can be removed or renamed over, which is what these
// tests do; Windows refuses both while the server lives.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// TestMCPLease runs the lease journeys against ferry processes (ferryExe).
func TestMCPLease(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	t.Run("survives-cache-purge", func(t *testing.T) {
		t.Parallel()
		mcpLeaseSurvivesCachePurge(t, bin)
	})
	t.Run("renewed-on-heartbeat", func(t *testing.T) {
		t.Parallel()
		mcpLeaseRenewed(t, bin)
	})
}

// waitUntil polls cond until it holds; only a hang (mcpDeadline) fails, naming what.
func waitUntil(t *testing.T, what string, cond func() bool, stderr func() string) {
	t.Helper()
	deadline := time.Now().Add(mcpDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v\nserver stderr:\n%s", what, mcpDeadline, stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// presenceRewrites returns a func that waits until bob's presence file has been
// rewritten n more times from now: each rewrite is one heartbeat of the server.
func presenceRewrites(t *testing.T, ch string, a *mcpAgent) func(n int) {
	glob := filepath.Join(ch, "presence", a.name+".*.json")
	read := func() []byte {
		files, _ := filepath.Glob(glob)
		if len(files) != 1 {
			return nil
		}
		b, _ := os.ReadFile(files[0])
		return b
	}
	return func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			before := read()
			waitUntil(t, fmt.Sprintf("heartbeat %d of %d (presence rewritten)", i+1, n), func() bool {
				now := read()
				return len(now) > 0 && !bytes.Equal(now, before)
			}, a.c.Stderr)
		}
	}
}

// refusedAsBob starts another `ferry mcp serve --as bob` and checks that its write is
// refused with a conflict naming the process pid.
func refusedAsBob(t *testing.T, m *mcpMachine, when string, pid int) {
	t.Helper()
	other := startAgent(t, m, mcpClientKinds[0], "bob", "acme")
	msg := other.fail("ferry_talk", map[string]any{"action": "post", "to": "master", "text": "second bob"})
	if want := fmt.Sprintf("conflict: process %d is already acting as bob", pid); !strings.HasPrefix(msg, want) {
		t.Errorf("%s: a second bob's post = %q, want %q…", when, msg, want)
	}
	_ = other.c.Close()
}

// mcpLeaseSurvivesCachePurge: the cache dir deleted while bob's server runs; after its
// next heartbeats a second bob is still refused, and the first still writes.
func mcpLeaseSurvivesCachePurge(t *testing.T, bin string) {
	m := newMCPMachine(t, bin)
	ch := m.channel("acme", "bob")
	first := startAgent(t, m, mcpClientKinds[0], "bob", "acme", "--presence-every", "200ms")
	first.ok("ferry_talk", map[string]any{"action": "post", "to": "master", "text": "bob here"}, nil) // takes the lease
	heartbeats := presenceRewrites(t, ch, first)
	if err := os.RemoveAll(filepath.Join(m.home, "cache")); err != nil {
		t.Fatal(err)
	}
	// Two rewrites after the purge: the lease's own heartbeat, on the same period,
	// has run at least once since the purge.
	heartbeats(2)
	refusedAsBob(t, m, "after the cache dir was deleted", first.c.Pid())
	first.ok("ferry_talk", map[string]any{"action": "post", "to": "master", "text": "still bob"}, nil)
}

// mcpLeaseRenewed: the lease file removed under a live server is taken again on the
// next heartbeat; replaced by a file another process holds, the server logs the
// conflict once, keeps serving, and takes the lease back when that process lets go.
func mcpLeaseRenewed(t *testing.T, bin string) {
	m := newMCPMachine(t, bin)
	ch := m.channel("acme", "bob")
	first := startAgent(t, m, mcpClientKinds[0], "bob", "acme", "--presence-every", "200ms")
	first.ok("ferry_join", nil, nil) // takes the lease; an idle session renews it too
	dir := filepath.Join(m.home, "config", "leases", "acme")
	lease := filepath.Join(dir, "agent-bob.lease")
	if _, err := os.Stat(lease); err != nil {
		t.Fatalf("the session lease is not at %s: %v", lease, err)
	}
	retaken := func() int { return strings.Count(first.c.Stderr(), "was removed or replaced; took it again") }

	// Removed: taken again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the removed lease taken again", func() bool { return retaken() == 1 }, first.c.Stderr)
	refusedAsBob(t, m, "after the lease file was removed", first.c.Pid())

	// Replaced by a file this test holds locked, its pid file naming the test: the
	// server reports who holds it and goes on serving.
	tmp := lease + ".tmp"
	other := flock.New(tmp)
	if ok, err := other.TryLock(); !ok || err != nil {
		t.Fatalf("locking %s: %v, %v", tmp, ok, err)
	}
	defer other.Unlock()
	if err := os.WriteFile(lease+".pid", []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, lease); err != nil {
		t.Fatal(err)
	}
	conflict := fmt.Sprintf("and process %d took it: two sessions act as bob on this machine", os.Getpid())
	waitUntil(t, "the conflict logged", func() bool { return strings.Contains(first.c.Stderr(), conflict) }, first.c.Stderr)
	first.ok("ferry_talk", map[string]any{"action": "post", "to": "master", "text": "still serving"}, nil)
	heartbeats := presenceRewrites(t, ch, first)
	heartbeats(2)
	if n := strings.Count(first.c.Stderr(), conflict); n != 1 {
		t.Errorf("the conflict was logged %d times over several heartbeats, want once:\n%s", n, first.c.Stderr())
	}

	// The other holder lets go: the next heartbeat takes the lease back.
	other.Unlock()
	waitUntil(t, "the lease taken back", func() bool { return retaken() == 2 }, first.c.Stderr)
	refusedAsBob(t, m, "after the other holder let go", first.c.Pid())
}
