package fsbus

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/internal/secretguard/secrettest"
)

// channelFiles lists every file under dir with its size: a refusal must leave it equal.
func channelFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSecretGuardOnEveryWrite: each free-text field of every write is scanned before
// anything is written (docs/format.md §12 "Input caps and the secret guard"); the
// refusal names the field and the kind, never the value, and the channel is unchanged.
func TestSecretGuardOnEveryWrite(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	if _, err := w.master.Grant(GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	alice := w.as(t, "alice")
	secret := "ghp_" + secrettest.Token(40, 36, secrettest.Alnum)
	env := "DB_PASSWORD=" + secrettest.Token(41, 14, secrettest.Alnum)
	mine, err := w.bob.NewOrder(NewOrderOptions{Title: "plain order"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Claim(mine.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field string
		call  func() error
	}{
		{"message body", func() error { _, err := alice.TalkSend(TalkSendOptions{To: "bob", Body: "hi\n" + secret}); return err }},
		{"order title", func() error { _, err := alice.NewOrder(NewOrderOptions{Title: "use " + secret}); return err }},
		{"order body", func() error { _, err := alice.NewOrder(NewOrderOptions{Title: "t", Body: env}); return err }},
		{"ask title", func() error {
			_, err := alice.AskRaise(AskRaiseOptions{Title: secret, Recommendation: "r"})
			return err
		}},
		{"ask recommendation", func() error {
			_, err := alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: env})
			return err
		}},
		{"ask reasoning", func() error {
			_, err := alice.AskRaise(AskRaiseOptions{Title: "t", Recommendation: "r", Reasoning: "because " + secret})
			return err
		}},
		{"progress note", func() error { _, err := alice.Progress(mine.ID, NoteOptions{Note: env}); return err }},
		{"result summary", func() error {
			_, err := alice.Submit(mine.ID, SubmitOptions{Reference: "main", Note: secret})
			return err
		}},
		{"result reference", func() error {
			_, err := alice.Submit(mine.ID, SubmitOptions{Reference: "https://ada:" + secrettest.Token(42, 12, secrettest.Alnum) + "@git.example.com/x.git"})
			return err
		}},
		{"result output", func() error {
			_, err := alice.Submit(mine.ID, SubmitOptions{Reference: "main", Output: []byte(`{"api_token":"` + secrettest.Token(43, 20, secrettest.Alnum) + `"}`)})
			return err
		}},
		{"extend note", func() error { _, err := alice.Extend(mine.ID, NoteOptions{Note: secret}); return err }},
		{"fail reason", func() error { _, err := alice.Fail(mine.ID, NoteOptions{Note: "crashed with " + secret}); return err }},
		{"release note", func() error { _, err := alice.Release(mine.ID, NoteOptions{Note: env}); return err }},
		{"cancel note", func() error { _, err := w.bob.Cancel(mine.ID, NoteOptions{Note: secret}); return err }},
		{"hand-in note", func() error { _, err := alice.HandinAdd("main", NoteOptions{Note: secret}); return err }},
		{"hand-in ref", func() error {
			_, err := alice.HandinAdd("AKIA"+secrettest.Token(44, 16, secrettest.Upnum), NoteOptions{})
			return err
		}},
		{"decision line", func() error { _, err := alice.DecisionRecord("rotate "+secret, ""); return err }},
		{"brief objective", func() error { _, err := alice.PrimaryBrief("ship with "+secret, nil, ""); return err }},
		{"brief constraints", func() error { _, err := alice.PrimaryBrief("ship", []string{"ok", env}, ""); return err }},
		{"presence doing line", func() error { return alice.WritePresence("testing "+secret, nil) }},
		// The schema and the idempotency key are free text too.
		{"order schema", func() error {
			_, err := alice.NewOrder(NewOrderOptions{Title: "t", Schema: []byte(`{"type":"object","description":"call it with ` + secret + `"}`)})
			return err
		}},
		{"order schema", func() error {
			_, err := alice.NewOrder(NewOrderOptions{Title: "t", Schema: []byte(`{"type":"object","properties":{"token":{"default":"` + secret + `"}}}`)})
			return err
		}},
		{"idempotency key", func() error {
			_, err := alice.TalkSend(TalkSendOptions{To: "bob", Body: "hi", Key: secret})
			return err
		}},
		{"idempotency key", func() error { _, err := alice.NewOrder(NewOrderOptions{Title: "t", Key: env}); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			before := channelFiles(t, w.c.Root)
			err := tc.call()
			var se *secretguard.Error
			if !errs.Is(err, errs.Invalid) || !errors.As(err, &se) {
				t.Fatalf("err = %v, want an invalid secret refusal", err)
			}
			if se.Field != tc.field {
				t.Errorf("field = %q, want %q", se.Field, tc.field)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), env) {
				t.Errorf("the refusal echoes the value: %v", err)
			}
			if after := channelFiles(t, w.c.Root); !sameFiles(before, after) {
				t.Errorf("the channel changed on a refusal")
			}
		})
	}
	// The same fields pass with ordinary text.
	if _, err := alice.Progress(mine.ID, NoteOptions{Note: "commit 3f2a9c1e" + secrettest.Token(45, 32, secrettest.Hex) + " pushed"}); err != nil {
		t.Fatal(err)
	}
}

