package autocompact

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestAutomaticCompaction: with compact_entries set, nothing happens before the owner's
// first checkpoint; after it, the compactor device compacts once enough entries are
// above the cut and settled; a locked master key, another device, Syncthing with no
// connected peer or a policy with neither key stop it, each with its reason; an idle
// seated writer does not.
func TestAutomaticCompaction(t *testing.T) {
	clock := &atomic.Int64{}
	clock.Store(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC).UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	c, ss := fsbustest.Channel(t, fsbustest.Options{Levels: map[string]string{"alice": "member", "bob": "member"}, Now: now})
	alice, m := ss["alice"], ss[fold.MasterWriter]
	order := func(title string) {
		t.Helper()
		if _, err := alice.NewOrder(fsbus.NewOrderOptions{Title: title}); err != nil {
			t.Fatal(err)
		}
	}
	run := func() (Decision, *fold.CompactResult, error) {
		t.Helper()
		return Run(context.Background(), fsbustest.Reopen(t, c), now())
	}

	order("zero")
	if d, r, err := run(); err != nil || d.Due || r != nil || !strings.Contains(d.Reason, "no owner's checkpoint") {
		t.Fatalf("before any checkpoint: %+v %+v %v", d, r, err)
	}
	if _, err := m.Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	if d, _, err := run(); err != nil || d.Due || !strings.Contains(d.Reason, "neither compact_after_s nor compact_entries") {
		t.Fatalf("with no policy: %+v %v", d, err)
	}
	if _, err := m.SetPolicy([]fold.PolicyAssign{{Key: "compact_entries", Value: "3"}, {Key: "settle_s", Value: "1"}}); err != nil {
		t.Fatal(err)
	}
	if d, _, err := run(); err != nil || d.Due || !strings.Contains(d.Reason, "not due: 0 settled entries above") {
		t.Fatalf("nothing settled above the cut: %+v %v", d, err)
	}
	order("one")
	order("two")
	clock.Add(10_000) // settled
	order("three")    // alice seen to advance within the settle time

	ch := fsbustest.Reopen(t, c)
	v, err := ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	if d := Decide(ch, v, &synchealth.Health{InUse: true, Connected: 0}, now()); d.Due || !strings.Contains(d.Reason, "no connected peer") {
		t.Fatalf("Syncthing with no connected peer: %+v", d)
	}
	if d := Decide(ch, v, &synchealth.Health{InUse: true, Connected: 1}, now()); !d.Due || !strings.Contains(d.Reason, "compact_entries 3") {
		t.Fatalf("due: %+v", d)
	}
	other := fsbustest.Reopen(t, c)
	other.Device = "d-elsewhere"
	ov, err := other.Load()
	if err != nil {
		t.Fatal(err)
	}
	if d := Decide(other, ov, nil, now()); d.Due || !strings.Contains(d.Reason, "is not the compactor") {
		t.Fatalf("another device: %+v", d)
	}
	if _, err := ch.Home.LockKey(ch.Project(), fold.MasterWriter, []byte("correct horse battery")); err != nil {
		t.Fatal(err)
	}
	if d := Decide(ch, v, nil, now()); d.Due || !strings.Contains(d.Reason, "locked") {
		t.Fatalf("a locked master key: %+v", d)
	}
	if _, err := ch.Home.UnlockKey(ch.Project(), fold.MasterWriter, []byte("correct horse battery"), time.Hour); err != nil {
		t.Fatal(err)
	}

	// bob, seated and idle, is not seen to advance: it does not stop the compaction,
	// and the result names it.
	d, r, err := run()
	if err != nil || !d.Due || r == nil || r.Entry == "" || r.Epoch != 2 || !slices.Contains(r.Unsettled, "bob") {
		t.Fatalf("automatic compaction: %+v %+v %v", d, r, err)
	}
	if d, r, err := run(); err != nil || d.Due || r != nil {
		t.Fatalf("right after: %+v %+v %v", d, r, err)
	}

	// The newest head gone from the folder (deleted, or not arrived on the machine):
	// neither the daemon nor the owner writes epoch 2 again on epoch 1.
	order("four")
	order("five")
	order("six")
	clock.Add(10_000)
	heads, err := filepath.Glob(filepath.Join(c.Root, "checkpoints", "2-*", "head.json"))
	if err != nil || len(heads) != 1 {
		t.Fatalf("epoch 2's head: %v %v", heads, err)
	}
	if err := os.Rename(heads[0], heads[0]+".aside"); err != nil {
		t.Fatal(err)
	}
	if d, r, err := run(); err != nil || d.Due || r != nil || !strings.Contains(d.Reason, "does not count here yet") {
		t.Fatalf("with epoch 2's head gone: %+v %+v %v", d, r, err)
	}
	owner, err := fsbustest.Reopen(t, c).As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := owner.Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); errs.CategoryOf(err) != errs.Conflict || !strings.Contains(err.Error(), "epoch 2") {
		t.Fatalf("ferry compact with epoch 2's head gone: %+v %v", r, err)
	}
	// On a restored home that never saw epoch 2 count, once its entry has been here
	// for the settle time, the daemon's compaction replaces it.
	lost := owner.OwnerCheckpoint().Stop()
	if lost == nil || lost.Epoch != 2 {
		t.Fatalf("the stop at epoch 2's missing head: %+v", owner.OwnerCheckpoint().Problems)
	}
	if err := os.Remove(filepath.Join(c.Home.ConfigDir, "checkpoints", c.Project())); err != nil {
		t.Fatal(err)
	}
	clock.Add(10_000)
	d, r, err = run()
	if err != nil || !d.Due || r == nil || r.Epoch != 2 || r.Replaces != lost.Hash {
		t.Fatalf("past epoch 2's missing head on a restored home: %+v %+v %v (want replaces %s)", d, r, err, lost.Hash)
	}
	if err := os.Rename(heads[0]+".aside", heads[0]); err != nil {
		t.Fatal(err)
	}
	order("seven")
	order("eight")
	order("nine")
	clock.Add(10_000)
	if d, r, err := run(); err != nil || !d.Due || r == nil || r.Epoch != 3 || r.Replaces != "" {
		t.Fatalf("with the replaced head back: %+v %+v %v", d, r, err)
	}
}
