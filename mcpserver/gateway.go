package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus"
)

// Bounds on what the gateway passes through from another server's tools/list.
const (
	// MaxGatewayDescription bounds a forwarded tool description, in bytes; a longer one
	// is cut at a rune boundary and ends in "…".
	MaxGatewayDescription = 1024
	// MaxGatewaySchema bounds a forwarded inputSchema, in bytes of JSON; a larger one (or
	// one that is not a JSON object) is replaced by {"type":"object"}.
	MaxGatewaySchema = 16 << 10
	// maxGatewayStarts is how many times one server's child is started in a gateway's
	// life: the first start and one restart after a crash or a kill.
	maxGatewayStarts = 2
)

// GatewayOptions configure a Gateway.
type GatewayOptions struct {
	// Reserved are tool names the gateway must not use (the ferry tools served beside
	// it); a sanitised name equal to one gets a hash suffix.
	Reserved []string
	// Log receives one line per server that fails to start or list (stderr).
	Log io.Writer
	// LookupEnv reads ferry's environment for the children (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Version is the clientInfo version sent to the children.
	Version string
}

// Gateway forwards tools of other MCP servers (issue 9, docs/mcp.md "Gateway"). Each
// configured server's child is started lazily — on the first tools/list, or the first
// call of one of its tools — kept for the gateway's life, and restarted once after it
// crashed or was killed; after a second failure its tools fail until the gateway
// restarts. Every child gets only the environment its entry names (ChildEnv), runs in
// its own process group, and is killed when it misses its start-up or call timeout,
// closes stdout, or prints anything on stdout that is not JSON-RPC (Strict).
//
// A Gateway is a ToolSource; it is safe for concurrent use.
type Gateway struct {
	opts     GatewayOptions
	reserved map[string]bool
	conns    []*gwConn // sorted by server name
}

// gwConn is one server's child, started at most maxGatewayStarts times.
type gwConn struct {
	g   *Gateway
	srv *GatewayServer

	mu     sync.Mutex // serialises starting and listing
	c      *Client
	starts int
	failed error        // the last start's failure, once the starts are spent
	tools  []RemoteTool // the server's tools once listed
	listed bool
}

// NewGateway returns a gateway over servers; nothing is started.
func NewGateway(servers []*GatewayServer, opts GatewayOptions) *Gateway {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	g := &Gateway{opts: opts, reserved: map[string]bool{}}
	for _, n := range opts.Reserved {
		g.reserved[n] = true
	}
	for _, s := range servers {
		g.conns = append(g.conns, &gwConn{g: g, srv: s})
	}
	sort.Slice(g.conns, func(i, j int) bool { return g.conns[i].srv.Name < g.conns[j].srv.Name })
	return g
}

// Close ends every child (EOF, then a kill after the exit timeout).
func (g *Gateway) Close() {
	for _, c := range g.conns {
		c.mu.Lock()
		if c.c != nil {
			_ = c.c.Close()
			c.c = nil
		}
		c.mu.Unlock()
	}
}

func (g *Gateway) conn(server string) *gwConn {
	for _, c := range g.conns {
		if c.srv.Name == server {
			return c
		}
	}
	return nil
}

// Tools lists every server's tools (starting the children not yet started, in
// parallel) as gateway tools named by GatewayToolNames. A server that fails is logged
// and left out.
func (g *Gateway) Tools(ctx context.Context) []*Tool {
	lists := make([][]RemoteTool, len(g.conns))
	var wg sync.WaitGroup
	for i, c := range g.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, err := c.list(ctx)
			if err != nil {
				fmt.Fprintf(g.opts.Log, "mcp: gateway: %v\n", err)
			}
			lists[i] = ts
		}()
	}
	wg.Wait()
	var refs []ToolRef
	var remote []RemoteTool
	var conns []*gwConn
	for i, c := range g.conns {
		for _, t := range lists[i] {
			refs = append(refs, ToolRef{Server: c.srv.Name, Tool: t.Name})
			remote = append(remote, t)
			conns = append(conns, c)
		}
	}
	names := GatewayToolNames(refs, g.reserved)
	tools := make([]*Tool, len(refs))
	for i, r := range refs {
		c, rt := conns[i], remote[i]
		tools[i] = &Tool{
			Name:        names[i],
			Description: gatewayDescription(c.srv.Name, rt.Description),
			InputSchema: gatewaySchema(rt.InputSchema),
			Call: func(ctx context.Context, args json.RawMessage) (any, error) {
				raw, err := c.call(ctx, r.Tool, args)
				if err != nil {
					if ctx.Err() != nil {
						return nil, err
					}
					// Rendered here, not by the server's ToolError: the remote text is
					// the point, even for an internal failure.
					return RawToolResult(gatewayErrorResult(err)), nil
				}
				return RawToolResult(raw), nil
			},
		}
	}
	return tools
}

