package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/mcpserver"
)

// Idempotency keys (docs/design.md §4): a replay returns the first result — also from
// a server started after the first one ended — and writes nothing; the same key with
// other arguments is a conflict.

// idemEntries counts the entries of writer that carry idempotency key key.
func idemEntries(t *testing.T, b *busyChannel, writer, key string) int {
	t.Helper()
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range v.Snapshot.Entries {
		if e.Writer == writer && e.Idem == key {
			n++
		}
	}
	return n
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	cfg := mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open}
	first := newRig(t, cfg)
	other := newRig(t, mcpserver.FerryConfig{Agent: "codex-desktop", Open: b.open})

	newArgs := map[string]any{"action": "new", "title": "Add a retry budget", "body": "Five retries, then fail.", "key": "k-new"}
	var made struct {
		Order struct {
			ID string `json:"id"`
		} `json:"order"`
	}
	created := first.ok("ferry_orders", newArgs, &made)
	claimed := first.ok("ferry_orders", map[string]any{"action": "claim", "id": made.Order.ID, "key": "k-claim"}, nil)
	posted := first.ok("ferry_talk", map[string]any{"action": "post", "to": "codex-desktop", "text": "on it", "key": "k-post"}, nil)
	standby := first.ok("ferry_primary", map[string]any{"action": "standby", "key": "k-standby"}, nil)
	raised := first.ok("ferry_ask_human", map[string]any{"action": "raise", "title": "Ship it?", "recommendation": "yes", "key": "k-ask"}, nil)

	// The world moves on: progress, a reply, the owner answers the ask.
	first.ok("ferry_orders", map[string]any{"action": "progress", "id": made.Order.ID, "note": "half done"}, nil)
	other.ok("ferry_talk", map[string]any{"action": "read"}, nil)
	master, err := b.ch.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	var ask struct {
		ID string `json:"id"`
	}
	first.ok("ferry_ask_human", map[string]any{"action": "status"}, nil)
	mustDecode(t, raised, &ask)
	if _, err := master.AskAnswer(ask.ID, "approve", fsbus.NoteOptions{Note: "go"}); err != nil {
		t.Fatal(err)
	}

	// The first server ends; a second one, a new process as far as the code can tell,
	// replays every call.
	first.close()
	second := newRig(t, cfg)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"ferry_orders", newArgs, created},
		{"ferry_orders", map[string]any{"action": "claim", "id": made.Order.ID, "key": "k-claim"}, claimed},
		{"ferry_talk", map[string]any{"action": "post", "to": "codex-desktop", "text": "on it", "key": "k-post"}, posted},
		{"ferry_primary", map[string]any{"action": "standby", "key": "k-standby"}, standby},
		{"ferry_ask_human", map[string]any{"action": "raise", "title": "Ship it?", "recommendation": "yes", "key": "k-ask"}, raised},
	} {
		if got := second.ok(c.tool, c.args, nil); got != c.want {
			t.Errorf("%s %v after a restart:\n%s\nwant the first result\n%s", c.tool, c.args["action"], got, c.want)
		}
	}
	for _, key := range []string{"k-new", "k-claim", "k-post", "k-standby", "k-ask"} {
		if n := idemEntries(t, b, "codex-laptop", key); n != 1 {
			t.Errorf("key %s is in %d entries, want exactly 1", key, n)
		}
	}

	// The same key with other arguments: a conflict, from the journal and — with the
	// journal gone (another machine, a purged cache) — from the ledger.
	other1 := map[string]any{"action": "new", "title": "Something else", "key": "k-new"}
	if got := second.fail("ferry_orders", other1); !strings.HasPrefix(got, `conflict: idempotency key "k-new" was already used with other arguments`) {
		t.Errorf("k-new with another title: %q, want a conflict", got)
	}
	if got := second.fail("ferry_talk", map[string]any{"action": "post", "to": "codex-desktop", "text": "on it", "key": "k-new"}); !strings.HasPrefix(got, "conflict:") {
		t.Errorf("k-new on another tool: %q, want a conflict", got)
	}
	second.close()
	journal := filepath.Join(b.home.StateDir("busy"), "mcp-replies")
	if _, err := os.Stat(journal); err != nil {
		t.Fatalf("no reply journal at %s: %v", journal, err)
	}
	if err := os.RemoveAll(journal); err != nil {
		t.Fatal(err)
	}
	third := newRig(t, cfg)
	if got := third.fail("ferry_orders", other1); !strings.HasPrefix(got, "conflict:") {
		t.Errorf("without the journal, k-new with another title: %q, want the ledger's conflict", got)
	}
	var again struct {
		Order struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"order"`
	}
	third.ok("ferry_orders", newArgs, &again)
	if again.Order.ID != made.Order.ID || idemEntries(t, b, "codex-laptop", "k-new") != 1 {
		t.Errorf("without the journal the replay made %s, want the first order %s and no second entry", again.Order.ID, made.Order.ID)
	}
	v, _ := b.ch.Load()
	n := 0
	for _, o := range v.State.Orders {
		if o.Title == "Add a retry budget" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d orders titled like the keyed one, want 1", n)
	}
	// A key on a read is ignored: reads have no replay.
	third.ok("ferry_orders", map[string]any{"action": "list", "key": "k-new"}, nil)
}

// close ends the rig's session (EOF) and releases its identity lease, as a process
// exiting does.
func (r *rig) close() {
	r.t.Helper()
	r.in.Close()
	for {
		if _, err := r.out.ReadBytes('\n'); err != nil {
			break
		}
	}
	if err := <-r.done; err != nil {
		r.t.Fatalf("Serve: %v", err)
	}
	r.done <- nil // the cleanup reads it again
	r.f.Close()
}

func mustDecode(t *testing.T, text string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(text), v); err != nil {
		t.Fatalf("decoding %s: %v", text, err)
	}
}
