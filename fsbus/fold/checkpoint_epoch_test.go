package fold_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// TestCheckpointSecondEpoch: the owner compacts again at a later cut covering the
// first, folding the state from the first checkpoint's (fold.NextBase); the ledger
// then folds from the second, and recomputing both states finds no dispute.
func TestCheckpointSecondEpoch(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 30
	}
	dir := t.TempDir()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var fails []string
	made := 0
	seeds := make(chan uint64)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range seeds {
				ok, err := secondEpoch(s, filepath.Join(dir, fmt.Sprint(s)))
				mu.Lock()
				if ok {
					made++
				}
				if err != nil {
					fails = append(fails, fmt.Sprintf("-fold.seed=%d: %v", s, err))
				}
				mu.Unlock()
			}
		}()
	}
	for s := range uint64(n) {
		seeds <- s
	}
	close(seeds)
	wg.Wait()
	for i, f := range fails {
		if i == 5 {
			break
		}
		t.Error(f)
	}
	t.Logf("%d of %d histories made a second checkpoint", made, n)
	if made < n/4 {
		t.Errorf("only %d of %d histories made a second checkpoint", made, n)
	}
}

// secondEpoch makes the second checkpoint of seed's history, when a closed cut
// covering the first is drawn, and checks it.
func secondEpoch(seed uint64, dir string) (bool, error) {
	h, err := genRun(seed, dir)
	if err != nil {
		return false, err
	}
	w := h.w
	in := fold.FoldInput{Project: genProject, Master: h.master, Entries: h.full.Entries, Forks: h.full.Forks}
	chain, _ := fold.CountingChain(fold.WithForkedCheckpoints(in.Entries, in.Forks), h.master, genProject, h.cps)
	if len(chain) != 1 {
		return false, fmt.Errorf("epoch 1 does not count")
	}
	top := map[[2]string]uint64{}
	for _, e := range h.full.Entries {
		k := [2]string{e.Writer, e.Device}
		top[k] = max(top[k], e.Seq)
	}
	limits := map[[2]string]uint64{}
	for _, k := range slices.SortedFunc(maps.Keys(top), func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) }) {
		lo, t := uint64(0), top[k]
		if p, ok := h.cut.At(k[0], k[1]); ok {
			lo = p.Seq
		}
		if t < lo {
			return false, nil // the ledger keeps a shorter branch than the first cut's
		}
		limits[k] = lo + w.r.Uint64N(t-lo+1)
	}
	cut := fold.CutOf(h.full.Entries, func(wr, dev string) (uint64, bool) {
		l, ok := limits[[2]string{wr, dev}]
		return l, ok
	})
	cut = fold.CloseCut(h.full.Entries, h.full.Forks, cut, nil)
	if cut.Covers(h.cut) != nil {
		return false, nil
	}
	at, _, probs := fold.Split(h.full.Entries, h.full.Forks, cut, nil)
	if len(probs) > 0 {
		return false, fmt.Errorf("split at the second cut: %+v", probs)
	}
	held := map[string]bool{}
	for i := range at {
		held[at[i].Hash()] = true
	}
	for _, p := range h.cut {
		if !held[p.Hash] {
			return false, nil // the second cut is on another branch than the first's
		}
	}
	base, err := fold.NextBase(in, h.base, at, 2, cut)
	if err != nil {
		return false, err
	}
	chunks, refs, err := fold.StateChunks(base)
	if err != nil {
		return false, err
	}
	for _, c := range chunks {
		h.cps["chunk "+ledger.HashBytes(c)] = c
	}
	head, err := fold.NewHead(genProject, base, refs, "m1", h.full.Entries, &chain[0])
	if err != nil {
		return false, err
	}
	hb, hh, err := fold.SignHead(head, ledger.KeySigner(w.master))
	if err != nil {
		return false, err
	}
	h.cps["head "+hh] = hb
	w.write(w.dev("m1"), fold.TypeCheckpoint, "checkpoint", "", fold.CheckpointData{Epoch: 2, Basis: chain[0].Entry.Hash(), Head: hh, Rules: fold.RulesVersion}, 0)
	for range w.r.IntN(6) {
		w.step()
	}
	if err := writeFolder(h.dir, w.records, nil); err != nil {
		return false, err
	}
	snap, err := readFolder(h.dir)
	if err != nil {
		return false, err
	}
	in.Entries, in.Forks = snap.Entries, snap.Forks
	cf := fold.FoldChannel(in, h.cps)
	if cf.Used != 1 {
		return true, fmt.Errorf("the second checkpoint does not count: %+v", cf.Problems)
	}
	if len(cf.State.Finality) == 0 {
		// What the first checkpoint decided the second holds as its state; where the
		// second decides nothing, both fold alike.
		_, above, _ := fold.Split(snap.Entries, snap.Forks, h.cut, nil)
		in1 := in
		in1.Forks = fold.ForksAbove(snap.Entries, snap.Forks, h.cut, above)
		first := fold.FoldFrom(in1, h.base, above)
		if a, p := stateCanon(cf.State, snap, false), stateCanon(first, snap, false); a != p {
			return true, fmt.Errorf("cut %s: no finality noted, yet the fold from the second checkpoint differs from the fold from the first:\n%s", cutText(cut), canonDiff(a, p))
		}
	}
	if dis, probs, err := fold.Recompute(in, cf.Chain, h.cps); err != nil || dis != nil || len(probs) > 0 {
		return true, fmt.Errorf("cut %s: recomputing: %+v %+v %v", cutText(cut), dis, probs, err)
	}
	return true, nil
}
