package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/ferryhq/ferry/mcpserver/gateway"
)

// fakeTok returns n deterministic pseudo-random alphanumerics: a token body that is no
// live credential.
func fakeTok(seed uint64, n int) string {
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = alpha[r.IntN(len(alpha))]
	}
	return string(b)
}

// TestSecretGuardMCP: the same refusal through MCP as on the command line: invalid, the
// kind and field named, the value never echoed, nothing written.
func TestSecretGuardMCP(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})
	tok := "ghp_" + fakeTok(1, 36)
	env := "API_KEY=" + fakeTok(2, 16)
	var made struct {
		Order struct {
			ID string `json:"id"`
		} `json:"order"`
	}
	r.ok("ferry_orders", map[string]any{"action": "new", "title": "plain"}, &made)
	r.ok("ferry_orders", map[string]any{"action": "claim", "id": made.Order.ID}, nil)
	cases := []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"ferry_talk", map[string]any{"action": "post", "to": "all", "text": "use " + tok}, "message body"},
		{"ferry_orders", map[string]any{"action": "new", "title": "t " + tok}, "order title"},
		{"ferry_orders", map[string]any{"action": "new", "title": "t", "body": "set\n" + env}, "order body"},
		{"ferry_orders", map[string]any{"action": "progress", "id": made.Order.ID, "note": env}, "progress note"},
		{"ferry_orders", map[string]any{"action": "submit", "id": made.Order.ID, "ref": "main", "note": tok}, "result summary"},
		{"ferry_ask_human", map[string]any{"action": "raise", "title": "t", "recommendation": "r", "reasoning": tok}, "ask reasoning"},
	}
	for _, tc := range cases {
		before := dirState(t, b.dir)
		text := r.fail(tc.tool, tc.args)
		if !strings.HasPrefix(text, "invalid: the "+tc.field+" looks like it holds") || !strings.Contains(text, "ferry secret put") {
			t.Errorf("%s %v: %s", tc.tool, tc.args["action"], text)
		}
		if strings.Contains(text, tok) || strings.Contains(text, env) || strings.Contains(text, tok[4:20]) {
			t.Errorf("%s: the refusal echoes the value: %s", tc.tool, text)
		}
		if dirState(t, b.dir) != before {
			t.Errorf("%s %v: the channel changed on a refusal", tc.tool, tc.args["action"])
		}
	}
}

// dirState is a fingerprint of every file under dir: its path and size.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d", p, info.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestPauseMCP: a paused machine's server answers `paused` to every tool call but the
// read-only status calls (docs/threat-model.md "The owner's key, locked keys and the
// pause switch"), and no tool call lifts the pause.
func TestPauseMCP(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{mcpserver.GroupAdmin, mcpserver.GroupLegacy}})
	for _, project := range []string{"", b.ch.Project()} {
		if _, err := b.home.Pause(project, "incident 42", busyClock); err != nil {
			t.Fatal(err)
		}
		allowed := map[string]map[string]any{
			"ferry_status":    {},
			"ferry_primary":   {"action": "status"},
			"ferry_ask_human": {"action": "status"},
			"ferry_orders":    {"action": "list"},
		}
		for tool, args := range allowed {
			if text := r.call(tool, args).Text; strings.HasPrefix(text, "paused:") {
				t.Errorf("%s %v while paused: %s (a read-only status call must answer)", tool, args, text)
			}
		}
		refused := []struct {
			tool string
			args map[string]any
		}{
			{"ferry_join", nil},
			{"ferry_catchup", nil},
			{"ferry_talk", map[string]any{"action": "read"}},
			{"ferry_talk", map[string]any{"action": "post", "to": "all", "text": "hi"}},
			{"ferry_orders", map[string]any{"action": "new", "title": "t"}},
			{"ferry_primary", map[string]any{"action": "takeover"}},
			{"ferry_primary", map[string]any{"action": "standby"}},
			{"ferry_ask_human", map[string]any{"action": "raise", "title": "t", "recommendation": "r"}},
			{"ferry_update", map[string]any{"action": "apply"}},
			{"ferry_search", map[string]any{"query": "x"}},
			{"list_tasks", nil},
		}
		before := dirState(t, b.dir)
		for _, c := range refused {
			text := r.fail(c.tool, c.args)
			if !strings.HasPrefix(text, "paused: ") || !strings.Contains(text, "ferry resume") || !strings.Contains(text, "incident 42") {
				t.Errorf("%s %v while paused (%q): %s", c.tool, c.args, project, text)
			}
		}
		if dirState(t, b.dir) != before {
			t.Error("a paused server changed the channel")
		}
		// Nothing an MCP client sends lifts the pause: every tool, unpause-like words.
		for _, name := range r.tools {
			for _, act := range []string{"resume", "unpause", "pause"} {
				r.call(name, map[string]any{"action": act})
			}
		}
		if b.home.Paused(project) == nil {
			t.Fatalf("a tool call lifted the pause (%q)", project)
		}
		if _, err := b.home.Resume(""); err != nil {
			t.Fatal(err)
		}
	}
	// Resumed: the same server writes again.
	r.ok("ferry_talk", map[string]any{"action": "post", "to": "all", "text": "back"}, nil)
}

