package fsbus

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestLostClaimRaceIsSuperseded: alice (machine A) and bob (machine B) claim one open
// order while partitioned; both claims succeed locally. Once the folders meet, one
// claim counts (docs/design.md §2: the lower hash of the branch's first entry). The loser's
// submit, progress, release and fail answer superseded naming the winner — not denied,
// which would say it lacks a permission — and write nothing; the winner submits.
func TestLostClaimRaceIsSuperseded(t *testing.T) {
	t.Parallel()
	hA, hB := testHome(t), testHome(t)
	dirA := filepath.Join(t.TempDir(), "acme")
	cA, err := Init(hA, InitOptions{Dir: dirA, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	mA, _ := cA.As(fold.MasterWriter)
	for _, name := range []string{"alice", "carol"} {
		if _, err := Join(cA, name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := mA.Grant(GrantOptions{Agent: name, Level: "member"}); err != nil {
			t.Fatal(err)
		}
	}
	// Machine B gets the folder; bob joins there and the owner seats him from A.
	dirB := filepath.Join(t.TempDir(), "acme")
	copyTree(t, dirA, dirB)
	cB, err := Open(hB, dirB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(cB, "bob", "test"); err != nil {
		t.Fatal(err)
	}
	copyTree(t, dirB, dirA)
	if _, err := mA.Grant(GrantOptions{Agent: "bob", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	carol, _ := cA.As("carol")
	o, err := carol.NewOrder(NewOrderOptions{Title: "Fix the parser"})
	if err != nil {
		t.Fatal(err)
	}
	copyTree(t, dirA, dirB)

	// Partitioned, both claim.
	alice, _ := cA.As("alice")
	bob, err := cB.As("bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Claim(o.ID, ""); err != nil {
		t.Fatalf("alice's claim on A: %v", err)
	}
	if _, err := bob.Claim(o.ID, ""); err != nil {
		t.Fatalf("bob's claim on B: %v", err)
	}
	copyTree(t, dirB, dirA)
	copyTree(t, dirA, dirB)

	v, err := cA.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := v.State.Order(o.ID)
	if got.Holder != "alice" && got.Holder != "bob" || len(got.Contests) != 1 {
		t.Fatalf("after the merge: holder %q, contests %+v", got.Holder, got.Contests)
	}
	winner, loser := map[string]*Session{"alice": alice, "bob": bob}[got.Holder], alice
	if got.Holder == "alice" {
		loser = bob
	}
	before := segmentBytes(t, loser.Root)
	for name, op := range map[string]func() (*fold.Order, error){
		"submit": func() (*fold.Order, error) {
			return loser.Submit(o.ID, SubmitOptions{Reference: "abc123", Note: "done"})
		},
		"progress": func() (*fold.Order, error) { return loser.Progress(o.ID, NoteOptions{Note: "half way"}) },
		"release":  func() (*fold.Order, error) { return loser.Release(o.ID, NoteOptions{}) },
		"fail":     func() (*fold.Order, error) { return loser.Fail(o.ID, NoteOptions{Note: "it broke"}) },
	} {
		_, err := op()
		var fe *errs.Error
		if !errors.As(err, &fe) || fe.Category != errs.Superseded {
			t.Errorf("%s's %s after losing the race: %v, want superseded", loser.Name, name, err)
			continue
		}
		want := loser.Name + "'s claim on order " + o.ID + " lost a race across machines: " + winner.Name + "'s claim counts"
		if fe.Message != want || !strings.Contains(fe.Hint, "ferry order show "+o.ID) {
			t.Errorf("%s: %q — %q, want the message %q", name, fe.Message, fe.Hint, want)
		}
	}
	if after := segmentBytes(t, loser.Root); after != before {
		t.Errorf("the refused calls wrote %d ledger bytes", after-before)
	}
	// A writer that never claimed is still denied: superseded is for a lost claim only.
	if _, err := carol.Submit(o.ID, SubmitOptions{Reference: "abc123"}); errs.CategoryOf(err) != errs.Denied {
		t.Errorf("carol's submit: %v, want denied", err)
	}
	if _, err := winner.Submit(o.ID, SubmitOptions{Reference: "abc123", Note: "done"}); err != nil {
		t.Errorf("the winner's submit: %v", err)
	}
}

// segmentBytes is the size of every ledger segment under root.
func segmentBytes(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(filepath.Join(root, "ledger"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
