package fold_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

var (
	foldSeed  = flag.Int64("fold.seed", -1, "run the checkpoint property test on this one history")
	foldFirst = flag.Uint64("fold.first", 0, "the checkpoint property test's first seed")
	foldN     = flag.Int("fold.n", 0, "how many histories the checkpoint property test draws (0: 1,000, -short 100)")
)

// compared counts the histories whose fold from the checkpoint was compared with the
// fold without it (no finality noted); deltas those where records above the cut were
// folded in after it (FoldDelta over the checkpoint's state).
var compared, deltas atomic.Int64

// The categories the property test must meet in at least 5% of its histories each.
var propCategories = []string{
	"branch crossing the cut on a live thing",
	"branch crossing the cut on a terminal thing",
	"fork at or below the cut",
	"bound below the cut written above it",
	"late lower-HLC idempotent write or secret put",
}

// TestCheckpointProperty: over random histories with the owner's checkpoint at a
// random cut, a machine that holds only the records above the cut and one that holds
// every record fold the same state from the checkpoint and report the same superseded
// entries; where the checkpoint decided nothing otherwise (State.Finality empty) both
// equal the fold without the checkpoint; recomputing the checkpoint's state finds no
// dispute.
func TestCheckpointProperty(t *testing.T) {
	dir := t.TempDir()
	if *foldSeed >= 0 {
		cats, err := checkHistory(uint64(*foldSeed), filepath.Join(dir, "one"))
		if err != nil {
			t.Fatalf("-fold.seed=%d: %v", *foldSeed, err)
		}
		t.Logf("-fold.seed=%d: %v", *foldSeed, cats)
		return
	}
	n := 1000
	if testing.Short() {
		n = 100
	}
	if *foldN > 0 {
		n = *foldN
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var fails []string
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	for range max(2, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range seeds {
				cats, err := checkHistory(s, filepath.Join(dir, fmt.Sprint(s)))
				mu.Lock()
				for _, c := range cats {
					counts[c]++
				}
				if err != nil {
					fails = append(fails, fmt.Sprintf("-fold.seed=%d: %v", s, err))
				}
				mu.Unlock()
			}
		}()
	}
	for s := range uint64(n) {
		seeds <- *foldFirst + s
	}
	close(seeds)
	wg.Wait()
	slices.Sort(fails)
	for i, f := range fails {
		if i == 5 {
			t.Errorf("and %d more", len(fails)-5)
			break
		}
		t.Error(f)
	}
	t.Logf("%-48s %4d", "compared with the fold without the checkpoint", compared.Load())
	t.Logf("%-48s %4d", "folded in after the checkpoint (FoldDelta)", deltas.Load())
	if pct := 100 * float64(deltas.Load()) / float64(n); pct < 5 {
		t.Errorf("records above the cut folded in after the checkpoint in %.1f%% of %d histories, below 5%%", pct, n)
	}
	for _, c := range propCategories {
		pct := 100 * float64(counts[c]) / float64(n)
		t.Logf("%-48s %4d  %5.1f%%", c, counts[c], pct)
		if pct < 5 {
			t.Errorf("category %q occurs in %.1f%% of %d histories, below 5%%", c, pct, n)
		}
	}
}

// checkHistory generates and checks one history, returning its categories.
func checkHistory(seed uint64, dir string) ([]string, error) {
	h, err := genRun(seed, dir)
	if err != nil {
		return nil, fmt.Errorf("generating: %w", err)
	}
	cats := categories(h)
	if err := checkGen(h); err != nil {
		return cats, fmt.Errorf("cut %s; categories %v: %w", cutText(h.cut), cats, err)
	}
	return cats, nil
}

// checkGen checks the properties on one history and returns the folds.
func checkGen(h *genHistory) error {
	_, _, err := foldGen(h)
	return err
}

