package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
	"github.com/ferryhq/ferry/mcpserver"
)

func init() { keyfile.ScryptWorkFactor = 10 } // keys locked below: a cheap scrypt, the same format

// ownerOnly are the owner's actions no MCP tool may expose (docs/threat-model.md
// "Hostile MCP callers"): grants and seats, the master key's rotation and pin, the
// keystore (export, import, lock, unlock) and release signing.
var ownerOnly = []string{"grant", "seat", "revoke", "rotate", "repin", "pin", "export", "import", "lock", "unlock", "approve", "sign"}

// secretWords may name no argument of any tool: a passphrase is never given to, read
// by or echoed by the MCP server.
var secretWords = []string{"passphrase", "password", "seed", "private"}

// schemaWalk calls fn on every property name and every enum value of a JSON schema.
func schemaWalk(v any, fn func(kind, s string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			switch k {
			case "properties":
				if props, ok := sub.(map[string]any); ok {
					for name, p := range props {
						fn("property", name)
						schemaWalk(p, fn)
					}
				}
			case "enum":
				if vals, ok := sub.([]any); ok {
					for _, e := range vals {
						if s, ok := e.(string); ok {
							fn("enum", s)
						}
					}
				}
			default:
				schemaWalk(sub, fn)
			}
		}
	case []any:
		for _, e := range x {
			schemaWalk(e, fn)
		}
	}
}

// TestMCPNeverActsAsOwner (docs/threat-model.md "Hostile MCP callers"): walks
// tools/list as served with every group of ferry's own tools (core, admin, legacy; the
// gateway only forwards other servers' tools) and asserts that no tool name, action or
// argument exposes an owner-only action or takes a passphrase; then calls every tool
// that has an action argument with each owner-only action (ferry_update approve among
// them) and asserts the call is refused as invalid.
func TestMCPNeverActsAsOwner(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "claude-code-laptop", Open: b.open, Groups: []string{"admin", "legacy"}})
	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.request("tools/list", `{}`), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != len(coreTools)+len(adminNames)+len(legacyNames) {
		t.Fatalf("served %d tools, want every group's", len(list.Tools))
	}
	var withAction []string
	for _, tl := range list.Tools {
		for _, w := range ownerOnly {
			if strings.Contains(tl.Name, w) {
				t.Errorf("tool %s names the owner-only action %q", tl.Name, w)
			}
		}
		if strings.Contains(strings.ToLower(tl.Description), "passphrase") {
			t.Errorf("tool %s mentions a passphrase", tl.Name)
		}
		schemaWalk(tl.InputSchema, func(kind, s string) {
			low := strings.ToLower(s)
			for _, w := range secretWords {
				if kind == "property" && strings.Contains(low, w) {
					t.Errorf("tool %s takes an argument %q", tl.Name, s)
				}
			}
			if kind == "enum" {
				for _, w := range ownerOnly {
					if low == w || strings.HasPrefix(low, w+"_") || strings.HasPrefix(low, w+"-") {
						t.Errorf("tool %s offers the owner-only value %q", tl.Name, s)
					}
				}
			}
		})
		if props, ok := tl.InputSchema["properties"].(map[string]any); ok && props["action"] != nil {
			withAction = append(withAction, tl.Name)
		}
	}
	if len(withAction) < 4 {
		t.Fatalf("tools with an action argument: %v; the walk found too few to mean anything", withAction)
	}
	for _, tool := range withAction {
		for _, act := range append(ownerOnly, "set") {
			if got := r.fail(tool, map[string]any{"action": act}); !strings.HasPrefix(got, "invalid") {
				t.Errorf("%s action %s: %s, want invalid", tool, act, got)
			}
		}
	}
}

// TestMCPLockedKey (docs/threat-model.md "The owner's key, locked keys and the pause
// switch"): with the agent's key locked, reads work and every write answers `locked`
// with the command to run (`ferry key unlock --as NAME`), writing nothing; the server
// never asks for, takes or prints a passphrase — after the owner unlocks the key in a
// terminal, the same server writes.
func TestMCPLockedKey(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	const agent = "codex-laptop"
	p := b.ch.Project()
	if _, err := b.home.LockKey(p, agent, []byte("a passphrase")); err != nil {
		t.Fatal(err)
	}
	seg := ledger.SegmentPath(b.dir, agent, b.ch.Device) // this machine's segment of the agent
	before, _ := os.ReadFile(seg)
	r := newRig(t, mcpserver.FerryConfig{Agent: agent, Open: b.open})
	r.ok("ferry_catchup", nil, nil)
	got := r.fail("ferry_talk", map[string]any{"action": "post", "to": "codex-desktop", "text": "while locked"})
	if !strings.HasPrefix(got, "locked") || !strings.Contains(got, "ferry key unlock --as "+agent) {
		t.Fatalf("write with a locked key: %s, want locked naming the unlock command", got)
	}
	if strings.Contains(got, "a passphrase") {
		t.Fatal("the answer echoes the passphrase")
	}
	got = r.fail("ferry_orders", map[string]any{"action": "new", "title": "While locked", "body": "nothing"})
	if !strings.HasPrefix(got, "locked") {
		t.Fatalf("order new with a locked key: %s, want locked", got)
	}
	if after, _ := os.ReadFile(seg); string(after) != string(before) {
		t.Fatal("a refused write changed the agent's segment")
	}
	if n, _ := filepath.Glob(filepath.Join(b.dir, "messages", "*.json")); len(n) > 0 {
		for _, f := range n {
			if raw, _ := os.ReadFile(f); strings.Contains(string(raw), "while locked") {
				t.Fatal("a refused write left a message file")
			}
		}
	}
	if _, err := b.home.UnlockKey(p, agent, []byte("a passphrase"), 3600e9); err != nil {
		t.Fatal(err)
	}
	r.ok("ferry_talk", map[string]any{"action": "post", "to": "codex-desktop", "text": "unlocked now"}, nil)
	if after, _ := os.ReadFile(seg); len(after) <= len(before) {
		t.Fatal("the write after unlock did not reach this machine's segment (the check above looked at the wrong file)")
	}
}
