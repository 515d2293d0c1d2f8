package fsbus

import (
	"encoding/json"
	"testing"

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
	}{st.Orders, st.Asks, st.Messages, seats, st.Contested, st.Entries, st.MaxHLC})
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
