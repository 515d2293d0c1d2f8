// Package gateway forwards the tools of other MCP servers, each run as a child process
// of ferry's (docs/mcp.md "Gateway"). Its servers are kept in TOML on this machine
// (Servers, Update); a Gateway over them starts each child when it is first needed and
// names its tools for ferry's tool list:
//
//	servers, err := gateway.Servers(home, project)
//	g := gateway.New(servers, gateway.Options{Reserved: mcpserver.FerryToolNames()})
//	defer g.Close()
//	tools, err := g.Named(ctx, "")           // every server's tools, under their gateway names
//	raw, err := g.Forward(ctx, tools[0], args) // the child's tools/call result, passed on
//
// The MCP server serves these tools with --tools gateway; `ferry mcp list` and `ferry
// mcp call` use the same names.
package gateway

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
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/ijson"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/internal/textsafe"
	"github.com/ferryhq/ferry/mcpserver/client"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
)

// Bounds on what the gateway passes through from another server's tools/list.
const (
	// MaxDescription bounds a forwarded tool description, in bytes; a longer one is cut
	// at a rune boundary and ends in "…".
	MaxDescription = 1024
	// MaxSchema bounds a forwarded inputSchema, in bytes of JSON; a larger one (or one
	// that is not a JSON object) is replaced by {"type":"object"}.
	MaxSchema = 16 << 10
	// StartsPerMinute bounds how often one server's child is started: after a
	// crash, a kill on a timeout or a failed start the next call starts it again, but
	// never more than this many starts in any minute; past that, calls fail
	// (retry_needed, naming the time of the next start) until the minute has passed.
	StartsPerMinute = 5
)

// Options configure a Gateway.
type Options struct {
	// Reserved are tool names the gateway must not serve a forwarded tool under
	// (ferry's own, mcpserver.FerryToolNames); a sanitised name equal to one gets a
	// hash suffix.
	Reserved []string
	// Log receives one line per server that fails to start or list (stderr).
	Log io.Writer
	// LookupEnv reads ferry's environment for the children (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Version is the clientInfo version sent to the children.
	Version string
	// Self is the ferry executable; a server whose command is that same file also gets
	// FerryEnv ("" means os.Executable()).
	Self string
	// Now is the clock of the restart bound (time.Now).
	Now func() time.Time
	// OneShot marks a gateway that serves one command (ferry mcp call, ferry mcp list):
	// its errors say to run the command again, not that the next call restarts the
	// server.
	OneShot bool
}

// Gateway forwards tools of other MCP servers (docs/mcp.md "Gateway"). Each
// configured server's child is started lazily — on the first tools/list, or the first
// call of one of its tools — kept for the gateway's life, and started again by the next
// call after it crashed or was killed, at most StartsPerMinute times a minute. Every
// child gets only the environment its entry names (ChildEnv; a ferry child also
// FerryEnv), runs in its own process group, and is killed when it misses its
// start-up or call timeout, closes stdout, or prints anything on stdout that is not
// JSON-RPC (Strict).
//
// A Gateway is safe for concurrent use.
type Gateway struct {
	opts     Options
	reserved map[string]bool
	conns    []*child // sorted by server name
}

// child is one server's child, started at most StartsPerMinute times a minute.
type child struct {
	g   *Gateway
	srv *Server

	mu     sync.Mutex // serialises starting and listing
	c      *client.Conn
	starts []time.Time   // the starts of the last minute
	failed error         // the last failure (start, list, or a call that ended the child)
	tools  []client.Tool // the server's tools once listed
	listed bool
	// listFailed is when listing last failed: Tools (run on every tools/list, and on
	// every call of a run-time tool) tries such a server again only a minute later.
	listFailed time.Time
}