// foldGen folds h on both machines from the checkpoint and checks the properties.
func foldGen(h *genHistory) (full, fresh *fold.ChannelFold, _ error) {
	fail := func(format string, args ...any) (*fold.ChannelFold, *fold.ChannelFold, error) {
		return full, fresh, fmt.Errorf(format, args...)
	}
	in := func(s *ledger.Snapshot) fold.FoldInput {
		return fold.FoldInput{Project: genProject, Master: h.master, Entries: s.Entries, Forks: s.Forks}
	}
	full = fold.FoldChannel(in(h.full), h.cps)
	fresh = fold.FoldChannel(in(h.fresh), h.cps)
	if full.Used != 0 || fresh.Used != 0 {
		return fail("the checkpoint did not count: %+v / %+v", full.Problems, fresh.Problems)
	}
	a, b := stateCanon(full.State, h.full, true), stateCanon(fresh.State, h.fresh, true)
	if a != b {
		return fail("every record and the records above the cut fold differently:\n%s", canonDiff(a, b))
	}
	if len(full.State.Finality) == 0 {
		compared.Add(1)
		plain := fold.Fold(in(h.full))
		if a, p := stateCanon(full.State, h.full, false), stateCanon(plain, h.full, false); a != p {
			return fail("no finality noted, yet the fold from the checkpoint differs from the fold without it:\n%s", canonDiff(a, p))
		}
	}
	if err := deltaGen(h, fresh); err != nil {
		return fail("%v", err)
	}
	dis, probs, err := fold.Recompute(in(h.full), full.Chain, h.cps)
	if err != nil || dis != nil || len(probs) > 0 {
		return fail("recomputing the state: %+v %+v %v", dis, probs, err)
	}
	return full, fresh, nil
}

// deltaGen checks the incremental fold over the checkpoint's state: the machine that
// holds only the records above the cut folds them without the last zero to two records
// of each segment, then folds those in (FoldDelta, as a process folds what arrived since
// its last Load). Where FoldDelta takes them, the state equals fresh's, the fold of
// every record above the cut at once.
func deltaGen(h *genHistory, fresh *fold.ChannelFold) error {
	if len(h.fresh.Forks) > 0 {
		return nil
	}
	bySeg := map[[2]string][]int{}
	for i, e := range h.fresh.Entries {
		k := [2]string{e.Writer, e.Device}
		bySeg[k] = append(bySeg[k], i)
	}
	drop := map[int]bool{}
	salt := len(h.fresh.Entries)
	for _, is := range bySeg {
		slices.SortFunc(is, func(a, b int) int { return int(h.fresh.Entries[a].Seq) - int(h.fresh.Entries[b].Seq) })
		r := (len(is) + salt) % 3
		for j := len(is) - 1; j >= 0 && j >= len(is)-r; j-- {
			if h.fresh.Entries[is[j]].Type == fold.TypeCheckpoint {
				break
			}
			drop[is[j]] = true
		}
	}
	if len(drop) == 0 {
		return nil
	}
	var kept, added []ledger.Entry
	maxHLC := ""
	for i, e := range h.fresh.Entries {
		maxHLC = max(maxHLC, e.HLC)
		if drop[i] {
			added = append(added, e)
		} else {
			kept = append(kept, e)
		}
	}
	in := fold.FoldInput{Project: genProject, Master: h.master}
	in.Entries = kept
	pre := fold.FoldChannel(in, h.cps)
	if pre.Used != 0 {
		return nil
	}
	nf, ok := pre.Folded.FoldDelta(in, added, len(h.fresh.Entries), maxHLC, func(fold.ObjRef) bool { return false })
	if !ok {
		return nil
	}
	deltas.Add(1)
	if a, b := stateCanon(nf.State, h.fresh, true), stateCanon(fresh.State, h.fresh, true); a != b {
		var what []string
		for _, e := range added {
			what = append(what, fmt.Sprintf("%s/%s@%d %s %s", e.Writer, e.Device, e.Seq, e.Type, e.Ref))
		}
		return fmt.Errorf("records above the cut %v folded in after the checkpoint differ from folding them with it:\n%s", what, canonDiff(a, b))
	}
	return nil
}

