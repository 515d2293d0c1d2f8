package fsbus

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/ledger"
)

// forgeRival plays a rival-create takeover: forger rewrites the object file of id with
// itself as author and a new title, signed with its own key, and appends to its own
// segment a creating entry of id (typ) naming the new object, its hlc varied until its
// hash is lower than the real create's. It returns the forged entry's hash.
func forgeRival(t *testing.T, w *advWorld, forger *Session, typ, id string) string {
	t.Helper()
	objPath := verify.ObjectPath(w.c.Root, "alice", id)
	var obj map[string]any
	if err := json.Unmarshal(mustReadFile(t, objPath), &obj); err != nil {
		t.Fatal(err)
	}
	obj["author"], obj["device"] = forger.Name, forger.Device
	for _, f := range []string{"title", "body"} {
		if _, ok := obj[f]; ok {
			obj[f] = "forged by " + forger.Name
		}
	}
	delete(obj, "sig")
	c, err := ledger.Canonical(obj)
	if err != nil {
		t.Fatal(err)
	}
	if obj["sig"], err = ledger.SignDomain(forger.Signer, ledger.ObjectDomain, "acme", c); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(obj)
	writeTestFile(t, objPath, b)
	_, objHash, err := verify.ReadObject(objPath)
	if err != nil {
		t.Fatal(err)
	}

	v := mustLoad(t, reopen(t, w.c))
	var real *ledger.Entry
	for i := range v.Snapshot.Entries {
		if e := &v.Snapshot.Entries[i]; e.Type == typ && e.Ref == id && e.Writer == "alice" {
			real = e
		}
	}
	if real == nil {
		t.Fatalf("no %s of %s by alice", typ, id)
	}
	var data map[string]any
	if err := json.Unmarshal(real.Data, &data); err != nil {
		t.Fatal(err)
	}
	data["object"] = objHash
	return appendSigned(t, w, forger, typ, id, data, func(h string) bool { return h < real.Hash() })
}

// appendSigned appends to s's own segment an entry of typ on ref with data, signed
// with s's key, chained to its tip, its hlc varied until want(hash) holds; it returns
// the entry's hash.
func appendSigned(t *testing.T, w *advWorld, s *Session, typ, ref string, data map[string]any, want func(hash string) bool) string {
	t.Helper()
	v := mustLoad(t, reopen(t, w.c))
	var tip *ledger.Entry
	for i := range v.Snapshot.Entries {
		if e := &v.Snapshot.Entries[i]; e.Writer == s.Name && e.Device == s.Device && (tip == nil || e.Seq > tip.Seq) {
			tip = e
		}
	}
	if tip == nil {
		t.Fatalf("no entry of %s", s.Name)
	}
	for i := 0; ; i++ {
		e := ledger.Entry{V: 1, Writer: s.Name, Device: s.Device, Seq: tip.Seq + 1, Prev: tip.Hash(),
			HLC: fmt.Sprintf("%s/%04d", tip.HLC[:strings.IndexByte(tip.HLC, '/')], i), Type: typ, Ref: ref, Data: mustJSON(data)}
		if err := e.Sign(s.Signer, "acme"); err != nil {
			t.Fatal(err)
		}
		line, _ := e.Canonical()
		p, err := ledger.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if want(p.Hash()) {
			seg := ledger.SegmentPath(w.c.Root, s.Name, s.Device)
			writeTestFile(t, seg, append(append(mustReadFile(t, seg), line...), '\n'))
			return p.Hash()
		}
	}
}

// rivalListed checks verify and doctor report the rival create of id as an error
// naming both writers, with a fix.
func rivalListed(t *testing.T, r advReport, id string) {
	t.Helper()
	found := false
	for _, c := range r.vr.Rivals {
		if c.Ref == id && strings.Join(c.Involved, ",") == "alice,bob" {
			found = true
		}
	}
	if !found || r.vr.OK() || r.vr.Fixes[fold.KindRival] == "" {
		t.Errorf("verify does not report the rival create of %s with a fix: %+v", id, r.vr.Rivals)
	}
	for _, f := range r.vr.Findings {
		if f.Check == fold.CheckRival && f.Level == verify.LevelError && f.Path == id && strings.Contains(f.Detail, "alice") && strings.Contains(f.Detail, "bob") && f.Fix != "" {
			return
		}
	}
	t.Errorf("verify has no rival_create error for %s naming alice and bob: %+v", id, r.vr.Findings)
}

