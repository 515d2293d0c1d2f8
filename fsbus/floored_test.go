package fsbus

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// wholeLoad loads c as a process with the local index off does: every segment read
// from its start, the owner's checkpoint found in the whole reading.
func wholeLoad(t *testing.T, c *Channel) *View {
	t.Helper()
	t.Setenv(envNoIndex, "1")
	defer os.Unsetenv(envNoIndex)
	v, err := reopen(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if v.Snapshot.Floors != nil {
		t.Fatal("a whole reading has floors")
	}
	return v
}

// sameAsWhole fails unless v folds to the state a whole reading of c folds to, and
// reports the same superseded entries.
func sameAsWhole(t *testing.T, c *Channel, v *View) {
	t.Helper()
	w := wholeLoad(t, c)
	if got, want := ownerCanon(v.State), ownerCanon(w.State); got != want {
		t.Fatalf("the reading from the cut folds otherwise than the whole reading:\n%s", propDiff(got, want))
	}
	if len(v.State.Superseded) != len(w.State.Superseded) {
		t.Fatalf("superseded: %d from the cut, %d whole", len(v.State.Superseded), len(w.State.Superseded))
	}
}

// TestLoadReadsFromTheCut: after the owner compacts, a new process reads each segment
// from the cut — its snapshot and its local index hold no record at or below it — and
// folds to what a whole reading folds to, writes included.
func TestLoadReadsFromTheCut(t *testing.T) {
	w := newLifeWorld(t)
	c, alice, bob, m := w.c, w.alice, w.bob, w.master
	a := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "accepted one"}))
	must[*fold.Order](t)(bob.Claim(a.ID, ""))
	must[*fold.Order](t)(bob.Submit(a.ID, SubmitOptions{Reference: "commit:1"}))
	must[*fold.Order](t)(alice.Review(a.ID, "accept", NoteOptions{}))
	l := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "live one"}))
	must[*fold.Order](t)(bob.Claim(l.ID, ""))
	if _, err := reopen(t, c).Load(); err != nil { // an index holding every record
		t.Fatal(err)
	}
	if _, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	must[*fold.Order](t)(bob.Submit(l.ID, SubmitOptions{Reference: "commit:2"}))
	must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "after the cut"}))

	p := reopen(t, c)
	v, err := p.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v.Snapshot.Floors == nil || v.State.Base() == nil || p.floored.Miss != nil {
		t.Fatalf("a new process did not read from the cut (floors %d, miss %v)", len(v.Snapshot.Floors), p.floored.Miss)
	}
	sameAsWhole(t, c, v)
	for _, pt := range v.State.Base().Cut {
		if pt.Offset == 0 {
			t.Errorf("the cut names no offset for %s/%s", pt.Writer, pt.Device)
		}
	}
	whole := wholeLoad(t, c)
	if n := len(v.Snapshot.Entries); n >= len(whole.Snapshot.Entries) || p.localIndex().rs.Len() != n {
		t.Fatalf("read from the cut: %d entries, %d in the index; whole: %d", n, p.localIndex().rs.Len(), len(whole.Snapshot.Entries))
	}
	// The index file keeps no record at or below the cut.
	idx, err := os.ReadFile(p.indexPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range whole.Snapshot.Entries {
		if e.Writer == fold.MasterWriter || e.Type == fold.TypeCheckpoint {
			continue
		}
		if fold.Cut(v.State.Base().Cut).Below(e.Writer, e.Device, e.Seq) && bytes.Contains(idx, []byte(e.Sig)) {
			t.Fatalf("the local index still holds %s seq %d, at or below the cut", e.Writer, e.Seq)
		}
	}
	// A machine that has seen no epoch count reads from the highest head's cut.
	if err := os.Remove(p.epochSeenPath()); err != nil {
		t.Fatal(err)
	}
	n := reopen(t, c)
	if v, err := n.Load(); err != nil || v.Snapshot.Floors == nil || n.floored.Hint.Epoch != 1 {
		t.Fatalf("with no epoch seen: %v", err)
	}
	// The state was loaded in full once: the next processes skip its canonical check.
	marker := filepath.Join(c.Home.StateDir(c.Project()), "state-checked-"+strings.TrimPrefix(p.floored.Hint.Head, "sha256:")[:32])
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no marker of the state loaded in full: %v", err)
	}
	// A write from the cut, then a new process again.
	o := must[*fold.Order](t)(alice.NewOrder(NewOrderOptions{Title: "one more"}))
	q, err := reopen(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if q.State.Order(o.ID) == nil || q.Snapshot.Floors == nil {
		t.Fatal("the write after the cut is not in the next reading from the cut")
	}
	sameAsWhole(t, c, q)
}

