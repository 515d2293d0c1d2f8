package fsbus

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Pending sync (docs/design.md §2 rule 6; docs/format.md §11):
// an event whose object has not arrived is pending sync, an object without its event
// is invisible, and a file that has only partly arrived — a segment or an object — is
// waited for, never taken for a forgery.

// pendingWorld is a talkWorld with one order, one message to bob and one ask, all by
// alice, and their object files.
type pendingWorld struct {
	*talkWorld
	order, msg, ask string
	files           map[string][]byte // object path → its bytes
}

func newPendingWorld(t *testing.T) *pendingWorld {
	t.Helper()
	w := &pendingWorld{talkWorld: newTalkWorld(t), files: map[string][]byte{}}
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "fix the login", Body: "see the log"})
	if err != nil {
		t.Fatal(err)
	}
	m := w.send(t, w.alice, "bob", "hello bob")
	a, err := w.alice.AskRaise(AskRaiseOptions{Title: "ship it?", Recommendation: "yes"})
	if err != nil {
		t.Fatal(err)
	}
	w.order, w.msg, w.ask = o.ID, m.ID, a.ID
	for _, id := range []string{o.ID, m.ID, a.ID} {
		p := verify.ObjectPath(w.c.Root, "alice", id)
		w.files[p] = readTestFile(t, p)
	}
	return w
}

// checkPending fails unless the order, message and ask all show as pending sync and no
// entry is ignored.
func (w *pendingWorld) checkPending(t *testing.T, what string) {
	t.Helper()
	w.fresh(t)
	v := w.load(t)
	st := v.State
	if o := st.Order(w.order); o == nil || !o.Missing || o.Title != "(pending sync)" || o.State != fold.StateOpen {
		t.Fatalf("%s: order %+v; want it shown as pending sync", what, o)
	}
	if m := st.Messages[w.msg]; m == nil || !m.Pending || m.Preview != "" {
		t.Fatalf("%s: message %+v; want it pending", what, m)
	}
	if a := st.Ask(w.ask); a == nil || !a.Missing || a.Title != "(pending sync)" {
		t.Fatalf("%s: ask %+v; want it pending sync", what, a)
	}
	if len(st.Ignored) != 0 {
		t.Fatalf("%s: ignored %+v; a file still arriving is no forgery", what, st.Ignored)
	}
	if _, err := w.bob.Claim(w.order, ""); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("%s: claiming a pending order: %v, want retry_needed", what, err)
	}
	if _, err := w.bob.TalkAck([]string{w.msg}); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("%s: acking a pending message: %v, want retry_needed", what, err)
	}
	if _, err := w.master.AskAnswer(w.ask, "approve", NoteOptions{}); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("%s: answering a pending ask: %v, want retry_needed", what, err)
	}
}

// checkArrived fails unless the order, message and ask show their text.
func (w *pendingWorld) checkArrived(t *testing.T, what string) {
	t.Helper()
	st := w.load(t).State
	if o := st.Order(w.order); o == nil || o.Missing || o.Title != "fix the login" {
		t.Fatalf("%s: order %+v", what, o)
	}
	if m := st.Messages[w.msg]; m == nil || m.Pending || m.Preview != "hello bob" {
		t.Fatalf("%s: message %+v", what, m)
	}
	if a := st.Ask(w.ask); a == nil || a.Missing || a.Title != "ship it?" {
		t.Fatalf("%s: ask %+v", what, a)
	}
	if len(st.Ignored) != 0 {
		t.Fatalf("%s: ignored %+v", what, st.Ignored)
	}
}

