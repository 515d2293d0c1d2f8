package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/mcpserver"
)

// Issue 6: ferry_orders verify reports pointer health, claim refuses a stale checkout
// (stale), submit carries a result validated against the order's schema.
func TestOrdersContract(t *testing.T) {
	b := copyBusy(t)
	ws := t.TempDir()
	calc := filepath.Join(ws, "calc.go")
	orig := "package calc\n\nfunc Eq(a, b any) bool { return a == b }\n"
	if err := os.WriteFile(calc, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	author, err := b.ch.As("codex-desktop")
	if err != nil {
		t.Fatal(err)
	}
	author.Workspace = ws
	o, err := author.NewOrder(fsbus.NewOrderOptions{Title: "Review calc", Pointers: []string{"calc.go"},
		Schema: json.RawMessage(`{"type":"object","required":["passed"],"properties":{"passed":{"type":"boolean"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Workspace: ws})

	var v struct {
		Verify mcpserver.VerifyView `json:"verify"`
	}
	r.ok("ferry_orders", map[string]any{"action": "verify", "id": o.ID}, &v)
	if !v.Verify.OK || len(v.Verify.Pointers) != 1 || v.Verify.Pointers[0] != "ok calc.go" {
		t.Fatalf("verify: %+v", v.Verify)
	}
	if err := os.WriteFile(calc, []byte(orig+"// edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.ok("ferry_orders", map[string]any{"action": "verify", "id": o.ID}, &v)
	if v.Verify.OK || v.Verify.Pointers[0] != "changed calc.go: size 65 bytes, dispatched 55" {
		t.Fatalf("verify after an edit: %+v", v.Verify)
	}
	if txt := r.fail("ferry_orders", map[string]any{"action": "claim", "id": o.ID}); !strings.HasPrefix(txt, "stale: ") || !strings.Contains(txt, "calc.go (changed") {
		t.Fatalf("claim on a stale checkout: %s", txt)
	}
	if err := os.WriteFile(calc, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	r.ok("ferry_orders", map[string]any{"action": "claim", "id": o.ID}, nil)
	txt := r.fail("ferry_orders", map[string]any{"action": "submit", "id": o.ID, "ref": "abc", "result": `{"passed":"yes"}`})
	if !strings.HasPrefix(txt, "retry_needed: ") || !strings.Contains(txt, "/passed: ") {
		t.Fatalf("submit with a bad result: %s", txt)
	}
	var done struct {
		Order struct {
			State string `json:"state"`
		} `json:"order"`
	}
	r.ok("ferry_orders", map[string]any{"action": "submit", "id": o.ID, "ref": "abc", "result": `{"passed":true}`}, &done)
	if done.Order.State != fsbus.StateSubmitted {
		t.Fatalf("submit: %+v", done)
	}
	if txt := r.fail("ferry_orders", map[string]any{"action": "verify"}); !strings.HasPrefix(txt, "invalid: ") {
		t.Fatalf("verify without id: %s", txt)
	}
}