// New returns a gateway over servers; nothing is started.
func New(servers []*Server, opts Options) *Gateway {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Self == "" {
		opts.Self, _ = os.Executable()
	}
	g := &Gateway{opts: opts, reserved: map[string]bool{}}
	for _, n := range opts.Reserved {
		g.reserved[n] = true
	}
	for _, s := range servers {
		g.conns = append(g.conns, &child{g: g, srv: s})
	}
	slices.SortFunc(g.conns, func(a, b *child) int { return strings.Compare(a.srv.Name, b.srv.Name) })
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

// byName is the child of server, nil when none is configured.
func (g *Gateway) byName(server string) *child {
	for _, c := range g.conns {
		if c.srv.Name == server {
			return c
		}
	}
	return nil
}

// Tool is one forwarded tool: its server, the tool as the server lists it, and the
// name the gateway serves it under (ToolNames).
type Tool struct {
	Server string
	Remote client.Tool
	Name   string
}

// Description is the description t is served with: the server's own without control
// characters (CleanText), cut to MaxDescription bytes, or a stand-in naming the server.
func (t Tool) Description() string { return description(t.Server, t.Remote.Description) }

// InputSchema is the input schema t is served with: the server's own when it is a JSON
// object of at most MaxSchema bytes, else {"type":"object"}.
func (t Tool) InputSchema() json.RawMessage { return schema(t.Remote.InputSchema) }

// Named lists the tools of the servers (starting the children not yet started, in
// parallel) with their gateway names. With only == "" that is every server; else
// only's tools, named exactly as over every server: the servers listed are only and
// those whose names can collide with its (one's tool-name prefix starts the other's),
// the only ones that can change its names. A server that fails is logged and left out;
// the error of only is returned.
func (g *Gateway) Named(ctx context.Context, only string) ([]Tool, error) {
	if only != "" && g.byName(only) == nil {
		return nil, unknownServer(only)
	}
	all := make([]string, len(g.conns))
	for i, c := range g.conns {
		all[i] = c.srv.Name
	}
	prefixes := Prefixes(all)
	lists := make([][]client.Tool, len(g.conns))
	errs := make([]error, len(g.conns))
	var wg sync.WaitGroup
	for i, c := range g.conns {
		if only != "" && c.srv.Name != only && !prefixesMeet(prefixes[only], prefixes[c.srv.Name]) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lists[i], errs[i] = c.list(ctx)
			if errs[i] != nil && (only == "" || c.srv.Name != only) {
				fmt.Fprintf(g.opts.Log, "mcp: gateway: %s\n", CleanText(errs[i].Error()))
			}
		}()
	}
	wg.Wait()
	var refs []ToolRef
	var out []Tool
	for i, c := range g.conns {
		for _, t := range lists[i] {
			refs = append(refs, ToolRef{Server: c.srv.Name, Tool: t.Name})
			out = append(out, Tool{Server: c.srv.Name, Remote: t})
		}
	}
	names := ToolNames(all, refs, g.reserved)
	kept := out[:0]
	for i := range out {
		out[i].Name = names[i]
		if only == "" || out[i].Server == only {
			kept = append(kept, out[i])
		}
	}
	if only != "" {
		return kept, errs[slices.IndexFunc(g.conns, func(c *child) bool { return c.srv.Name == only })]
	}
	return kept, nil
}

// prefixesMeet reports whether a tool name under prefix a can equal one under b.
func prefixesMeet(a, b string) bool {
	return strings.HasPrefix(a+"_", b+"_") || strings.HasPrefix(b+"_", a+"_")
}

// Forward runs t (one of Named's) with args and returns the tools/call result to pass
// on: the server's own, isError included, or for a call that failed an isError result
// whose text is the failure's "category: message — hint" (Call's errors), the remote
// text being the point even for an internal failure. Its error is ctx's, when ctx
// ended.
func (g *Gateway) Forward(ctx context.Context, t Tool, args json.RawMessage) (json.RawMessage, error) {
	c := g.byName(t.Server)
	if c == nil {
		return errorResult(unknownServer(t.Server)), nil
	}
	raw, err := c.call(ctx, t.Remote.Name, args)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return errorResult(err), nil
	}
	return raw, nil
}

// List starts server if needed and returns its tools (the CLI's `ferry mcp list`).
// Errors: not_found for a server not configured, else as Call.
func (g *Gateway) List(ctx context.Context, server string) ([]client.Tool, error) {
	c := g.byName(server)
	if c == nil {
		return nil, unknownServer(server)
	}
	return c.list(ctx)
}

// Call runs tool of server with args (a JSON object) and returns the raw tools/call
// result — a result with isError is a result, not an error. Errors, as *errs.Error:
// not_found (server not configured, command not found), retry_needed (a timeout or a
// crash: the child was killed or is gone; the next call restarts it once), invalid (the
// server refused the request: its text), internal (any other JSON-RPC error, garbage on
// stdout, a server that failed twice).
func (g *Gateway) Call(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	c := g.byName(server)
	if c == nil {
		return nil, unknownServer(server)
	}
	return c.call(ctx, tool, args)
}

// Pid returns the process id of server's child, 0 when none is running (tests).
func (g *Gateway) Pid(server string) int {
	c := g.byName(server)
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
	return errs.Errorf(errs.NotFound, "see `ferry mcp servers`, or add it with `ferry mcp add "+name+" -- COMMAND`", "no MCP server named %s is configured", name)
}

