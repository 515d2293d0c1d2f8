package fsbus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// ownerCanon is the comparable domain state of a fold: orders, asks, messages, agents'
// seats and the contests (what entries at or below a cut leave behind in Ignored and
// Counted is not part of it).
func ownerCanon(st *fold.State) string {
	type seat struct {
		Level   string
		Seated  bool
		Retired bool
		Devices []string
		LastHLC string
	}
	seats := map[string]seat{}
	for n, a := range st.Agents {
		seats[n] = seat{a.Level, a.Seated, a.Retired, a.Devices, a.LastHLC}
	}
	b, err := json.Marshal(struct {
		Orders    map[string]*fold.Order
		Asks      map[string]*fold.Ask
		Messages  map[string]*fold.Message
		Seats     map[string]seat
		Contested []fold.Contest
		Entries   int
		MaxHLC    string
	}{st.AllOrders(), st.AllAsks(), st.Messages, seats, st.Contested, st.Entries, st.MaxHLC})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestOwnerCheckpointSmoke(t *testing.T) {
	w := propWorldFor(t)
	in := fold.FoldInput{Project: propProject, Master: w.master, Entries: w.entries,
		Objects: func(writer, id string) ([]byte, string, error) {
			o, ok := w.objects[id]
			if !ok {
				return nil, "", fold.ErrObjectMissing
			}
			return o.canonical, o.hash, nil
		}}
	plain := fold.Fold(in)
	for _, frac := range []float64{0.25, 0.5, 0.75, 1} {
		top := map[[2]string]uint64{}
		for _, e := range w.entries {
			k := [2]string{e.Writer, e.Device}
			top[k] = max(top[k], e.Seq)
		}
		// Every segment at the same fraction: a cut between a writer's grant.set and its
		// entries is closed by CloseCut (its seat).
		cut := fold.CutOf(w.entries, func(wr, dev string) (uint64, bool) {
			return uint64(float64(top[[2]string{wr, dev}]) * frac), true
		})
		cut = fold.CloseCut(w.entries, nil, cut, nil)
		at, above, probs := fold.Split(w.entries, nil, cut, nil)
		if len(probs) > 0 {
			t.Fatalf("frac %v: %+v", frac, probs)
		}
		base, err := fold.NextBase(in, nil, at, 1, cut)
		if err != nil {
			t.Fatal(err)
		}
		st := fold.FoldFrom(in, base, above)
		enc, _ := fold.EncodeBase(base)
		t.Logf("frac %v: cut %d segments, %d at, %d above, base %d lines %d terminal orders, %d bytes, finality %v", frac, len(cut), len(at), len(above), len(base.Lines), len(base.Orders), len(enc), st.Finality)
		if len(st.Finality) == 0 {
			if got, want := ownerCanon(st), ownerCanon(plain); got != want {
				t.Fatalf("frac %v: fold from the checkpoint differs from the plain fold:\n%s", frac, propDiff(got, want))
			}
		}
	}
	_ = ledger.Entry{}
}

// TestCompactAndFoldFromCheckpoint: the owner compacts a channel with an accepted, a
// cancelled and a claimed order; a new process folds from the checkpoint to the same
// state; a late claim on the cancelled order is superseded and told to those involved;
// a write on the claimed order above the cut counts.
func TestCompactAndFoldFromCheckpoint(t *testing.T) {
	w := newLifeWorld(t)
	c, alice, bob, m := w.c, w.alice, w.bob, w.master
	a := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "accepted one"}))
	must[*fold.Order](t)(bob.Claim(a.ID, ""))
	must[*fold.Order](t)(bob.Submit(a.ID, SubmitOptions{Reference: "commit:1"}))
	must[*fold.Order](t)(alice.Review(a.ID, "accept", NoteOptions{}))
	x := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "cancelled one"}))
	must[*fold.Order](t)(alice.Cancel(x.ID, NoteOptions{}))
	l := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "live one"}))
	must[*fold.Order](t)(bob.Claim(l.ID, ""))

	before, err := reopen(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Compact(CompactOptions{SettleSet: true, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entry == "" || r.Epoch != 1 || r.Terminal != 2 {
		t.Fatalf("compact: %+v", r)
	}
	after, err := reopen(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Base() == nil {
		t.Fatal("a new process did not fold from the checkpoint")
	}
	for _, id := range []string{a.ID, x.ID, l.ID} {
		b, _ := json.Marshal(before.State.Order(id))
		g, _ := json.Marshal(after.State.Order(id))
		if string(b) != string(g) {
			t.Fatalf("order %s differs after compaction:\n%s\n%s", id, b, g)
		}
	}
	// A second compact with nothing new settled writes nothing.
	if r2, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r2.Entry != "" {
		t.Fatalf("second compact: %+v, %v", r2, err)
	}
	// Above the cut: progress on the live order counts.
	if _, err := bob.Submit(l.ID, SubmitOptions{Reference: "commit:2"}); err != nil {
		t.Fatal(err)
	}
	v, err := reopen(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.State.Order(l.ID).State; got != fold.StateSubmitted {
		t.Fatalf("live order above the cut: %s", got)
	}
	if got := v.State.Order(x.ID).State; got != fold.StateCancelled {
		t.Fatalf("cancelled order: %s", got)
	}
}

// TestCheckpointFinalOverPartitionedBranch: machine B, partitioned, takes an order
// through to accepted that the owner on machine A cancelled and then compacted. Under
// the plain branch rule B's accepted branch wins (stage rank); with the checkpoint the
// cancellation is final at the cut: after the heal both machines fold it cancelled,
// B's entries are superseded and told to bob, and B's owner device may not compact.
// The control run without the checkpoint gives B's outcome.
func TestCheckpointFinalOverPartitionedBranch(t *testing.T) {
	for _, compact := range []bool{true, false} {
		root := t.TempDir()
		home := func(m string) *Home {
			return &Home{ConfigDir: filepath.Join(root, m, "config"), CacheDir: filepath.Join(root, m, "cache")}
		}
		hA, hB := home("A"), home("B")
		dA, dB := filepath.Join(root, "syncA", "acme"), filepath.Join(root, "syncB", "acme")
		cA, err := Init(hA, InitOptions{Dir: dA, Project: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		ok := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		ok(propSync(dB, dA))
		cB, err := Open(hB, dB)
		ok(err)
		sync := func() { ok(propSync(dA, dB)); ok(propSync(dB, dA)) }
		_, err = Join(cA, "alice", "test")
		ok(err)
		_, err = Join(cB, "bob", "test")
		ok(err)
		for _, n := range []string{"alice", fold.MasterWriter} {
			k, err := os.ReadFile(hA.keyPath("acme", n))
			ok(err)
			ok(os.MkdirAll(filepath.Dir(hB.keyPath("acme", n)), 0o700))
			ok(fsutil.WriteFile(hB.keyPath("acme", n), k, 0o600))
		}
		sync()
		mA := must[*Session](t)(cA.As(fold.MasterWriter))
		for _, n := range []string{"alice", "bob"} {
			must[*fold.Agent](t)(mA.Grant(GrantOptions{Agent: n, Level: "member"}))
		}
		sync()
		aliceA, aliceB, bobB := must[*Session](t)(cA.As("alice")), must[*Session](t)(cB.As("alice")), must[*Session](t)(cB.As("bob"))
		x := must[*fold.Order](t)(aliceA.NewOrder(NewOrderOptions{Title: "contested"}))
		sync()
		// Partitioned: A cancels; B claims, submits and accepts.
		must[*fold.Order](t)(aliceA.Cancel(x.ID, NoteOptions{}))
		must[*fold.Order](t)(bobB.Claim(x.ID, ""))
		must[*fold.Order](t)(bobB.Submit(x.ID, SubmitOptions{Reference: "commit:b"}))
		must[*fold.Order](t)(aliceB.Review(x.ID, "accept", NoteOptions{}))
		if compact {
			r, err := mA.Compact(CompactOptions{SettleSet: true, Force: true})
			ok(err)
			if r.Entry == "" || r.Terminal != 1 {
				t.Fatalf("compact on A: %+v", r)
			}
		}
		sync()
		want := fold.StateAccepted
		if compact {
			want = fold.StateCancelled
		}
		for _, c := range []*Channel{cA, cB} {
			v, err := reopen(t, c).Load()
			ok(err)
			if got := v.State.Order(x.ID).State; got != want {
				t.Fatalf("compact=%v: machine %s folds %s, want %s", compact, c.Device, got, want)
			}
			if !compact {
				continue
			}
			told := false
			for _, ct := range v.State.Contested {
				if ct.Ref == x.ID && ct.Checkpoint == 1 && slices.Contains(ct.Involved, "bob") {
					told = true
				}
			}
			if !told || len(v.State.Superseded) != 3 {
				t.Fatalf("machine %s: bob is not told, or not 3 superseded entries: %+v", c.Device, v.State.Superseded)
			}
		}
		if compact {
			mB := must[*Session](t)(reopen(t, cB).As(fold.MasterWriter))
			if _, err := mB.Compact(CompactOptions{SettleSet: true, Force: true}); !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), cA.Device) {
				t.Fatalf("compact on B: want denied naming %s, got %v", cA.Device, err)
			}
			// The thing chunk holding x not here yet on B (sync in progress): the
			// entries above the cut on x need it, so B does not fold from the
			// checkpoint and says why, instead of folding them as not superseded.
			chunks, _ := filepath.Glob(filepath.Join(dB, "checkpoints", "chunks", "*"))
			for _, p := range chunks {
				if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), `{"asks":`) {
					ok(os.Remove(p))
				}
			}
			cb := reopen(t, cB)
			v, err := cb.Load()
			ok(err)
			if v.State.Base() != nil {
				t.Fatal("B folded from a checkpoint whose thing chunk is not here")
			}
			if cf := cb.OwnerCheckpoint(); cf == nil || !slices.ContainsFunc(cf.Problems, func(p fold.CheckpointProblem) bool { return p.Kind == "state" }) {
				t.Fatalf("the missing thing chunk is not reported: %+v", cf)
			}
		}
	}
}

// TestCheckpointVerifyAndTamper: ledger verify folds the checkpoint's state again and
// finds it equal; a tampered chunk makes every process fold without the checkpoint,
// reported as a checkpoint error, and verify reports a dispute.
func TestCheckpointVerifyAndTamper(t *testing.T) {
	w := newLifeWorld(t)
	a := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "one"}))
	must[*fold.Order](t)(w.alice.Cancel(a.ID, NoteOptions{}))
	r, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true})
	if err != nil || r.Entry == "" {
		t.Fatalf("compact: %+v %v", r, err)
	}
	c := reopen(t, w.c)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dispute != nil || len(rep.Checkpoints) != 0 {
		t.Fatalf("verify of a good checkpoint: dispute %+v, problems %+v", rep.Dispute, rep.Checkpoints)
	}
	chunks, _ := filepath.Glob(filepath.Join(w.c.Root, "checkpoints", "chunks", "*"))
	if len(chunks) != 2 {
		t.Fatalf("chunks (the core's and one of terminal things): %v", chunks)
	}
	var core, things string
	for _, p := range chunks {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(b), `{"asks":`) {
			things = p
		} else {
			core = p
		}
	}
	flip := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		old := slices.Clone(b)
		b[len(b)/2] ^= 1
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return old
	}
	// A tampered thing chunk: the process folds from the checkpoint, and the thing
	// whose chunk it is is refused loudly, naming the chunk, when asked for.
	good := flip(things)
	c = reopen(t, w.c)
	if v, err = c.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.State.FindOrder(a.ID); err == nil || !strings.Contains(err.Error(), "tampered") {
		t.Fatalf("order in a tampered thing chunk: %v", err)
	}
	if rep, err = c.Verify(v); err != nil || rep.Dispute == nil {
		t.Fatalf("verify with a tampered thing chunk: %+v, %v", rep, err)
	}
	// The thing chunk not here (not synced yet, or lost): verify recomputes the state
	// from the history here and restores it, byte for byte; no dispute.
	if err := os.Remove(things); err != nil {
		t.Fatal(err)
	}
	c = reopen(t, w.c)
	if v, err = c.Load(); err != nil {
		t.Fatal(err)
	}
	if rep, err = c.Verify(v); err != nil || rep.Dispute != nil || len(rep.Checkpoints) != 0 {
		t.Fatalf("verify with a thing chunk not here: %+v, %v", rep, err)
	}
	if back, err := os.ReadFile(things); err != nil || !bytes.Equal(back, good) {
		t.Fatalf("the thing chunk verify restored: %v (equal %v)", err, bytes.Equal(back, good))
	}
	// A tampered core chunk: every process folds without the checkpoint.
	flip(core)
	c = reopen(t, w.c)
	v, err = c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v.State.Base() != nil {
		t.Fatal("folded from a tampered checkpoint")
	}
	if cf := c.OwnerCheckpoint(); cf == nil || len(cf.Problems) == 0 || cf.Problems[0].Kind != "state" {
		t.Fatalf("tampered chunk not reported: %+v", cf)
	}
	if rep, err = c.Verify(v); err != nil || rep.Dispute == nil {
		t.Fatalf("verify of a tampered checkpoint: %+v, %v", rep, err)
	}
}

