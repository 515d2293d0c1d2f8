package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/mcpserver/client"
)

// The MCP benchmarks time the real binary's `ferry mcp serve` as an AI app drives it:
// spawned as a child, spoken to over its stdin/stdout by client.Conn, on a copy of
// the busy fixture (fixtures/README.md), acting as benchAgent (a member whose key is in
// the fixture's home). Figures are in docs/benchmarks.md.

// mcpServe is the command an app runs: `ferry mcp serve --as benchAgent` on the copy.
func (c *busyCopy) mcpServe() *exec.Cmd {
	cmd := exec.Command(c.bin, "mcp", "serve", "--as", benchAgent, "--channel", c.channel)
	env := []string{"FERRY_HOME=" + c.home}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

var benchClientOptions = client.Options{
	StartTimeout: 30 * time.Second, CallTimeout: 30 * time.Second, ExitTimeout: 30 * time.Second,
	ProtocolVersion: "2025-11-25", Name: "ferry-bench",
}

// BenchmarkMCPSpawnInitialize times spawning `ferry mcp serve` and getting its answer
// to initialize (aim ≤ 15 ms, docs/benchmarks.md). Closing the child's stdin and
// reaping it is not timed.
func BenchmarkMCPSpawnInitialize(b *testing.B) {
	c := newBusyCopy(b, releaseBinary(b))
	for b.Loop() {
		cl, err := client.Start(context.Background(), c.mcpServe(), benchClientOptions)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if cl.Init.ProtocolVersion != "2025-11-25" {
			b.Fatalf("initialize answered protocol %q", cl.Init.ProtocolVersion)
		}
		if err := cl.Close(); err != nil {
			b.Fatalf("closing the server: %v", err)
		}
		b.StartTimer()
	}
}

// BenchmarkMCPToolCall times one tools/call round trip on a long-lived server: a
// ferry_catchup (the full digest, no cursor) and a ferry_orders list (the 40 open
// orders). Each call loads the channel afresh, as every call of a running server does.
func BenchmarkMCPToolCall(b *testing.B) {
	c := newBusyCopy(b, releaseBinary(b))
	cl, err := client.Start(context.Background(), c.mcpServe(), benchClientOptions)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cl.Close(); err != nil {
			b.Errorf("closing the server: %v", err)
		}
	})
	for _, bc := range []struct {
		name string
		tool string
		args map[string]any
		want string // in the result's text
	}{
		{"catchup", "ferry_catchup", nil, `"agent":"` + benchAgent + `"`},
		{"orders_list", "ferry_orders", map[string]any{"action": "list", "state": "open"}, `"orders":[{`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				r, err := cl.CallTool(context.Background(), bc.tool, bc.args)
				if err != nil {
					b.Fatal(err)
				}
				if r.IsError || !strings.Contains(r.Text(), bc.want) {
					b.Fatalf("%s: unexpected result: %.300s", bc.tool, r.Text())
				}
			}
		})
	}
}