// client returns the live child, starting it when there is none (c.mu held): at most
// StartsPerMinute starts in any minute, else a retry_needed error naming when the next
// start is allowed.
func (c *child) client(ctx context.Context) (*client.Conn, error) {
	if c.c != nil {
		if c.c.Alive() {
			return c.c, nil
		}
		c.c.Kill() // reaps it
		c.c = nil
	}
	now := c.g.opts.Now()
	recent := c.starts[:0]
	for _, t := range c.starts {
		if now.Sub(t) < time.Minute {
			recent = append(recent, t)
		}
	}
	c.starts = recent
	if len(c.starts) >= StartsPerMinute {
		next := c.starts[0].Add(time.Minute)
		return nil, errs.Errorf(errs.RetryNeeded,
			fmt.Sprintf("call again after that; check the server by hand with `ferry mcp list %s`, or restart your app to reset the gateway", c.srv.Name),
			"MCP server %s was started %d times in the last minute and failed (last: %v); the gateway starts it again after %s (in %ds)",
			c.srv.Name, len(c.starts), c.failed, next.UTC().Format(time.TimeOnly), int(next.Sub(now).Seconds()+0.999))
	}
	c.starts = append(c.starts, now)
	startup, call := c.srv.Timeouts()
	cmd := exec.Command(c.srv.Command, c.srv.Args...)
	cmd.Env = c.srv.ChildEnv(c.g.opts.LookupEnv)
	if sameFile(cmd.Path, c.g.opts.Self) {
		cmd.Env = withFerryEnv(cmd.Env, c.g.opts.LookupEnv)
	}
	if err := notExecutable(cmd.Path); err != nil {
		c.failed = err
		return nil, err
	}
	cl, err := client.Start(ctx, cmd, client.Options{
		StartTimeout: startup, CallTimeout: call,
		Name: "ferry-gateway", Version: c.g.opts.Version,
		Strict: true, ProcessGroup: true,
	})
	if err != nil {
		c.failed = c.g.failure(c.srv.Name, "initialize", startup, err)
		return nil, c.failed
	}
	if v := cl.Init.ProtocolVersion; !slices.Contains(protocol.SupportedVersions, v) {
		// MCP lifecycle: a client that does not speak the version the server answered
		// disconnects.
		cl.Kill()
		c.failed = errs.Errorf(errs.Internal, "use a version of the server that speaks one of "+strings.Join(protocol.SupportedVersions, ", "),
			"MCP server %s answered initialize with protocol version %q, which ferry does not speak", c.srv.Name, v)
		return nil, c.failed
	}
	c.c = cl
	if len(c.starts) > 1 {
		fmt.Fprintf(c.g.opts.Log, "mcp: gateway: restarted MCP server %s (pid %d)\n", c.srv.Name, cl.Pid())
	}
	return cl, nil
}