func cutText(c fold.Cut) string {
	var parts []string
	for _, p := range c {
		parts = append(parts, fmt.Sprintf("%s/%s@%d", p.Writer, p.Device, p.Seq))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// stateCanon is the comparable state of a fold: the things, seats, contests, idempotency
// keys and secrets, and with checkpoint the superseded and ignored entries.
func stateCanon(st *fold.State, snap *ledger.Snapshot, checkpoint bool) string {
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
	idem := map[string]string{}
	for k, v := range st.AllIdem() {
		idem[k] = v.Hash + " " + v.HLC
	}
	v := map[string]any{"orders": st.AllOrders(), "asks": st.AllAsks(), "messages": st.Messages, "seats": seats, "contested": st.Contested,
		"idem": idem, "entries": st.Entries, "max_hlc": st.MaxHLC}
	if checkpoint {
		v["superseded"], v["ignored"], v["secrets"] = st.Superseded, st.Ignored, st.Secrets(snap)
	}
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// canonDiff shows the first lines where two canons differ.
func canonDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			lo, hi := max(0, i-3), min(i+4, len(al), len(bl))
			return fmt.Sprintf("line %d:\n  %s\nvs\n  %s", i, strings.Join(al[lo:hi], "\n  "), strings.Join(bl[lo:hi], "\n  "))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}

// categories names what a history holds of propCategories.
func categories(h *genHistory) []string {
	var out []string
	all := slices.Clone(h.full.Entries)
	for _, f := range h.full.Forks {
		all = append(all, f.Losers...)
	}
	below := func(e *ledger.Entry) bool { return h.cut.Below(e.Writer, e.Device, e.Seq) }
	at, _, _ := fold.Split(h.full.Entries, h.full.Forks, h.cut, nil)
	held := map[string]bool{}
	childBelow := map[string]bool{} // basis named by an entry at or below the cut
	for i := range at {
		held[at[i].Hash()] = true
		if d, _ := fold.DecodeData(&at[i]); d.Basis != "" {
			childBelow[d.Basis] = true
		}
	}
	var live, terminal, bound, late, fork bool
	for i := range all {
		e := &all[i]
		if below(e) {
			continue
		}
		d, _ := fold.DecodeData(e)
		if f := fold.Family(e.Type); d.Basis != "" && held[d.Basis] && childBelow[d.Basis] && (f == "order" || f == "ask") {
			if h.base.TerminalOrder(e.Ref) != nil || h.base.TerminalAsk(e.Ref) != nil {
				terminal = true
			} else {
				live = true
			}
		}
		if e.Writer == fold.MasterWriter && (e.Type == fold.TypeGrantSet || e.Type == fold.TypeGrantRevoke || e.Type == fold.TypeAgentRetire) {
			for dev, b := range d.Bounds {
				if p, ok := h.cut.At(e.Ref, dev); ok && b < p.Seq {
					bound = true
				}
			}
		}
		if e.Idem != "" {
			if r, ok := h.base.Idem[e.Writer+"\x00"+e.Idem]; ok && e.HLC < r.HLC {
				late = true
			}
		}
		if e.Type == fold.TypeSecretPut {
			for j := range h.base.Lines {
				l := &h.base.Lines[j]
				if l.Type == fold.TypeSecretPut && l.Ref == e.Ref && e.HLC < l.HLC {
					late = true
				}
			}
		}
	}
	for _, f := range h.full.Forks {
		if p, ok := h.cut.At(f.Writer, f.Device); ok && f.Seq <= p.Seq {
			fork = true
		}
	}
	for i, on := range []bool{live, terminal, fork, bound, late} {
		if on {
			out = append(out, propCategories[i])
		}
	}
	return out
}
