package fsbus_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
)

// reader is a second machine (a home of its own) reading w's folder.
func (w *ownerWorld) reader(h *fsbus.Home) *fold.ChannelFold {
	w.t.Helper()
	ch, err := fsbus.Open(h, w.c.Root)
	if err != nil {
		w.t.Fatal(err)
	}
	ch.Now, ch.Boot = w.c.Now, w.c.Boot
	if _, err := ch.Load(); err != nil {
		w.t.Fatal(err)
	}
	return ch.OwnerCheckpoint()
}

// TestCompactorNeverReplacesItsOwnFreshCheckpoint: the compactor writes epoch 2 and
// exits; a reader machine sees epoch 2 count. A member with write access to the
// folder deletes the head of epoch 2 before the compactor's next command. The
// compactor remembers the epoch it wrote, so its later compactions are refused as a
// rollback and never replace its own checkpoint; the reader keeps counting epoch 2's
// checkpoint or reports the rollback.
func TestCompactorNeverReplacesItsOwnFreshCheckpoint(t *testing.T) {
	w := newOwnerWorld(t)
	clock, order, owner := w.clock, w.order, w.owner
	now0 := fsbus.CompactOptions{SettleSet: true, Force: true}
	seen := filepath.Join(w.c.Home.ConfigDir, "checkpoints", "acme")
	rh := fsbustest.Home(t)

	order("one")
	if r, err := owner("").Compact(now0); err != nil || r.Epoch != 1 {
		t.Fatalf("epoch 1: %+v %v", r, err)
	}
	w.top()
	order("two")
	r2, err := owner("").Compact(now0)
	if err != nil || r2.Epoch != 2 {
		t.Fatalf("epoch 2: %+v %v", r2, err)
	}
	b, _ := os.ReadFile(seen)
	t.Logf("compactor's epoch memory right after writing epoch 2: %q", b)

	// Another machine sees epoch 2 count.
	if cf := w.reader(rh); len(cf.Chain) != 2 || cf.Chain[1].Entry.Hash() != r2.Entry {
		t.Fatalf("reader: %+v", cf)
	}

	// The member deletes the head of epoch 2 from the folder (or truncates it: a
	// "torn" file is pending just the same).
	heads, _ := filepath.Glob(filepath.Join(w.c.Root, "checkpoints", "2-*"))
	if len(heads) != 1 {
		t.Fatal(heads)
	}
	if err := os.RemoveAll(heads[0]); err != nil {
		t.Fatal(err)
	}

	var replaced *fold.CompactResult
	for i := range 3 {
		clock.Add((25 * time.Hour).Milliseconds())
		order("more")
		r, err := owner("").Compact(now0)
		t.Logf("compact %d on the compactor: %+v %v", i, r, err)
		if err == nil && r != nil && r.Replaces != "" {
			replaced = r
			break
		}
	}
	if replaced != nil {
		t.Errorf("the compactor replaced its own good checkpoint %s (it wrote it) after a member deleted its head: new %s", r2.Entry, replaced.Entry)
	}
	cf := w.reader(rh)
	top := cf.Chain[len(cf.Chain)-1]
	rolled := slices.ContainsFunc(cf.Problems, func(p fold.CheckpointProblem) bool { return p.Kind == "rolled_back" })
	t.Logf("reader: top epoch %d %s (replaces %q), rolled_back reported %v, problems %+v", top.Data.Epoch, top.Entry.Hash(), top.Data.Replaces, rolled, cf.Problems)
	if top.Entry.Hash() != r2.Entry && !rolled {
		t.Errorf("the reader that saw epoch 2 (%s) count now counts %s at the same epoch and reports no rollback", r2.Entry, top.Entry.Hash())
	}
}

