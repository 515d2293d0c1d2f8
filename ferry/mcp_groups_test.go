package main

// The MCP tool groups (docs/design.md §4) through ferry processes: `ferry mcp serve
// --tools admin,legacy` and `--read-only` driven by the real clients, a group name
// refused, the tools array byte-identical across processes of different agents,
// machines, time zones and protocol versions for every combination, and an idempotency
// key replayed by a second server process after the first has exited.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/schematest"
	"github.com/google/jsonschema-go/jsonschema"
)

var (
	mcpAdminTools  = []string{"ferry_get", "ferry_search", "ferry_status", "ferry_update"}
	mcpLegacyTools = []string{"channel_status", "discover", "get_task", "list_engines", "list_learnings", "list_ledger", "list_tasks", "read_memory"}
)

func TestMCPGroups(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	for _, kind := range mcpClientKinds {
		t.Run("groups/"+kind.name, func(t *testing.T) {
			t.Parallel()
			mcpGroupsJourney(t, bin, kind)
		})
	}
	t.Run("read-only", func(t *testing.T) {
		t.Parallel()
		mcpReadOnly(t, bin)
	})
	t.Run("bad-group", func(t *testing.T) {
		t.Parallel()
		m := newMCPMachine(t, bin)
		m.channel("acme", "bob")
		for _, args := range [][]string{{"--tools", "gateways"}, {"--tools", "admin", "--read-only"}, {"--tools", "gateway", "--read-only"}} {
			so, se, code := m.ferry(append([]string{"mcp", "serve", "--as", "bob", "--project", "acme"}, args...)...)
			if code != 2 || so != "" || !strings.HasPrefix(se, "ferry: error: invalid: ") {
				t.Errorf("mcp serve %v: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, an invalid error", args, code, so, se)
			}
		}
	})
	t.Run("tools-list-stable", func(t *testing.T) {
		t.Parallel()
		mcpToolsListStable(t, bin)
	})
	t.Run("idempotent-across-processes", func(t *testing.T) {
		t.Parallel()
		mcpIdempotentAcrossProcesses(t, bin)
	})
}

