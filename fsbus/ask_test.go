package fsbus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// askWorld is a channel with the owner, alice (member) and wendy (worker).
type askWorld struct {
	c                   *Channel
	master, alice, wend *Session
}

func newAskWorld(t *testing.T) *askWorld {
	t.Helper()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	w := &askWorld{c: c, master: m}
	for _, a := range []struct{ name, level string }{{"alice", "member"}, {"wendy", "worker"}} {
		if _, err := Join(c, a.name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Grant(GrantOptions{Agent: a.name, Level: a.level}); err != nil {
			t.Fatal(err)
		}
	}
	if w.alice, err = c.As("alice"); err != nil {
		t.Fatal(err)
	}
	if w.wend, err = c.As("wendy"); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *askWorld) load(t *testing.T) *View {
	t.Helper()
	v, err := reopened(t, w.c).Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// raise raises a plain ask as alice.
func (w *askWorld) raise(t *testing.T, title string) *fold.Ask {
	t.Helper()
	a, err := w.alice.AskRaise(AskRaiseOptions{Title: title, Recommendation: "Do it.", Reasoning: "Because."})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// appendRaw appends an entry to s's own segment, bypassing every write-side check:
// what a modified or older binary could write.
func appendRaw(t *testing.T, s *Session, typ, ref string, d fold.EntryData) ledger.Entry {
	t.Helper()
	e, err := s.Ledger.Append(s.Name, s.Device, ledger.Draft{Type: typ, Ref: ref, Data: mustJSON(d)}, s.Signer, ledger.HLC{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// snapshotFiles lists every file under dir with its size: compare two to show nothing
// was written.
func snapshotFiles(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(p + " " + ledger.HashBytes(raw) + "\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func hasIgnored(st *fold.State, hash, reason string) bool {
	for _, ig := range st.Ignored {
		if ig.Hash == hash && strings.Contains(ig.Reason, reason) {
			return true
		}
	}
	return false
}

// TestAskLoop: an agent raises an ask, the owner approves it with a note; every field
// of the view is filled from the signed object and the master's answer.
func TestAskLoop(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	a, err := w.alice.AskRaise(AskRaiseOptions{Title: "  Drop the legacy table?  ", Recommendation: "Yes, after a backup.", Reasoning: "Nothing reads it since v2."})
	if err != nil {
		t.Fatal(err)
	}
	if !fold.ValidID(a.ID) || !strings.HasPrefix(a.ID, fold.PrefixAsk) || a.State != fold.AskPending || a.Author != "alice" ||
		a.Title != "Drop the legacy table?" || a.Recommendation != "Yes, after a backup." || a.Reasoning != "Nothing reads it since v2." || a.Raised == "" {
		t.Fatalf("raised ask: %+v", a)
	}
	if _, err := os.Stat(filepath.Join(w.c.Root, "asks", a.ID+".json")); err != nil {
		t.Fatalf("ask object not published: %v", err)
	}
	if p := w.load(t).State.PendingAsks(); len(p) != 1 || p[0].ID != a.ID {
		t.Fatalf("pending asks: %+v", p)
	}
	got, err := w.master.AskAnswer(a.ID[:6], fold.VerdictApprove, NoteOptions{Note: "  go ahead  "})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != fold.AskApproved || got.Note != "go ahead" || got.AnsweredBy != fold.MasterWriter || got.Answered <= got.Raised {
		t.Fatalf("answered ask: %+v", got)
	}
	st := w.load(t).State
	if p := st.PendingAsks(); len(p) != 0 {
		t.Fatalf("pending after the answer: %+v", p)
	}
	if f, err := st.FindAsk(a.ID); err != nil || f.State != fold.AskApproved || f.Note != "go ahead" {
		t.Fatalf("FindAsk: %+v %v", f, err)
	}
	if len(st.Ignored) != 0 {
		t.Fatalf("ignored: %+v", st.Ignored)
	}
	// Verdicts map to states; "send-back" is accepted for send_back.
	for verdict, want := range map[string]string{fold.VerdictReject: string(fold.AskRejected), "send-back": string(fold.AskSentBack), fold.VerdictSendBack: string(fold.AskSentBack)} {
		b := w.raise(t, "another "+verdict)
		got, err := w.master.AskAnswer(b.ID, verdict, NoteOptions{})
		if err != nil || string(got.State) != want {
			t.Fatalf("%s: %+v %v", verdict, got, err)
		}
	}
}

// TestAskWriteRefusals: every refusal has its category and writes nothing.
func TestAskWriteRefusals(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	a := w.raise(t, "Pending one")
	done := w.raise(t, "Answered one")
	if _, err := w.master.AskAnswer(done.ID, fold.VerdictReject, NoteOptions{Note: "no"}); err != nil {
		t.Fatal(err)
	}
	before := snapshotFiles(t, w.c.Root)
	long := strings.Repeat("é", MaxAskText+1)
	for _, tc := range []struct {
		name string
		cat  errs.Category
		msg  string
		call func() error
	}{
		{"agent answers", errs.Denied, "alice may not answer asks", func() error { _, err := w.alice.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{}); return err }},
		{"worker raises", errs.Denied, "ask.raise needs level member; wendy has level worker", func() error {
			_, err := w.wend.AskRaise(AskRaiseOptions{Title: "t", Recommendation: "r"})
			return err
		}},
		{"long reasoning", errs.Invalid, "reasoning is 1201 characters; the limit is 1200", func() error {
			_, err := w.alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: "r", Reasoning: long})
			return err
		}},
		{"long recommendation", errs.Invalid, "recommendation is 1201 characters", func() error {
			_, err := w.alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: long})
			return err
		}},
		{"no recommendation", errs.Invalid, "needs a recommendation", func() error {
			_, err := w.alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: "  "})
			return err
		}},
		{"empty title", errs.Invalid, "empty title", func() error {
			_, err := w.alice.AskRaise(AskRaiseOptions{Title: " ", Recommendation: "r"})
			return err
		}},
		{"two-line title", errs.Invalid, "multi-line", func() error {
			_, err := w.alice.AskRaise(AskRaiseOptions{Title: "a\nb", Recommendation: "r"})
			return err
		}},
		{"long title", errs.Invalid, "ask title is 201 characters; the limit is 200", func() error {
			_, err := w.alice.AskRaise(AskRaiseOptions{Title: strings.Repeat("x", MaxAskTitle+1), Recommendation: "r"})
			return err
		}},
		{"answered twice", errs.Conflict, "is already rejected (by master", func() error { _, err := w.master.AskAnswer(done.ID, fold.VerdictApprove, NoteOptions{}); return err }},
		{"bad verdict", errs.Invalid, "unknown verdict", func() error { _, err := w.master.AskAnswer(a.ID, "maybe", NoteOptions{}); return err }},
		{"long note", errs.Invalid, "note is", func() error {
			_, err := w.master.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{Note: strings.Repeat("n", MaxNote+1)})
			return err
		}},
		{"unknown id", errs.NotFound, `no ask "a-zzzzzzzzzzzzz"`, func() error {
			_, err := w.master.AskAnswer("a-zzzzzzzzzzzzz", fold.VerdictApprove, NoteOptions{})
			return err
		}},
		{"ambiguous prefix", errs.Invalid, "is ambiguous (2 candidates)", func() error { _, err := w.master.AskAnswer("a-", fold.VerdictApprove, NoteOptions{}); return err }},
	} {
		err := tc.call()
		if !errs.Is(err, tc.cat) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %s containing %q", tc.name, err, tc.cat, tc.msg)
		}
		if fe, ok := errs.From(err); ok && fe.Hint == "" && tc.cat != errs.Invalid {
			t.Errorf("%s: no hint", tc.name)
		}
	}
	if after := snapshotFiles(t, w.c.Root); after != before {
		t.Fatalf("a refusal wrote to the channel:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// 1,200 characters of two bytes each are within the limit (characters, not bytes).
	if _, err := w.alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: strings.Repeat("é", MaxAskText), Reasoning: strings.Repeat("é", MaxAskText)}); err != nil {
		t.Fatalf("1,200 characters refused: %v", err)
	}
}