// TestTornChunkIsRestoredAndATamperedOneDisputed: a chunk of the newest counting
// checkpoint cut to zero bytes or holding a NUL byte (what a sync tool that writes in
// place leaves, or damage) is restored by the next recomputation, and compaction goes
// on; one whose bytes were changed is disputed, as a tampered chunk is.
func TestTornChunkIsRestoredAndATamperedOneDisputed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		damage   func(b []byte) []byte
		restored bool
	}{
		{"torn", func([]byte) []byte { return nil }, true},
		{"nul", func(b []byte) []byte { b = slices.Clone(b); b[len(b)/2] = 0; return b }, true},
		{"flipped", func(b []byte) []byte { b = slices.Clone(b); b[len(b)-2] ^= 1; return b }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOwnerWorld(t)
			order, owner, top := w.order, w.owner, w.top
			now0 := fsbus.CompactOptions{SettleSet: true, Force: true}
			w.twoEpochs()
			k := top()
			if len(k.Head.State) == 0 {
				t.Fatal("epoch 2's head names no core chunk")
			}
			chunk := filepath.Join(w.c.Root, filepath.FromSlash(fold.ChunkPath(k.Head.State[0].Hash)))
			good, err := os.ReadFile(chunk)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(chunk, tc.damage(good), 0o644); err != nil {
				t.Fatal(err)
			}
			ch := fsbustest.Reopen(t, w.c)
			v, err := ch.Load()
			if err != nil {
				t.Fatal(err)
			}
			probs, d, err := ch.Recheck(v)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(chunk)
			if !tc.restored {
				if d == nil || bytes.Equal(b, good) {
					t.Fatalf("a tampered chunk: dispute %+v, restored %v (problems %+v)", d, bytes.Equal(b, good), probs)
				}
				return
			}
			if d != nil || !bytes.Equal(b, good) {
				t.Fatalf("a %s chunk after the recheck: dispute %+v, restored %v (problems %+v)", tc.name, d, bytes.Equal(b, good), probs)
			}
			order("three")
			if r, err := owner("").Compact(now0); err != nil || r.Epoch != 3 {
				t.Fatalf("compact after the chunk was restored: %+v %v", r, err)
			}
		})
	}
}