// TestPendingObjectsTornAndMissing: an object file not arrived, or arrived only in
// part (cut short, its new size filled with NUL bytes, empty), leaves its order,
// message and ask pending sync — shown, writes to them refused with retry_needed,
// nothing ignored — until the whole file arrives. A complete file that says something
// else is still a forgery.
func TestPendingObjectsTornAndMissing(t *testing.T) {
	t.Parallel()
	w := newPendingWorld(t)
	w.checkArrived(t, "written")
	for _, tc := range []struct {
		name string
		part func(b []byte) []byte // nil: the file is absent
	}{
		{"absent", nil},
		{"cut short", func(b []byte) []byte { return b[:len(b)/2] }},
		{"cut after the first byte", func(b []byte) []byte { return b[:1] }},
		{"tail of NULs", func(b []byte) []byte {
			return append(bytes.Clone(b[:len(b)/3]), make([]byte, len(b)-len(b)/3)...)
		}},
		{"all NULs", func(b []byte) []byte { return make([]byte, len(b)) }},
		{"empty", func([]byte) []byte { return nil }},
		{"BOM and half", func(b []byte) []byte { return append([]byte("\xef\xbb\xbf"), b[:len(b)/2]...) }},
	} {
		for p, b := range w.files {
			if tc.part == nil {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			writeTestFile(t, p, tc.part(b))
		}
		w.checkPending(t, tc.name)
		for p, b := range w.files {
			writeTestFile(t, p, b)
		}
		w.checkArrived(t, tc.name+", then arrived")
	}

	// A complete file with other content (or trailing garbage) is no partial arrival.
	for p, b := range w.files {
		writeTestFile(t, p, append(bytes.Clone(b), []byte("{}\n")...))
	}
	st := w.load(t).State
	if st.Order(w.order) != nil || st.Messages[w.msg] != nil || st.Ask(w.ask) != nil || len(st.Ignored) != 3 {
		t.Fatalf("objects with trailing garbage: order %v message %v ask %v ignored %+v; want all three ignored",
			st.Order(w.order), st.Messages[w.msg], st.Ask(w.ask), st.Ignored)
	}
}

// TestObjectsWithoutEventInvisible: machine B receives the object files of an order, a
// message and an ask (and sync tools' temp files) before the ledger lines that name
// them: none of them exists on B (not listed, not found, not an error in verify) until
// the lines arrive; then all do.
func TestObjectsWithoutEventInvisible(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	dirB := filepath.Join(t.TempDir(), "acme")
	if err := propSync(dirB, w.c.Root); err != nil { // B as it was before alice wrote
		t.Fatal(err)
	}
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "early bird"})
	if err != nil {
		t.Fatal(err)
	}
	m := w.send(t, w.alice, "bob", "hi")
	a, err := w.alice.AskRaise(AskRaiseOptions{Title: "ok?", Recommendation: "yes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{o.ID, m.ID, a.ID} {
		p := verify.ObjectPath(w.c.Root, "alice", id)
		rel, _ := filepath.Rel(w.c.Root, p)
		writeTestFile(t, filepath.Join(dirB, rel), readTestFile(t, p))
	}
	// Sync tools' temp files, half-written, beside them: invisible too.
	for _, dir := range []string{"orders", "messages", "asks", "presence"} {
		for _, name := range []string{".syncthing." + o.ID + ".json.tmp", "~syncthing~" + o.ID + ".json.tmp"} {
			writeTestFile(t, filepath.Join(dirB, dir, name), []byte(`{"v":1,"id":"`))
		}
	}
	cB, err := Open(testHome(t), dirB)
	if err != nil {
		t.Fatal(err)
	}
	vB, err := cB.Load()
	if err != nil {
		t.Fatal(err)
	}
	st := vB.State
	if st.Order(o.ID) != nil || st.Messages[m.ID] != nil || st.Ask(a.ID) != nil || len(st.ListOrders(fold.OrderFilter{})) != 0 {
		t.Fatalf("objects without their entries are visible: %v %v %v", st.Order(o.ID), st.Messages[m.ID], st.Ask(a.ID))
	}
	if _, err := st.FindOrder(o.ID); !errs.Is(err, errs.NotFound) {
		t.Fatalf("FindOrder of an order whose entry has not arrived: %v, want not_found", err)
	}
	rep, err := cB.Verify(vB)
	if err != nil || !rep.OK() {
		t.Fatalf("verify with objects ahead of their entries: %+v, %v", rep, err)
	}
	if err := propSync(dirB, w.c.Root); err != nil { // the ledger lines arrive
		t.Fatal(err)
	}
	vB, err = cB.Load()
	if err != nil {
		t.Fatal(err)
	}
	st = vB.State
	if st.Order(o.ID) == nil || st.Order(o.ID).Title != "early bird" || st.Messages[m.ID] == nil || st.Messages[m.ID].Pending ||
		st.Ask(a.ID) == nil || st.Ask(a.ID).Title != "ok?" {
		t.Fatalf("after the entries arrived: %v %v %v", st.Order(o.ID), st.Messages[m.ID], st.Ask(a.ID))
	}
}

