package fsbus

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/pause"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestInputCaps: every free-text input is refused one unit over its cap — invalid,
// naming the field, its size and the cap in the cap's unit — and accepted at the cap; a
// refusal writes nothing (docs/format.md §12 "Input caps and the secret guard").
// Character caps are measured in characters: 200 two-byte "é" fit a 200-character
// title.
func TestInputCaps(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	if _, err := w.master.Grant(GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	alice := w.as(t, "alice")
	if _, err := alice.PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	held := func() *fold.Order { // an order alice holds
		o, err := w.bob.NewOrder(NewOrderOptions{Title: "held"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Claim(o.ID, ""); err != nil {
			t.Fatal(err)
		}
		return o
	}
	submitted := func() *fold.Order { // an order alice submitted, bob to review
		o := held()
		if _, err := alice.Submit(o.ID, SubmitOptions{Reference: "main"}); err != nil {
			t.Fatal(err)
		}
		return o
	}
	var id string
	hold := func() { id = held().ID }
	sub := func() { id = submitted().ID }
	bytesOf := func(n int) string { return strings.Repeat("x", n) }
	charsOf := func(n int) string { return strings.Repeat("é", n) } // 2 bytes each
	cases := []struct {
		field string
		limit int
		unit  string
		text  func(n int) string
		call  func(s string) error
		prep  func() // run before the snapshot: sets id
	}{
		{"order title", MaxTitle, UnitChars, charsOf, func(s string) error { _, err := alice.NewOrder(NewOrderOptions{Title: s}); return err }, nil},
		{"order body", MaxOrderBody, unitBytes, bytesOf, func(s string) error { _, err := alice.NewOrder(NewOrderOptions{Title: "t", Body: s}); return err }, nil},
		{"message body", fold.MaxMessageBody, unitBytes, bytesOf, func(s string) error { _, err := alice.TalkSend(TalkSendOptions{To: "bob", Body: s}); return err }, nil},
		{"progress note", MaxNote, unitBytes, bytesOf, func(s string) error { _, err := alice.Progress(id, NoteOptions{Note: s}); return err }, hold},
		{"result summary", MaxNote, unitBytes, bytesOf, func(s string) error {
			_, err := alice.Submit(id, SubmitOptions{Reference: "main", Note: s})
			return err
		}, hold},
		{"result reference", MaxReference, unitBytes, bytesOf, func(s string) error {
			_, err := alice.Submit(id, SubmitOptions{Reference: s})
			return err
		}, hold},
		{"review note", MaxNote, unitBytes, bytesOf, func(s string) error { _, err := w.bob.Review(id, "accept", NoteOptions{Note: s}); return err }, sub},
		{"release note", MaxNote, unitBytes, bytesOf, func(s string) error { _, err := alice.Release(id, NoteOptions{Note: s}); return err }, hold},
		{"cancel note", MaxNote, unitBytes, bytesOf, func(s string) error { _, err := w.bob.Cancel(id, NoteOptions{Note: s}); return err }, hold},
		{"extend note", MaxNote, unitBytes, bytesOf, func(s string) error { _, err := alice.Extend(id, NoteOptions{Note: s}); return err }, hold},
		{"fail reason", MaxNote, unitBytes, bytesOf, func(s string) error { _, err := alice.Fail(id, NoteOptions{Note: s}); return err }, hold},
		{"ask title", MaxAskTitle, UnitChars, charsOf, func(s string) error {
			_, err := alice.AskRaise(AskRaiseOptions{Title: s, Recommendation: "r"})
			return err
		}, nil},
		{"recommendation", MaxAskText, UnitChars, charsOf, func(s string) error {
			_, err := alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: s})
			return err
		}, nil},
		{"reasoning", MaxAskText, UnitChars, charsOf, func(s string) error {
			_, err := alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: "r", Reasoning: s})
			return err
		}, nil},
		{"answer note", MaxNote, unitBytes, bytesOf, func(s string) error {
			_, err := w.master.AskAnswer(id, fold.VerdictApprove, NoteOptions{Note: s})
			return err
		}, func() {
			a, err := alice.AskRaise(AskRaiseOptions{Title: "t" + fold.NewID(""), Recommendation: "r"})
			if err != nil {
				t.Fatal(err)
			}
			id = a.ID
		}},
		{"hand-in note", MaxNote, unitBytes, bytesOf, func(s string) error { _, err := alice.HandinAdd("main", NoteOptions{Note: s}); return err }, nil},
		{"decision", fold.MaxDecisionLine, UnitChars, charsOf, func(s string) error { _, err := alice.DecisionRecord(s, ""); return err }, nil},
		{"objective", fold.MaxBriefLine, UnitChars, charsOf, func(s string) error { _, err := alice.PrimaryBrief(s, nil, ""); return err }, nil},
		{"secret value", MaxSecretValue, unitBytes, bytesOf, func(s string) error { _, err := alice.SecretPut("k", []string{"bob"}, []byte(s), ""); return err }, nil},
		{"pause reason", pause.MaxReason, UnitChars, charsOf, func(s string) error {
			_, err := w.c.Home.Pause("", s, time.Now())
			if err == nil {
				_, err = w.c.Home.Resume("")
			}
			return err
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			over := tc.text(tc.limit + 1)
			if tc.prep != nil {
				tc.prep()
			}
			before := channelFiles(t, w.c.Root)
			err := tc.call(over)
			want := fmt.Sprintf("%s is %d %s; the limit is %d", tc.field, tc.limit+1, tc.unit, tc.limit)
			if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), want) {
				t.Fatalf("one over the cap: %v; want invalid containing %q", err, want)
			}
			if !sameFiles(before, channelFiles(t, w.c.Root)) {
				t.Fatal("a refusal over the cap changed the channel")
			}
			if tc.prep != nil {
				tc.prep()
			}
			if err := tc.call(tc.text(tc.limit)); err != nil {
				t.Fatalf("at the cap: %v", err)
			}
		})
	}
}