// TestVerifyGoesOnWhenAChunkCannotBeRestored: a member replaces checkpoints/chunks by
// a link to a copy lacking one chunk of the newest counting checkpoint. The
// restoration refuses to write through the link, and verify goes on, reporting the
// chunk pending.
func TestVerifyGoesOnWhenAChunkCannotBeRestored(t *testing.T) {
	w := newOwnerWorld(t)
	w.twoEpochs()
	chunk := removeNewChunk(t, w.c.Root, w.top())
	if chunk == "" {
		t.Fatal("no new chunk")
	}
	dir := filepath.Join(w.c.Root, "checkpoints", "chunks")
	elsewhere := filepath.Join(t.TempDir(), "chunks")
	if err := os.Rename(dir, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	ch := fsbustest.Reopen(t, w.c)
	v, err := ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ch.Verify(v)
	if err != nil {
		t.Fatalf("verify with a chunk missing behind a linked chunks directory: %v", err)
	}
	if !slices.ContainsFunc(rep.Checkpoints, func(p fold.CheckpointProblem) bool {
		return p.Kind == "pending" && strings.Contains(p.Detail, "could not be restored") && strings.Contains(p.Detail, "symbolic link")
	}) {
		t.Fatalf("verify does not report the chunk pending, naming why it was not restored: %+v", rep.Checkpoints)
	}
	if _, err := os.Lstat(chunk); err == nil {
		t.Fatal("a chunk was written through the link")
	}
}

// floorDivergence builds: C (this machine's device) writes epoch 1, then epoch 2 (S)
// while partitioned; S's head is lost. D, not seeing S, takes over at epoch 2 (W).
// S arrives; a day later B takes over, replacing S (T), its cut covering W. The head
// of W is then lost too (or a member deletes it). It returns the counting tops of a
// fresh reader from the cut and of a whole reader, and W's and T's entry hashes.
func floorDivergence(t *testing.T, D string, loseW bool) (floored, whole fold.Counting, W, T string) {
	w := newOwnerWorld(t)
	c, clock, order, owner, chainOf := w.c, w.clock, w.order, w.owner, w.chain
	C, B := c.Device, "d-b"
	seen := filepath.Join(c.Home.ConfigDir, "checkpoints", "acme")

	order("one")
	if r, err := owner(C).Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 1 {
		t.Fatalf("epoch 1: %+v %v", r, err)
	}
	chainOf(false)
	before := readChain(t, c.Root, fold.MasterWriter, C)
	seenBefore, _ := os.ReadFile(seen)
	order("two")
	rS, err := owner(C).Compact(fsbus.CompactOptions{SettleSet: true, Force: true})
	if err != nil || rS.Epoch != 2 {
		t.Fatalf("C's epoch 2: %+v %v", rS, err)
	}
	after := readChain(t, c.Root, fold.MasterWriter, C)
	backS := w.away(2) // S's head never arrives anywhere
	_ = backS
	before.put(t, c.Root, fold.MasterWriter, C) // S's entry not yet at D
	os.WriteFile(seen, seenBefore, 0o644)

	clock.Add((25 * time.Hour).Milliseconds())
	rW, err := owner(D).Compact(fsbus.CompactOptions{TakeOver: true, Force: true, SettleSet: true})
	if err != nil || rW.Epoch != 2 || rW.Replaces != "" {
		t.Fatalf("D's take-over: %+v %v", rW, err)
	}
	wHeads, _ := filepath.Glob(filepath.Join(c.Root, "checkpoints", "2-*"))
	var wHead string
	for _, h := range wHeads {
		if !strings.HasSuffix(h, ".away") {
			wHead = h
		}
	}
	// S's entry arrives (its head never does).
	after.put(t, c.Root, fold.MasterWriter, C)
	os.WriteFile(seen, seenBefore, 0o644)
	fsbustest.Reopen(t, c).Load()
	os.WriteFile(seen, seenBefore, 0o644)
	clock.Add((25 * time.Hour).Milliseconds())
	order("three")
	rT, err := owner(B).Compact(fsbus.CompactOptions{TakeOver: true, Force: true, SettleSet: true})
	if err != nil || rT.Epoch != 2 || rT.Replaces != rS.Entry {
		t.Fatalf("B's take-over replacing S: %+v %v", rT, err)
	}
	// W's head is lost (a member deletes it).
	if loseW {
		if err := os.RemoveAll(wHead); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(seen)
	bins, _ := filepath.Glob(filepath.Join(c.Home.StateDir("acme"), "fold-*.bin"))
	for _, b := range bins {
		os.Remove(b)
	}
	last := func(thorough bool) fold.Counting {
		ch := fsbustest.Reopen(t, c)
		ch.Thorough = thorough
		if _, err := ch.Load(); err != nil {
			t.Fatal(err)
		}
		cf := ch.OwnerCheckpoint()
		t.Logf("thorough %v: problems %+v", thorough, cf.Problems)
		return cf.Chain[len(cf.Chain)-1]
	}
	floored = last(false)
	os.Remove(seen)
	whole = last(true)
	return floored, whole, rW.Entry, rT.Entry
}

// TestReplacementOutranksACandidateItsCutCovers: a replacement's cut may cover another
// candidate of its epoch and basis that the replaced one outranked (here W, a
// take-over whose head is then lost). A replacement ranks before every candidate that
// replaces none, and a reader from a replacement's cut reads whole, so a reader from
// the cut and a whole reader count the same checkpoint, whatever the device names.
func TestReplacementOutranksACandidateItsCutCovers(t *testing.T) {
	for i := range 8 {
		D := fmt.Sprintf("d-d%d", i)
		ok := t.Run(D, func(t *testing.T) {
			floored, whole, W, T := floorDivergence(t, D, true)
			t.Logf("W %s, T %s; floored top epoch %d %s; whole top epoch %d %s", W, T, floored.Data.Epoch, floored.Entry.Hash(), whole.Data.Epoch, whole.Entry.Hash())
			if floored.Entry.Hash() != whole.Entry.Hash() {
				t.Fatalf("a reader from the cut counts epoch %d (%s), a whole reader epoch %d (%s)", floored.Data.Epoch, floored.Entry.Hash(), whole.Data.Epoch, whole.Entry.Hash())
			}
		})
		if !ok {
			return
		}
	}
}

// TestReplacementOutranksACandidateItsCutCoversAllFilesHere: the same with W's head
// here, whichever epoch-2 head a fresh reader's hint names.
func TestReplacementOutranksACandidateItsCutCoversAllFilesHere(t *testing.T) {
	for i := range 12 {
		D := fmt.Sprintf("d-d%d", i)
		t.Run(D, func(t *testing.T) {
			floored, whole, W, T := floorDivergence(t, D, false)
			t.Logf("W %s, T %s; floored %s; whole %s", W, T, floored.Entry.Hash(), whole.Entry.Hash())
			if floored.Entry.Hash() != whole.Entry.Hash() {
				t.Fatalf("a reader from the cut counts %s (on %s), a whole reader %s (on %s)", floored.Entry.Hash(), floored.Entry.Device, whole.Entry.Hash(), whole.Entry.Device)
			}
		})
	}
}

// twoEpochs has alice write an order before each of two compactions on this machine,
// epochs 1 and 2.
func (w *ownerWorld) twoEpochs() {
	w.t.Helper()
	for epoch, title := range []string{"one", "two"} {
		w.order(title)
		if r, err := w.owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != epoch+1 {
			w.t.Fatalf("epoch %d: %+v %v", epoch+1, r, err)
		}
	}
}