// TestAskFoldOnlyMasterAnswers: an ask.answer signed by an agent (written around the
// write-side check) is ignored by the fold with the level reason; the ask stays
// pending and the owner can still answer it.
func TestAskFoldOnlyMasterAnswers(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	a := w.raise(t, "Rotate the deploy key?")
	forged := appendRaw(t, w.alice, fold.TypeAskAnswer, a.ID, fold.EntryData{Basis: a.Head, Verdict: fold.VerdictApprove, Note: "self-approved"})
	st := w.load(t).State
	if got := st.Ask(a.ID); got.State != fold.AskPending || got.Note != "" {
		t.Fatalf("forged answer changed the ask: %+v", got)
	}
	if !hasIgnored(st, forged.Hash(), "ask.answer needs level master; alice has level member") {
		t.Fatalf("forged answer not listed as ignored: %+v", st.Ignored)
	}
	got, err := w.master.AskAnswer(a.ID, fold.VerdictReject, NoteOptions{Note: "not now"})
	if err != nil || got.State != fold.AskRejected || got.Note != "not now" {
		t.Fatalf("owner's answer after a forged one: %+v %v", got, err)
	}
}

// TestAskFoldAnsweredTwiceIgnored: a second answer built on the first (written around
// the write-side check) is not allowed from an answered state: ignored, the first
// verdict stands.
func TestAskFoldAnsweredTwiceIgnored(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	a := w.raise(t, "Merge the branch?")
	first, err := w.master.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{Note: "yes"})
	if err != nil {
		t.Fatal(err)
	}
	second := appendRaw(t, w.master, fold.TypeAskAnswer, a.ID, fold.EntryData{Basis: first.Head, Verdict: fold.VerdictReject, Note: "changed my mind"})
	st := w.load(t).State
	if got := st.Ask(a.ID); got.State != fold.AskApproved || got.Note != "yes" || got.Head != first.Head {
		t.Fatalf("second answer changed the ask: %+v", got)
	}
	if !hasIgnored(st, second.Hash(), "not allowed: ask is already approved") {
		t.Fatalf("second answer not listed as ignored: %+v", st.Ignored)
	}
}