// compactedWorld is a channel whose owner compacted it (epoch 1) while bob held order a.
func compactedWorld(t *testing.T) (*lifeWorld, *fold.Order) {
	t.Helper()
	w := newLifeWorld(t)
	a := must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "first"}))
	must[*fold.Order](t)(w.bob.Claim(a.ID, ""))
	if _, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	return w, a
}

// TestLoadFromTheCutFallsBack: a reading from the cut that cannot stand for the whole
// one — a newer checkpoint above it, a chunk gone — reads whole and folds what the
// whole reading folds; after a newer checkpoint the process reads from its cut.
func TestLoadFromTheCutFallsBack(t *testing.T) {
	w, a := compactedWorld(t)
	c, alice, m := w.c, w.alice, w.master
	p := reopen(t, c)
	if v, err := p.Load(); err != nil || v.Snapshot.Floors == nil {
		t.Fatalf("epoch 1: floors %v, %v", v != nil && v.Snapshot.Floors != nil, err)
	}
	must[*fold.Order](t)(alice.Cancel(a.ID, NoteOptions{}))
	if r, err := m.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v, %v", r, err)
	}
	v, err := p.Load() // the epoch-2 entry is above epoch 1's cut
	if err != nil {
		t.Fatal(err)
	}
	if v.Snapshot.Floors != nil || p.floored.Hint.Epoch != 2 || p.floored.Miss != nil {
		t.Fatalf("a newer checkpoint: floors %v, hint epoch %d, miss %v", v.Snapshot.Floors != nil, p.floored.Hint.Epoch, p.floored.Miss)
	}
	sameAsWhole(t, c, v)
	if v, err = p.Load(); err != nil || v.Snapshot.Floors == nil {
		t.Fatalf("the process does not read from epoch 2's cut: %v", err)
	}
	sameAsWhole(t, c, v)

	// A forged head of a higher epoch, named by its own hash, on a machine that has seen
	// no epoch count: its floors are tried, no entry names it, the reading is whole.
	forged := *p.ownerCheckpoint.Chain[len(p.ownerCheckpoint.Chain)-1].Head
	forged.Epoch = 9
	raw, err := json.Marshal(&forged)
	if err != nil {
		t.Fatal(err)
	}
	fp := filepath.Join(c.Root, filepath.FromSlash(fold.HeadPath(9, ledger.HashBytes(raw))))
	if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p.epochSeenPath()); err != nil {
		t.Fatal(err)
	}
	f := reopen(t, c)
	if v, err = f.Load(); err != nil {
		t.Fatal(err)
	}
	if f.floored.Hint.Epoch != 2 || v.Snapshot.Floors != nil {
		t.Fatalf("a forged head: hint epoch %d, floors %v", f.floored.Hint.Epoch, v.Snapshot.Floors != nil)
	}
	sameAsWhole(t, c, v)
	if err := os.RemoveAll(filepath.Dir(fp)); err != nil {
		t.Fatal(err)
	}

	// A chunk of epoch 2 gone: neither reading folds from it.
	st := v.State.Base()
	var chunk string
	for _, cp := range p.ownerCheckpoint.Chain {
		if cp.Data.Epoch == st.Epoch {
			chunk = filepath.Join(c.Root, filepath.FromSlash(fold.ChunkPath(cp.Head.State[0].Hash)))
		}
	}
	if err := os.Remove(chunk); err != nil {
		t.Fatal(err)
	}
	q := reopen(t, c)
	v, err = q.Load()
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 2 does not load: the whole reading folds from epoch 1 (format.md §20), and
	// the process's next reading starts from epoch 1's cut...
	if v.Snapshot.Floors != nil || q.floored.Hint.Epoch != 1 || v.State.Base() == nil || v.State.Base().Epoch != 1 {
		t.Fatalf("a chunk gone: floors %v, hint epoch %d", v.Snapshot.Floors != nil, q.floored.Hint.Epoch)
	}
	sameAsWhole(t, c, v)
	// ...where epoch 2's entry above it makes it read whole, and go on reading whole.
	for range 2 {
		if v, err = q.Load(); err != nil {
			t.Fatal(err)
		}
		if q.floored.Miss == nil || v.Snapshot.Floors != nil {
			t.Fatalf("floors %v, miss %v", v.Snapshot.Floors != nil, q.floored.Miss)
		}
		sameAsWhole(t, c, v)
	}
}