// TestForeignTornSegmentWaits: machine B holds bob's segment only up to the middle of
// his submit line (the rest not yet delivered, or NUL bytes where it will be) and
// carol's whole segment, whose review names that submit: B reads bob's complete lines,
// reports the torn tail as not arrived (not a ledger problem), counts the review as
// pending, and never repairs another writer's segment. When the rest arrives the order
// is accepted everywhere.
func TestForeignTornSegmentWaits(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mustOrder(t)(w.bob.Claim(o.ID, ""))
	mustOrder(t)(w.bob.Submit(o.ID, SubmitOptions{Reference: "c1"}))
	mustOrder(t)(w.carol.Review(o.ID, "accept", NoteOptions{}))

	dirB := filepath.Join(t.TempDir(), "acme")
	if err := propSync(dirB, w.c.Root); err != nil {
		t.Fatal(err)
	}
	segB := ledger.SegmentPath(dirB, "bob", w.c.Device)
	full := readTestFile(t, segB)
	lastNL := bytes.LastIndexByte(full[:len(full)-1], '\n') // start of the submit line
	cB, err := Open(testHome(t), dirB)
	if err != nil {
		t.Fatal(err)
	}
	for _, torn := range [][]byte{
		full[:lastNL+1+(len(full)-lastNL)/2],
		append(bytes.Clone(full[:lastNL+1]), make([]byte, len(full)-lastNL-1)...),
	} {
		writeTestFile(t, segB, torn)
		v, err := cB.Load()
		if err != nil {
			t.Fatal(err)
		}
		got := v.State.Order(o.ID)
		if got == nil || got.State != fold.StateClaimed || got.Pending != 1 || got.Holder != "bob" {
			t.Fatalf("with bob's submit half-arrived: %+v; want claimed, 1 pending", got)
		}
		if n := countProblems(v.Snapshot); n != 0 || len(v.Snapshot.Problems) != 1 || v.Snapshot.Problems[0].Kind != ledger.KindTorn {
			t.Fatalf("problems %+v; want only bob's torn tail, not counted", v.Snapshot.Problems)
		}
		if len(v.State.Ignored) != 0 {
			t.Fatalf("ignored %+v", v.State.Ignored)
		}
		if b := readTestFile(t, segB); !bytes.Equal(b, torn) {
			t.Fatal("reading changed another writer's segment")
		}
	}
	writeTestFile(t, segB, full)
	v, err := cB.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.State.Order(o.ID); got.State != fold.StateAccepted || got.Pending != 0 || len(v.Snapshot.Problems) != 0 {
		t.Fatalf("after the rest arrived: %+v, problems %+v", got, v.Snapshot.Problems)
	}
}

func mustOrder(t *testing.T) func(*fold.Order, error) *fold.Order {
	return func(o *fold.Order, err error) *fold.Order {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
}

func readTestFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNotFoundWhileObjectsArrive: an id that matches nothing while object files are
// still arriving answers "not found yet", counting them, and says to retry when the
// sync has finished (its entry may be on its way with them); once they have arrived,
// the plain not_found again.
func TestNotFoundWhileObjectsArrive(t *testing.T) {
	t.Parallel()
	w := newPendingWorld(t)
	for p := range w.files {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	w.fresh(t)
	st := w.load(t).State
	finds := map[string]func(q string) error{
		"order":   func(q string) error { _, err := st.FindOrder(q); return err },
		"message": func(q string) error { _, err := st.TalkShow(q); return err },
		"ask":     func(q string) error { _, err := st.FindAsk(q); return err },
		"handin":  func(q string) error { _, err := st.FindHandin(q); return err },
	}
	for kind, find := range finds {
		q := kind[:1] + "-zzzzzzzzzzzzz"
		err := find(q)
		fe, ok := errs.From(err)
		if !ok || fe.Category != errs.NotFound ||
			fe.Message != kind+` "`+q+`" not found yet: 3 objects are still arriving (sync in progress)` ||
			!strings.HasPrefix(fe.Hint, "retry when the sync tool has finished; ") {
			t.Errorf("%s %s while 3 objects are arriving: %#v", kind, q, err)
		}
	}
	for p, b := range w.files {
		writeTestFile(t, p, b)
	}
	w.fresh(t)
	st = w.load(t).State
	for kind, find := range finds {
		q := kind[:1] + "-zzzzzzzzzzzzz"
		if err := find(q); !errs.Is(err, errs.NotFound) || errOf(err).Message != "no "+kind+` "`+q+`"` {
			t.Errorf("%s %s once arrived: %v", kind, q, err)
		}
	}
}