// FerryEnv are the variables a child that is ferry itself (the same executable) also
// gets from ferry's environment: those that choose ferry's home (fsbus.Home), so the
// child sees the same projects and keys as its parent.
var FerryEnv = []string{fsbus.EnvHome, "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "APPDATA", "LOCALAPPDATA"}

// withFerryEnv adds FerryEnv from lookup to env, unless env sets them already.
func withFerryEnv(env []string, lookup func(string) (string, bool)) []string {
	for _, n := range FerryEnv {
		if slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, n+"=") }) {
			continue
		}
		if v, ok := lookup(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// sameFile reports whether paths a and b name one existing file.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// notExecutable returns a not_found error when path is a file that cannot be run for
// want of permission (not an ENOENT: Start names those).
func notExecutable(path string) error {
	if !filepath.IsAbs(path) {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if st.IsDir() {
		return errs.Errorf(errs.NotFound, "give the server's program, not a directory", "the command %s is a directory", path)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0 {
		return errs.Errorf(errs.NotFound, "chmod +x "+path, "the command %s is not executable (permission denied)", path)
	}
	return nil
}

// list returns the server's tools, listed once (by the first child that answers); after
// a failure it answers that error for a minute without starting anything, so a server
// that hangs at start-up does not delay every call. Tools with no name, and every
// repeat of a name, are dropped with a line on the log.
func (c *child) list(ctx context.Context) ([]client.Tool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed {
		return c.tools, nil
	}
	if c.failed != nil && c.g.opts.Now().Sub(c.listFailed) < time.Minute {
		return nil, c.failed
	}
	cl, err := c.client(ctx)
	if err != nil {
		c.listFailed = c.g.opts.Now()
		return nil, err
	}
	ts, err := cl.ListTools(ctx)
	if err != nil {
		_, call := c.srv.Timeouts()
		c.failed = c.g.failure(c.srv.Name, "tools/list", call, err)
		c.listFailed = c.g.opts.Now()
		return nil, c.failed
	}
	seen := map[string]bool{}
	kept := make([]client.Tool, 0, len(ts))
	for _, t := range ts {
		switch {
		case strings.TrimSpace(t.Name) == "":
			fmt.Fprintf(c.g.opts.Log, "mcp: gateway: MCP server %s lists a tool with no name; dropped\n", c.srv.Name)
		case seen[t.Name]:
			fmt.Fprintf(c.g.opts.Log, "mcp: gateway: MCP server %s lists the tool %q twice; the second dropped\n", c.srv.Name, CleanText(t.Name))
		default:
			seen[t.Name] = true
			kept = append(kept, t)
		}
	}
	c.tools, c.listed = kept, true
	return kept, nil
}

// call forwards one tools/call and returns its raw result.
func (c *child) call(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
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
		err = c.g.failure(c.srv.Name, tool, call, err)
		if !cl.Alive() {
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
		return nil, errs.Errorf(errs.Internal, "the server does not follow MCP; report it to its authors",
			"MCP server %s answered tools/call %s with no content array", c.srv.Name, tool)
	}
	return raw, nil
}

// restartHint says what the next call does after a child ended (StartsPerMinute).
var restartHint = fmt.Sprintf("call again: the next call starts it again (at most %d starts a minute)", StartsPerMinute)

// oneShotHint replaces restartHint for a gateway that serves one command (OneShot).
const oneShotHint = "run the command again"

// envHint is said of a child that failed: it runs without most of ferry's environment.
var envHint = "It gets none of ferry's environment but " + strings.Join(BaseEnv, ", ") +
	" and the names its entry gives (ferry mcp servers shows them; add more with ferry mcp add --env NAME)"

// failure maps a client failure to ferry's categories (docs/mcp.md "Results and errors").
func (g *Gateway) failure(server, what string, timeout time.Duration, err error) error {
	restartHint := restartHint
	if g.opts.OneShot {
		restartHint = oneShotHint
	}
	var re *protocol.Error
	switch {
	case errors.As(err, &re):
		cat := errs.Internal
		switch re.Code {
		case protocol.CodeInvalidParams, protocol.CodeInvalidRequest, protocol.CodeMethodNotFound, protocol.CodeParseError:
			cat = errs.Invalid
		}
		return &errs.Error{Category: cat, Message: fmt.Sprintf("MCP server %s refused %s: %s (code %d)", server, what, re.Message, re.Code),
			Hint: "check the arguments against the tool's inputSchema (ferry mcp list " + server + ")", Err: err}
	case errors.Is(err, client.ErrTimeout):
		return &errs.Error{Category: errs.RetryNeeded, Message: fmt.Sprintf("MCP server %s did not answer %s within %s; it was killed", server, what, timeout),
			Hint: restartHint + ", or raise its timeouts (ferry mcp remove, then ferry mcp add --call-timeout)", Err: err}
	case errors.Is(err, client.ErrGarbage):
		return &errs.Error{Category: errs.Internal, Message: fmt.Sprintf("MCP server %s broke the protocol during %s: %v", server, what, err),
			Hint: "a stdio MCP server must print only JSON-RPC on stdout (logs go to stderr); fix the server (" + restartHint + ")", Err: err}
	case errors.Is(err, client.ErrNotIJSON):
		why := err.Error()
		var ie *ijson.Error
		if errors.As(err, &ie) {
			why = secretguard.RedactIJSON(ie)
		}
		return &errs.Error{Category: errs.Internal, Message: fmt.Sprintf("MCP server %s answered %s with JSON that is not I-JSON (RFC 7493), so it was not passed on: %s", server, what, why),
			Hint: "fix the server: ferry passes on no JSON that names a member twice in one object, is not UTF-8, or has a lone surrogate escape, since readers disagree on what it says (the server keeps running)", Err: err}
	case errors.Is(err, client.ErrServerExited):
		return &errs.Error{Category: errs.RetryNeeded, Message: fmt.Sprintf("MCP server %s exited during %s: %v", server, what, err),
			Hint: restartHint + stderrNote(err) + ". " + envHint, Err: err}
	case errors.Is(err, fs.ErrPermission):
		return &errs.Error{Category: errs.NotFound, Message: fmt.Sprintf("the command of MCP server %s is not executable (permission denied): %v", server, err),
			Hint: "make it executable (chmod +x), or re-add the server with another command", Err: err}
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return &errs.Error{Category: errs.NotFound, Message: fmt.Sprintf("the command of MCP server %s was not found: %v", server, err),
			Hint: "install it, or re-add the server with the command's absolute path", Err: err}
	}
	return &errs.Error{Category: errs.Internal, Message: fmt.Sprintf("MCP server %s failed during %s: %v", server, what, err),
		Hint: "run the server's command by hand to see why", Err: err}
}

// stderrNote is "; its stderr is in the message" when err carries the child's stderr
// (a *client.StderrError), else "".
func stderrNote(err error) string {
	var se *client.StderrError
	if errors.As(err, &se) {
		return "; its stderr is in the message"
	}
	return ""
}

// errorResult is a tools/call isError result whose text is err's
// "category: message — hint".
func errorResult(err error) json.RawMessage {
	text := err.Error()
	var fe *errs.Error
	if errors.As(err, &fe) {
		text = string(fe.Category) + ": " + fe.Message
		if fe.Hint != "" {
			text += " — " + fe.Hint
		}
	}
	b, _ := protocol.Marshal(protocol.ToolError(CleanText(text)))
	return b
}

// description is a forwarded tool's description: the remote one without control
// characters (CleanText), bounded, or a stand-in naming the server.
func description(server, d string) string {
	d = strings.TrimSpace(CleanText(d))
	if d == "" {
		return "Tool of the MCP server " + server + " (through ferry's gateway)."
	}
	d, _ = textsafe.CutBytes(d, MaxDescription)
	return d
}

// schema is a forwarded inputSchema: the remote one when it is a JSON object of
// at most MaxSchema bytes, else {"type":"object"}.
func schema(s json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if len(s) == 0 || len(s) > MaxSchema || json.Unmarshal(s, &obj) != nil || obj == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return s
}

// ToolRef names one tool of one gateway server.
type ToolRef struct{ Server, Tool string }

// maxToolName is the longest gateway tool name (docs/design.md §4: ^[a-z0-9_]{1,64}$).
const maxToolName = 64

// Prefixes returns the tool-name prefix of each server of servers (every
// configured server, whether it runs or not): its name lower-cased with '-' as '_';
// "gw_" before it when that is "ferry" or starts with "ferry_", so no forwarded tool is
// ever named like ferry's own ferry_* tools; and "_" and 6 hex digits of
// sha256(name) after it when two servers share the prefix (my-srv and my_srv), for
// each of them. A server's prefix depends only on its name and the names of the
// servers it shares a prefix with.
func Prefixes(servers []string) map[string]string {
	plain := map[string]string{}
	count := map[string]int{}
	for _, s := range servers {
		p := sanitizeToolName(s)
		if p == "ferry" || strings.HasPrefix(p, "ferry_") {
			p = "gw_" + p
		}
		if _, dup := plain[s]; !dup {
			plain[s] = p
			count[p]++
		}
	}
	out := map[string]string{}
	for s, p := range plain {
		if count[p] > 1 {
			sum := sha256.Sum256([]byte(s))
			p += "_" + hex.EncodeToString(sum[:3])
		}
		out[s] = p
	}
	return out
}

// ToolNames returns the gateway name of each ref, in order: the prefix of its server
// (Prefixes over servers, every configured server), "_", and the tool's
// name lower-cased with every character outside [a-z0-9_] as '_'. A name longer than 64
// bytes is cut to 57 and given "_" and 6 hex digits of sha256("<server>\x00<tool>");
// every name shared by two refs, or equal to a reserved name, gets the same suffix
// (after a cut to 57 when needed). The result depends only on the set of servers, refs
// and reserved names, not their order; suffixed names match ^[a-z0-9_]{1,64}$ as well.
// Refs are expected to be distinct with non-empty tools (child.list drops the rest).
func ToolNames(servers []string, refs []ToolRef, reserved map[string]bool) []string {
	prefixes := Prefixes(servers)
	plain := make([]string, len(refs))
	count := map[string]int{}
	for i, r := range refs {
		p, ok := prefixes[r.Server]
		if !ok {
			p = Prefixes([]string{r.Server})[r.Server]
		}
		plain[i] = p + "_" + sanitizeToolName(r.Tool)
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

// CleanText drops the control characters of s except newline and tab (C0, DEL, C1),
// its line separators and its bidi controls (textsafe.Lines): what the gateway passes
// on from a child in descriptions and error texts, so no terminal escape and no
// reordered line reaches an app or a screen through ferry.
func CleanText(s string) string {
	return textsafe.Lines.Clean(s, func(rune) string { return "" })
}
