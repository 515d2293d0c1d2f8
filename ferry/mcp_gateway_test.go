package main

// The gateway end to end (docs/mcp.md "Gateway"): `ferry mcp serve --tools gateway`
// driven by the official go-sdk client, forwarding to two real child processes — a
// ferry server of another project on another FERRY_HOME, and the misbehaving fixture
// server of mcpserver/testdata/gwfixture.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMCPGateway(t *testing.T) {
	gw := gwfixtureBuild() // built while the tests before the parallel ones run
	t.Parallel()
	bin := ferryExe(t)
	fixture := gw.wait(t)

	// Another project on another machine (its own FERRY_HOME): carol is seated there.
	other := newMCPMachine(t, bin)
	other.channel("other", "carol")
	// This machine: bob in acme, with two gateway servers.
	m := newMCPMachine(t, bin)
	m.channel("acme", "bob")
	m.must("mcp", "add", "oth", "--env", "FERRY_HOME="+other.home, "--",
		bin, "mcp", "serve", "--as", "carol", "--project", "other")
	pidfile := filepath.Join(t.TempDir(), "pids")
	m.must("mcp", "add", "fx", "--project", "acme", "--project-local", "--call-timeout", "500ms", "--", fixture, "-pidfile", pidfile)
	// A server named ferry that is this ferry, for another
	// project of this machine, with no --env: it gets ferry's home, and its tools are
	// gw_ferry_…, never ferry's own names.
	m.channel("beta", "b1")
	if out := m.must("mcp", "add", "ferry", "--", bin, "mcp", "serve", "--as", "b1", "--project", "beta"); !strings.Contains(out, "runs this ferry binary: it gets FERRY_HOME") {
		t.Errorf("mcp add of ferry itself says: %s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*mcpDeadline)
	defer cancel()
	c, err := connectGoSDK(ctx, m.serve("bob", "acme", "--tools", "gateway"), "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, c.Stderr())
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	want := slices.Clone(mcpCoreTools)
	for _, n := range []string{"echo", "env", "slow", "hangup", "crash", "garbage", "rpc_error", "fail"} {
		want = append(want, "fx_"+n)
	}
	for _, n := range mcpCoreTools {
		want = append(want, "oth_"+n, "gw_ferry_"+n)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools/list:\n got %q\nwant %q\nstderr: %s", names, want, c.Stderr())
	}
	// The ferry child acts in beta as b1, with this machine's home; ferry_join is bob's.
	r, err := c.CallTool(ctx, "gw_ferry_ferry_join", map[string]any{})
	if err != nil || r.IsError || !strings.Contains(r.Text, "b1") || !strings.Contains(r.Text, "beta") {
		t.Fatalf("gw_ferry_ferry_join: %v %+v\n%s", err, r, c.Stderr())
	}

	// A call forwarded to the other project's ferry: carol joins there.
	r, err = c.CallTool(ctx, "oth_ferry_join", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || !strings.Contains(r.Text, "carol") {
		t.Fatalf("oth_ferry_join: isError %v, text %s\n%s", r.IsError, r.Text, c.Stderr())
	}
	var join struct {
		Agent   string `json:"agent"`
		Project string `json:"project"`
	}
	if err := json.Unmarshal(r.Structured, &join); err != nil || join.Agent != "carol" || join.Project != "other" {
		t.Errorf("oth_ferry_join structuredContent %s (%v): want carol in other", r.Structured, err)
	}
	// bob's own tools still act in acme.
	r, err = c.CallTool(ctx, "ferry_join", map[string]any{})
	if err != nil || r.IsError || !strings.Contains(r.Text, "acme") {
		t.Fatalf("ferry_join: %v %+v", err, r)
	}
	// A remote tool's own error passes through; a remote failure maps to a category.
	r, err = c.CallTool(ctx, "fx_fail", map[string]any{})
	if err != nil || !r.IsError || r.Text != "the widget is broken" {
		t.Errorf("fx_fail: %v %+v", err, r)
	}
	r, err = c.CallTool(ctx, "fx_rpc_error", map[string]any{})
	if err != nil || !r.IsError || !strings.HasPrefix(r.Text, "invalid: MCP server fx refused rpc_error: bad widget") {
		t.Errorf("fx_rpc_error: %v %+v", err, r)
	}
	r, err = c.CallTool(ctx, "fx_slow", map[string]any{})
	if err != nil || !r.IsError || !strings.HasPrefix(r.Text, "retry_needed: MCP server fx did not answer slow within 500ms") {
		t.Errorf("fx_slow: %v %+v", err, r)
	}
	// The killed child is gone; the next call starts it again, and again after a crash
	// (one bad tool does not disable the server).
	b, _ := os.ReadFile(pidfile)
	first, _ := strconv.Atoi(strings.Fields(string(b))[0])
	waitPidGone(t, first)
	r, err = c.CallTool(ctx, "fx_crash", map[string]any{})
	if err != nil || !r.IsError || !strings.Contains(r.Text, "the next call starts it again") {
		t.Errorf("fx_crash: %v %+v", err, r)
	}
	b, _ = os.ReadFile(pidfile)
	crashed, _ := strconv.Atoi(strings.Fields(string(b))[1])
	waitPidGone(t, crashed)
	r, err = c.CallTool(ctx, "fx_echo", map[string]any{"x": "again"})
	if err != nil || r.IsError || r.Text != `{"x":"again"}` {
		t.Errorf("fx_echo after the restarts: %v %+v", err, r)
	}
	// The other ferry child answers still; closing the session ends every child.
	if r, err := c.CallTool(ctx, "oth_ferry_catchup", map[string]any{}); err != nil || r.IsError {
		t.Errorf("oth_ferry_catchup: %v %+v", err, r)
	}
	if err := c.Close(); err != nil {
		t.Errorf("closing: %v", err)
	}
	b, _ = os.ReadFile(pidfile)
	pids := strings.Fields(string(b))
	if len(pids) != 3 {
		t.Fatalf("fixture pids %q, want 3 (two restarts)", pids)
	}
	third, _ := strconv.Atoi(pids[2])
	waitPidGone(t, third)
	// `ferry mcp list` names each server's tools exactly as serve did (after the
	// session: the CLI's own fx child appends to the pidfile).
	for _, srv := range []string{"oth", "fx", "ferry"} {
		var listed struct {
			Tools []struct {
				Gateway string `json:"gateway_name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(m.must("mcp", "list", srv, "--project", "acme", "--json")), &listed); err != nil {
			t.Fatal(err)
		}
		for _, tl := range listed.Tools {
			if !slices.Contains(names, tl.Gateway) {
				t.Errorf("mcp list %s names %s, which serve does not serve", srv, tl.Gateway)
			}
		}
		if len(listed.Tools) == 0 {
			t.Errorf("mcp list %s: no tools", srv)
		}
	}
}

// TestMCPGatewayBrokenConfig: a servers.toml that cannot be read does not stop
// `ferry mcp serve --tools gateway`: the core tools are served,
// no gateway tool, and the capabilities resource says why.
func TestMCPGatewayBrokenConfig(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	m := newMCPMachine(t, bin)
	m.channel("acme", "bob")
	cfg := filepath.Join(m.home, "config", "servers.toml")
	if err := os.WriteFile(cfg, []byte("[servers.x\ncommand = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*mcpDeadline)
	defer cancel()
	c, err := connectGoSDK(ctx, m.serve("bob", "acme", "--tools", "gateway"), "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, c.Stderr())
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	want := slices.Sorted(slices.Values(mcpCoreTools))
	if !slices.Equal(names, want) {
		t.Errorf("tools/list %q, want the core tools %q", names, want)
	}
	if r, err := c.CallTool(ctx, "ferry_join", map[string]any{}); err != nil || r.IsError {
		t.Errorf("ferry_join: %v %+v", err, r)
	}
	cs, err := c.ReadResource(ctx, "ferry://acme/capabilities")
	if err != nil || len(cs) != 1 {
		t.Fatalf("capabilities: %v %v", err, cs)
	}
	var caps struct {
		GatewayError string `json:"gateway_error"`
	}
	if err := json.Unmarshal([]byte(cs[0].Text), &caps); err != nil || !strings.Contains(caps.GatewayError, "servers.toml") {
		t.Errorf("capabilities gateway_error %q (%v)", caps.GatewayError, err)
	}
	if !strings.Contains(c.Stderr(), "serving no gateway tools") {
		t.Errorf("stderr: %s", c.Stderr())
	}
}

// waitPidGone fails the test unless pid is gone within mcpDeadline.
func waitPidGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(mcpDeadline)
	for pidRunning(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gwfixtureBuild starts the build of mcpserver/testdata/gwfixture, built once.
func gwfixtureBuild() *build { return startBuild("gwfixture", "../mcpserver/testdata/gwfixture") }

// TestMCPGatewayListClean: `ferry mcp list` prints a server's tools with their control
// characters shown as \xNN, never raw, and drops nameless and repeated tools with a
// warning.
func TestMCPGatewayListClean(t *testing.T) {
	gw := gwfixtureBuild() // built while the tests before the parallel ones run
	t.Parallel()
	bin := ferryExe(t)
	fixture := gw.wait(t)
	m := newMCPMachine(t, bin)
	m.must("mcp", "add", "bad", "--", fixture, "-badnames")
	stdout, stderr, code := m.ferry("mcp", "list", "bad")
	if code != 0 {
		t.Fatalf("mcp list: exit %d\n%s", code, stderr)
	}
	if strings.ContainsAny(stdout+stderr, "\x1b\x00") {
		t.Errorf("raw control characters reached the terminal: %q %q", stdout, stderr)
	}
	if !strings.Contains(stdout, "echo\tbad_echo\tThe \\x1b[31mecho\\x1b[0m tool.\\x00\n") {
		t.Errorf("echo's line: %q", stdout)
	}
	if n := strings.Count(stdout, "\tbad_echo\t"); n != 1 {
		t.Errorf("bad_echo listed %d times: %q", n, stdout)
	}
	if strings.Count(stderr, "a tool with no name; dropped") != 2 || !strings.Contains(stderr, `the tool "echo" twice; the second dropped`) {
		t.Errorf("stderr: %q", stderr)
	}
}