// TestAskPendingAndEditedObject: a raise whose object has not arrived shows the ask as
// pending sync and refuses an answer with retry_needed; an edited object makes the
// raise count for nothing, listed with the reason.
func TestAskPendingAndEditedObject(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	a := w.raise(t, "Upgrade the database?")
	p := verify.ObjectPath(w.c.Root, "alice", a.ID)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	st := w.load(t).State
	got := st.Ask(a.ID)
	if got == nil || !got.Missing || got.Title != "(pending sync)" || got.State != fold.AskPending {
		t.Fatalf("ask without its object: %+v", got)
	}
	if pa := st.PendingAsks(); len(pa) != 1 || pa[0].ID != a.ID {
		t.Fatalf("pending asks: %+v", pa)
	}
	if _, err := w.master.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{}); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("answer before the object arrived: %v", err)
	}
	// An editor changes the title (still valid JSON): the raise no longer counts.
	edited := strings.Replace(string(raw), "Upgrade the database?", "Drop the database?", 1)
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	st = w.load(t).State
	if st.Ask(a.ID) != nil {
		t.Fatalf("edited ask still shown: %+v", st.Ask(a.ID))
	}
	if !hasIgnored(st, a.Head, "ask object differs from the hash its ask.raise names") {
		t.Fatalf("edited ask not listed: %+v", st.Ignored)
	}
	if _, err := st.FindAsk(a.ID); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "does not count") {
		t.Fatalf("FindAsk of an edited ask: %v", err)
	}
	// Restored, it counts again: nothing was lost.
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := w.load(t).State.Ask(a.ID); got == nil || got.Title != "Upgrade the database?" {
		t.Fatalf("restored ask: %+v", got)
	}
}

