package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/ferryhq/ferry/mcpserver/client"
	"github.com/ferryhq/ferry/mcpserver/gateway"
)

// The gateway's commands (docs/mcp.md "Gateway"): the MCP servers that
// `ferry mcp serve --tools gateway` forwards to, kept in this machine's config.

// McpAddCmd is `ferry mcp add NAME [--env NAME…] [--project-local] -- COMMAND ARGS…`.
type McpAddCmd struct {
	Name           string        `arg:"" help:"Server name: 1–32 of a-z, 0-9, '_' and '-', starting with a letter or digit."`
	Command        []string      `arg:"" passthrough:"" help:"The server's command and its arguments, after --."`
	Env            []string      `help:"Give the server this variable: NAME passes ferry's own value when it starts (never stored), NAME=VALUE sets it (stored: no secrets); repeat." placeholder:"NAME"`
	ProjectLocal   bool          `help:"Keep the entry for --project only (it shadows a machine-wide entry of the same name)." name:"project-local"`
	StartupTimeout time.Duration `help:"Kill the server when it has not answered initialize by then." default:"10s" name:"startup-timeout"`
	CallTimeout    time.Duration `help:"Kill the server when a call has not been answered by then." default:"60s" name:"call-timeout"`
}

// Help is the long help.
func (c *McpAddCmd) Help() string {
	return "Adds a stdio MCP server to this machine's gateway config (<config>/servers.toml, or with\n" +
		"--project-local <config>/projects/<project>/servers.toml). `ferry mcp serve --tools gateway`\n" +
		"then serves each of its tools as <name>_<tool>.\n\n" +
		"The server gets only PATH, HOME, USERPROFILE, SystemRoot, TEMP, TMP and TMPDIR from ferry's\n" +
		"environment, plus what --env names; a server that is this ferry binary also gets FERRY_HOME,\n" +
		"XDG_CONFIG_HOME, XDG_CACHE_HOME, APPDATA and LOCALAPPDATA (ferry's home). Example:\n\n" +
		"  ferry mcp add github --env GITHUB_TOKEN -- github-mcp-server stdio"
}

// Run implements the command.
func (c *McpAddCmd) Run(g *Globals) error {
	path, scope, err := c.target(g)
	if err != nil {
		return err
	}
	s := &gateway.Server{Name: c.Name, Scope: scope, Env: c.Env,
		StartupTimeout: c.StartupTimeout.String(), CallTimeout: c.CallTimeout.String()}
	if len(c.Command) > 0 && c.Command[0] == "--" {
		c.Command = c.Command[1:]
	}
	if len(c.Command) > 0 {
		s.Command, s.Args = c.Command[0], c.Command[1:]
	}
	if err := s.Validate(); err != nil {
		return err
	}
	// A command given as a path is stored absolute: the gateway runs from anywhere.
	if strings.ContainsRune(s.Command, filepath.Separator) || strings.ContainsRune(s.Command, '/') {
		if abs, err := filepath.Abs(s.Command); err == nil {
			s.Command = abs
		}
	}
	if err := commandRunnable(s.Command); err != nil {
		return err
	}
	if err := c.prefixFree(g); err != nil {
		return err
	}
	err = gateway.Update(path, func(m map[string]*gateway.Server) error {
		if _, dup := m[c.Name]; dup {
			return errs.Errorf(errs.Conflict, fmt.Sprintf("remove it first: ferry mcp remove %s%s", c.Name, c.flagHint()),
				"an MCP server named %s is already configured in %s", c.Name, path)
		}
		m[c.Name] = s
		return nil
	})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(s)
	}
	g.printf("added MCP server %s (%s) to %s\n", c.Name, scope, path)
	see := "see its tools: ferry mcp list " + c.Name
	if c.ProjectLocal {
		see += " --project " + g.Project
	}
	g.printf("%s\n", see)
	if isFerry(s.Command) {
		g.printf("note: %s runs this ferry binary: it gets %s from ferry's environment (ferry's home), and otherwise only %s and what --env names\n",
			c.Name, strings.Join(gateway.FerryEnv, ", "), strings.Join(gateway.BaseEnv, ", "))
	}
	return nil
}

