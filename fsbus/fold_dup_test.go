package fsbus

import (
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// TestFoldDuplicateCreateLowerHashWins: two order.create entries under one order id
// (a forged or cloned record) resolve by hash, never by clock: the lower hash counts
// and the other is listed as ignored, whichever carries the earlier HLC.
func TestFoldDuplicateCreateLowerHashWins(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	var orig *ledger.Entry
	for i := range w.entries {
		if e := &w.entries[i]; e.Type == fold.TypeOrderCreate && e.Writer != fold.MasterWriter {
			orig = e
			break
		}
	}
	if orig == nil {
		t.Fatal("scenario has no order.create")
	}
	signer := w.signers[orig.Writer]
	for _, tc := range []struct{ earlier, dupWins bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		earlier, dupWins := tc.earlier, tc.dupWins
		// A second create under the same id naming another object hash, stamped before
		// or after the original; its seq is varied until its hash sorts where wanted.
		var parsed ledger.Entry
		for seq := uint64(9000); ; seq++ {
			dup := ledger.Entry{V: 1, Writer: orig.Writer, Device: orig.Device, Seq: seq, Type: fold.TypeOrderCreate, Ref: orig.Ref,
				Data: mustJSON(fold.EntryData{Object: ledger.HashBytes([]byte("another object"))})}
			dup.HLC = "2099-01-01T00:00:00.000Z/0000"
			if earlier {
				dup.HLC = "2000-01-01T00:00:00.000Z/0000"
			}
			if err := dup.Sign(signer, propProject); err != nil {
				t.Fatal(err)
			}
			line, _ := dup.Canonical()
			p, err := ledger.ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			if (p.Hash() < orig.Hash()) == dupWins {
				parsed = p
				break
			}
		}
		entries := append(append([]ledger.Entry{}, w.entries...), parsed)
		st := w.fold(entries, nil)
		o := st.Order(orig.Ref)
		switch {
		case dupWins && o != nil:
			t.Fatalf("earlier=%v: the lower-hash duplicate should count (its object does not match: order hidden), got %+v", earlier, o.Row())
		case !dupWins && (o == nil || o.Title != w.full.Orders[orig.Ref].Title):
			t.Fatalf("earlier=%v: the original (lower hash) should count", earlier)
		}
		found := false
		for _, ig := range st.Ignored {
			if ig.Type == fold.TypeOrderCreate && ig.Ref == orig.Ref {
				found = true
			}
		}
		if !found {
			t.Fatalf("earlier=%v: the losing create is not listed as ignored", earlier)
		}
	}
}

// TestFoldUnknownTypeHoldsChainPlace: an order.* entry of a type this binary does not
// know, carrying a basis, takes its place in the order's chain without changing its
// state, so a claim a newer binary chained after it counts here instead of waiting
// forever as pending (docs/format.md §17).
func TestFoldUnknownTypeHoldsChainPlace(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	var o *fold.Order
	for _, id := range w.full.OrderIDs() {
		if c := w.full.Orders[id]; c.State == fold.StateOpen && !c.Missing {
			o = c
			break
		}
	}
	if o == nil {
		t.Fatal("scenario has no open order")
	}
	var claimer string
	for name, a := range w.full.Agents {
		if a.Seated && a.LevelRank >= fold.LevelMember && name != o.Author {
			claimer = name
			break
		}
	}
	signer := w.signers[claimer]
	dev := w.full.Agents[claimer].Devices[0]
	mk := func(seq uint64, typ string, d fold.EntryData) ledger.Entry {
		e := ledger.Entry{V: 1, Writer: claimer, Device: dev, Seq: seq, HLC: "2099-01-01T00:00:00.000Z/" + fmt.Sprintf("%04d", seq%10000),
			Type: typ, Ref: o.ID, Data: mustJSON(d)}
		if err := e.Sign(signer, propProject); err != nil {
			t.Fatal(err)
		}
		line, _ := e.Canonical()
		p, err := ledger.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := mk(9001, "order.annotate", fold.EntryData{Basis: o.Head, Note: "from a newer binary"})
	claim := mk(9002, fold.TypeOrderClaim, fold.EntryData{Basis: unknown.Hash()})
	st := w.fold(append(append([]ledger.Entry{}, w.entries...), unknown, claim), nil)
	got := st.Order(o.ID)
	if got.State != fold.StateClaimed || got.Holder != claimer || got.Pending != 0 {
		t.Fatalf("order after unknown+claim: state %s holder %s pending %d; want claimed by %s, nothing pending", got.State, got.Holder, got.Pending, claimer)
	}
	// Without the unknown entry, the claim waits for its basis.
	st = w.fold(append(append([]ledger.Entry{}, w.entries...), claim), nil)
	if got := st.Order(o.ID); got.State != fold.StateOpen || got.Pending != 1 {
		t.Fatalf("claim on a missing basis: state %s pending %d; want open with 1 pending", got.State, got.Pending)
	}
}
