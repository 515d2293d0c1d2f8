package fsbus

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// copyTree copies a directory tree (a sync tool delivering a folder).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// Segments only grow: a sync tool never replaces a longer copy with a shorter.
		if old, err := os.ReadFile(target); err == nil && len(old) >= len(b) {
			return nil
		}
		return os.WriteFile(target, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGrantChainBranchesResolveWithoutClock: the owner changes an agent's grant on two
// machines at once (both name the same previous grant as basis). Once the folders meet,
// every machine folds the same roster: the branch that reached a revocation wins,
// whatever the clocks say, and the other branch is reported as contested and ignored.
func TestGrantChainBranchesResolveWithoutClock(t *testing.T) {
	t.Parallel()
	hA, hB := testHome(t), testHome(t)
	dirA := filepath.Join(t.TempDir(), "acme")
	cA, err := Init(hA, InitOptions{Dir: dirA, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(cA, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	mA, _ := cA.As(fold.MasterWriter)
	if _, err := mA.Grant(GrantOptions{Agent: "alice", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	// Machine B gets the folder and the owner's key (its own device, its own segment).
	dirB := filepath.Join(t.TempDir(), "acme")
	copyTree(t, dirA, dirB)
	kb, _ := os.ReadFile(hA.keyPath("acme", fold.MasterWriter))
	if err := os.MkdirAll(filepath.Dir(hB.keyPath("acme", fold.MasterWriter)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hB.keyPath("acme", fold.MasterWriter), kb, 0o600); err != nil {
		t.Fatal(err)
	}
	cB, err := Open(hB, dirB)
	if err != nil {
		t.Fatal(err)
	}
	if cA.Device == cB.Device {
		t.Fatal("two homes share a device id")
	}
	mB, _ := cB.As(fold.MasterWriter)
	// Partitioned: A revokes, B raises alice to orchestrator.
	if _, err := mA.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := mB.Grant(GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	// The folders meet both ways.
	copyTree(t, filepath.Join(dirB, "ledger"), filepath.Join(dirA, "ledger"))
	copyTree(t, filepath.Join(dirA, "ledger"), filepath.Join(dirB, "ledger"))
	for _, c := range []*Channel{cA, cB} {
		v, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		a := v.State.Agents["alice"]
		if a.Seated || a.Level != "none" {
			t.Fatalf("device %s: alice seated=%v level=%s; the revocation branch must win", c.Device, a.Seated, a.Level)
		}
		var found bool
		for _, ct := range v.State.Contested {
			if ct.Ref == "alice" && ct.Winner.Type == fold.TypeGrantRevoke && len(ct.Losers) == 1 && ct.Losers[0].Type == fold.TypeGrantSet {
				found = true
			}
		}
		if !found {
			t.Fatalf("device %s: grant contest not reported: %+v", c.Device, v.State.Contested)
		}
		// Alice's later entries count for nothing on either machine.
		if err := fold.CheckLevel("alice", v.State.LevelOf("alice"), fold.TypeOrderCreate); !errs.Is(err, errs.Denied) {
			t.Fatalf("device %s: alice may still create orders: %v", c.Device, err)
		}
	}
	// A new grant after the contest chains on the winning head: alice is seated again.
	if _, err := mA.Grant(GrantOptions{Agent: "alice", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	v, err := cA.Load()
	if err != nil {
		t.Fatal(err)
	}
	if a := v.State.Agents["alice"]; !a.Seated || a.Level != "member" {
		t.Fatalf("re-seated alice: seated=%v level=%s", a.Seated, a.Level)
	}
}
