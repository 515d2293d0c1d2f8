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

// Order contracts (ADR 0003): ferry_orders verify reports pointer health, claim refuses
// a stale checkout (stale), submit carries a result validated against the order's
// schema.
func TestOrdersContract(t *testing.T) {
	t.Parallel()
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
	if done.Order.State != string(fold.StateSubmitted) {
		t.Fatalf("submit: %+v", done)
	}
	if txt := r.fail("ferry_orders", map[string]any{"action": "verify"}); !strings.HasPrefix(txt, "invalid: ") {
		t.Fatalf("verify without id: %s", txt)
	}
}

// TestOrdersShowContract: ferry_orders show carries the contract, compact — pointers as
// path, lines, size and short sha; the schema (cut, saying so, when it is long); task,
// read-only, windows, heavy and hints — so the agent knows the schema before its first
// submit; a result without the schema's hint names no @FILE.
func TestOrdersShowContract(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "calc.go"), []byte("package calc\n\nfunc Eq(a, b any) bool { return a == b }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	author, err := b.ch.As("codex-desktop")
	if err != nil {
		t.Fatal(err)
	}
	author.Workspace = ws
	schema := `{"type":"object","required":["passed"],"properties":{"passed":{"type":"boolean"}}}`
	long := `{"type":"object","description":"` + strings.Repeat("x", 6000) + `"}`
	o, err := author.NewOrder(fsbus.NewOrderOptions{Title: "Review calc", Pointers: []string{"calc.go:3-3"},
		Schema: json.RawMessage(schema), Task: "code_review", ReadOnly: true, Heavy: true,
		Windows: &fold.Windows{ExecS: 7200, LifetimeS: 28800}, Hints: &fold.Hints{Cores: 8, RAMGB: 32, ExpectedMinutes: 90}})
	if err != nil {
		t.Fatal(err)
	}
	big, err := author.NewOrder(fsbus.NewOrderOptions{Title: "Big schema", Schema: json.RawMessage(long)})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Workspace: ws})
	type shown struct {
		Order struct {
			BodyURI  string                  `json:"body_uri"`
			Contract *mcpserver.ContractView `json:"contract"`
		} `json:"order"`
		Truncated bool `json:"truncated"`
	}
	for _, detail := range []bool{false, true} {
		var got shown
		r.ok("ferry_orders", map[string]any{"action": "show", "id": o.ID, "detail": detail}, &got)
		c := got.Order.Contract
		if c == nil {
			t.Fatalf("detail %v: no contract", detail)
		}
		sha := strings.TrimPrefix(o.Pointers[0].SHA256, "sha256:")[:8]
		want := mcpserver.ContractView{Task: "code_review", ReadOnly: true, Pointers: []string{"calc.go:3-3 55B sha256:" + sha},
			Schema: string(o.Schema), Windows: "exec 2h, lifetime 8h", Heavy: true, Hints: "cores 8, ram 32 GB, ~90 min"}
		if gj, wj := mustJSON(t, c), mustJSON(t, want); gj != wj {
			t.Fatalf("detail %v: contract\n got %s\nwant %s", detail, gj, wj)
		}
	}
	var got shown
	r.ok("ferry_orders", map[string]any{"action": "show", "id": big.ID}, &got)
	c := got.Order.Contract
	if c == nil || !strings.HasSuffix(c.Schema, "(truncated: the full schema is in the order object at body_uri)") || !got.Truncated || got.Order.BodyURI == "" || len(c.Schema) > 2000 {
		t.Fatalf("long schema: %+v truncated %v", c, got.Truncated)
	}
	// An order without a contract shows none.
	plain, err := author.NewOrder(fsbus.NewOrderOptions{Title: "Plain"})
	if err != nil {
		t.Fatal(err)
	}
	got = shown{}
	r.ok("ferry_orders", map[string]any{"action": "show", "id": plain.ID}, &got)
	if got.Order.Contract != nil {
		t.Fatalf("plain order shows a contract: %+v", got.Order.Contract)
	}
	// An order waiting for a cancelled one says it is blocked for good.
	waits, err := author.NewOrder(fsbus.NewOrderOptions{Title: "After plain", Deps: []string{plain.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := author.Cancel(plain.ID, fsbus.NoteOptions{}); err != nil {
		t.Fatal(err)
	}
	var blocked struct {
		Order struct {
			Blocked string `json:"blocked"`
		} `json:"order"`
	}
	r.ok("ferry_orders", map[string]any{"action": "show", "id": waits.ID}, &blocked)
	if blocked.Order.Blocked != "dependency "+plain.ID+" was cancelled: cancel or re-dispatch this order" {
		t.Fatalf("blocked: %q", blocked.Order.Blocked)
	}
	// The submit refusal for a missing result names the MCP argument, never @FILE.
	r.ok("ferry_orders", map[string]any{"action": "claim", "id": o.ID}, nil)
	txt := r.fail("ferry_orders", map[string]any{"action": "submit", "id": o.ID, "ref": "abc"})
	if !strings.HasPrefix(txt, "invalid: ") || strings.Contains(txt, "@FILE") || !strings.Contains(txt, "in result") {
		t.Fatalf("submit without a result: %s", txt)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