// TestRotationBoundBelowTheCut: a master.rotate written above the cut whose bound for
// another master segment lies below that segment's cut is applied with the cut as its
// bound: the master's entries at or below the cut keep the key they had there (a
// policy set on the second owner machine still holds), and the raise is noted.
func TestRotationBoundBelowTheCut(t *testing.T) {
	c, m, bot := seatedAgent(t)
	c2, m2 := secondMaster(t, c)
	for _, v := range []string{"400", "500"} {
		if _, err := m2.SetPolicy([]fold.PolicyAssign{{Key: "quiet_after_s", Value: v}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bot.NewOrder(NewOrderOptions{Title: "one"}); err != nil {
		t.Fatal(err)
	}
	if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Entry == "" {
		t.Fatalf("compact: %+v %v", r, err)
	}
	v := mustLoad(t, c)
	p, ok := v.State.Base().Cut.At(fold.MasterWriter, c2.Device)
	if !ok || p.Seq < 2 {
		t.Fatalf("the cut of master/%s: %+v %v", c2.Device, p, ok)
	}
	k, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rawRotate(t, c, c.Device, m.Signer, k, "", map[string]uint64{c2.Device: 1})
	v = mustLoad(t, c)
	if got := c.PolicyOf(v).QuietAfterS; got != 500 {
		t.Fatalf("quiet_after_s %d after the rotation, want 500 (set at or below the cut)", got)
	}
	for _, ig := range v.State.Ignored {
		if ig.Writer == fold.MasterWriter && ig.Device == c2.Device {
			t.Fatalf("master/%s seq %d ignored: %s", ig.Device, ig.Seq, ig.Reason)
		}
	}
	if !slices.ContainsFunc(v.State.Finality, func(s string) bool { return strings.Contains(s, "bound of master/"+c2.Device+" raised to the cut") }) {
		t.Fatalf("finality %q", v.State.Finality)
	}

	// The next checkpoint, signed by the new key, covers the rotation: folded from it,
	// the rotation keeps the bounds the first cut raised, and the state rechecks.
	if _, err := bot.NewOrder(NewOrderOptions{Title: "two"}); err != nil {
		t.Fatal(err)
	}
	m3, err := reopen(t, c).As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	m3.Signer = ledger.KeySigner(priv)
	if r, err := m3.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("compact under the new key: %+v %v", r, err)
	}
	c3 := reopen(t, c)
	v = mustLoad(t, c3)
	if cf := c3.OwnerCheckpoint(); cf == nil || cf.Used != len(cf.Chain)-1 || cf.Chain[cf.Used].Data.Epoch != 2 {
		t.Fatalf("not folded from epoch 2: %+v", cf)
	}
	if got := c3.PolicyOf(v).QuietAfterS; got != 500 {
		t.Fatalf("quiet_after_s %d folded from epoch 2, want 500", got)
	}
	if rb := v.State.Base().RaisedBounds; len(rb) != 1 {
		t.Fatalf("rotation bounds kept in epoch 2's state: %v", rb)
	}
	probs, d, err := c3.Recheck(v)
	if err != nil || d != nil {
		t.Fatalf("recheck of epoch 2: %+v %+v %v", probs, d, err)
	}
}

// TestRevokeBoundBelowTheCutAcrossEpochs: a grant.revoke written above the cut whose
// bound lies below the agent's cut is applied with the cut as its bound, and still so
// when the next checkpoint holds it as a line: the agent's orders at or below the first
// cut stay, folded from either checkpoint, and the second rechecks.
func TestRevokeBoundBelowTheCutAcrossEpochs(t *testing.T) {
	c, m, bot := seatedAgent(t)
	var ids []string
	for _, title := range []string{"one", "two", "three"} {
		o, err := bot.NewOrder(NewOrderOptions{Title: title})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 1 {
		t.Fatalf("compact: %+v %v", r, err)
	}
	v := mustLoad(t, reopen(t, c))
	d := fold.EntryData{Basis: v.State.Agents["bot"].GrantHead, Bounds: map[string]uint64{c.Device: 1}}
	if _, err := c.Ledger.Append(fold.MasterWriter, c.Device, ledger.Draft{Type: fold.TypeGrantRevoke, Ref: "bot", Data: mustJSON(d)}, m.Signer, ledger.HLC{}); err != nil {
		t.Fatal(err)
	}
	check := func(epoch int) {
		t.Helper()
		ch := reopen(t, c)
		v := mustLoad(t, ch)
		if cf := ch.OwnerCheckpoint(); cf == nil || cf.Used < 0 || cf.Chain[cf.Used].Data.Epoch != epoch {
			t.Fatalf("not folded from epoch %d: %+v", epoch, cf)
		}
		for _, id := range ids {
			if v.State.Order(id) == nil {
				t.Fatalf("folded from epoch %d: bot's order %s, at or below the first cut, is gone", epoch, id)
			}
		}
		if probs, dis, err := ch.Recheck(v); err != nil || dis != nil {
			t.Fatalf("recheck of epoch %d: %+v %+v %v", epoch, probs, dis, err)
		}
	}
	check(1)
	m2, err := reopen(t, c).As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := m2.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v %v", r, err)
	}
	check(2)
}

// TestKeyRotateKeepsTheChainAfterAHandOver: `ferry key rotate` on a process that read
// from the cut bounds every master segment the newest cut names, so a segment with no
// record above the cut (the compactor before a hand-over) keeps its key for what it
// wrote, and the checkpoints written there still count.
func TestKeyRotateKeepsTheChainAfterAHandOver(t *testing.T) {
	c, _, bot := seatedAgent(t)
	c2, m2 := secondMaster(t, c)
	compact := func(ch *Channel, epoch int) {
		t.Helper()
		m, err := reopen(t, ch).As(fold.MasterWriter)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != epoch {
			t.Fatalf("compact %d on %s: %+v %v", epoch, ch.Device, r, err)
		}
	}
	order := func(title string) {
		t.Helper()
		if _, err := bot.NewOrder(NewOrderOptions{Title: title}); err != nil {
			t.Fatal(err)
		}
	}
	order("one")
	compact(c2, 1)
	if _, err := m2.SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: c.Device}}); err != nil {
		t.Fatal(err)
	}
	order("two")
	compact(c2, 2)
	order("three")
	compact(c, 3)
	chain := func(thorough bool) *fold.ChannelFold {
		t.Helper()
		ch := reopen(t, c)
		ch.Thorough = thorough
		mustLoad(t, ch)
		return ch.OwnerCheckpoint()
	}
	if cf := chain(true); len(cf.Chain) != 3 {
		t.Fatalf("chain of %d before the rotation", len(cf.Chain))
	}
	ch := reopen(t, c)
	mustLoad(t, ch) // read from the cut of epoch 3
	m, err := ch.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RotateMaster(); err != nil {
		t.Fatal(err)
	}
	cf := chain(true)
	for _, p := range cf.Problems {
		t.Logf("problem: %+v", p)
	}
	if len(cf.Chain) != 3 {
		t.Fatalf("`ferry key rotate` voided the owner's checkpoints: %d count, want 3", len(cf.Chain))
	}
}