// TestAskIdempotency: a replayed raise or answer with the same key writes nothing and
// returns the ask; the same key with other arguments is a conflict.
func TestAskIdempotency(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	opt := AskRaiseOptions{Title: "Ship it?", Recommendation: "Yes.", Key: "k1"}
	a, err := w.alice.AskRaise(opt)
	if err != nil {
		t.Fatal(err)
	}
	n := w.load(t).State.Entries
	b, err := w.alice.AskRaise(opt)
	if err != nil || b.ID != a.ID {
		t.Fatalf("replayed raise: %+v %v", b, err)
	}
	opt.Recommendation = "No."
	if _, err := w.alice.AskRaise(opt); !errs.Is(err, errs.Conflict) {
		t.Fatalf("same key, other arguments: %v", err)
	}
	if _, err := w.master.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{Note: "ok", Key: "k2"}); err != nil {
		t.Fatal(err)
	}
	// A retry of the same answer with its key is a replay, not "already answered".
	if got, err := w.master.AskAnswer(a.ID[:5], fold.VerdictApprove, NoteOptions{Note: "ok", Key: "k2"}); err != nil || got.State != fold.AskApproved {
		t.Fatalf("replayed answer: %+v %v", got, err)
	}
	if _, err := w.master.AskAnswer(a.ID, fold.VerdictReject, NoteOptions{Note: "ok", Key: "k2"}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("answer key reused for another verdict: %v", err)
	}
	if got := w.load(t).State.Entries; got != n+1 {
		t.Fatalf("entries: %d, want %d (one answer)", got, n+1)
	}
}

// TestAskUnknownTypeHoldsChainPlace: an ask.* entry of a type this binary does not know,
// carrying a basis, takes its place in the ask's chain; the owner's answer chains after
// it and counts (docs/format.md §17).
func TestAskUnknownTypeHoldsChainPlace(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	a := w.raise(t, "Buy the domain?")
	unk := appendRaw(t, w.alice, "ask.amend", a.ID, fold.EntryData{Basis: a.Head, Note: "from a newer binary"})
	got, err := w.master.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{})
	if err != nil || got.State != fold.AskApproved || got.Pending != 0 {
		t.Fatalf("answer after an unknown entry: %+v %v", got, err)
	}
	st := w.load(t).State
	if !st.Counts(unk.Hash()) || len(st.Ignored) != 0 {
		t.Fatalf("unknown entry: counts=%v ignored=%+v", st.Counts(unk.Hash()), st.Ignored)
	}
}

// TestAskListsAndFind: AsksBy is newest first, PendingAsks oldest first; FindAsk
// resolves prefixes and lists candidates of an ambiguous one.
func TestAskListsAndFind(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	st := w.load(t).State
	if l := st.AsksBy("alice", true); l == nil || len(l) != 0 {
		t.Fatalf("AsksBy on an empty channel: %#v", l)
	}
	if l := st.PendingAsks(); l == nil || len(l) != 0 {
		t.Fatalf("PendingAsks on an empty channel: %#v", l)
	}
	a1, a2, a3 := w.raise(t, "one"), w.raise(t, "two"), w.raise(t, "three")
	if _, err := w.master.AskAnswer(a2.ID, fold.VerdictReject, NoteOptions{}); err != nil {
		t.Fatal(err)
	}
	st = w.load(t).State
	ids := func(l []*fold.Ask) string {
		var s []string
		for _, a := range l {
			s = append(s, a.ID)
		}
		return strings.Join(s, ",")
	}
	if got, want := ids(st.AsksBy("alice", true)), strings.Join([]string{a3.ID, a2.ID, a1.ID}, ","); got != want {
		t.Fatalf("AsksBy = %s, want %s", got, want)
	}
	if got, want := ids(st.PendingAsks()), a1.ID+","+a3.ID; got != want {
		t.Fatalf("PendingAsks = %s, want %s", got, want)
	}
	if got := st.AsksBy("wendy", true); len(got) != 0 {
		t.Fatalf("AsksBy(wendy) = %+v", got)
	}
	if f, err := st.FindAsk(strings.ToUpper(a1.ID[2:])); err != nil || f.ID != a1.ID {
		t.Fatalf("FindAsk by bare upper-case id: %+v %v", f, err)
	}
	_, err := st.FindAsk("a-")
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), a1.ID) || !strings.Contains(err.Error(), a3.ID) {
		t.Fatalf("ambiguous: %v", err)
	}
	_, err = st.FindAsk("a-zzzz")
	if fe, ok := errs.From(err); !ok || fe.Category != errs.NotFound || !strings.Contains(fe.Hint, "ferry ask status") {
		t.Fatalf("not found: %#v", err)
	}
}