// List starts server if needed and returns its tools (the CLI's `ferry mcp list`).
// Errors: not_found for a server not configured, else as Call.
func (g *Gateway) List(ctx context.Context, server string) ([]RemoteTool, error) {
	c := g.conn(server)
	if c == nil {
		return nil, unknownServer(server)
	}
	return c.list(ctx)
}

// Call runs tool of server with args (a JSON object) and returns the raw tools/call
// result — a result with isError is a result, not an error. Errors, as *fsbus.Error:
// not_found (server not configured, command not found), retry_needed (a timeout or a
// crash: the child was killed or is gone; the next call restarts it once), invalid (the
// server refused the request: its text), internal (any other JSON-RPC error, garbage on
// stdout, a server that failed twice).
func (g *Gateway) Call(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	c := g.conn(server)
	if c == nil {
		return nil, unknownServer(server)
	}
	return c.call(ctx, tool, args)
}

// Pid returns the process id of server's child, 0 when none is running (tests).
func (g *Gateway) Pid(server string) int {
	c := g.conn(server)
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return 0
	}
	return c.c.Pid()
}

func unknownServer(name string) error {
	return fsbus.Errorf(fsbus.CatNotFound, "see `ferry mcp servers`, or add it with `ferry mcp add "+name+" -- COMMAND`", "no MCP server named %s is configured", name)
}

// client returns the live child, starting it when there is none (c.mu held).
func (c *gwConn) client(ctx context.Context) (*Client, error) {
	if c.c != nil {
		if c.c.alive() {
			return c.c, nil
		}
		c.c.Kill() // reaps it
		c.c = nil
	}
	if c.starts >= maxGatewayStarts {
		return nil, fsbus.Errorf(fsbus.CatInternal, "fix the server, then restart ferry mcp serve (your app's MCP connection)",
			"MCP server %s failed %d times; the gateway gave up on it: %v", c.srv.Name, c.starts, c.failed)
	}
	c.starts++
	startup, call := c.srv.Timeouts()
	cmd := exec.Command(c.srv.Command, c.srv.Args...)
	cmd.Env = c.srv.ChildEnv(c.g.opts.LookupEnv)
	cl, err := Start(ctx, cmd, ClientOptions{
		StartTimeout: startup, CallTimeout: call,
		Name: "ferry-gateway", Version: c.g.opts.Version,
		Strict: true, ProcessGroup: true,
	})
	if err != nil {
		c.failed = gatewayError(c.srv.Name, "initialize", startup, err)
		return nil, c.failed
	}
	if v := cl.Init.ProtocolVersion; !slices.Contains(SupportedVersions, v) {
		// MCP lifecycle: a client that does not speak the version the server answered
		// disconnects.
		cl.Kill()
		c.failed = fsbus.Errorf(fsbus.CatInternal, "use a version of the server that speaks one of "+strings.Join(SupportedVersions, ", "),
			"MCP server %s answered initialize with protocol version %q, which ferry does not speak", c.srv.Name, v)
		return nil, c.failed
	}
	c.failed = fsbus.Errorf(fsbus.CatRetryNeeded, "", "MCP server %s stopped", c.srv.Name)
	c.c = cl
	if c.starts > 1 {
		fmt.Fprintf(c.g.opts.Log, "mcp: gateway: restarted MCP server %s (pid %d)\n", c.srv.Name, cl.Pid())
	}
	return cl, nil
}

// list returns the server's tools, listing them once per child.
func (c *gwConn) list(ctx context.Context) ([]RemoteTool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed {
		return c.tools, nil
	}
	cl, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := cl.ListTools(ctx)
	if err != nil {
		_, call := c.srv.Timeouts()
		c.failed = gatewayError(c.srv.Name, "tools/list", call, err)
		return nil, c.failed
	}
	c.tools, c.listed = ts, true
	return ts, nil
}

// call forwards one tools/call and returns its raw result.
func (c *gwConn) call(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	c.mu.Lock()
	cl, err := c.client(ctx)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	err = cl.Call(ctx, "tools/call", map[string]any{"name": tool, "arguments": args}, &raw)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_, call := c.srv.Timeouts()
		err = gatewayError(c.srv.Name, tool, call, err)
		if !cl.alive() {
			c.mu.Lock()
			c.failed = err
			c.mu.Unlock()
		}
		return nil, err
	}
	var shape struct {
		Content []json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &shape) != nil || shape.Content == nil {
		return nil, fsbus.Errorf(fsbus.CatInternal, "the server does not follow MCP; report it to its authors",
			"MCP server %s answered tools/call %s with no content array", c.srv.Name, tool)
	}
	return raw, nil
}

