package main

// Helpers of the MCP tests: the ferry binary (ferryExe), a machine (a FERRY_HOME)
// whose channel is set up with the CLI, and the two real MCP clients — the official
// go-sdk and mark3labs/mcp-go — behind one small interface, so every journey runs
// through each of them against real `ferry mcp serve` processes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/schematest"
	"github.com/google/jsonschema-go/jsonschema"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpDeadline bounds every wait on a server process: generous, so a slow machine never
// fails a test that is right; only a hang does.
const mcpDeadline = 20 * time.Second

// mcpCoreTools are the six core tools, sorted as tools/list returns them.
var mcpCoreTools = []string{"ferry_ask_human", "ferry_catchup", "ferry_join", "ferry_orders", "ferry_primary", "ferry_talk"}

// mcpMachine is one machine: its own FERRY_HOME (so its own device and locks), the real
// binary, and the channel folders made on it.
type mcpMachine struct {
	t    *testing.T
	bin  string
	home string
	dir  string   // where channel folders go
	base []string // the environment its processes start from; nil: this process's
}

// newMCPMachine returns a fresh machine of t running bin.
func newMCPMachine(t *testing.T, bin string) *mcpMachine {
	dir := t.TempDir()
	return &mcpMachine{t: t, bin: bin, home: filepath.Join(dir, "home"), dir: dir}
}

// env is the environment of every ferry process of m: its base, minus every FERRY_
// variable (a developer's FERRY_AGENT or FERRY_CHANNEL must not leak in), plus m's home.
func (m *mcpMachine) env() []string {
	base := m.base
	if base == nil {
		base = os.Environ()
	}
	var env []string
	for _, e := range base {
		if !strings.HasPrefix(e, "FERRY_") {
			env = append(env, e)
		}
	}
	return append(env, fsbus.EnvHome+"="+m.home)
}

// command returns an unstarted ferry process on m.
func (m *mcpMachine) command(args ...string) *exec.Cmd {
	cmd := exec.Command(m.bin, args...)
	cmd.Env = m.env()
	return cmd
}

// ferry runs one ferry process on m and returns its output and exit code.
func (m *mcpMachine) ferry(args ...string) (stdout, stderr string, code int) {
	m.t.Helper()
	cmd := m.command(args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return so.String(), se.String(), ee.ExitCode()
	}
	if err != nil {
		m.t.Fatalf("running ferry %v: %v", args, err)
	}
	return so.String(), se.String(), 0
}

// must runs ferry on m and fails the test unless it exits 0.
func (m *mcpMachine) must(args ...string) string {
	m.t.Helper()
	so, se, code := m.ferry(args...)
	if code != 0 {
		m.t.Fatalf("ferry %s: exit %d\n%s%s", strings.Join(args, " "), code, so, se)
	}
	return so
}

// channel creates project's channel on m with the CLI: init (the owner, master, gets
// no grant: the owner is master), then every agent joins and is seated as a member.
// It returns the channel folder.
func (m *mcpMachine) channel(project string, agents ...string) string {
	m.t.Helper()
	ch := filepath.Join(m.dir, "sync", project)
	m.must("init", ch, "--project", project)
	for _, a := range agents {
		m.must("join", "--as", a, "--project", project)
		m.must("grant", a, "--level", "member", "--project", project)
	}
	return ch
}

// serve returns an unstarted `ferry mcp serve --as agent --project project` process.
func (m *mcpMachine) serve(agent, project string, extra ...string) *exec.Cmd {
	return m.command(append([]string{"mcp", "serve", "--as", agent, "--project", project}, extra...)...)
}

// ---- the clients ----

// listedTool is one tool of tools/list as a client decoded it, re-encoded.
type listedTool struct {
	Name         string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
}

// listedResource is one entry of resources/list as a client decoded it.
type listedResource struct {
	URI, Name, MimeType, Description string
	Size                             int64
}

// listedTemplate is one entry of resources/templates/list as a client decoded it.
type listedTemplate struct {
	URITemplate, Name, MimeType string
}

// resourceText is one text content of resources/read as a client decoded it.
type resourceText struct {
	URI, MimeType, Text string
}

// toolReply is a tools/call result as a client decoded it: the text of its one content
// block and its structuredContent re-encoded (nil when absent).
type toolReply struct {
	IsError    bool
	Text       string
	Blocks     int
	Structured json.RawMessage
}

