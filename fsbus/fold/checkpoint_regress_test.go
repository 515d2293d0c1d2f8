package fold_test

import (
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// Focused cases of the fold from an owner's checkpoint, each a history the property
// test (checkpoint_prop_test.go) also draws.

// cutAt returns a checkpoint limit that cuts the named segments at their seq and
// leaves every other segment whole.
func cutAt(at map[[2]string]uint64) func(map[[2]string]uint64) map[[2]string]uint64 {
	return func(top map[[2]string]uint64) map[[2]string]uint64 {
		out := map[[2]string]uint64{}
		for k, t := range top {
			out[k] = t
			if s, ok := at[k]; ok {
				out[k] = s
			}
		}
		return out
	}
}

// rollBack sets d's tip back to seq k, as a restore from a backup does.
func rollBack(d *genDevice, k int) {
	d.chain = slices.Clone(d.chain[:k])
	d.tip = d.chain[k-1]
}

func create(w *genWorld, d *genDevice, n int) *ledger.Entry {
	return w.write(d, fold.TypeOrderCreate, fmt.Sprintf("o-%013d", n), "", map[string]any{"object": "sha256:" + strings.Repeat("0", 64)}, 0)
}

func hasNote(notes []string, part string) bool {
	return slices.ContainsFunc(notes, func(s string) bool { return strings.Contains(s, part) })
}

// TestSplitKeepsTheCutsBranch: the snapshot's fork rule kept another branch than the
// cut's at a fork below the cut; above the cut Split keeps the records that follow H,
// and leaves out those that continue the other branch.
func TestSplitKeepsTheCutsBranch(t *testing.T) {
	w := newGenWorld(1)
	a := w.dev("a1")
	r1, r2 := create(w, a, 1), create(w, a, 2)
	r3 := create(w, a, 3)
	rollBack(a, 1)
	r2b := create(w, a, 4)
	r3b := create(w, a, 5)
	entries := []ledger.Entry{*r1, *r2b, *r3b}
	forks := []ledger.Fork{{Writer: "alice", Device: "a1", Seq: 2, Winner: *r2b, Losers: []ledger.Entry{*r2, *r3}}}
	cut := fold.Cut{{Writer: "alice", Device: "a1", Seq: 2, Hash: r2.Hash()}}
	at, above, probs := fold.Split(entries, forks, cut, nil)
	hashes := func(es []ledger.Entry) []string {
		var out []string
		for i := range es {
			out = append(out, es[i].Hash())
		}
		return out
	}
	if got, want := hashes(at), []string{r1.Hash(), r2.Hash()}; !slices.Equal(got, want) {
		t.Fatalf("at the cut: %v, want %v", got, want)
	}
	if got, want := hashes(above), []string{r3.Hash()}; !slices.Equal(got, want) || len(probs) > 0 {
		t.Fatalf("above the cut: %v (%+v), want %v", got, probs, want)
	}
	// The snapshot's branch has nothing above the cut: the cut's still counts there.
	_, above2, _ := fold.Split([]ledger.Entry{*r1, *r2b}, []ledger.Fork{{Writer: "alice", Device: "a1", Seq: 2, Winner: *r2b,
		Losers: []ledger.Entry{*r2, *r3}}}, cut, nil)
	if got, want := hashes(above2), []string{r3.Hash()}; !slices.Equal(got, want) {
		t.Fatalf("above the cut, the snapshot's branch ending at it: %v, want %v", got, want)
	}
	// The forks a fold from the checkpoint reads: the records above the cut Split
	// left out, the same for a machine that holds only those records.
	fa := fold.ForksAbove(entries, forks, cut, above)
	fresh := []ledger.Entry{*r3}
	freshForks := []ledger.Fork{{Writer: "alice", Device: "a1", Seq: 3, Winner: *r3, Losers: []ledger.Entry{*r3b}}}
	if r3b.Hash() < r3.Hash() {
		fresh, freshForks[0].Winner, freshForks[0].Losers = []ledger.Entry{*r3b}, *r3b, []ledger.Entry{*r3}
	}
	_, freshAbove, _ := fold.Split(fresh, freshForks, cut, nil)
	fb := fold.ForksAbove(fresh, freshForks, cut, freshAbove)
	losers := func(fs []ledger.Fork) []string {
		var out []string
		for _, f := range fs {
			out = append(out, hashes(f.Losers)...)
		}
		return out
	}
	if got, want := losers(fa), []string{r3b.Hash()}; !slices.Equal(got, want) || !slices.Equal(losers(fb), want) {
		t.Fatalf("forks above the cut: %v and %v, want %v", got, losers(fb), want)
	}
}

// TestCheckpointKeepsLinesOverAttestedBound: after the checkpoint alice's device is
// restored below the cut and writes another branch, which the owner's next grant
// attests, above the cut, over the cut's branch. Her order created at or below the cut is a line of the base: it keeps the
// grant it had at the cut, on both machines, and the finality is noted; the fold
// without the checkpoint voids it. The fork is decided by the cut whichever branch the
// ledger's fork rule keeps.
func TestCheckpointKeepsLinesOverAttestedBound(t *testing.T) {
	w := newGenWorld(2)
	a := w.dev("a1")
	create(w, a, 1)
	r2 := create(w, a, 2)
	w.sync()
	h, err := w.checkpoint(t.TempDir(), cutAt(nil), func() {
		create(w, a, 5) // seq 3 on the cut's branch
		rollBack(a, 1)
		create(w, a, 3)
		r4 := create(w, a, 4) // seq 3 on the other branch
		w.write(w.dev("m1"), fold.TypeGrantSet, "alice", "", map[string]any{"basis": w.grants["alice"], "level": "member",
			"key": ledger.FormatKey(w.agentKey("alice").Public().(ed25519.PublicKey)), "bounds": map[string]uint64{"a1": 3},
			"bound_hashes": map[string]string{"a1": r4.Hash()}}, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := h.cut.At("alice", "a1"); p.Hash != r2.Hash() {
		t.Fatalf("cut %s", cutText(h.cut))
	}
	full, fresh, err := foldGen(h)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("o-%013d", 2)
	for _, cf := range []*fold.ChannelFold{full, fresh} {
		if cf.State.Order(fmt.Sprintf("o-%013d", 5)) != nil {
			t.Fatal("the record above the cut outside the attested branch counts")
		}
		if cf.State.Order(id) == nil || !hasNote(cf.State.Finality, "kept by the cut over the attested bound") {
			t.Fatalf("order %s at the cut: %v; finality %q", id, cf.State.Order(id) != nil, cf.State.Finality)
		}
	}
	if !hasNote(full.State.Finality, "decided by the cut") && !slices.ContainsFunc(h.full.Entries, func(e ledger.Entry) bool { return e.Hash() == r2.Hash() }) {
		t.Fatalf("the ledger left out the cut's branch and no fork finality was noted: %q", full.State.Finality)
	}
	if plain := fold.Fold(fold.FoldInput{Project: genProject, Master: h.master, Entries: h.full.Entries, Forks: h.full.Forks}); plain.Orders[id] != nil {
		t.Fatalf("without the checkpoint the attested branch should void order %s", id)
	}
}

// TestCheckpointForkDecidedByTheCut: a fork at or below the cut whose other branch the
// ledger keeps is noted in Finality, and both machines fold the cut's branch.
func TestCheckpointForkDecidedByTheCut(t *testing.T) {
	for seed := uint64(1); ; seed++ {
		w := newGenWorld(seed)
		a := w.dev("a1")
		create(w, a, 1)
		r2 := create(w, a, 2)
		w.sync()
		var r2b *ledger.Entry
		h, err := w.checkpoint(t.TempDir(), cutAt(nil), func() {
			rollBack(a, 1)
			r2b = create(w, a, 3)
		})
		if err != nil {
			t.Fatal(err)
		}
		if r2b.Hash() > r2.Hash() {
			continue // the ledger keeps the cut's branch: nothing decided
		}
		full, fresh, err := foldGen(h)
		if err != nil {
			t.Fatal(err)
		}
		if !hasNote(full.State.Finality, "fork of alice/a1 decided by the cut") {
			t.Fatalf("seed %d: finality %q", seed, full.State.Finality)
		}
		for _, cf := range []*fold.ChannelFold{full, fresh} {
			if cf.State.Order(fmt.Sprintf("o-%013d", 2)) == nil || cf.State.Order(fmt.Sprintf("o-%013d", 3)) != nil {
				t.Fatalf("seed %d: the cut's branch does not count", seed)
			}
		}
		return
	}
}

// TestCloseCutAttestedBound: a grant that attests a record the cut does not hold (the
// other branch of a fork at its bound) is not covered by a closed cut.
func TestCloseCutAttestedBound(t *testing.T) {
	w := newGenWorld(3)
	a, m := w.dev("a1"), w.dev("m1")
	r1, r2 := create(w, a, 1), create(w, a, 2)
	rollBack(a, 1)
	r2b := create(w, a, 3)
	g := w.write(m, fold.TypeGrantSet, "alice", "", map[string]any{"basis": w.grants["alice"], "level": "member",
		"key": ledger.FormatKey(w.agentKey("alice").Public().(ed25519.PublicKey)), "bounds": map[string]uint64{"a1": 2},
		"bound_hashes": map[string]string{"a1": r2b.Hash()}}, 0)
	var entries []ledger.Entry
	for _, e := range w.records {
		if e.Hash() != r2b.Hash() {
			entries = append(entries, *e)
		}
	}
	forks := []ledger.Fork{{Writer: "alice", Device: "a1", Seq: 2, Winner: *r2, Losers: []ledger.Entry{*r2b}}}
	cut := fold.Cut{{Writer: "alice", Device: "a1", Seq: 2, Hash: r2.Hash()}, {Writer: fold.MasterWriter, Device: "m1", Seq: g.Seq, Hash: g.Hash()}}
	closed := fold.CloseCut(entries, forks, cut, nil)
	if p, ok := closed.At(fold.MasterWriter, "m1"); ok && p.Seq >= g.Seq {
		t.Fatalf("closed cut %s covers the grant at m1 seq %d", cutText(closed), g.Seq)
	}
	if p, _ := closed.At("alice", "a1"); p.Hash != r2.Hash() {
		t.Fatalf("closed cut %s", cutText(closed))
	}
	_ = r1
}

// TestCheckpointAttestedBoundSettled: a grant above the cut whose attested bound is at
// or below the segment's cut is settled by the cut, and noted.
func TestCheckpointAttestedBoundSettled(t *testing.T) {
	w := newGenWorld(4)
	a, m := w.dev("a1"), w.dev("m1")
	r1 := create(w, a, 1)
	create(w, a, 2)
	w.sync()
	h, err := w.checkpoint(t.TempDir(), cutAt(nil), func() {
		w.write(m, fold.TypeGrantSet, "alice", "", map[string]any{"basis": w.grants["alice"], "level": "member",
			"key": ledger.FormatKey(w.agentKey("alice").Public().(ed25519.PublicKey)), "bounds": map[string]uint64{"a1": 1},
			"bound_hashes": map[string]string{"a1": r1.Hash()}}, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := foldGen(h)
	if err != nil {
		t.Fatal(err)
	}
	if !hasNote(full.State.Finality, "attested bound of alice/a1 settled by the cut") {
		t.Fatalf("finality %q", full.State.Finality)
	}
}

// TestCheckpointSecretsAndIdemFinal: after the checkpoint, bob puts a name alice put at
// or below the cut and alice takes an idempotency key again, both with lower HLCs than
// the base's records. The name stays alice's and the key the base's, on a machine that
// holds only the records above the cut too; alice's own late put follows the base's
// (an entry above the cut never precedes the state's record), so it is the value.
func TestCheckpointSecretsAndIdemFinal(t *testing.T) {
	w := newGenWorld(5)
	a1, a2, b := w.dev("a1"), w.dev("a2"), w.dev("b1")
	put := func(d *genDevice, id string, ms int64) *ledger.Entry {
		return w.write(d, fold.TypeSecretPut, "db", "", map[string]any{"object": "vault/" + id + ".age", "id": id, "recipients": []string{d.writer}}, ms)
	}
	first := put(a1, "s-0000000000001", 0)
	k := w.write(a1, fold.TypeOrderCreate, fmt.Sprintf("o-%013d", 1), "key", map[string]any{"object": "sha256:" + strings.Repeat("0", 64), "args": "x"}, 0)
	w.sync()
	h, err := w.checkpoint(t.TempDir(), cutAt(nil), func() {
		put(b, "s-0000000000002", genMs(first.HLC)-5)
		put(a2, "s-0000000000003", genMs(first.HLC)-3)
		w.write(a2, fold.TypeOrderCreate, fmt.Sprintf("o-%013d", 2), "key", map[string]any{"object": "sha256:" + strings.Repeat("0", 64), "args": "y"}, genMs(k.HLC)-1)
	})
	if err != nil {
		t.Fatal(err)
	}
	full, fresh, err := foldGen(h)
	if err != nil {
		t.Fatal(err)
	}
	for i, cf := range []*fold.ChannelFold{full, fresh} {
		snap := []*ledger.Snapshot{h.full, h.fresh}[i]
		s := cf.State.Secrets(snap)["db"]
		if s == nil || s.Owner != "alice" || s.ID != "s-0000000000003" || s.Puts != 2 || !slices.Equal(s.Ignored, []string{"bob"}) {
			t.Fatalf("machine %d: secret %+v", i, s)
		}
		if r, _ := cf.State.IdemGet("alice\x00key"); r.Hash != k.Hash() {
			t.Fatalf("machine %d: idempotency key taken by %s", i, r.Hash)
		}
	}
	if !hasNote(full.State.Finality, "idempotency key") {
		t.Fatalf("finality %q", full.State.Finality)
	}
	plain := fold.Fold(fold.FoldInput{Project: genProject, Master: h.master, Entries: h.full.Entries, Forks: h.full.Forks})
	if s := plain.Secrets(h.full)["db"]; s == nil || s.Owner != "bob" {
		t.Fatalf("without the checkpoint bob's lower HLC should own the name: %+v", s)
	}
}

// TestCheckpointEntryAcrossAFork: the owner's device was restored and forked its
// segment below the cut, and the other branch holds a record at the checkpoint entry's
// seq. A machine that reads the segment only above the cut resolves that fork without
// H, and its ledger's fork rule may leave the checkpoint entry out: it still counts.
func TestCheckpointEntryAcrossAFork(t *testing.T) {
	for seed := uint64(1); seed < 500; seed++ {
		w := newGenWorld(seed)
		m := w.dev("m1")
		w.grant("alice", fold.TypeGrantSet, false, false)
		r4 := w.write(m, fold.TypePolicySet, "", "", map[string]any{}, 0)
		rollBack(m, 2)
		w.grant("bob", fold.TypeGrantSet, false, false)
		h, err := w.checkpoint(t.TempDir(), cutAt(nil), func() {})
		if err != nil {
			t.Fatal(err)
		}
		ck := m.tip
		if p, _ := h.cut.At(fold.MasterWriter, "m1"); p.Seq != 3 || ck.Seq != 4 || r4.Hash() > ck.Hash() {
			continue // not the case: the cut's branch is the older one, or the fresh ledger keeps the entry
		}
		if slices.ContainsFunc(h.fresh.Entries, func(e ledger.Entry) bool { return e.Hash() == ck.Hash() }) {
			t.Fatalf("seed %d: the fresh ledger kept the checkpoint entry", seed)
		}
		if _, _, err := foldGen(h); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return
	}
	t.Fatal("no history of the case drawn")
}

// TestCheckpointTerminalOverAttestedBound: as above, but alice's order at or below the
// cut is cancelled there, so the base holds it as folded, not as lines: it stays
// cancelled, and the attestation off the cut's branch is noted in Finality.
func TestCheckpointTerminalOverAttestedBound(t *testing.T) {
	w := newGenWorld(6)
	a := w.dev("a1")
	r1 := create(w, a, 1)
	w.write(a, fold.TypeOrderCancel, fmt.Sprintf("o-%013d", 1), "", map[string]any{"basis": r1.Hash()}, 0)
	w.sync()
	h, err := w.checkpoint(t.TempDir(), cutAt(nil), func() {
		create(w, a, 5) // seq 3 on the cut's branch
		rollBack(a, 1)
		create(w, a, 4)
		r6 := create(w, a, 6) // seq 3 on the other branch
		w.write(w.dev("m1"), fold.TypeGrantSet, "alice", "", map[string]any{"basis": w.grants["alice"], "level": "member",
			"key": ledger.FormatKey(w.agentKey("alice").Public().(ed25519.PublicKey)), "bounds": map[string]uint64{"a1": 3},
			"bound_hashes": map[string]string{"a1": r6.Hash()}}, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	full, fresh, err := foldGen(h)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("o-%013d", 1)
	for _, cf := range []*fold.ChannelFold{full, fresh} {
		if o := cf.State.Order(id); o == nil || o.State != fold.StateCancelled || !hasNote(cf.State.Finality, "off the cut's branch") {
			t.Fatalf("order %s: %+v; finality %q", id, o, cf.State.Finality)
		}
	}
}

// TestCheckpointRevokeNamesNoBound: a revocation above the cut that names no bound for
// bob's segment leaves his claim at or below the cut counting (it keeps the grant it
// had there), and says so in Finality; without the checkpoint it voids the claim.
func TestCheckpointRevokeNamesNoBound(t *testing.T) {
	w := newGenWorld(7)
	a, b := w.dev("a1"), w.dev("b1")
	r1 := create(w, a, 1)
	w.write(b, fold.TypeOrderClaim, fmt.Sprintf("o-%013d", 1), "", map[string]any{"basis": r1.Hash()}, 0)
	w.sync()
	h, err := w.checkpoint(t.TempDir(), cutAt(nil), func() {
		w.write(w.dev("m1"), fold.TypeGrantRevoke, "bob", "", map[string]any{"basis": w.grants["bob"]}, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	full, fresh, err := foldGen(h)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("o-%013d", 1)
	for _, cf := range []*fold.ChannelFold{full, fresh} {
		if o := cf.State.Order(id); o == nil || o.Holder != "bob" || !hasNote(cf.State.Finality, "bound of bob/b1 set to the cut") {
			t.Fatalf("order %s: %+v; finality %q", id, o, cf.State.Finality)
		}
	}
	if plain := fold.Fold(fold.FoldInput{Project: genProject, Master: h.master, Entries: h.full.Entries, Forks: h.full.Forks}); plain.Orders[id].Holder != "" {
		t.Fatalf("without the checkpoint the revocation voids bob's claim: %+v", plain.Orders[id])
	}
}

// TestCloseCutSeat: a writer's records at or below the cut need the grant.set that
// seats it there too: a cut holding alice's creates but none of the master's segment
// (where her seat was granted) is closed below her records.
func TestCloseCutSeat(t *testing.T) {
	w := newGenWorld(5)
	a := w.dev("a1")
	c1 := create(w, a, 1)
	c2 := create(w, a, 2)
	var entries []ledger.Entry
	for _, e := range w.records {
		entries = append(entries, *e)
	}
	cut := fold.Cut{{Writer: "alice", Device: "a1", Seq: c2.Seq, Hash: c2.Hash()}}
	closed := fold.CloseCut(entries, nil, cut, nil)
	if p, ok := closed.At("alice", "a1"); ok && p.Seq >= c1.Seq {
		t.Fatalf("closed cut %s holds alice's records without her seat", cutText(closed))
	}
	cut = append(cut, fold.CutPoint{Writer: fold.MasterWriter, Device: "m1", Seq: 1, Hash: w.grants["alice"]})
	slices.SortFunc(cut, func(x, y fold.CutPoint) int { return strings.Compare(x.Writer, y.Writer) })
	if p, _ := fold.CloseCut(entries, nil, cut, nil).At("alice", "a1"); p.Seq != c2.Seq {
		t.Fatalf("with her seat below the cut, alice's records stay: %s", cutText(fold.CloseCut(entries, nil, cut, nil)))
	}
}