// TestAskRaceTwoOwnerMachines: the owner answers one ask from two machines at once
// (both answers name the raise as basis). Once the folders meet, both machines fold the
// same single verdict — the answer with the lower entry hash — and report the contest
// to the asker and the owner, listing the losing answer; a further answer is refused.
func TestAskRaceTwoOwnerMachines(t *testing.T) {
	t.Parallel()
	hA, hB := testHome(t), testHome(t)
	dirA := filepath.Join(t.TempDir(), "acme")
	cA, err := Init(hA, InitOptions{Dir: dirA, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(cA, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	mA, _ := cA.As(fold.MasterWriter)
	if _, err := mA.Grant(GrantOptions{Agent: "alice", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	alice, _ := cA.As("alice")
	a, err := alice.AskRaise(AskRaiseOptions{Title: "Release v1?", Recommendation: "Yes."})
	if err != nil {
		t.Fatal(err)
	}
	// Machine B gets the folder and the owner's key (its own device, its own segment).
	dirB := filepath.Join(t.TempDir(), "acme")
	copyTree(t, dirA, dirB)
	kb, _ := os.ReadFile(hA.keyPath("acme", fold.MasterWriter))
	if err := os.MkdirAll(filepath.Dir(hB.keyPath("acme", fold.MasterWriter)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hB.keyPath("acme", fold.MasterWriter), kb, 0o600); err != nil {
		t.Fatal(err)
	}
	cB, err := Open(hB, dirB)
	if err != nil {
		t.Fatal(err)
	}
	mB, _ := cB.As(fold.MasterWriter)
	// Partitioned: A approves, B rejects; each succeeds locally.
	ansA, err := mA.AskAnswer(a.ID, fold.VerdictApprove, NoteOptions{Note: "from the laptop"})
	if err != nil {
		t.Fatal(err)
	}
	ansB, err := mB.AskAnswer(a.ID, fold.VerdictReject, NoteOptions{Note: "from the desktop"})
	if err != nil {
		t.Fatal(err)
	}
	winner, loser := ansA, ansB
	if ansB.Head < ansA.Head {
		winner, loser = ansB, ansA
	}
	// The folders meet both ways.
	copyTree(t, filepath.Join(dirB, "ledger"), filepath.Join(dirA, "ledger"))
	copyTree(t, filepath.Join(dirA, "ledger"), filepath.Join(dirB, "ledger"))
	for _, c := range []*Channel{cA, cB} {
		v, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		got := v.State.Ask(a.ID)
		if got.State != winner.State || got.Note != winner.Note || got.Head != winner.Head {
			t.Fatalf("device %s: ask %s %q head %s; want the lower-hash answer %s %q", c.Device, got.State, got.Note, got.Head, winner.State, winner.Note)
		}
		if len(got.Contests) != 1 || len(got.Superseded) != 1 {
			t.Fatalf("device %s: contests %+v superseded %+v", c.Device, got.Contests, got.Superseded)
		}
		ct := got.Contests[0]
		if ct.Ref != a.ID || ct.Basis != a.Head || ct.Winner.Hash != winner.Head || len(ct.Losers) != 1 || ct.Losers[0].Hash != loser.Head ||
			strings.Join(ct.Involved, ",") != "alice,master" {
			t.Fatalf("device %s: contest %+v", c.Device, ct)
		}
		s := got.Superseded[0]
		if st, _ := fold.AskVerdictState(s.Verdict); s.Hash != loser.Head || s.Note != loser.Note || st != loser.State {
			t.Fatalf("device %s: superseded %+v, want the losing answer", c.Device, s)
		}
		found := false
		for _, sc := range v.State.Contested {
			found = found || sc.Ref == a.ID
		}
		if !found {
			t.Fatalf("device %s: contest not in State.Contested", c.Device)
		}
	}
	if _, err := mB.AskAnswer(a.ID, fold.VerdictSendBack, NoteOptions{}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("answer after the contest: %v", err)
	}
}