// TestNoVaultOrPauseTool: no MCP tool of any group reads or writes the vault, pauses or
// resumes (docs/threat-model.md "The owner's key, locked keys and the pause switch"):
// no tool is named for them, and no input schema has a member for a secret's name or
// value.
func TestNoVaultOrPauseTool(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{mcpserver.GroupAdmin, mcpserver.GroupLegacy}})
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Input       json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.request("tools/list", `{}`), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) < 10 {
		t.Fatalf("only %d tools listed", len(list.Tools))
	}
	for _, tl := range list.Tools {
		low := strings.ToLower(tl.Name + " " + tl.Description + " " + string(tl.Input))
		for _, w := range []string{"secret", "vault", "unpause", "resume", "decrypt", "passphrase"} {
			if strings.Contains(low, w) {
				t.Errorf("tool %s mentions %q: MCP must never reach the vault or the pause switch", tl.Name, w)
			}
		}
	}
	// The vault's files are out of reach of ferry_get too.
	s, err := b.ch.As("codex-laptop")
	if err != nil {
		t.Fatal(err)
	}
	sec, err := s.SecretPut("db-password", []string{"codex-desktop"}, []byte("v"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{sec.ID, "db-password", "ferry://" + b.ch.Project() + "/vault/db-password", "vault/db-password/" + sec.ID + ".age"} {
		if rep := r.call("ferry_get", map[string]any{"uri": q}); !rep.IsError {
			t.Errorf("ferry_get %q answered: %s", q, rep.Text)
		}
	}
}

// TestPauseMCPGateway: the gateway's proxied tools answer paused too, and without a
// reachable channel the machine-wide switch still holds for them.
func TestPauseMCPGateway(t *testing.T) {
	bin := buildFixture(t)
	b := copyBusy(t)
	home := t.TempDir()
	t.Setenv(fsbus.EnvHome, home)
	local, err := fsbus.LocalHome()
	if err != nil {
		t.Fatal(err)
	}
	broken := func() (*fsbus.Channel, error) {
		return nil, errs.Errorf(errs.NotFound, "pass --channel", "no channel here")
	}
	for _, c := range []struct {
		name string
		open func() (*fsbus.Channel, error)
		home *fsbus.Home
	}{{"channel", b.open, b.home}, {"no channel", broken, local}} {
		r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: c.open, Groups: []string{mcpserver.GroupGateway},
			Gateway: []*gateway.Server{{Name: "fx", Command: bin}}})
		if rep := r.call("fx_echo", map[string]any{"x": "hi"}); rep.IsError {
			t.Fatalf("%s: fx_echo before the pause: %s", c.name, rep.Text)
		}
		if _, err := c.home.Pause("", "", busyClock); err != nil {
			t.Fatal(err)
		}
		if text := r.fail("fx_echo", map[string]any{"x": "hi"}); !strings.HasPrefix(text, "paused: ") {
			t.Errorf("%s: fx_echo while paused: %s", c.name, text)
		}
		if _, err := c.home.Resume(""); err != nil {
			t.Fatal(err)
		}
	}
}