// A folder put back from an older copy — its counting checkpoints end below the epoch
// this machine has seen count — is reported as rolled back on every Load, naming the
// epoch seen, and the machine keeps remembering the higher epoch.
func TestRolledBackHeadReported(t *testing.T) {
	w, a := compactedWorld(t)
	backup := filepath.Join(t.TempDir(), "backup")
	if err := os.CopyFS(backup, os.DirFS(w.c.Root)); err != nil {
		t.Fatal(err)
	}
	must[*fold.Order](t)(w.alice.Cancel(a.ID, NoteOptions{}))
	if r, err := w.master.Compact(CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 2 {
		t.Fatalf("second compact: %+v, %v", r, err)
	}
	if _, err := reopen(t, w.c).Load(); err != nil { // this machine sees epoch 2 count
		t.Fatal(err)
	}
	seen := mustReadFile(t, w.c.epochSeenPath())
	if err := os.RemoveAll(w.c.Root); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(w.c.Root, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	p := reopen(t, w.c)
	for i := range 2 {
		if _, err := p.Load(); err != nil {
			t.Fatal(err)
		}
		cf := p.OwnerCheckpoint()
		if cf == nil || len(cf.Chain) != 1 {
			t.Fatalf("load %d: the folder's chain %+v, want epoch 1 only", i, cf)
		}
		var got *fold.CheckpointProblem
		for j := range cf.Problems {
			if cf.Problems[j].Kind == "rolled_back" {
				got = &cf.Problems[j]
			}
		}
		if got == nil || got.Epoch != 2 || !strings.Contains(got.Detail, "rolled back") {
			t.Fatalf("load %d: problems %+v, want rolled_back naming epoch 2", i, cf.Problems)
		}
		p.Thorough = true // the second Load folds whole again
	}
	// ferry ledger verify says so too. The hint names the epoch seen, whose head the
	// folder lacks, so the process reads whole, not from epoch 1's cut.
	q := reopen(t, w.c)
	v, err := q.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v.Snapshot.Floors != nil {
		t.Fatal("a rolled-back folder was read from a cut below the epoch seen")
	}
	rep, err := q.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Checkpoints, func(p fold.CheckpointProblem) bool { return p.Kind == "rolled_back" && p.Epoch == 2 }) {
		t.Errorf("verify's checkpoint problems: %+v, want rolled_back naming epoch 2", rep.Checkpoints)
	}
	if now := mustReadFile(t, w.c.epochSeenPath()); !bytes.Equal(now, seen) {
		t.Errorf("the epoch seen went from %q to %q", seen, now)
	}
}
