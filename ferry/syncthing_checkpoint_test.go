package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestSyncthingCheckpointFinality (docs/format.md §20, ADR 0019 "Building it" 3): two
// real Syncthing instances carry one channel between machines A and B, and B holds the
// master key too (`ferry key export` on A, `ferry key import` on B). Alice's order is
// synced to both; then the devices are paused. On A alice cancels it; on B bob claims
// and submits it and dan accepts it. Both branches name the order's create as basis, so
// under the plain branch rule (§14) B's wins: its subtree reaches accepted (rank 10),
// A's only cancelled (9).
//
// "checkpoint": the owner compacts on A during the partition, so A's checkpoint holds
// the order as cancelled and B's three entries land above its cut. After the heal both
// machines fold it cancelled; each of B's entries is superseded, a contest naming epoch
// 1 in `ferry status` and `ledger verify`'s reason, and its writer's catch-up on B lists
// it as lost to alice's cancel (the digest row names no epoch); `ferry compact` on B, an
// owner device that is not the compactor, is refused naming A's device. "control": the
// same without the compact, and both machines fold B's outcome, accepted by dan with
// bob's result.
//
// Gate: syncthingGate, as TestSyncthingTwoNodes.
func TestSyncthingCheckpointFinality(t *testing.T) {
	t.Parallel()
	stBin := syncthingGate(t)
	bin := ferryExe(t)
	for _, compact := range []bool{true, false} {
		name := map[bool]string{true: "checkpoint", false: "control"}[compact]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkpointScenario(t, stBin, bin, compact)
		})
	}
}

