package fsbus

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// forkInsideBound plays a fork inside a grant's bounds: after the owner's revocation of alice,
// her demotion to worker or her retirement (end; bounds {dev: N}), a line signed by alice at seq N with the original prev — a claim
// of bob's order, its hlc varied until its hash is lower than the real seq N's. With
// inPlace it replaces alice's last line; otherwise it is a conflict copy beside the
// segment. It returns the forged entry's hash and bob's order id.
func forkInsideBound(t *testing.T, w *advWorld, inPlace bool, end string) (string, string) {
	t.Helper()
	o, err := w.bob.NewOrder(NewOrderOptions{Title: "Rotate the deploy key"})
	if err != nil {
		t.Fatal(err)
	}
	switch end {
	case "demote":
		_, err = w.master.Grant(GrantOptions{Agent: "alice", Level: "worker"})
	case "retire":
		_, err = w.master.Retire("alice")
	default:
		_, err = w.master.Revoke("alice")
	}
	if err != nil {
		t.Fatal(err)
	}
	v := mustLoad(t, reopen(t, w.c))
	real := v.chainTip("alice", w.alice.Device)
	for i := 0; ; i++ {
		e := ledger.Entry{V: 1, Writer: "alice", Device: w.alice.Device, Seq: real.Seq, Prev: real.Prev,
			HLC: fmt.Sprintf("%s/%04d", real.HLC[:strings.IndexByte(real.HLC, '/')], i), Type: fold.TypeOrderClaim, Ref: o.ID,
			Data: mustJSON(fold.EntryData{Basis: o.Head})}
		if err := e.Sign(w.alice.Signer, "acme"); err != nil {
			t.Fatal(err)
		}
		line, _ := e.Canonical()
		p, err := ledger.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if p.Hash() >= real.Hash() {
			continue
		}
		if inPlace {
			raw := bytes.TrimSuffix(mustReadFile(t, w.aliceSeg), []byte("\n"))
			raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
			writeTestFile(t, w.aliceSeg, append(append(raw, line...), '\n'))
		} else {
			copyPath := strings.TrimSuffix(w.aliceSeg, ".jsonl") + ".sync-conflict-20261130-010101-ABCDEFG.jsonl"
			writeTestFile(t, copyPath, append(line, '\n'))
		}
		return p.Hash(), o.ID
	}
}

// TestForkInsideBoundCountsNothing (docs/format.md §13 "Attested bounds"): a revoked
// (or demoted) key that forks or rewrites its own segment inside its grant's bounds
// gains nothing: the grant names the hash of the last record it covers, and a record at
// or below the bound that is not that record or its past counts for nothing, listed
// with its reason.
func TestForkInsideBoundCountsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		inPlace bool
		end     string
	}{{false, "revoke"}, {true, "revoke"}, {false, "demote"}, {false, "retire"}} {
		inPlace := tc.inPlace
		t.Run(fmt.Sprintf("%s in place %v", tc.end, inPlace), func(t *testing.T) {
			w := newAdvWorld(t)
			forged, order := forkInsideBound(t, w, inPlace, tc.end)
			r := w.report(t)
			st := r.v.State
			if o := st.Order(order); o == nil || o.State != fold.StateOpen || o.Holder != "" {
				t.Fatalf("the forged claim counts: %+v", o)
			}
			if st.Counts(forged) {
				t.Error("the forged record counts")
			}
			reason := "nor one before it"
			if inPlace {
				reason = "no longer holds the record"
			}
			r.listed(t, "ignored", reason, "")
			// Records before the fork are the attested record's past: they still count
			// when the attested record is at hand (in a fork's losing branch).
			if a := st.Order(w.order); !inPlace && (a == nil || a.Author != "alice") {
				t.Errorf("alice's order before the fork no longer counts: %+v", a)
			}
		})
	}
	t.Run("the revocation names the hash of the last record", func(t *testing.T) {
		w := newAdvWorld(t)
		tip := mustLoad(t, reopen(t, w.c)).chainTip("alice", w.alice.Device)
		if _, err := w.master.Revoke("alice"); err != nil {
			t.Fatal(err)
		}
		v := mustLoad(t, reopen(t, w.c))
		d, _ := fold.DecodeData(v.chainTip(fold.MasterWriter, w.master.Device))
		if d.Bounds[w.alice.Device] != tip.Seq || d.BoundHashes[w.alice.Device] != tip.Hash() {
			t.Errorf("revoke data: bounds %v bound_hashes %v, want %d %s", d.Bounds, d.BoundHashes, tip.Seq, tip.Hash())
		}
	})
}