// TestRefusalsNeverEcho: errors about bad input quote it only when it does not look
// like a credential (not `bad label "ghp_…"`, `cannot send to "ghp_…"`).
func TestRefusalsNeverEcho(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	tok := "ghp_" + secrettest.Token(70, 36, secrettest.Alnum)
	cases := []struct {
		name string
		call func() error
	}{
		{"label", func() error {
			_, err := w.alice.NewOrder(NewOrderOptions{Title: "t", Labels: []string{tok}})
			return err
		}},
		{"talk recipient", func() error { _, err := w.alice.TalkSend(TalkSendOptions{To: tok, Body: "hi"}); return err }},
		{"secret name", func() error { _, err := w.alice.SecretPut(tok, []string{"bob"}, []byte("v4lue-123"), ""); return err }},
		{"secret recipient", func() error { _, err := w.alice.SecretPut("x", []string{tok}, []byte("v4lue-123"), ""); return err }},
		{"secret get name", func() error { _, _, err := w.alice.SecretGet(tok); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || strings.Contains(err.Error(), tok[4:]) || !strings.Contains(err.Error(), "looks like a GitHub token, not shown") {
				t.Fatalf("err = %v: want a refusal naming the kind, never the value", err)
			}
		})
	}
	if _, err := w.alice.TalkSend(TalkSendOptions{To: "Bad Name", Body: "hi"}); err == nil || !strings.Contains(err.Error(), `"Bad Name"`) {
		t.Fatalf("an ordinary bad name is still quoted: %v", err)
	}
}

// TestSecretGuardEveryField: the fields the guard used to miss — names, labels, types,
// file names and the member names of structured JSON at any depth — are refused like
// free text, before anything is written (the channel and this machine's keys unchanged),
// and the refusal never holds the value. The tokens are shaped to pass each field's
// own syntax (a portable name for names and labels), so only the guard can refuse them.
func TestSecretGuardEveryField(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	if _, err := w.master.Grant(GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	alice := w.as(t, "alice")
	lower := "abcdefghijklmnopqrstuvwxyz0123456789"
	name := "glpat-" + secrettest.Token(80, 24, lower)         // a portable name that is a GitLab token
	task := "ghp_" + secrettest.Token(81, 36, lower)           // a task type ('_' allowed) that is a GitHub token
	tok := "ghp_" + secrettest.Token(82, 36, secrettest.Alnum) // free text
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, name+".txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alice.Workspace = ws
	mine, err := w.bob.NewOrder(NewOrderOptions{Title: "plain order"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Claim(mine.ID, ""); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field string
		call  func() error
	}{
		{"order label", func() error {
			_, err := alice.NewOrder(NewOrderOptions{Title: "t", Labels: []string{name}})
			return err
		}},
		{"order task type", func() error { _, err := alice.NewOrder(NewOrderOptions{Title: "t", Task: task}); return err }},
		{"pointer path", func() error {
			_, err := alice.NewOrder(NewOrderOptions{Title: "t", Pointers: []string{name + ".txt"}})
			return err
		}},
		{"pointer path", func() error { _, err := alice.NewOrder(NewOrderOptions{Title: "t", Diff: name + ".txt"}); return err }},
		{"offer recipient", func() error { _, err := alice.NewOrder(NewOrderOptions{Title: "t", To: name}); return err }},
		{"offer recipient", func() error { _, err := alice.Offer(mine.ID, OfferOptions{To: name}); return err }},
		{"app name", func() error { _, err := Join(w.c, "erin", name); return err }},
		{"agent name", func() error { _, err := Join(w.c, name, "test"); return err }},
		{"secret name", func() error { _, err := alice.SecretPut(name, []string{"bob"}, []byte("v4lue-123"), ""); return err }},
		{"grant scope", func() error {
			_, err := w.master.Grant(GrantOptions{Agent: "carol", Level: "member", Scopes: []string{name}})
			return err
		}},
		{"result output member name", func() error {
			_, err := alice.Submit(mine.ID, SubmitOptions{Reference: "main", Output: []byte(`{"` + tok + `":1}`)})
			return err
		}},
		{"result output member name", func() error {
			_, err := alice.Submit(mine.ID, SubmitOptions{Reference: "main", Output: []byte(`{"a":[{"b":{"` + tok + `":null}}]}`)})
			return err
		}},
		{"order schema member name", func() error {
			_, err := alice.NewOrder(NewOrderOptions{Title: "t", Schema: []byte(`{"type":"object","properties":{"` + tok + `":{"type":"integer"}}}`)})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			before := channelFiles(t, w.c.Root)
			keys := channelFiles(t, w.c.Home.ConfigDir)
			err := tc.call()
			var se *secretguard.Error
			if !errs.Is(err, errs.Invalid) || !errors.As(err, &se) {
				t.Fatalf("err = %v, want an invalid secret refusal", err)
			}
			if se.Field != tc.field {
				t.Errorf("field = %q, want %q", se.Field, tc.field)
			}
			var fe *errs.Error
			errors.As(err, &fe)
			for _, v := range []string{name, task, tok} {
				if strings.Contains(err.Error(), v) || strings.Contains(fe.Hint, v) {
					t.Errorf("the refusal echoes the value: %v (hint %s)", err, fe.Hint)
				}
			}
			if after := channelFiles(t, w.c.Root); !sameFiles(before, after) {
				t.Errorf("the channel changed on a refusal")
			}
			if after := channelFiles(t, w.c.Home.ConfigDir); !sameFiles(keys, after) {
				t.Errorf("this machine's config (keys) changed on a refusal")
			}
		})
	}
	// Generated values are exempt by their place in the format, whatever they look
	// like: a grant's key text, a secret's s- id and hashes never trip the guard.
	if _, err := w.master.Grant(GrantOptions{Agent: "carol", Level: "member", Scopes: []string{"backend"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.SecretPut("db-password", []string{"bob"}, []byte(tok), ""); err != nil {
		t.Fatalf("a token as a vault value (sealed) is what the vault is for: %v", err)
	}
}
