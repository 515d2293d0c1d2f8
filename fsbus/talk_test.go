package fsbus

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// talkWorld is a channel with alice, bob and carol seated as members and wendy as a
// worker; dave joined but is not seated.
type talkWorld struct {
	c                        *Channel
	alice, bob, carol, wendy *Session
	dave, master             *Session
}

func newTalkWorld(t *testing.T) *talkWorld {
	t.Helper()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	w := &talkWorld{c: c}
	for _, n := range []string{"alice", "bob", "carol", "wendy", "dave"} {
		if _, err := Join(c, n, "test"); err != nil {
			t.Fatal(err)
		}
	}
	w.master = w.as(t, fold.MasterWriter)
	for n, lvl := range map[string]string{"alice": "member", "bob": "member", "carol": "member", "wendy": "worker"} {
		if _, err := w.master.Grant(GrantOptions{Agent: n, Level: lvl}); err != nil {
			t.Fatal(err)
		}
	}
	w.alice, w.bob, w.carol, w.wendy, w.dave = w.as(t, "alice"), w.as(t, "bob"), w.as(t, "carol"), w.as(t, "wendy"), w.as(t, "dave")
	return w
}

// fresh reopens the channel and the sessions, as the next ferry commands would: what a
// test did to the files behind the channel's back (an object taken away, as if it had
// not arrived yet) is then read as a machine seeing it for the first time. A process
// that had already folded the object keeps what it verified (fold_incr.go).
func (w *talkWorld) fresh(t *testing.T) {
	t.Helper()
	w.c = reopened(t, w.c)
	w.master = w.as(t, fold.MasterWriter)
	w.alice, w.bob, w.carol, w.wendy, w.dave = w.as(t, "alice"), w.as(t, "bob"), w.as(t, "carol"), w.as(t, "wendy"), w.as(t, "dave")
}

