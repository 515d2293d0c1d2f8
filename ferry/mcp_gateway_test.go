package main

// The gateway end to end (issue 9): `ferry mcp serve --tools gateway` driven by the
// official go-sdk client, forwarding to two real child processes — a ferry server of
// another project on another FERRY_HOME, and the misbehaving fixture server of
// mcpserver/testdata/gwfixture.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMCPGateway(t *testing.T) {
	bin := mcpBinary(t)
	fixture := filepath.Join(t.TempDir(), "gwfixture")
	if runtime.GOOS == "windows" {
		fixture += ".exe"
	}
	if out, err := exec.Command("go", "build", "-o", fixture, "../mcpserver/testdata/gwfixture").CombinedOutput(); err != nil {
		t.Fatalf("building the fixture: %v\n%s", err, out)
	}

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
		want = append(want, "oth_"+n)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools/list:\n got %q\nwant %q\nstderr: %s", names, want, c.Stderr())
	}

	// A call forwarded to the other project's ferry: carol joins there.
	r, err := c.CallTool(ctx, "oth_ferry_join", map[string]any{})
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
	// The killed child is gone; the next call restarts it once.
	b, _ := os.ReadFile(pidfile)
	first, _ := strconv.Atoi(strings.Fields(string(b))[0])
	waitPidGone(t, first)
	r, err = c.CallTool(ctx, "fx_echo", map[string]any{"x": "again"})
	if err != nil || r.IsError || r.Text != `{"x":"again"}` {
		t.Errorf("fx_echo after the restart: %v %+v", err, r)
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
	if len(pids) != 2 {
		t.Fatalf("fixture pids %q, want 2 (one restart)", pids)
	}
	second, _ := strconv.Atoi(pids[1])
	waitPidGone(t, second)
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