// TestRivalCreateTakeover (docs/format.md §12 "Rival creates"): a seated member that
// re-creates another author's order, message or ask under its id, with a lower entry
// hash, does not take it over: a chain that got further wins, a revoked forger loses
// every tie, and verify and doctor report the forgery as an error naming both writers.
func TestRivalCreateTakeover(t *testing.T) {
	t.Parallel()
	t.Run("an accepted order beats a fresh forged create", func(t *testing.T) {
		w := newAdvWorld(t)
		carol := seatCarol(t, w)
		if _, err := carol.Claim(w.order, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := carol.Submit(w.order, SubmitOptions{Reference: "main", Note: "done"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.alice.Review(w.order, "accept", NoteOptions{}); err != nil {
			t.Fatal(err)
		}
		forged := forgeRival(t, w, w.bob, fold.TypeOrderCreate, w.order)
		r := w.report(t)
		o := r.v.State.Order(w.order)
		if o == nil || o.Author != "alice" || o.State != fold.StateAccepted || len(o.History) != 4 || o.History[1].By != "carol" {
			t.Fatalf("the forged create took the order over: %+v", o)
		}
		if len(o.Contests) == 0 || !o.Contests[0].Rival || o.Contests[0].Losers[0].Hash != forged {
			t.Errorf("order does not list the rival create: %+v", o.Contests)
		}
		r.listed(t, "ignored", "rival order.create", "")
		rivalListed(t, r, w.order)
	})

	t.Run("the forger's own claim and submit do not out-run another writer's claim", func(t *testing.T) {
		w := newAdvWorld(t)
		carol := seatCarol(t, w)
		if _, err := carol.Claim(w.order, ""); err != nil {
			t.Fatal(err)
		}
		forged := forgeRival(t, w, w.bob, fold.TypeOrderCreate, w.order)
		anyHash := func(string) bool { return true }
		claim := appendSigned(t, w, w.bob, fold.TypeOrderClaim, w.order, map[string]any{"basis": forged}, anyHash)
		appendSigned(t, w, w.bob, fold.TypeOrderSubmit, w.order, map[string]any{"basis": claim, "reference": "main"}, anyHash)
		r := w.report(t)
		if o := r.v.State.Order(w.order); o == nil || o.Author != "alice" || o.State != fold.StateClaimed || o.Holder != "carol" {
			t.Fatalf("the forger's own chain took the order over: %+v", o)
		}
		r.listed(t, "ignored", "built on an entry that does not count", "")
		rivalListed(t, r, w.order)
	})

	t.Run("revoking the forger hands back order, message and ask", func(t *testing.T) {
		w := newAdvWorld(t)
		forgeRival(t, w, w.bob, fold.TypeOrderCreate, w.order)
		forgeRival(t, w, w.bob, fold.TypeMsgPost, w.msg)
		forgeRival(t, w, w.bob, fold.TypeAskRaise, w.ask)
		r := w.report(t)
		// Nobody worked on them: the tie goes to the lower hash (the forger ground its
		// hash), and every machine reports the forgery as an error.
		for _, id := range []string{w.order, w.msg, w.ask} {
			rivalListed(t, r, id)
		}
		if _, err := w.master.Revoke("bob"); err != nil {
			t.Fatal(err)
		}
		r = w.report(t)
		st := r.v.State
		if o := st.Order(w.order); o == nil || o.Author != "alice" || o.State != fold.StateOpen {
			t.Errorf("order not back with alice after revoking bob: %+v", o)
		}
		if m := st.Messages[w.msg]; m == nil || m.From != "alice" {
			t.Errorf("message not back with alice after revoking bob: %+v", m)
		}
		if a := st.Ask(w.ask); a == nil || a.Author != "alice" || a.State != fold.AskPending {
			t.Errorf("ask not back with alice after revoking bob: %+v", a)
		}
		for _, id := range []string{w.order, w.msg, w.ask} {
			rivalListed(t, r, id)
		}
	})
}

// seatCarol joins and seats a third member, carol.
func seatCarol(t *testing.T, w *advWorld) *Session {
	t.Helper()
	if _, err := Join(w.c, "carol", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.master.Grant(GrantOptions{Agent: "carol", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	carol, err := w.c.As("carol")
	if err != nil {
		t.Fatal(err)
	}
	return carol
}