// mcpClient is one real MCP client session with one `ferry mcp serve` process.
type mcpClient interface {
	// ProtocolVersion is the version the initialize handshake settled on.
	ProtocolVersion() string
	// ServerName and Instructions come from the initialize result.
	ServerName() string
	Instructions() string
	ListTools(ctx context.Context) ([]listedTool, error)
	CallTool(ctx context.Context, name string, args map[string]any) (*toolReply, error)
	// ListResources asks for the first page of resources/list and follows every
	// nextCursor to the end; pages is how many requests that took. A cursor handed back
	// twice is an error (the listing would never end).
	ListResources(ctx context.Context) (res []listedResource, pages int, err error)
	// ListResourceTemplates lists the resource templates (every page).
	ListResourceTemplates(ctx context.Context) ([]listedTemplate, error)
	// ReadResource reads uri; a JSON-RPC error comes back as the library reports it
	// (see rpcErrorCode).
	ReadResource(ctx context.Context, uri string) ([]resourceText, error)
	// Pid is the server process's id.
	Pid() int
	// Close ends the session the way the client library does (closing stdin first) and
	// waits for the process.
	Close() error
	// Exited reports whether the process has exited by itself with status 0 (valid after
	// Close).
	Exited() bool
	// Stderr is what the server wrote to stderr so far.
	Stderr() string
}

// mcpClientKind is one client library and the protocol version pinned for it.
type mcpClientKind struct {
	name    string
	version string // the protocolVersion the client asks for and must get back
	connect func(ctx context.Context, cmd *exec.Cmd, version string) (mcpClient, error)
	// app is what an MCP ferry_join announces for this client: the name the connect
	// func gives the library (its Implementation / clientInfo), made portable by
	// mcpserver.Ferry.SetClientApp (lowercased, [a-z0-9-]).
	app string
}

// The names each client library reports about itself (go-sdk: Implementation.Name,
// sent in initialize and, on 2026-07-28, in every request's _meta; mcp-go:
// InitializeRequest clientInfo.name). mcp-go's is not portable on purpose: the server
// must lowercase it and turn the space into a hyphen.
const (
	e2eClientGoSDK        = "e2e-go-sdk"
	e2eClientGoSDKDefault = "e2e-go-sdk-default"
	e2eClientMCPGo        = "E2E mcp-go"
)

// mcpClientKinds are the clients every journey runs through: the official go-sdk pinned
// to 2025-11-25, the same go-sdk on its default version, and mcp-go pinned to
// 2025-06-18 (an older version the server must echo, not upgrade).
var mcpClientKinds = []mcpClientKind{
	{"go-sdk", "2025-11-25", connectGoSDK, e2eClientGoSDK},
	{"go-sdk-default", goSDKDefaultVersion, connectGoSDKDefault, e2eClientGoSDKDefault},
	{"mcp-go", "2025-06-18", connectMCPGo, "e2e-mcp-go"},
}

// modern reports whether kind speaks the stateless 2026-07-28 revision (_meta on every
// request) rather than a legacy initialize-negotiated version.
func (k mcpClientKind) modern() bool { return k.version >= goSDKDefaultVersion }

// syncBuffer is a bytes.Buffer safe for a process writing while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// goSDKClient is github.com/modelcontextprotocol/go-sdk's client.
type goSDKClient struct {
	cs     *sdk.ClientSession
	cmd    *exec.Cmd
	stderr *syncBuffer
}

