package main

import (
	"context"
	"os"
	"os/signal"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/mcpserver"
)

// McpCmd groups the MCP commands.
type McpCmd struct {
	Serve McpServeCmd `cmd:"" help:"Serve the channel to an AI app over MCP (stdio JSON-RPC)."`
}

// McpServeCmd is `ferry mcp serve --as AGENT --project ID`.
type McpServeCmd struct {
	PresenceEvery time.Duration `help:"How often to rewrite this agent's presence file." default:"60s" hidden:""`
}

// Help is the long help.
func (c *McpServeCmd) Help() string {
	return "An AI app (Claude Code, Claude Desktop, Codex, Cursor) spawns this as a stdio MCP server.\n" +
		"One process is one agent in one project. Start-up reads nothing; the channel is opened\n" +
		"on the first tool call. stdout carries only JSON-RPC; logs go to stderr."
}

// Run implements the command: it serves stdin/stdout until EOF or a signal.
func (c *McpServeCmd) Run(g *Globals) error {
	if g.As == "" {
		return fsbus.Errorf(fsbus.CatInvalid, "pass --as NAME (one identity per server), e.g. --as claude-code-laptop", "no agent name given")
	}
	if !fsbus.ValidName(g.As) {
		return fsbus.Errorf(fsbus.CatInvalid, "use a-z, 0-9 and '-'", "%q is not a portable name", g.As)
	}
	srv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{
		Agent:         g.As,
		Open:          g.Open,
		Version:       version,
		Log:           g.stderr,
		PresenceEvery: c.PresenceEvery,
	})
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return srv.Serve(ctx, g.stdin, g.stdout)
}