// gatewayError maps a client failure to ferry's categories (docs/mcp.md "Gateway").
func gatewayError(server, what string, timeout time.Duration, err error) error {
	var re *RPCError
	switch {
	case errors.As(err, &re):
		cat := fsbus.CatInternal
		switch re.Code {
		case CodeInvalidParams, CodeInvalidRequest, CodeMethodNotFound, CodeParseError:
			cat = fsbus.CatInvalid
		}
		return &fsbus.Error{Category: cat, Message: fmt.Sprintf("MCP server %s refused %s: %s (code %d)", server, what, re.Message, re.Code),
			Hint: "check the arguments against the tool's inputSchema (ferry mcp list " + server + ")", Err: err}
	case errors.Is(err, ErrTimeout):
		return &fsbus.Error{Category: fsbus.CatRetryNeeded, Message: fmt.Sprintf("MCP server %s did not answer %s within %s; it was killed", server, what, timeout),
			Hint: "call again (the gateway restarts it once), or raise its timeouts with ferry mcp add", Err: err}
	case errors.Is(err, ErrGarbage):
		return &fsbus.Error{Category: fsbus.CatInternal, Message: fmt.Sprintf("MCP server %s broke the protocol during %s: %v", server, what, err),
			Hint: "a stdio MCP server must print only JSON-RPC on stdout (logs go to stderr); fix the server", Err: err}
	case errors.Is(err, ErrServerExited):
		return &fsbus.Error{Category: fsbus.CatRetryNeeded, Message: fmt.Sprintf("MCP server %s exited during %s: %v", server, what, err),
			Hint: "call again (the gateway restarts it once); its stderr is in the message", Err: err}
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return &fsbus.Error{Category: fsbus.CatNotFound, Message: fmt.Sprintf("the command of MCP server %s was not found: %v", server, err),
			Hint: "install it, or re-add the server with the command's absolute path", Err: err}
	}
	return &fsbus.Error{Category: fsbus.CatInternal, Message: fmt.Sprintf("MCP server %s failed during %s: %v", server, what, err),
		Hint: "run the server's command by hand to see why", Err: err}
}

// gatewayErrorResult is a tools/call isError result whose text is err's
// "category: message — hint".
func gatewayErrorResult(err error) json.RawMessage {
	text := err.Error()
	var fe *fsbus.Error
	if errors.As(err, &fe) {
		text = fe.Category + ": " + fe.Message
		if fe.Hint != "" {
			text += " — " + fe.Hint
		}
	}
	b, _ := marshal(toolError(text))
	return b
}

// gatewayDescription is a forwarded tool's description: the remote one, bounded, or a
// stand-in naming the server.
func gatewayDescription(server, d string) string {
	d = strings.TrimSpace(d)
	if d == "" {
		return "Tool of the MCP server " + server + " (through ferry's gateway)."
	}
	if len(d) <= MaxGatewayDescription {
		return d
	}
	cut := MaxGatewayDescription - len("…")
	for cut > 0 && !utf8.RuneStart(d[cut]) {
		cut--
	}
	return d[:cut] + "…"
}

// gatewaySchema is a forwarded inputSchema: the remote one when it is a JSON object of
// at most MaxGatewaySchema bytes, else {"type":"object"}.
func gatewaySchema(s json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if len(s) == 0 || len(s) > MaxGatewaySchema || json.Unmarshal(s, &obj) != nil || obj == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return s
}

// ToolRef names one tool of one gateway server.
type ToolRef struct{ Server, Tool string }

// maxToolName is the longest gateway tool name (issue 9: ^[a-z0-9_]{1,64}$).
const maxToolName = 64

// GatewayToolNames returns the gateway name of each ref, in order: "<server>_<tool>"
// lower-cased, every character outside [a-z0-9_] replaced by '_'. A name longer than
// 64 bytes is cut to 57 and given "_" and 6 hex digits of sha256("<server>\x00<tool>");
// every name shared by two refs, or equal to a reserved name, gets the same suffix
// (after a cut to 57 when needed). The result depends only on the set of refs and
// reserved names, not their order; suffixed names match ^[a-z0-9_]{1,64}$ as well.
func GatewayToolNames(refs []ToolRef, reserved map[string]bool) []string {
	plain := make([]string, len(refs))
	count := map[string]int{}
	for i, r := range refs {
		plain[i] = sanitizeToolName(r.Server + "_" + r.Tool)
		count[plain[i]]++
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		n := plain[i]
		if len(n) > maxToolName || count[n] > 1 || reserved[n] {
			sum := sha256.Sum256([]byte(r.Server + "\x00" + r.Tool))
			if len(n) > maxToolName-7 {
				n = n[:maxToolName-7]
			}
			n += "_" + hex.EncodeToString(sum[:3])
		}
		out[i] = n
	}
	return out
}

// sanitizeToolName lower-cases s and replaces every byte outside [a-z0-9_] by '_'.
func sanitizeToolName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