// isFerry reports whether command is this very ferry executable (the gateway then
// passes it gateway.FerryEnv).
func isFerry(command string) bool {
	self, err := os.Executable()
	if err != nil {
		return false
	}
	p, err := exec.LookPath(command)
	if err != nil {
		return false
	}
	a, err1 := os.Stat(p)
	b, err2 := os.Stat(self)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// commandRunnable checks an entry's command before it is stored: not_found for a
// command missing from PATH or from disk, and for a file that cannot be executed.
func commandRunnable(command string) error {
	if filepath.IsAbs(command) {
		st, err := os.Stat(command)
		switch {
		case err != nil:
			return errs.Errorf(errs.NotFound, "check the path, or install the server", "command %s not found: %v", command, err)
		case st.IsDir():
			return errs.Errorf(errs.NotFound, "give the server's program, not a directory", "command %s is a directory", command)
		case runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0:
			return errs.Errorf(errs.NotFound, "chmod +x "+command, "command %s is not executable (permission denied)", command)
		}
	}
	if _, err := exec.LookPath(command); err != nil {
		return errs.Errorf(errs.NotFound, "install it, or give its absolute path", "command %s not found: %v", command, err)
	}
	return nil
}

// prefixFree refuses a name whose tools would be named like those of another server
// this gateway sees (my-srv and my_srv: both my_srv_…), which would rename that
// server's tools. A project-local entry of the same name shadows
// the machine's and is allowed.
func (c *McpAddCmd) prefixFree(g *Globals) error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	servers, err := gateway.Servers(h, g.Project)
	if err != nil {
		return err
	}
	prefix := func(name string) string { return gateway.Prefixes([]string{name})[name] }
	mine := prefix(c.Name)
	for _, s := range servers {
		if s.Name != c.Name && prefix(s.Name) == mine {
			return errs.Errorf(errs.Conflict, "choose another name",
				"the tools of %s would be named like those of the MCP server %s (%s_…)", c.Name, s.Name, mine)
		}
	}
	return nil
}

func (c *McpAddCmd) flagHint() string {
	if c.ProjectLocal {
		return " --project-local"
	}
	return ""
}

// target is the config file of --project-local or of the machine.
func (c *McpAddCmd) target(g *Globals) (path, scope string, err error) {
	return gatewayTarget(g, c.ProjectLocal)
}

func gatewayTarget(g *Globals, projectLocal bool) (path, scope string, err error) {
	h, err := g.Home()
	if err != nil {
		return "", "", err
	}
	if !projectLocal {
		return gateway.ConfigPath(h, ""), gateway.ScopeMachine, nil
	}
	if g.Project == "" {
		return "", "", errs.Errorf(errs.Invalid, "pass --project ID with --project-local", "--project-local needs a project")
	}
	if err := fold.CheckName("project id", g.Project); err != nil {
		return "", "", err
	}
	return gateway.ConfigPath(h, g.Project), gateway.ScopeProject, nil
}

// McpRemoveCmd is `ferry mcp remove NAME [--project-local]`.
type McpRemoveCmd struct {
	Name         string `arg:"" help:"Server name."`
	ProjectLocal bool   `help:"Remove the entry of --project, not the machine-wide one." name:"project-local"`
}

// Run implements the command.
func (c *McpRemoveCmd) Run(g *Globals) error {
	path, scope, err := gatewayTarget(g, c.ProjectLocal)
	if err != nil {
		return err
	}
	err = gateway.Update(path, func(m map[string]*gateway.Server) error {
		if _, ok := m[c.Name]; !ok {
			hint := "see `ferry mcp servers`"
			if !c.ProjectLocal && g.Project != "" {
				hint += "; a project-local entry needs --project-local"
			}
			return errs.Errorf(errs.NotFound, hint, "no %s MCP server named %s in %s", scope, c.Name, path)
		}
		delete(m, c.Name)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "removed MCP server %s (%s)\n", c.Name, scope)
	return nil
}

// McpServersCmd is `ferry mcp servers [--json]`.
type McpServersCmd struct{}

// Help is the long help.
func (c *McpServersCmd) Help() string {
	return "Lists the gateway's MCP servers: the machine-wide ones and, with --project, that project's\n" +
		"(a project-local entry shadows a machine-wide one of the same name)."
}

// Run implements the command.
func (c *McpServersCmd) Run(g *Globals) error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	servers, err := gateway.Servers(h, g.Project)
	if err != nil {
		return err
	}
	if g.JSON {
		if servers == nil {
			servers = []*gateway.Server{}
		}
		return g.printJSON(map[string]any{"servers": servers})
	}
	if len(servers) == 0 {
		fmt.Fprintln(g.stdout, "no MCP servers; add one with: ferry mcp add NAME -- COMMAND ARGS…")
		return nil
	}
	for _, s := range servers {
		startup, call := s.Timeouts()
		line := fmt.Sprintf("%s\t%s\t%s", s.Name, s.Scope, strings.Join(append([]string{s.Command}, s.Args...), " "))
		if len(s.Env) > 0 {
			line += "\tenv " + strings.Join(envNames(s.Env), ",")
		}
		fmt.Fprintf(g.stdout, "%s\ttimeouts %s/%s\n", line, startup, call)
	}
	return nil
}

// envNames are the variable names of an entry's env (values are not printed).
func envNames(env []string) []string {
	out := make([]string, len(env))
	for i, e := range env {
		out[i], _, _ = strings.Cut(e, "=")
	}
	return out
}

