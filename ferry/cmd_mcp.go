package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/recheck"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/ferryhq/ferry/mcpserver/gateway"
)

// McpCmd groups the MCP commands.
type McpCmd struct {
	Serve   McpServeCmd   `cmd:"" help:"Serve the channel to an AI app over MCP (stdio JSON-RPC)."`
	Add     McpAddCmd     `cmd:"" help:"Add an MCP server to the gateway (--tools gateway)."`
	Remove  McpRemoveCmd  `cmd:"" help:"Remove an MCP server from the gateway."`
	Servers McpServersCmd `cmd:"" help:"List the gateway's MCP servers."`
	List    McpListCmd    `cmd:"" help:"List the tools of a gateway MCP server."`
	Call    McpCallCmd    `cmd:"" help:"Call one tool of a gateway MCP server."`
}

// McpServeCmd is `ferry mcp serve --as AGENT --project ID`.
type McpServeCmd struct {
	Tools         []string      `help:"Also serve an opt-in tool group: admin (ferry_search, ferry_get, ferry_status, ferry_update), gateway (the tools of ferry mcp add's servers) or legacy (the old read tools); repeat or comma-separate." placeholder:"GROUP" sep:","`
	ReadOnly      bool          `help:"Serve the legacy read tools only: nothing that writes." name:"read-only"`
	PresenceEvery time.Duration `help:"How often to rewrite this agent's presence file." default:"60s" hidden:""`
	workspaceFlag
}

// Help is the long help.
func (c *McpServeCmd) Help() string {
	return "An AI app (Claude Code, Claude Desktop, Codex, Cursor) spawns this as a stdio MCP server.\n" +
		"One process is one agent in one project. Start-up checks that the channel is named\n" +
		"(--channel DIR holds a channel.toml, or --project ID is mapped on this machine, or one\n" +
		"project is) and exits 2 with the fix when not; the channel is opened on the first tool\n" +
		"call. stdout carries only JSON-RPC; logs go to stderr.\n\n" +
		"By default the six core tools are served. --tools admin adds ferry_search, ferry_get,\n" +
		"ferry_status and ferry_update; --tools legacy adds the old read tools (channel_status,\n" +
		"discover, list_tasks, get_task, read_memory, list_ledger, list_learnings, list_engines).\n" +
		"--tools gateway adds the tools of the servers of `ferry mcp servers` as <name>_<tool>, each\n" +
		"server started on first use (a servers.toml that cannot be read: no gateway tools, the\n" +
		"error on stderr and in the capabilities resource). --read-only serves the legacy read tools alone."
}

// Run implements the command: it serves stdin/stdout until EOF or a signal.
func (c *McpServeCmd) Run(g *Globals) error {
	if g.As == "" {
		return errs.Errorf(errs.Invalid, "pass --as NAME (one identity per server), e.g. --as claude-code-laptop", "no agent name given")
	}
	if err := fold.CheckName("agent name", g.As); err != nil {
		return err
	}
	// Before answering anything: the channel this server is for must be named, so an
	// app's own `mcp list` shows the entry failed instead of connected (one read of the
	// config dir, no fold).
	if err := g.checkChannelNamed(); err != nil {
		return err
	}
	// A config that cannot be read does not stop the server: it serves the
	// core tools, no gateway tools, and reports why (stderr, the capabilities resource).
	var servers []*gateway.Server
	var gatewayErr error
	if slices.Contains(c.Tools, mcpserver.GroupGateway) {
		h, err := g.Home()
		if err != nil {
			return err
		}
		servers, gatewayErr = gateway.Servers(h, g.Project)
	}
	srv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{
		Gateway:       servers,
		GatewayError:  gatewayErr,
		Agent:         g.As,
		Open:          g.Open,
		Version:       currentVersion(),
		Log:           g.stderr,
		PresenceEvery: c.PresenceEvery,
		Groups:        c.Tools,
		ReadOnly:      c.ReadOnly,
		// The command catalog, walked from the model of the whole CLI (catalog.go) on
		// the first read of ferry://<project>/commands or capabilities, so the server
		// never imports the CLI and start-up never builds the whole model.
		Commands: func() (json.RawMessage, error) {
			app, err := catalogModel()
			if err != nil {
				return nil, err
			}
			return catalogJSON(app)
		},
		Workspace: c.Workspace,
	})
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Off the request path: the owner's newest checkpoint folded again, once per
	// checkpoint on this machine (package fsbus/recheck).
	// A read-only server writes nothing, and MCP never writes master entries.
	if !c.ReadOnly && g.As != fold.MasterWriter {
		recheck.Start(ctx, g.Open, g.As, g.stderr)
	}
	return srv.Serve(ctx, g.stdin, g.stdout)
}