// TestCapsDoc: docs/format.md lists every cap of the Caps table (-update rewrites it).
func TestCapsDoc(t *testing.T) {
	t.Parallel()
	const path, begin, end = "../docs/format.md", "<!-- caps:begin -->\n", "<!-- caps:end -->"
	var b strings.Builder
	b.WriteString(begin)
	b.WriteString("<!-- Generated from fsbus.caps (fsbus/caps.go) by `go test ./fsbus -run TestCapsDoc -update`; do not edit. -->\n\n")
	b.WriteString("| input | cap |\n|---|---:|\n")
	for _, c := range caps {
		lim := fmt.Sprint(c.Limit)
		switch {
		case c.Unit == unitBytes && c.Limit%(1<<20) == 0:
			lim = fmt.Sprintf("%d MiB", c.Limit>>20)
		case c.Unit == unitBytes && c.Limit%(1<<10) == 0:
			lim = fmt.Sprintf("%d KiB", c.Limit>>10)
		default:
			lim += " " + c.Unit
		}
		fmt.Fprintf(&b, "| %s | %s |\n", c.Field, lim)
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", path, strings.TrimSpace(begin), end)
	}
	got := string(doc[i:j])
	if got == b.String() {
		return
	}
	if !updating() {
		t.Fatalf("%s's caps table is out of date: run go test ./fsbus -run TestCapsDoc -update", path)
	}
	out := append(append(append([]byte{}, doc[:i]...), b.String()...), doc[j:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestJSONCapIsCompacted: a result output (and a schema) is measured compacted, as the
// channel stores it: indentation does not count toward MaxOutput, content does, and
// whitespace past maxJSONSlack times the cap is refused before parsing.
func TestJSONCapIsCompacted(t *testing.T) {
	t.Parallel()
	val := strings.Repeat("x", contract.MaxOutput-20)
	indented := "{\n" + strings.Repeat(" ", 8<<10) + `"v":` + strings.Repeat("\n", 8<<10) + `"` + val + `"` + "\n}"
	if len(indented) <= contract.MaxOutput {
		t.Fatal("the test input must be over the cap as written")
	}
	out, err := contract.CompactJSON([]byte(indented), contract.MaxOutput, "result")
	if err != nil || len(out) > contract.MaxOutput || !strings.Contains(string(out), `{"v":"`) {
		t.Fatalf("indented output within the cap compacted: %d bytes, %v", len(out), err)
	}
	big := `{"v":"` + strings.Repeat("x", contract.MaxOutput) + `"}`
	if _, err := contract.CompactJSON([]byte(big), contract.MaxOutput, "result"); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "bytes compacted; the limit is 65536") {
		t.Fatalf("content over the cap: %v", err)
	}
	padded := "{" + strings.Repeat(" ", contract.MaxJSONSlack*contract.MaxOutput) + "}"
	if _, err := contract.CompactJSON([]byte(padded), contract.MaxOutput, "result"); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "before compaction") {
		t.Fatalf("whitespace past the slack: %v", err)
	}
}