// gatewayFor returns a gateway over the one server name (not started).
func gatewayFor(g *Globals, name string) (*gateway.Gateway, error) {
	h, err := g.Home()
	if err != nil {
		return nil, err
	}
	servers, err := gateway.Servers(h, g.Project)
	if err != nil {
		return nil, err
	}
	for _, s := range servers {
		if s.Name == name {
			// Every server, so names are computed as serve computes them; only name
			// (and those whose names it can collide with) are started.
			return gateway.New(servers, gateway.Options{Reserved: mcpserver.FerryToolNames(), Log: g.stderr, Version: currentVersion(), OneShot: true}), nil
		}
	}
	return nil, errs.Errorf(errs.NotFound, "see `ferry mcp servers`, or add it with `ferry mcp add "+name+" -- COMMAND`", "no MCP server named %s is configured", name)
}

// McpListCmd is `ferry mcp list NAME`.
type McpListCmd struct {
	Name string `arg:"" help:"Server name."`
}

// Help is the long help.
func (c *McpListCmd) Help() string {
	return "Starts the server, lists its tools and stops it. The gateway serves each as <name>_<tool>\n" +
		"(lower-case, other characters as '_', at most 64; a hash suffix resolves collisions; a server\n" +
		"named ferry or ferry_… gets gw_ before its name). The names are those `ferry mcp serve` uses:\n" +
		"servers whose names could collide with NAME's are started too. Tools with no name or a\n" +
		"repeated one are dropped with a warning."
}

// Run implements the command.
func (c *McpListCmd) Run(g *Globals) error {
	gw, err := gatewayFor(g, c.Name)
	if err != nil {
		return err
	}
	defer gw.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	named, err := gw.Named(ctx, c.Name)
	if err != nil {
		return err
	}
	tools := make([]client.Tool, len(named))
	names := make([]string, len(named))
	for i, n := range named {
		tools[i], names[i] = n.Remote, n.Name
	}
	if g.JSON {
		type tool struct {
			Name        string          `json:"name"`
			Gateway     string          `json:"gateway_name"`
			Description string          `json:"description,omitempty"`
			InputSchema json.RawMessage `json:"inputSchema,omitempty"`
		}
		out := make([]tool, len(tools))
		for i, t := range tools {
			out[i] = tool{t.Name, names[i], t.Description, t.InputSchema}
		}
		return g.printJSON(map[string]any{"server": c.Name, "tools": out})
	}
	if len(tools) == 0 {
		g.printf("MCP server %s has no tools\n", c.Name)
	}
	for i, t := range tools {
		// The server's text is cleaned (printf): no terminal escape reaches the screen.
		d, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
		g.printf("%s\t%s\t%s\n", t.Name, names[i], d)
	}
	return nil
}

// McpCallCmd is `ferry mcp call NAME TOOL --args JSON|@FILE`.
type McpCallCmd struct {
	Name string `arg:"" help:"Server name."`
	Tool string `arg:"" help:"The tool's name as the server lists it (ferry mcp list NAME)."`
	Args string `help:"The tool's arguments: a JSON object, or @FILE holding one." default:"{}" placeholder:"JSON|@FILE"`
}

// Help is the long help.
func (c *McpCallCmd) Help() string {
	return "Starts the server, calls one tool and stops it. Prints the tool's text (--json: the whole\n" +
		"result). A tool that reports an error (isError) exits 1 with its text."
}

// Run implements the command.
func (c *McpCallCmd) Run(g *Globals) error {
	text, err := readArg(c.Args)
	if err != nil {
		return err
	}
	if err := contract.CheckIJSON([]byte(text), "--args"); err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &obj); err != nil || obj == nil {
		msg := "not a JSON object"
		if err != nil {
			msg = err.Error()
		}
		return errs.Errorf(errs.Invalid, `pass a JSON object, e.g. --args '{"query":"x"}'`, "--args is not a JSON object: %s", msg)
	}
	gw, err := gatewayFor(g, c.Name)
	if err != nil {
		return err
	}
	defer gw.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	raw, err := gw.Call(ctx, c.Name, c.Tool, json.RawMessage(text))
	if err != nil {
		return err
	}
	var r client.ToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("decoding the result of %s: %w", c.Tool, err)
	}
	if g.JSON {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return fmt.Errorf("formatting the result: %w", err)
		}
		fmt.Fprintln(g.stdout, b.String())
	} else if !r.IsError {
		g.printf("%s\n", r.Text())
	}
	if r.IsError {
		return errs.Errorf(errs.Internal, "the tool's own error: see its text; ferry ran the call. The server gets none of your environment but "+
			strings.Join(gateway.BaseEnv, ", ")+" and what its --env names (ferry mcp servers)",
			"tool %s of MCP server %s reported an error: %s", c.Tool, c.Name, r.Text())
	}
	return nil
}