// startWith spawns `ferry mcp serve` with extra flags through kind's client, checks the
// tool names, and returns an mcpAgent whose ok checks every result against the output
// schema the client listed, closed at the top level.
func startWith(t *testing.T, m *mcpMachine, kind mcpClientKind, agent, project string, want []string, extra ...string) *mcpAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	c, err := kind.connect(ctx, m.serve(agent, project, extra...), kind.version)
	if err != nil {
		t.Fatalf("%s: connecting to ferry mcp serve %v: %v", kind.name, extra, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	a := &mcpAgent{t: t, name: agent, c: c, schemas: map[string]*jsonschema.Resolved{}}
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatalf("%s: tools/list: %v", kind.name, err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
		rs, err := schematest.Closed(tl.OutputSchema)
		if err != nil {
			t.Fatalf("%s: outputSchema of %s: %v\n%s", kind.name, tl.Name, err, tl.OutputSchema)
		}
		a.schemas[tl.Name] = rs
	}
	if !slices.Equal(names, want) {
		t.Fatalf("%s: mcp serve %v lists %v, want %v", kind.name, extra, names, want)
	}
	return a
}

// mcpGroupsJourney: with --tools admin,legacy every admin and legacy tool answers over
// the real client, each result valid against its output schema; the repeated flag
// serves the same.
func mcpGroupsJourney(t *testing.T, bin string, kind mcpClientKind) {
	m := newMCPMachine(t, bin)
	ch := m.channel("acme", "alice", "bob")
	if err := os.WriteFile(filepath.Join(ch, "memory", "team.md"), []byte("# Team\n\nalice reviews the parser work.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all := append(append(append([]string{}, mcpCoreTools...), mcpAdminTools...), mcpLegacyTools...)
	slices.Sort(all)
	alice := startWith(t, m, kind, "alice", "acme", all, "--tools", "admin,legacy")
	bob := startWith(t, m, kind, "bob", "acme", all, "--tools", "legacy", "--tools", "admin")

	alice.ok("ferry_join", nil, nil)
	var o wireOrders
	alice.ok("ferry_orders", map[string]any{"action": "new", "title": "Swap the TOML parser", "body": "The old one chokes on CRLF."}, &o)
	id := o.Order.ID
	bob.ok("ferry_orders", map[string]any{"action": "claim", "id": id}, nil)
	bob.ok("ferry_orders", map[string]any{"action": "submit", "id": id, "ref": "commit 1a2b3c4"}, nil)
	alice.ok("ferry_orders", map[string]any{"action": "review", "id": id, "verdict": "accept"}, nil)

	var hits struct {
		Hits []struct {
			URI string `json:"uri"`
		} `json:"hits"`
	}
	bob.ok("ferry_search", map[string]any{"query": "crlf"}, &hits)
	if len(hits.Hits) != 1 || hits.Hits[0].URI != "ferry://acme/order/"+id {
		t.Fatalf("ferry_search crlf: %+v, want the order", hits.Hits)
	}
	var got struct {
		Text string `json:"text"`
	}
	bob.ok("ferry_get", map[string]any{"uri": hits.Hits[0].URI}, &got)
	if !strings.Contains(got.Text, "The old one chokes on CRLF.") {
		t.Errorf("ferry_get: %q, want the order's body", got.Text)
	}
	bob.ok("ferry_get", map[string]any{"uri": "ferry://acme/memory/team.md"}, &got)
	if !strings.Contains(got.Text, "alice reviews") {
		t.Errorf("ferry_get of a memory note: %q", got.Text)
	}
	bob.ok("ferry_status", nil, nil)

	bob.ok("channel_status", nil, nil)
	bob.ok("discover", map[string]any{"detail": true}, nil)
	bob.ok("list_tasks", map[string]any{"state": "accepted"}, nil)
	bob.ok("get_task", map[string]any{"id": id}, nil)
	var mem struct {
		Files []struct {
			File string `json:"file"`
		} `json:"files"`
	}
	bob.ok("read_memory", nil, &mem)
	if len(mem.Files) != 1 || mem.Files[0].File != "team.md" {
		t.Errorf("read_memory: %+v", mem.Files)
	}
	bob.ok("read_memory", map[string]any{"file": "team.md"}, nil)
	bob.ok("list_ledger", map[string]any{"limit": 5}, nil)
	var learned struct {
		Learnings []struct {
			Submitter string `json:"submitter"`
			Kept      bool   `json:"kept"`
			Order     string `json:"order"`
		} `json:"learnings"`
	}
	bob.ok("list_learnings", nil, &learned)
	if len(learned.Learnings) != 1 || learned.Learnings[0].Submitter != "bob" || !learned.Learnings[0].Kept || learned.Learnings[0].Order != id {
		t.Errorf("list_learnings: %+v, want bob's accepted result", learned.Learnings)
	}
	bob.ok("list_engines", nil, nil)
	if msg := bob.fail("read_memory", map[string]any{"file": "../channel.toml"}); !strings.HasPrefix(msg, "not_found:") {
		t.Errorf("read_memory outside memory/: %q", msg)
	}
}

// mcpReadOnly: --read-only lists the legacy tools alone, a core tool is unknown, and
// the session writes nothing to the ledger.
func mcpReadOnly(t *testing.T, bin string) {
	m := newMCPMachine(t, bin)
	ch := m.channel("acme", "bob")
	before := segmentSizes(t, ch)
	kind := mcpClientKinds[0]
	bob := startWith(t, m, kind, "bob", "acme", mcpLegacyTools, "--read-only")
	bob.ok("channel_status", nil, nil)
	bob.ok("list_tasks", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	if r, err := bob.c.CallTool(ctx, "ferry_join", map[string]any{}); err == nil && !r.IsError {
		t.Errorf("ferry_join on a read-only server succeeded: %s", r.Text)
	}
	_ = bob.c.Close()
	if after := segmentSizes(t, ch); after != before {
		t.Errorf("a read-only session changed the ledger:\n%s\n%s", before, after)
	}
}

// segmentSizes lists the channel's ledger segments with their sizes.
func segmentSizes(t *testing.T, ch string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(ch, "ledger"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprint(p, " ", info.Size()))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// rawToolsList runs initialize (version) and tools/list on a fresh process of m with
// env added and returns the tools/list result bytes as written.
func rawToolsList(t *testing.T, m *mcpMachine, agent, version string, env []string, extra ...string) []byte {
	t.Helper()
	cmd := m.serve(agent, "acme", extra...)
	cmd.Env = append(cmd.Env, env...)
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	cmd.Stdin = strings.NewReader(in)
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := runWithin(cmd, mcpDeadline); err != nil {
		t.Fatalf("mcp serve %v: %v\n%s", extra, err, errb.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && string(r.ID) == "2" {
			// The tools array exactly as written (the modern era adds members around it).
			var res map[string]json.RawMessage
			if err := json.Unmarshal(r.Result, &res); err != nil || res["tools"] == nil {
				t.Fatalf("tools/list result %s", r.Result)
			}
			return res["tools"]
		}
	}
	t.Fatalf("no tools/list answer in %q", out.String())
	return nil
}

// runWithin runs cmd, killing it after d.
func runWithin(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		return <-done
	}
}

// mcpToolsListStable (T8): for every combination of groups, two processes on two
// machines (two FERRY_HOMEs: two device ids), as two agents, in two time zones, in two
// protocol versions, write the same tools array, byte for byte.
func mcpToolsListStable(t *testing.T, bin string) {
	m1, m2 := newMCPMachine(t, bin), newMCPMachine(t, bin)
	m1.channel("acme", "alice")
	m2.channel("acme", "claude-code-beastly-2")
	for _, extra := range [][]string{nil, {"--tools", "admin"}, {"--tools", "legacy"}, {"--tools", "admin,legacy"}, {"--read-only"}} {
		a := rawToolsList(t, m1, "alice", "2024-11-05", []string{"TZ=UTC"}, extra...)
		b := rawToolsList(t, m2, "claude-code-beastly-2", "2025-11-25", []string{"TZ=Asia/Kathmandu", "LANG=de_DE.UTF-8"}, extra...)
		if !bytes.Equal(a, b) || len(a) < 100 {
			t.Errorf("mcp serve %v: the tools array differs between processes:\n%s\n%s", extra, a, b)
		}
		if bytes.Contains(a, []byte("alice")) {
			t.Errorf("mcp serve %v: the tools array names the agent", extra)
		}
	}
}

// mcpIdempotentAcrossProcesses: a keyed ferry_orders new is replayed by a second
// server process after the first exited and the order moved on: the same answer, byte
// for byte, one order; the key with another title is a conflict.
func mcpIdempotentAcrossProcesses(t *testing.T, bin string) {
	m := newMCPMachine(t, bin)
	m.channel("acme", "alice", "bob")
	kind := mcpClientKinds[0]
	args := map[string]any{"action": "new", "title": "Keyed order", "body": "made once", "key": "order-1"}
	first := startWith(t, m, kind, "alice", "acme", mcpCoreTools)
	var o wireOrders
	r1 := first.ok("ferry_orders", args, &o)
	if err := first.c.Close(); err != nil || !first.c.Exited() {
		t.Fatalf("the first server did not exit cleanly: %v", err)
	}
	m.must("order", "claim", o.Order.ID, "--project", "acme", "--as", "bob")
	m.must("order", "progress", o.Order.ID, "--note", "started", "--project", "acme", "--as", "bob")

	second := startWith(t, m, kind, "alice", "acme", mcpCoreTools)
	if r2 := second.ok("ferry_orders", args, nil); !bytes.Equal(r1, r2) {
		t.Errorf("the replay in a second process answered\n%s\nwant the first answer\n%s", r2, r1)
	}
	if msg := second.fail("ferry_orders", map[string]any{"action": "new", "title": "Another", "key": "order-1"}); !strings.HasPrefix(msg, "conflict:") {
		t.Errorf("the key with another title: %q, want a conflict", msg)
	}
	out := m.must("order", "list", "--project", "acme", "--json")
	if n := strings.Count(out, "Keyed order"); n != 1 {
		t.Errorf("%d orders titled Keyed order, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, `"Another"`); n != 0 {
		t.Errorf("the conflicting call made an order:\n%s", out)
	}
}
