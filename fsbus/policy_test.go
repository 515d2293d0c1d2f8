package fsbus

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// appendPolicySet appends a master policy.set carrying table, chained on basis ("" for
// the chain's first), straight to s's segment: what any binary of this format writes.
func appendPolicySet(t *testing.T, s *Session, basis string, table map[string]any) ledger.Entry {
	t.Helper()
	d := map[string]any{"policy": table}
	if basis != "" {
		d["basis"] = basis
	}
	data, err := ledger.Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Ledger.Append(s.Name, s.Device, ledger.Draft{Type: "policy.set", Ref: "policy", Data: data}, s.Signer, ledger.HLC{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// execWindow is the execution window o is in on c, as a span from now.
func execWindow(t *testing.T, c *Channel, id string, now time.Time) time.Duration {
	t.Helper()
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	win, ok := c.Window(v, v.State.Order(id))
	if !ok || win.Kind != WindowExecution {
		t.Fatalf("order %s: no execution window (%+v, %v)", id, win, ok)
	}
	return win.Deadline.Sub(now).Round(time.Second)
}

// TestPolicySetWindowDecides: a counting policy.set is the policy every decision reads:
// an exec_window_s of 600 set after channel.toml's default (4 h) expires a claim after
// 10 minutes on the holder's machine (docs/format.md §8 "Policy changes").
func TestPolicySetWindowDecides(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	appendPolicySet(t, w.master, "", map[string]any{"quiet_after_s": 300, "silent_after_s": 1800, "max_skew_s": 3600, "exec_window_s": 600})
	o := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "Quick one"}))
	must[*fold.Order](t)(w.bob.Claim(o.ID, ""))
	if got := execWindow(t, w.c, o.ID, w.now()); got != 10*time.Minute {
		t.Fatalf("execution window after policy.set exec_window_s=600: %v left, want 10m0s", got)
	}
	w.pass(11 * time.Minute)
	if got := settled(t, w.bob); len(got) != 1 || got[0] != o.ID {
		t.Fatalf("11 min after the claim under exec_window_s=600: settled %v, want [%s]", got, o.ID)
	}
}

// TestPolicySetBranchesLowerHashWins: the owner changes the policy on two machines at
// once (both policy.sets name no basis: the chain's first). Once the folders meet,
// both machines fold the same head — the lower entry hash, whatever the clocks say —
// report a contest whose ref is "policy", list the other set as ignored, and decide
// by the winner's table.
func TestPolicySetBranchesLowerHashWins(t *testing.T) {
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
	alice, _ := cA.As("alice")
	o, err := alice.NewOrder(NewOrderOptions{Title: "Held"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Claim(o.ID, ""); err != nil {
		t.Fatal(err)
	}
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
	mB, _ := cB.As(fold.MasterWriter)
	base := map[string]any{"quiet_after_s": 300, "silent_after_s": 1800, "max_skew_s": 3600}
	with := func(k string, v any) map[string]any {
		m := map[string]any{k: v}
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	ea := appendPolicySet(t, mA, "", with("exec_window_s", 600))
	eb := appendPolicySet(t, mB, "", with("exec_window_s", 1200))
	copyTree(t, filepath.Join(dirB, "ledger"), filepath.Join(dirA, "ledger"))
	copyTree(t, filepath.Join(dirA, "ledger"), filepath.Join(dirB, "ledger"))
	win, lose, want := ea, eb, 10*time.Minute
	if eb.Hash() < ea.Hash() {
		win, lose, want = eb, ea, 20*time.Minute
	}
	for _, c := range []*Channel{cA, cB} {
		v, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, ct := range v.State.Contested {
			if ct.Ref == "policy" && ct.Winner.Hash == win.Hash() && len(ct.Losers) == 1 && ct.Losers[0].Hash == lose.Hash() {
				found = true
			}
		}
		if !found {
			t.Errorf("device %s: no policy contest won by the lower hash %s: %+v", c.Device, win.Hash(), v.State.Contested)
		}
		ignored := false
		for _, ig := range v.State.Ignored {
			ignored = ignored || ig.Hash == lose.Hash()
		}
		if !ignored {
			t.Errorf("device %s: the losing policy.set %s is not listed as ignored", c.Device, lose.Hash())
		}
		// The window is measured from when this machine saw the claim: compare it with
		// the one the winner's value gives, on this machine's own clock.
		w, ok := c.Window(v, v.State.Order(o.ID))
		if !ok {
			t.Fatalf("device %s: no window", c.Device)
		}
		// The cap is the claim's sighting + 24 h (no renewal since).
		claimSeen := w.Cap.Add(-fold.DefaultLifetimeS * time.Second)
		if got := w.Deadline.Sub(claimSeen); got != want {
			t.Errorf("device %s: execution window %v, want the winner's %v", c.Device, got, want)
		}
	}
	// A set after the contest chains on the winning head: it is the head on both.
	third := appendPolicySet(t, mA, win.Hash(), with("exec_window_s", 900))
	copyTree(t, filepath.Join(dirA, "ledger"), filepath.Join(dirB, "ledger"))
	for _, c := range []*Channel{cA, cB} {
		v, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PolicyOf(v).ExecWindowS; got != 900 {
			t.Errorf("device %s: exec_window_s %d after a set chained on the winner, want 900", c.Device, got)
		}
		if v.State.Policy == nil || v.State.Policy.Hash != third.Hash() {
			t.Errorf("device %s: head %+v, want %s", c.Device, v.State.Policy, third.Hash())
		}
	}
}