// checkpointScenario runs one arm of TestSyncthingCheckpointFinality on a Syncthing
// pair of its own.
func checkpointScenario(t *testing.T, stBin, bin string, compact bool) {
	deadline := time.Now().Add(170 * time.Second) // the whole test stays under 3 minutes
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	stA, stB, a, b := twoNodes(t, ctx, stBin, bin)
	dirA, dirB := a.dir, b.dir

	a.must("init", dirA, "--project", "acme")
	converge(t, ctx, stA, stB, a, b)
	a.must("join", "--as", "alice", "--channel", dirA, "--app", "claude-code")
	for _, n := range []string{"bob", "dan"} {
		b.must("join", "--as", n, "--channel", dirB, "--app", "codex")
	}
	converge(t, ctx, stA, stB, a, b)
	for _, n := range []string{"alice", "bob", "dan"} {
		a.must("grant", n, "--level", "member")
	}
	// B becomes an owner device: the master key, exported on A, imported on B.
	root := t.TempDir()
	pass, export := filepath.Join(root, "passphrase"), filepath.Join(root, "master.export")
	if err := os.WriteFile(pass, []byte("a passphrase for the test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.must("key", "export", "--out", export, "--passphrase-file", pass)
	converge(t, ctx, stA, stB, a, b)
	b.must("key", "import", export, "--passphrase-file", pass)
	devA, devB := readDevice(t, a.home), readDevice(t, b.home)

	var o struct{ ID string }
	a.jsonOut(&o, "--as", "alice", "order", "new", "ship the release notes")
	id := o.ID
	converge(t, ctx, stA, stB, a, b)

	// The partition.
	pauseDevice(t, ctx, stA, stB.id, true)
	pauseDevice(t, ctx, stB, stA.id, true)
	waitConnected(t, ctx, stA, stB, false)

	// A: alice cancels; in the checkpoint arm the owner then compacts.
	a.must("--as", "alice", "order", "cancel", id)
	if compact {
		var r fold.CompactResult
		a.jsonOut(&r, "compact", "--settle", "0s", "--force")
		if r.Entry == "" || r.Epoch != 1 || r.Format != 2 || r.Terminal < 1 {
			t.Fatalf("compact on A: %+v", r)
		}
		// The head names A's device as compactor, and its thing chunks hold the order
		// as cancelled.
		var h fold.Head
		readJSON(t, filepath.Join(dirA, filepath.FromSlash(r.Head)), &h)
		if h.Compactor != devA || h.Epoch != 1 {
			t.Fatalf("head %s: compactor %q epoch %d, want %q and 1", r.Head, h.Compactor, h.Epoch, devA)
		}
		var held *fold.Order
		for _, ref := range h.Things {
			var c struct {
				Orders map[string]*fold.TerminalOrder
			}
			readJSON(t, filepath.Join(dirA, filepath.FromSlash(fold.ChunkPath(ref.Hash))), &c)
			if to := c.Orders[id]; to != nil {
				held = to.Order
			}
		}
		if held == nil || held.State != fold.StateCancelled {
			t.Fatalf("the checkpoint's thing chunks hold order %s as %+v, want cancelled", id, held)
		}
	}

	// B: bob claims and submits, dan accepts, from the create A's cancel also names.
	b.must("--as", "bob", "order", "claim", id)
	b.must("--as", "bob", "order", "submit", id, "--ref", "branch:bob", "--note", "done on B")
	b.must("--as", "dan", "order", "review", id, "--accept")
	var onB fold.Order
	b.jsonOut(&onB, "order", "show", id)
	if onB.State != fold.StateAccepted {
		t.Fatalf("order %s on B during the partition: %s, want accepted", id, onB.State)
	}

	// The heal.
	pauseDevice(t, ctx, stA, stB.id, false)
	pauseDevice(t, ctx, stB, stA.id, false)
	waitConnected(t, ctx, stA, stB, true)
	converge(t, ctx, stA, stB, a, b)

	var oa, ob fold.Order
	a.jsonOut(&oa, "order", "show", id)
	b.jsonOut(&ob, "order", "show", id)
	if !jsonEqual(oa, ob) {
		t.Errorf("order %s differs:\nA: %+v\nB: %+v", id, oa, ob)
	}
	var sa, sb fsbus.Status
	a.jsonOut(&sa, "status")
	b.jsonOut(&sb, "status")
	if !jsonEqual(sa.Contests, sb.Contests) {
		t.Errorf("contests differ:\nA: %+v\nB: %+v", sa.Contests, sb.Contests)
	}
	var mine []fold.Contest
	for _, c := range sb.Contests {
		if c.Ref == id {
			mine = append(mine, c)
		}
	}

	if compact {
		if ob.State != fold.StateCancelled || ob.Result != nil || ob.Holder != "" {
			t.Errorf("order %s after the heal: %s, holder %q, result %+v; want the checkpoint's cancelled", id, ob.State, ob.Holder, ob.Result)
		}
		// Each of B's entries is superseded: a contest naming the checkpoint's epoch,
		// won by alice's cancel, lost by that entry, involving its writer and alice.
		var lost []string
		for _, c := range mine {
			if c.Checkpoint != 1 || c.Winner.By != "alice" || c.Winner.Type != fold.TypeOrderCancel || len(c.Losers) != 1 ||
				!slices.Contains(c.Involved, c.Losers[0].By) || !slices.Contains(c.Involved, "alice") {
				t.Errorf("contest of order %s: %+v, want one superseded entry lost to the checkpoint of epoch 1", id, c)
				continue
			}
			lost = append(lost, c.Losers[0].By+": "+c.Losers[0].Type)
		}
		slices.Sort(lost)
		if want := []string{"bob: order.claim", "bob: order.submit", "dan: order.review"}; !slices.Equal(lost, want) {
			t.Errorf("superseded by the checkpoint: %v, want %v", lost, want)
		}
		// B's agents are told, in their catch-up on B.
		for who, want := range map[string][]string{"bob": {"bob: order.claim", "bob: order.submit"}, "dan": {"dan: order.review"}} {
			var d fsbus.Catchup
			b.jsonOut(&d, "--as", who, "catchup")
			var got []string
			for _, r := range d.Contested {
				if r.Ref == id && r.Winner == "alice: order.cancel" && r.Checkpoint == 1 {
					got = append(got, r.Lost...)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s's catch-up on B: contests %+v, want %s's %v lost to alice's cancel at the checkpoint of epoch 1", who, d.Contested, id, want)
			}
		}
		// order show lists them too, as superseded at the checkpoint.
		if so, se, err := b.run("--as", "bob", "order", "show", id); err != nil || !strings.Contains(so, "superseded you (bob)'s claim: the order was final at the owner's checkpoint of epoch 1") {
			t.Errorf("order show on B: %v\n%s%s", err, so, se)
		}
		if len(ob.Contests) != 3 {
			t.Errorf("order show --json on B: contests %+v, want the three superseded entries", ob.Contests)
		}
		// B's owner device is not the compactor: its compact is refused, naming A's.
		so, se, err := b.run("compact", "--settle", "0s", "--force")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitCodes[errs.Denied] ||
			!strings.Contains(se, "this device ("+devB+") is not the compactor") || !strings.Contains(se, "names device "+devA) {
			t.Errorf("compact on B: %v\n%s%s; want exit %d naming compactor %s", err, so, se, exitCodes[errs.Denied], devA)
		}
	} else {
		if ob.State != fold.StateAccepted || ob.Result == nil || ob.Result.By != "bob" || len(ob.Reviews) != 1 || ob.Reviews[0].By != "dan" {
			t.Errorf("order %s after the heal without a checkpoint: %s, result %+v, reviews %+v; want B's accepted", id, ob.State, ob.Result, ob.Reviews)
		}
		// The plain branch rule: bob's claim beat alice's cancel at the create.
		if len(mine) != 1 || mine[0].Checkpoint != 0 || mine[0].Winner.By != "bob" || mine[0].Winner.Type != fold.TypeOrderClaim ||
			len(mine[0].Losers) != 1 || mine[0].Losers[0].By != "alice" || mine[0].Losers[0].Type != fold.TypeOrderCancel {
			t.Errorf("contests of order %s without a checkpoint: %+v, want bob's claim over alice's cancel", id, mine)
		}
	}
	// ledger verify is clean on both: no error, no checkpoint problem or dispute; its
	// only findings are, with the checkpoint, B's three entries it superseded.
	for _, m := range []*syncMachine{a, b} {
		var r verify.Report
		m.jsonOut(&r, "ledger", "verify")
		var ignored []string
		for _, f := range r.Findings {
			if f.Check == verify.CheckIgnored && f.Level == verify.LevelWarning && strings.Contains(f.Detail, "superseded by the owner's checkpoint (epoch 1)") {
				ignored = append(ignored, f.Detail)
			}
		}
		want := map[bool]int{true: 3}[compact]
		if r.Errors != 0 || len(r.Findings) != want || len(ignored) != want || len(r.Checkpoints) != 0 || r.Dispute != nil {
			t.Errorf("ledger verify on %s: %d errors, checkpoint problems %+v, dispute %+v, findings %+v; want %d superseded entries only",
				m.name, r.Errors, r.Checkpoints, r.Dispute, r.Findings, want)
		}
	}
}

// readDevice returns the device id of a FERRY_HOME.
func readDevice(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "config", "device"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// readJSON decodes the JSON file at p into v.
func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}