func connectGoSDK(ctx context.Context, cmd *exec.Cmd, version string) (mcpClient, error) {
	c := &goSDKClient{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = c.stderr
	client := sdk.NewClient(&sdk.Implementation{Name: e2eClientGoSDK, Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: mcpDeadline},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		return nil, fmt.Errorf("go-sdk connect: %w (stderr: %s)", err, c.stderr.String())
	}
	c.cs = cs
	return c, nil
}

func (c *goSDKClient) ProtocolVersion() string { return c.cs.InitializeResult().ProtocolVersion }
func (c *goSDKClient) Instructions() string    { return c.cs.InitializeResult().Instructions }
func (c *goSDKClient) ServerName() string {
	if si := c.cs.InitializeResult().ServerInfo; si != nil {
		return si.Name
	}
	return ""
}
func (c *goSDKClient) Pid() int       { return c.cmd.Process.Pid }
func (c *goSDKClient) Stderr() string { return c.stderr.String() }
func (c *goSDKClient) Close() error   { return c.cs.Close() }
func (c *goSDKClient) Exited() bool {
	return c.cmd.ProcessState != nil && c.cmd.ProcessState.ExitCode() == 0
}

func (c *goSDKClient) ListTools(ctx context.Context) ([]listedTool, error) {
	res, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []listedTool
	for _, t := range res.Tools {
		in, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, err
		}
		lt := listedTool{Name: t.Name, InputSchema: in}
		if t.OutputSchema != nil {
			if lt.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
				return nil, err
			}
		}
		out = append(out, lt)
	}
	return out, nil
}

func (c *goSDKClient) CallTool(ctx context.Context, name string, args map[string]any) (*toolReply, error) {
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	r := &toolReply{IsError: res.IsError, Blocks: len(res.Content)}
	if len(res.Content) > 0 {
		tc, ok := res.Content[0].(*sdk.TextContent)
		if !ok {
			return nil, fmt.Errorf("go-sdk: first content block is %T, not text", res.Content[0])
		}
		r.Text = tc.Text
	}
	if res.StructuredContent != nil {
		if r.Structured, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (c *goSDKClient) ListResources(ctx context.Context) ([]listedResource, int, error) {
	var out []listedResource
	seen := map[string]bool{"": true}
	params := &sdk.ListResourcesParams{}
	for pages := 1; ; pages++ {
		res, err := c.cs.ListResources(ctx, params)
		if err != nil {
			return nil, pages, err
		}
		for _, r := range res.Resources {
			out = append(out, listedResource{URI: r.URI, Name: r.Name, MimeType: r.MIMEType, Description: r.Description, Size: r.Size})
		}
		if res.NextCursor == "" {
			return out, pages, nil
		}
		if seen[res.NextCursor] {
			return nil, pages, fmt.Errorf("go-sdk: resources/list handed back cursor %q twice", res.NextCursor)
		}
		seen[res.NextCursor] = true
		params = &sdk.ListResourcesParams{Cursor: res.NextCursor}
	}
}

func (c *goSDKClient) ListResourceTemplates(ctx context.Context) ([]listedTemplate, error) {
	var out []listedTemplate
	for rt, err := range c.cs.ResourceTemplates(ctx, nil) { // the library follows the cursors
		if err != nil {
			return nil, err
		}
		out = append(out, listedTemplate{URITemplate: rt.URITemplate, Name: rt.Name, MimeType: rt.MIMEType})
	}
	return out, nil
}

func (c *goSDKClient) ReadResource(ctx context.Context, uri string) ([]resourceText, error) {
	res, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, err
	}
	var out []resourceText
	for _, rc := range res.Contents {
		out = append(out, resourceText{URI: rc.URI, MimeType: rc.MIMEType, Text: rc.Text})
	}
	return out, nil
}

// mcpGoClient is github.com/mark3labs/mcp-go's stdio client.
type mcpGoClient struct {
	c      *mcpgoclient.Client
	cmd    *exec.Cmd
	init   *mcpgo.InitializeResult
	stderr *syncBuffer
}

func connectMCPGo(ctx context.Context, cmd *exec.Cmd, version string) (mcpClient, error) {
	g := &mcpGoClient{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = g.stderr
	// The library spawns the process; the command func hands it ours, with its clean
	// environment.
	c, err := mcpgoclient.NewStdioMCPClientWithOptions(cmd.Path, nil, cmd.Args[1:],
		mcpgotransport.WithCommandFunc(func(context.Context, string, []string, []string) (*exec.Cmd, error) { return cmd, nil }))
	if err != nil {
		return nil, fmt.Errorf("mcp-go start: %w", err)
	}
	g.c = c
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcpgo.Implementation{Name: e2eClientMCPGo, Version: "1.0.0"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("mcp-go initialize: %w (stderr: %s)", err, g.stderr.String())
	}
	g.init = res
	return g, nil
}

func (g *mcpGoClient) ProtocolVersion() string { return g.init.ProtocolVersion }
func (g *mcpGoClient) Instructions() string    { return g.init.Instructions }
func (g *mcpGoClient) ServerName() string      { return g.init.ServerInfo.Name }
func (g *mcpGoClient) Pid() int                { return g.cmd.Process.Pid }
func (g *mcpGoClient) Stderr() string          { return g.stderr.String() }
func (g *mcpGoClient) Close() error            { return g.c.Close() }
func (g *mcpGoClient) Exited() bool {
	return g.cmd.ProcessState != nil && g.cmd.ProcessState.ExitCode() == 0
}

func (g *mcpGoClient) ListTools(ctx context.Context) ([]listedTool, error) {
	res, err := g.c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	var out []listedTool
	for _, t := range res.Tools {
		in, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, err
		}
		lt := listedTool{Name: t.Name, InputSchema: in}
		if t.OutputSchema.Type != "" {
			if lt.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
				return nil, err
			}
		}
		out = append(out, lt)
	}
	return out, nil
}

