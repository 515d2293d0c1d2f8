package fsbus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestPresenceSightings: a writer's presence file is a signed heartbeat; another
// machine records when it first saw each version, and liveness runs on that
// machine's clock (docs/design.md §2 rule 7). A presence not signed by the seated key counts
// for nothing.
func TestPresenceSightings(t *testing.T) {
	t.Parallel()
	hA, hB := testHome(t), testHome(t)
	dir := filepath.Join(t.TempDir(), "acme")
	cA, err := Init(hA, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(cA, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	m, _ := cA.As(fold.MasterWriter)
	if _, err := m.Grant(GrantOptions{Agent: "alice", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	alice, _ := cA.As("alice")

	// Machine B watches with its own clock.
	cB, err := Open(hB, dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cB.Now = func() time.Time { return clock }
	if _, err := cB.Load(); err != nil { // first look: alice's entries seen at 12:00
		t.Fatal(err)
	}
	clock = clock.Add(40 * time.Minute)
	v, _ := cB.Load()
	if l, _ := cB.Liveness(v, "alice"); l != Silent {
		t.Fatalf("alice after 40 quiet minutes: %s, want silent", l)
	}
	// A heartbeat: B sees it change now, so alice is alive again on B's clock.
	if err := alice.WritePresence("reviewing o-123", nil); err != nil {
		t.Fatal(err)
	}
	v, _ = cB.Load()
	if l, age := cB.Liveness(v, "alice"); l != Alive || age != 0 {
		t.Fatalf("alice after a heartbeat: %s %ds, want alive 0s", l, age)
	}
	if p := v.PresenceOf("alice"); p == nil || p.Doing != "reviewing o-123" {
		t.Fatalf("presence of alice: %+v", p)
	}
	// The same file seen again later is not a new sighting.
	clock = clock.Add(10 * time.Minute)
	v, _ = cB.Load()
	if l, age := cB.Liveness(v, "alice"); l != Quiet || age != 600 {
		t.Fatalf("alice 10 min after an unchanged heartbeat: %s %ds, want quiet 600s", l, age)
	}
	// A presence file forged for alice (signed by another key) counts for nothing.
	forger, err := hB.NewKey("acme", "mallory")
	if err != nil {
		t.Fatal(err)
	}
	fake := &Session{Channel: cB, Name: "alice", Signer: forger}
	if err := fake.WritePresence("forged", nil); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(30 * time.Minute)
	v, _ = cB.Load()
	if l, _ := cB.Liveness(v, "alice"); l != Silent {
		t.Fatalf("a forged heartbeat revived alice: %s", l)
	}
	if p := v.PresenceOf("alice"); p != nil && p.Device == cB.Device {
		t.Fatalf("forged presence shown: %+v", p)
	}
	// Bad input changes nothing.
	if err := alice.WritePresence(strings.Repeat("x", maxDoing+1), nil); !errs.Is(err, errs.Invalid) {
		t.Fatalf("over-long doing: %v", err)
	}
	if _, err := os.Stat(presencePath(dir, "alice", cA.Device)); err != nil {
		t.Fatal(err)
	}
}