func (w *talkWorld) as(t *testing.T, name string) *Session {
	t.Helper()
	s, err := w.c.As(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (w *talkWorld) load(t *testing.T) *View {
	t.Helper()
	v, err := reopened(t, w.c).Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (w *talkWorld) send(t *testing.T, from *Session, to, body string) *fold.Message {
	t.Helper()
	m, err := from.TalkSend(TalkSendOptions{To: to, Body: body})
	if err != nil {
		t.Fatalf("%s → %s: %v", from.Name, to, err)
	}
	return m
}

func (w *talkWorld) read(t *testing.T, s *Session, opt TalkReadOptions) *TalkReadResult {
	t.Helper()
	r, err := s.TalkRead(opt)
	if err != nil {
		t.Fatalf("%s reads: %v", s.Name, err)
	}
	return r
}

// entries counts the entries of the channel.
func (w *talkWorld) entries(t *testing.T) int {
	t.Helper()
	return len(w.load(t).Snapshot.Entries)
}

// rawAck appends a correctly signed msg.ack by s naming ids, bypassing every write-side
// check: what a modified binary could write.
func (w *talkWorld) rawAck(t *testing.T, s *Session, ids ...string) ledger.Entry {
	t.Helper()
	v := w.load(t)
	e, err := s.Ledger.Append(s.Name, s.Device, ledger.Draft{Type: fold.TypeMsgAck, Data: mustJSON(fold.EntryData{IDs: ids})}, s.Signer, s.observedHLC(v))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func ids(ms []fold.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func ignoredFor(st *fold.State, hash string) []fold.Ignored {
	var out []fold.Ignored
	for _, ig := range st.Ignored {
		if ig.Hash == hash {
			out = append(out, ig)
		}
	}
	return out
}

// TestTalkReceiptsOnlyFromAddressees: a read receipt counts only from an addressee of
// the message (not an ack by someone the message was not for), id by id.
func TestTalkReceiptsOnlyFromAddressees(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	toBob := w.send(t, w.alice, "bob", "bob: please look at the build")
	toAll := w.send(t, w.alice, fold.ToAll, "everyone: the build is green")
	toMaster := w.send(t, w.bob, fold.ToMaster, "owner: may I push?")
	if !slices.Equal(toBob.ReadBy, []string{}) || toBob.From != "alice" || toBob.To != "bob" || toBob.Preview != "bob: please look at the build" || toBob.Bytes != 29 {
		t.Fatalf("sent message view: %+v", toBob)
	}

	r := w.read(t, w.bob, TalkReadOptions{})
	if got := ids(r.Messages); !slices.Equal(got, []string{toBob.ID, toAll.ID}) || !slices.Equal(r.Acked, got) {
		t.Fatalf("bob reads %v, acked %v", got, r.Acked)
	}
	if !slices.Equal(r.Messages[0].ReadBy, []string{"bob"}) {
		t.Fatalf("the read's own receipt is not shown: %v", r.Messages[0].ReadBy)
	}
	r = w.read(t, w.carol, TalkReadOptions{})
	if got := ids(r.Messages); !slices.Equal(got, []string{toAll.ID}) {
		t.Fatalf("carol reads %v, want only the message to all", got)
	}
	r = w.read(t, w.master, TalkReadOptions{})
	if got := ids(r.Messages); !slices.Equal(got, []string{toAll.ID, toMaster.ID}) {
		t.Fatalf("the owner reads %v", got)
	}

	// Signed acks the write side would refuse: carol acks bob's message, alice her own
	// message, and carol acks bob's message together with one that is hers to ack.
	foreign := w.rawAck(t, w.carol, toBob.ID)
	own := w.rawAck(t, w.alice, toAll.ID, toBob.ID)
	mixed := w.rawAck(t, w.wendy, toBob.ID, toAll.ID, "m-0000000000000")
	st := w.load(t).State
	if got := st.Messages[toBob.ID].ReadBy; !slices.Equal(got, []string{"bob"}) {
		t.Fatalf("read_by of the message to bob = %v, want [bob]", got)
	}
	if got := st.Messages[toAll.ID].ReadBy; !slices.Equal(got, []string{"bob", "carol", "master", "wendy"}) {
		t.Fatalf("read_by of the message to all = %v", got)
	}
	for _, h := range []string{foreign.Hash(), own.Hash()} {
		ig := ignoredFor(st, h)
		if len(ig) != 1 || !strings.HasPrefix(ig[0].Reason, "msg.ack names no message addressed to") {
			t.Fatalf("ack with no qualifying id: ignored %v", ig)
		}
	}
	if ig := ignoredFor(st, mixed.Hash()); len(ig) != 0 {
		t.Fatalf("an ack with one qualifying id is listed as ignored: %v", ig)
	}

	sent, err := st.TalkSent("alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(sentMessages(sent)); !slices.Equal(got, []string{toAll.ID, toBob.ID}) {
		t.Fatalf("alice's sent, newest first: %v", got)
	}
	if u := sent.Messages[0].Unread; !slices.Equal(u, []string{}) {
		t.Fatalf("unread of the message to all = %v, want [] (dave is not seated)", u)
	}

	// Write side: acknowledging a message not addressed to you is denied, nothing written.
	n := w.entries(t)
	for _, tc := range []struct {
		s  *Session
		id string
	}{{w.carol, toBob.ID}, {w.alice, toAll.ID}, {w.carol, toMaster.ID}} {
		if _, err := tc.s.TalkAck([]string{tc.id}); !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "not addressed to "+tc.s.Name) {
			t.Errorf("%s acks %s: %v, want denied", tc.s.Name, tc.id, err)
		}
	}
	if _, err := w.bob.TalkAck([]string{toBob.ID}); err != nil {
		t.Fatalf("acking again: %v", err)
	}
	if got := w.entries(t); got != n {
		t.Fatalf("refused or repeated acks wrote %d entries", got-n)
	}
}

func sentMessages(r *fold.TalkSentResult) []fold.Message {
	var out []fold.Message
	for _, m := range r.Messages {
		out = append(out, m.Message)
	}
	return out
}

// TestTalkPendingAndEditedObjects: a message whose object has not arrived is pending
// (counted, not listed, not acknowledged); one whose object was edited counts for
// nothing and says why.
func TestTalkPendingAndEditedObjects(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	m1 := w.send(t, w.alice, "bob", "first")
	m2 := w.send(t, w.alice, "bob", "second")
	p1 := verify.ObjectPath(w.c.Root, "alice", m1.ID)
	raw, err := os.ReadFile(p1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p1); err != nil {
		t.Fatal(err)
	}
	w.fresh(t)
	v := w.load(t)
	if m := v.State.Messages[m1.ID]; m == nil || !m.Pending || m.From != "alice" || m.To != "bob" || m.Preview != "" {
		t.Fatalf("message without its object: %+v", m)
	}
	if u := v.State.Unread("bob"); len(u) != 1 || u[0].ID != m2.ID {
		t.Fatalf("Unread lists a pending message: %v", u)
	}
	r := w.read(t, w.bob, TalkReadOptions{})
	if !slices.Equal(ids(r.Messages), []string{m2.ID}) || r.Pending != 1 || !slices.Equal(r.Acked, []string{m2.ID}) {
		t.Fatalf("read with a pending message: %+v", r)
	}
	if _, err := w.bob.TalkAck([]string{m1.ID}); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("acking a pending message: %v, want retry_needed", err)
	}
	if sh, err := v.State.TalkShow(m1.ID); err != nil || !sh.Pending || sh.Body != "" {
		t.Fatalf("show of a pending message: %+v, %v", sh, err)
	}
	// The object arrives: the message is new to bob.
	if err := os.WriteFile(p1, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	r = w.read(t, w.bob, TalkReadOptions{})
	if !slices.Equal(ids(r.Messages), []string{m1.ID}) || r.Pending != 0 {
		t.Fatalf("read after the object arrived: %+v", r)
	}

	// Re-indenting the object changes nothing; editing its text ignores the message.
	if err := os.WriteFile(p1, []byte("\xef\xbb\xbf"+strings.ReplaceAll(string(raw), ",", ",\r\n  ")), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := w.load(t).State.Messages[m1.ID]; m == nil || m.Pending || m.Preview != "first" {
		t.Fatalf("re-indented object: %+v", m)
	}
	if err := os.WriteFile(p1, []byte(strings.Replace(string(raw), `"body":"first"`, `"body":"forged"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	st := w.load(t).State
	if st.Messages[m1.ID] != nil {
		t.Fatal("a message with an edited object still counts")
	}
	if _, err := st.TalkShow(m1.ID); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "message object differs") {
		t.Fatalf("show of an edited message: %v", err)
	}
	if _, err := st.TalkShow("m-zzzz"); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "ferry talk read --peek") {
		t.Fatalf("show of an unknown message: %v", err)
	}
	// A bob read ignores it (no ack for a message that does not count).
	if r := w.read(t, w.bob, TalkReadOptions{}); len(r.Messages) != 0 || r.Pending != 0 {
		t.Fatalf("read after the edit: %+v", r)
	}
}

// TestTalkReadPeekSinceLimit: peek writes nothing; limit and the 4,000-character budget
// truncate with the count remaining; a second read returns nothing new and writes
// nothing; --since lists what arrived after a cursor, read or not, and pages without
// skipping; a foreign cursor falls back.
func TestTalkReadPeekSinceLimit(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	var sent []string
	for i := range 25 {
		sent = append(sent, w.send(t, w.alice, "bob", strings.Repeat("x", i+1)).ID)
	}
	n := w.entries(t)
	if _, err := w.bob.TalkRead(TalkReadOptions{Peek: true, Limit: 50}); !errs.Is(err, errs.Invalid) {
		t.Fatalf("limit 50: %v, want invalid", err)
	}
	r := w.read(t, w.bob, TalkReadOptions{Peek: true})
	if len(r.Messages) != fold.TalkReadLimit || !r.Truncated || r.Remaining != 5 || len(r.Acked) != 0 {
		t.Fatalf("peek: %d messages, truncated %v remaining %d acked %v", len(r.Messages), r.Truncated, r.Remaining, r.Acked)
	}
	if !slices.Equal(ids(r.Messages), sent[:20]) {
		t.Fatal("not oldest first")
	}
	if w.entries(t) != n {
		t.Fatal("a peek wrote an entry")
	}
	r = w.read(t, w.bob, TalkReadOptions{Limit: 3})
	if !slices.Equal(r.Acked, sent[:3]) || r.Remaining != 22 {
		t.Fatalf("limit 3: acked %v remaining %d", r.Acked, r.Remaining)
	}
	if w.entries(t) != n+1 {
		t.Fatal("a read must write exactly one msg.ack")
	}
	r = w.read(t, w.bob, TalkReadOptions{})
	if !slices.Equal(ids(r.Messages), sent[3:23]) || r.Remaining != 2 {
		t.Fatalf("second page: %v remaining %d", ids(r.Messages), r.Remaining)
	}
	// A truncated read's cursor stops below what it left out: a read from it lists
	// those (`--since next` after a peek must not skip them).
	if left := w.read(t, w.bob, TalkReadOptions{Since: r.Next, Peek: true}); !slices.Equal(ids(left.Messages), sent[23:]) {
		t.Fatalf("since the truncated page's cursor %s: %v, want the 2 left out", r.Next, ids(left.Messages))
	}
	r = w.read(t, w.bob, TalkReadOptions{})
	if !slices.Equal(ids(r.Messages), sent[23:]) || r.Truncated {
		t.Fatalf("last page: %v", ids(r.Messages))
	}
	cur := r.Next
	n = w.entries(t)
	r = w.read(t, w.bob, TalkReadOptions{})
	if len(r.Messages) != 0 || len(r.Acked) != 0 || w.entries(t) != n {
		t.Fatalf("a read with nothing new returned %v and wrote %d entries", ids(r.Messages), w.entries(t)-n)
	}
	if _, err := w.bob.TalkRead(TalkReadOptions{Limit: -1}); !errs.Is(err, errs.Invalid) {
		t.Fatalf("negative limit: %v", err)
	}

	// Since a cursor: the messages that arrived after it, already read ones included.
	r = w.read(t, w.bob, TalkReadOptions{Since: cur, Peek: true})
	if !r.Since || len(r.Messages) != 0 {
		t.Fatalf("since %s (nothing arrived after it): since=%v %v", cur, r.Since, ids(r.Messages))
	}
	r = w.read(t, w.bob, TalkReadOptions{Since: firstCursor(w.load(t)), Peek: true, Limit: 5})
	if !r.Since || !slices.Equal(ids(r.Messages), sent[:5]) || r.Remaining != 20 {
		t.Fatalf("since the start: since=%v %v remaining %d", r.Since, ids(r.Messages), r.Remaining)
	}
	cur = w.load(t).Arrivals.Cursor()
	late := w.send(t, w.carol, fold.ToAll, "late news")
	mine := w.send(t, w.bob, fold.ToAll, "bob's own news")
	r = w.read(t, w.bob, TalkReadOptions{Since: cur})
	if !r.Since || !slices.Equal(ids(r.Messages), []string{late.ID}) || !slices.Equal(r.Acked, []string{late.ID}) {
		t.Fatalf("since after two posts: %v acked %v (own %s must not show)", ids(r.Messages), r.Acked, mine.ID)
	}
	r = w.read(t, w.bob, TalkReadOptions{Since: "zzzzzzzz.1"})
	if r.Since || len(r.Messages) != 0 || r.Next == "" {
		t.Fatalf("foreign cursor: %+v", r)
	}

}

// TestTalkReadBudgetAndSincePaging: previews are bounded to TalkReadChars per read;
// paging with --since and each result's next cursor skips nothing.
func TestTalkReadBudgetAndSincePaging(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	var longs []string
	for range 15 {
		longs = append(longs, w.send(t, w.alice, "carol", strings.Repeat("é", 400)).ID)
	}
	r := w.read(t, w.carol, TalkReadOptions{Peek: true})
	if len(r.Messages) != 13 || r.Remaining != 2 || !r.Truncated {
		t.Fatalf("character budget: %d messages, remaining %d", len(r.Messages), r.Remaining)
	}
	if m := r.Messages[0]; !m.Truncated || len([]rune(m.Preview)) != fold.PreviewRunes || m.Bytes != 800 {
		t.Fatalf("preview: truncated %v, %d runes, %d bytes", m.Truncated, len([]rune(m.Preview)), m.Bytes)
	}
	page1 := w.read(t, w.carol, TalkReadOptions{Since: firstCursor(w.load(t)), Peek: true, Limit: 10})
	if !page1.Since || len(page1.Messages) != 10 || page1.Remaining != 5 {
		t.Fatalf("since page 1: since %v, %d messages, remaining %d", page1.Since, len(page1.Messages), page1.Remaining)
	}
	page2 := w.read(t, w.carol, TalkReadOptions{Since: page1.Next})
	if got := append(ids(page1.Messages), ids(page2.Messages)...); !slices.Equal(got, longs) {
		t.Fatalf("since pages:\n got %v\nwant %v", got, longs)
	}
	if !slices.Equal(page2.Acked, longs[10:]) {
		t.Fatalf("page 2 acked %v", page2.Acked)
	}
}

// firstCursor is a cursor before every arrival of v's log.
func firstCursor(v *View) string { return v.Arrivals.LogID + ".0" }

// TestTalkSendRefusalsAndIdempotency: every refusal of TalkSend writes nothing; a
// replayed key returns the first message, another call under it is a conflict.
func TestTalkSendRefusalsAndIdempotency(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	n := w.entries(t)
	for _, tc := range []struct {
		s        *Session
		to, body string
		cat      errs.Category
		msg      string
	}{
		{w.wendy, "bob", "hi", errs.Denied, "msg.post needs level member; wendy has level worker"},
		{w.dave, "bob", "hi", errs.Denied, "dave is not seated"},
		{w.alice, "zed", "hi", errs.NotFound, "no agent zed has joined"},
		{w.alice, "Bob!", "hi", errs.Invalid, "not an agent name"},
		{w.alice, "", "hi", errs.Invalid, "needs a recipient"},
		{w.alice, "alice", "hi", errs.Invalid, "to itself"},
		{w.alice, "bob", " \n\t", errs.Invalid, "empty message"},
		{w.alice, "bob", strings.Repeat("x", fold.MaxMessageBody+1), errs.Invalid, "the limit is 65536"},
		{w.alice, "bob", "\xff", errs.Invalid, "UTF-8"},
	} {
		_, err := tc.s.TalkSend(TalkSendOptions{To: tc.to, Body: tc.body})
		if !errs.Is(err, tc.cat) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s → %q: %v, want %s %q", tc.s.Name, tc.to, err, tc.cat, tc.msg)
		}
	}
	if got := w.entries(t); got != n {
		t.Fatalf("refusals wrote %d entries", got-n)
	}
	if ents, _ := os.ReadDir(filepath.Join(w.c.Root, "messages")); len(ents) != 0 {
		t.Fatalf("refusals left message files: %v", ents)
	}

	m, err := w.alice.TalkSend(TalkSendOptions{To: "bob", Body: "deploy at noon\n", Key: "k1"})
	if err != nil || m.Preview != "deploy at noon" {
		t.Fatalf("send with a key: %+v, %v", m, err)
	}
	again, err := w.alice.TalkSend(TalkSendOptions{To: "bob", Body: "deploy at noon", Key: "k1"})
	if err != nil || again.ID != m.ID {
		t.Fatalf("replay: %+v, %v (first %s)", again, err, m.ID)
	}
	if _, err := w.alice.TalkSend(TalkSendOptions{To: "bob", Body: "deploy at one", Key: "k1"}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("key reused with another body: %v", err)
	}
	if got := w.entries(t); got != n+1 {
		t.Fatalf("send, replay and conflict wrote %d entries, want 1", got-n)
	}
	// dave has joined but is not seated: a message to him is refused (he could never
	// acknowledge it); his own read that would acknowledge is denied.
	if _, err := w.alice.TalkSend(TalkSendOptions{To: "dave", Body: "welcome"}); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not seated") {
		t.Fatalf("message to an unseated agent: %v", err)
	}
	w.send(t, w.alice, "all", "welcome, everyone")
	if _, err := w.dave.TalkRead(TalkReadOptions{}); !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "--peek") {
		t.Fatalf("unseated read: %v", err)
	}
	if r := w.read(t, w.dave, TalkReadOptions{Peek: true}); len(r.Messages) != 1 {
		t.Fatalf("unseated peek: %+v", r)
	}
	// The owner may send to everyone and to agents; master and all are not agent names
	// to join.
	w.send(t, w.master, fold.ToAll, "release on friday")
	if _, err := Join(w.c, fold.ToAll, "test"); !errs.Is(err, errs.Invalid) {
		t.Fatalf("join as all: %v", err)
	}
}

// TestTalkShowAndPreview: the preview is rune-safe and flagged; show gives the body.
func TestTalkShowAndPreview(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	body := strings.Repeat("ü", fold.PreviewRunes) + "tail"
	m := w.send(t, w.alice, "bob", body)
	if !m.Truncated || m.Preview != strings.Repeat("ü", fold.PreviewRunes) || m.Bytes != len(body) || m.Body != "" {
		t.Fatalf("preview of a long body: truncated %v, %d runes", m.Truncated, len([]rune(m.Preview)))
	}
	st := w.load(t).State
	full, err := st.TalkShow(m.ID[:6])
	if err != nil || full.Body != body {
		t.Fatalf("show by prefix: %v", err)
	}
	if st.Messages[m.ID].Body != "" {
		t.Fatal("show changed the state's message")
	}
	exact := w.send(t, w.alice, "bob", strings.Repeat("a", fold.PreviewRunes))
	if exact.Truncated {
		t.Fatal("a body of exactly the preview length is not truncated")
	}
	if _, err := st.TalkSent("Not A Name", 0); !errs.Is(err, errs.Invalid) {
		t.Fatalf("TalkSent with a bad name: %v", err)
	}
	if _, err := st.TalkSent("alice", fold.TalkSentMax+1); !errs.Is(err, errs.Invalid) {
		t.Fatalf("TalkSent with a limit too large: %v", err)
	}
}

// TestTalkFoldIsOrderFree: an ack stamped before the post it names (a clock behind)
// still counts: posts fold before acks, so neither arrival nor clock order matters.
func TestTalkFoldIsOrderFree(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	m := w.send(t, w.alice, fold.ToAll, "hi")
	// wendy's machine clock is far behind: her ack is stamped just after her join,
	// before alice's post in merged order.
	l, err := ledger.Open(ledger.Options{Root: w.c.Root, LockDir: w.c.Home.LockDir("acme"), Project: "acme",
		Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := l.Append("wendy", w.wendy.Device, ledger.Draft{Type: fold.TypeMsgAck, Data: mustJSON(fold.EntryData{IDs: []string{m.ID}})}, w.wendy.Signer, ledger.HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if ack.HLC >= m.HLC {
		t.Fatalf("ack %s is not stamped before the post %s", ack.HLC, m.HLC)
	}
	v := w.load(t)
	if got := v.State.Messages[m.ID]; got == nil || !slices.Equal(got.ReadBy, []string{"wendy"}) {
		t.Fatalf("ack before its post: %+v", got)
	}
	// Without the post, the ack names nothing and is listed; the post arriving later
	// makes it count.
	var noPost []ledger.Entry
	for _, e := range v.Snapshot.Entries {
		if e.Type != fold.TypeMsgPost {
			noPost = append(noPost, e)
		}
	}
	st := fold.Fold(fold.FoldInput{Project: "acme", Master: w.c.MasterKey, Entries: noPost, Objects: w.c.objects()})
	if len(st.Messages) != 0 || len(st.Ignored) != 1 || st.Ignored[0].Hash != ack.Hash() {
		t.Fatalf("ack without its post: %d messages, ignored %v", len(st.Messages), st.Ignored)
	}
}