func (g *mcpGoClient) CallTool(ctx context.Context, name string, args map[string]any) (*toolReply, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := g.c.CallTool(ctx, req)
	if err != nil {
		return nil, err
	}
	r := &toolReply{IsError: res.IsError, Blocks: len(res.Content)}
	if len(res.Content) > 0 {
		tc, ok := mcpgo.AsTextContent(res.Content[0])
		if !ok {
			return nil, fmt.Errorf("mcp-go: first content block is %T, not text", res.Content[0])
		}
		r.Text = tc.Text
	}
	if len(res.RawStructuredContent) > 0 {
		r.Structured = res.RawStructuredContent
	} else if res.StructuredContent != nil {
		if r.Structured, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (g *mcpGoClient) ListResources(ctx context.Context) ([]listedResource, int, error) {
	var out []listedResource
	seen := map[mcpgo.Cursor]bool{"": true}
	req := mcpgo.ListResourcesRequest{}
	for pages := 1; ; pages++ {
		res, err := g.c.ListResourcesByPage(ctx, req)
		if err != nil {
			return nil, pages, err
		}
		for _, r := range res.Resources {
			lr := listedResource{URI: r.URI, Name: r.Name, MimeType: r.MIMEType, Description: r.Description}
			if r.Size != nil {
				lr.Size = *r.Size
			}
			out = append(out, lr)
		}
		if res.NextCursor == "" {
			return out, pages, nil
		}
		if seen[res.NextCursor] {
			return nil, pages, fmt.Errorf("mcp-go: resources/list handed back cursor %q twice", res.NextCursor)
		}
		seen[res.NextCursor] = true
		req.Params.Cursor = res.NextCursor
	}
}

func (g *mcpGoClient) ListResourceTemplates(ctx context.Context) ([]listedTemplate, error) {
	res, err := g.c.ListResourceTemplates(ctx, mcpgo.ListResourceTemplatesRequest{}) // follows the cursors
	if err != nil {
		return nil, err
	}
	var out []listedTemplate
	for _, rt := range res.ResourceTemplates {
		lt := listedTemplate{Name: rt.Name, MimeType: rt.MIMEType}
		if rt.URITemplate != nil && rt.URITemplate.Template != nil {
			lt.URITemplate = rt.URITemplate.Raw()
		}
		out = append(out, lt)
	}
	return out, nil
}

func (g *mcpGoClient) ReadResource(ctx context.Context, uri string) ([]resourceText, error) {
	req := mcpgo.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := g.c.ReadResource(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []resourceText
	for _, rc := range res.Contents {
		tc, ok := mcpgo.AsTextResourceContents(rc)
		if !ok {
			return nil, fmt.Errorf("mcp-go: resource content is %T, not text", rc)
		}
		out = append(out, resourceText{URI: tc.URI, MimeType: tc.MIMEType, Text: tc.Text})
	}
	return out, nil
}

// rpcErrorCode is the JSON-RPC error code of err as the client library reports it:
// go-sdk hands back the wire error itself (*jsonrpc.Error); mcp-go maps the codes it
// knows to sentinel errors (and drops the code of any other). ok is false when err
// carries no code either library reports.
func rpcErrorCode(err error) (code int64, ok bool) {
	var we *sdkjsonrpc.Error
	if errors.As(err, &we) {
		return we.Code, true
	}
	for _, s := range []struct {
		code int64
		err  error
	}{
		{mcpgo.RESOURCE_NOT_FOUND, mcpgo.ErrResourceNotFound},
		{mcpgo.INVALID_PARAMS, mcpgo.ErrInvalidParams},
		{mcpgo.INVALID_REQUEST, mcpgo.ErrInvalidRequest},
		{mcpgo.METHOD_NOT_FOUND, mcpgo.ErrMethodNotFound},
		{mcpgo.INTERNAL_ERROR, mcpgo.ErrInternalError},
		{mcpgo.PARSE_ERROR, mcpgo.ErrParseError},
	} {
		if errors.Is(err, s.err) {
			return s.code, true
		}
	}
	return 0, false
}

// ---- one agent's session, with the checks every result gets ----

// mcpAgent is one agent's live `ferry mcp serve` process and the client driving it.
// Every successful call is checked the same way: structuredContent present and valid
// against the tool's outputSchema as the client listed it, and the text content the
// same JSON.
type mcpAgent struct {
	t       *testing.T
	name    string
	c       mcpClient
	schemas map[string]*jsonschema.Resolved // tool → its output schema
	// succeeded are the tools this agent called with success (ok), for the journey's
	// "every core tool, per client kind" check.
	succeeded map[string]bool
}

// startAgent spawns `ferry mcp serve --as agent --project project` on m through kind's
// client and checks the handshake (the pinned protocolVersion back, serverInfo,
// instructions) and the tool list (the six core tools, each with an object input
// schema and an output schema). The session is closed at the end of the test, if the
// test did not close it.
func startAgent(t *testing.T, m *mcpMachine, kind mcpClientKind, agent, project string, extra ...string) *mcpAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	c, err := kind.connect(ctx, m.serve(agent, project, extra...), kind.version)
	if err != nil {
		t.Fatalf("%s: connecting to ferry mcp serve --as %s: %v", kind.name, agent, err)
	}
	a := &mcpAgent{t: t, name: agent, c: c, schemas: map[string]*jsonschema.Resolved{}, succeeded: map[string]bool{}}
	t.Cleanup(func() { _ = c.Close() }) // a second Close is harmless in both libraries
	if got := c.ProtocolVersion(); got != kind.version {
		t.Errorf("%s: negotiated protocolVersion %q, want the pinned %q", kind.name, got, kind.version)
	}
	if c.ServerName() != "ferry" || !strings.Contains(c.Instructions(), "ferry_join") {
		t.Errorf("%s: initialize: serverInfo.name %q, instructions %q", kind.name, c.ServerName(), c.Instructions())
	}
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatalf("%s: tools/list: %v", kind.name, err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
		var in jsonschema.Schema
		if err := json.Unmarshal(tl.InputSchema, &in); err != nil || in.Type != "object" {
			t.Errorf("%s: inputSchema of %s as the client decoded it: %s (%v), want an object schema", kind.name, tl.Name, tl.InputSchema, err)
		}
		if len(tl.OutputSchema) == 0 {
			t.Errorf("%s: tool %s has no outputSchema", kind.name, tl.Name)
			continue
		}
		rs, err := schematest.Closed(tl.OutputSchema)
		if err != nil {
			t.Fatalf("%s: outputSchema of %s: %v\n%s", kind.name, tl.Name, err, tl.OutputSchema)
		}
		a.schemas[tl.Name] = rs
	}
	if !reflect.DeepEqual(names, mcpCoreTools) {
		t.Fatalf("%s: tools/list names %v, want %v", kind.name, names, mcpCoreTools)
	}
	return a
}

// call runs one tool call; a transport or protocol error fails the test.
func (a *mcpAgent) call(tool string, args map[string]any) *toolReply {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	r, err := a.c.CallTool(ctx, tool, args)
	if err != nil {
		a.t.Fatalf("%s: %s %v: %v\nserver stderr:\n%s", a.name, tool, args, err, a.c.Stderr())
	}
	return r
}

// ok calls tool, requires success, checks the result, and decodes it into out (may be
// nil). It returns the structured JSON.
func (a *mcpAgent) ok(tool string, args map[string]any, out any) json.RawMessage {
	a.t.Helper()
	r := a.call(tool, args)
	if r.IsError {
		a.t.Fatalf("%s: %s %v failed: %s", a.name, tool, args, r.Text)
	}
	if a.succeeded == nil { // an mcpAgent built by hand (mcp_groups_test.go)
		a.succeeded = map[string]bool{}
	}
	a.succeeded[tool] = true
	if len(r.Structured) == 0 {
		a.t.Fatalf("%s: %s %v: no structuredContent (text %s)", a.name, tool, args, r.Text)
	}
	// The text content is the same JSON as structuredContent.
	var fromText, fromStruct any
	if err := json.Unmarshal([]byte(r.Text), &fromText); err != nil {
		a.t.Fatalf("%s: %s: text content is not JSON: %v\n%s", a.name, tool, err, r.Text)
	}
	if err := json.Unmarshal(r.Structured, &fromStruct); err != nil {
		a.t.Fatalf("%s: %s: structuredContent: %v", a.name, tool, err)
	}
	if !reflect.DeepEqual(fromText, fromStruct) {
		a.t.Errorf("%s: %s: text content and structuredContent differ:\ntext:       %s\nstructured: %s", a.name, tool, r.Text, r.Structured)
	}
	if r.Blocks != 1 {
		a.t.Errorf("%s: %s: %d content blocks, want 1", a.name, tool, r.Blocks)
	}
	// structuredContent satisfies the tool's outputSchema, closed at the top level (the
	// validator go-sdk servers use).
	rs := a.schemas[tool]
	if rs == nil {
		a.t.Fatalf("%s: no outputSchema listed for %s", a.name, tool)
	}
	if err := rs.Validate(fromStruct); err != nil {
		a.t.Errorf("%s: %s: structuredContent does not satisfy the outputSchema: %v\n%s", a.name, tool, err, r.Structured)
	}
	if out != nil {
		if err := json.Unmarshal(r.Structured, out); err != nil {
			a.t.Fatalf("%s: %s: decoding %s: %v", a.name, tool, r.Structured, err)
		}
	}
	return r.Structured
}

// fail calls tool, requires an isError result with no structuredContent, and returns
// its text ("category: message — hint").
func (a *mcpAgent) fail(tool string, args map[string]any) string {
	a.t.Helper()
	r := a.call(tool, args)
	if !r.IsError {
		a.t.Fatalf("%s: %s %v succeeded, want isError: %s", a.name, tool, args, r.Structured)
	}
	if len(r.Structured) != 0 {
		a.t.Errorf("%s: %s: an isError result carries structuredContent %s", a.name, tool, r.Structured)
	}
	return r.Text
}

// ---- what the tests read back from results (wire names, decoded by hand) ----

type wireOrder struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	State    string   `json:"state"`
	Author   string   `json:"author"`
	Holder   string   `json:"holder"`
	Body     string   `json:"body"`
	Progress []string `json:"progress"`
	Result   *struct {
		By        string `json:"by"`
		Reference string `json:"reference"`
		Note      string `json:"note"`
	} `json:"result"`
	Reviews []struct {
		By      string `json:"by"`
		Verdict string `json:"verdict"`
	} `json:"reviews"`
}

type wireOrders struct {
	Order  *wireOrder  `json:"order"`
	Orders []wireOrder `json:"orders"`
}

type wireMessage struct {
	ID      string   `json:"id"`
	From    string   `json:"from"`
	To      string   `json:"to"`
	Preview string   `json:"preview"`
	ReadBy  []string `json:"read_by"`
}

type wireTalk struct {
	ID       string        `json:"id"`
	Messages []wireMessage `json:"messages"`
	Next     string        `json:"next"`
}

type wireJoin struct {
	Agent   string `json:"agent"`
	Project string `json:"project"`
	Level   string `json:"level"`
	Granted bool   `json:"granted"`
	Next    string `json:"next"`
}

type wireCatchup struct {
	Agent    string `json:"agent"`
	Level    string `json:"level"`
	Next     string `json:"next"`
	Messages struct {
		Waiting int `json:"waiting"`
	} `json:"messages"`
	Open []struct {
		ID string `json:"id"`
	} `json:"open"`
}

type wirePrimary struct {
	State    string `json:"state"`
	Holder   string `json:"holder"`
	Rule     string `json:"rule"`
	Standbys []struct {
		Name string `json:"name"`
	} `json:"standbys"`
}

type wireAsk struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	State string `json:"state"`
	Asks  []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"asks"`
}
