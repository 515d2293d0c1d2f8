package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// SupportedVersions are the MCP protocol versions of the legacy handshake this server
// speaks, oldest first; initialize echoes the client's when it is one of them, else
// answers the newest (DESIGN §4).
var SupportedVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// DrainTimeout is how long Serve, at EOF, waits for calls already read to finish
// before cancelling them.
var DrainTimeout = 10 * time.Second

// LatestVersion is the newest supported protocol version.
var LatestVersion = SupportedVersions[len(SupportedVersions)-1]

// Tool is one MCP tool. Call receives the raw "arguments" object (never nil: "{}" when
// absent) and returns a JSON-marshalable result or an error; an *RPCError becomes a
// JSON-RPC error, any other error an isError tool result.
type Tool struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Call         func(ctx context.Context, args json.RawMessage) (any, error)
}

// Options configure a Server.
type Options struct {
	Name         string // serverInfo.name
	Version      string // serverInfo.version
	Instructions string
	Tools        []*Tool
	// Log receives diagnostics (stderr in `ferry mcp serve`); nil discards them.
	Log io.Writer
	// ToolError renders a tool's failure as the text of an isError result
	// ("category: message — hint"); nil uses err.Error().
	ToolError func(err error) string
	// Resources serves resources/list, resources/templates/list and resources/read;
	// nil means the server has no resources capability (issue 5).
	Resources Resources
}

// Resources is what a server needs to serve MCP resources. Implementations MUST be
// safe for concurrent use; List and Read may read the channel (never at start-up).
type Resources interface {
	// List returns one page of resources after cursor ("" for the first page) and the
	// cursor of the next page ("" when none). A cursor always advances.
	List(ctx context.Context, cursor string) (page []Resource, next string, err error)
	// Templates returns the resource templates (static: no channel read).
	Templates() []ResourceTemplate
	// Read returns the contents of uri, or an error whose fsbus category is not_found
	// when nothing has that uri.
	Read(ctx context.Context, uri string) ([]ResourceContents, error)
}

// Resource is one entry of resources/list (MCP "Resource"): summaries only.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	Size        int64  `json:"size,omitempty"`
}

// ResourceTemplate is one entry of resources/templates/list.
type ResourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// ResourceContents is one text content of resources/read.
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text"`
}

// Server is a stdio MCP server. It holds no channel state of its own: tools do.
type Server struct {
	opts      Options
	tools     map[string]*Tool
	toolsList json.RawMessage // the tools/list result, built once: byte-identical always

	wmu sync.Mutex // one write of one whole line per message
	out io.Writer

	mu       sync.Mutex
	inflight map[string]context.CancelFunc // raw id → cancel of a running tools/call
	wg       sync.WaitGroup
}

// New builds a server. It returns an error when two tools share a name or a tool's
// schemas are not JSON.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, tools: map[string]*Tool{}, inflight: map[string]context.CancelFunc{}}
	if s.opts.Log == nil {
		s.opts.Log = io.Discard
	}
	type listed struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	}
	var list []listed
	for _, t := range opts.Tools {
		if _, dup := s.tools[t.Name]; dup {
			return nil, fmt.Errorf("mcpserver: tool %q registered twice", t.Name)
		}
		if !json.Valid(t.InputSchema) || (t.OutputSchema != nil && !json.Valid(t.OutputSchema)) {
			return nil, fmt.Errorf("mcpserver: tool %q has a schema that is not JSON", t.Name)
		}
		s.tools[t.Name] = t
		list = append(list, listed{t.Name, t.Description, t.InputSchema, t.OutputSchema})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	if list == nil {
		list = []listed{}
	}
	b, err := json.Marshal(map[string]any{"tools": list})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: encoding tools/list: %w", err)
	}
	s.toolsList = b
	return s, nil
}

// ToolsList returns the tools/list result bytes (for budget tests and benchmarks).
func (s *Server) ToolsList() json.RawMessage { return s.toolsList }

// Serve reads messages from in until EOF or ctx ends, answering on out. On EOF it
// cancels calls still running, waits for them, and returns nil; a read error other than
// EOF is returned.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	s.out = out
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		// Calls already read are answered (a write that happened must be reported), for
		// up to DrainTimeout; then they are cancelled and their answers dropped.
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(DrainTimeout):
		}
		cancel()
		s.wg.Wait()
	}()
	r := bufio.NewReaderSize(in, 64<<10)
	first := true
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			if first {
				line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
			}
			first = false
			if len(bytes.TrimSpace(line)) > 0 {
				s.handleLine(ctx, line)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// handleLine parses one line and dispatches it.
func (s *Server) handleLine(ctx context.Context, line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && trimmed[0] == '[' {
			s.reply(nullID, nil, rpcErrorf(CodeInvalidRequest, "batches are not supported"))
			return
		}
		if json.Valid(line) { // JSON, but not a request ("jsonrpc":2, "method":5): §5.1
			id := nullID
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(line, &probe) == nil && validID(probe.ID) {
				id = probe.ID // usable: echo it so the client can match the error
			}
			s.reply(id, nil, rpcErrorf(CodeInvalidRequest, "invalid request: %v", err))
			return
		}
		s.reply(nullID, nil, rpcErrorf(CodeParseError, "parse error: %v", err))
		return
	}
	if m.Method == "" {
		if len(m.Result) > 0 || len(m.Error) > 0 {
			return // a response to a request we never sent: ignore
		}
		id := m.ID
		if !validID(id) {
			id = nullID
		}
		s.reply(id, nil, rpcErrorf(CodeInvalidRequest, "invalid request: no method"))
		return
	}
	if m.isNotification() {
		s.notify(m)
		return
	}
	if !validID(m.ID) {
		s.reply(nullID, nil, rpcErrorf(CodeInvalidRequest, "invalid request: id must be a string or an integer"))
		return
	}
	if m.JSONRPC != "2.0" {
		// The id is usable: echo it so the client can match the error to its request.
		s.reply(m.ID, nil, rpcErrorf(CodeInvalidRequest, "invalid request: jsonrpc must be \"2.0\""))
		return
	}
	if m.Method == "tools/call" {
		s.startCall(ctx, m)
		return
	}
	res, err := s.dispatch(m)
	s.reply(m.ID, res, err)
}

// notify handles a notification; unknown ones are ignored (JSON-RPC 2.0 §4.1).
func (s *Server) notify(m message) {
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && len(p.RequestID) > 0 {
			s.mu.Lock()
			if c := s.inflight[string(bytes.TrimSpace(p.RequestID))]; c != nil {
				c()
			}
			s.mu.Unlock()
		}
	case "notifications/initialized":
	default:
		fmt.Fprintf(s.opts.Log, "mcp: ignoring notification %q\n", m.Method)
	}
}

// dispatch answers every request but tools/call.
func (s *Server) dispatch(m message) (any, error) {
	switch m.Method {
	case "initialize":
		return s.initialize(m.Params)
	case "ping":
		return struct{}{}, nil
	case "tools/list":
		return s.toolsList, nil
	}
	return nil, rpcErrorf(CodeMethodNotFound, "method not found: %s", m.Method)
}

func (s *Server) initialize(params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p) // never an error: a bad request still gets the newest version
	version := LatestVersion
	for _, v := range SupportedVersions {
		if v == p.ProtocolVersion {
			version = v
		}
	}
	res := map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": s.opts.Name, "version": s.opts.Version},
	}
	if s.opts.Instructions != "" {
		res["instructions"] = s.opts.Instructions
	}
	return res, nil
}

// startCall runs a tools/call in its own goroutine so a slow tool never blocks ping or
// another call; notifications/cancelled cancels it and suppresses its response.
func (s *Server) startCall(ctx context.Context, m message) {
	key := string(bytes.TrimSpace(m.ID))
	cctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.inflight[key] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			cancel()
		}()
		res, err := s.call(cctx, m.Params)
		if cctx.Err() != nil {
			return // cancelled: no response (MCP cancellation)
		}
		s.reply(m.ID, res, err)
	}()
}

// call runs one tool.
func (s *Server) call(ctx context.Context, params json.RawMessage) (res any, err error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		return nil, rpcErrorf(CodeInvalidParams, "tools/call needs params {name, arguments}")
	}
	t := s.tools[p.Name]
	if t == nil {
		return nil, rpcErrorf(CodeInvalidParams, "unknown tool: %s", p.Name)
	}
	args := bytes.TrimSpace(p.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return nil, rpcErrorf(CodeInvalidParams, "arguments of %s must be an object", p.Name)
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(s.opts.Log, "mcp: tool %s panicked: %v\n", p.Name, r)
			res, err = toolError("internal: the tool failed — see the server log"), nil
		}
	}()
	out, err := t.Call(ctx, args)
	if err != nil {
		var re *RPCError
		if errors.As(err, &re) {
			return nil, re
		}
		text := err.Error()
		if s.opts.ToolError != nil {
			text = s.opts.ToolError(err)
		}
		return toolError(text), nil
	}
	return toolResult(out)
}

// toolResult is a successful tools/call result: structuredContent plus the same JSON as
// compact text, so clients that pass either one to the model lose nothing (DESIGN §4).
func toolResult(v any) (any, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, rpcErrorf(CodeInternalError, "encoding result: %v", err)
	}
	return map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": string(b)}},
		"structuredContent": json.RawMessage(b),
	}, nil
}

// toolError is a failed tools/call result: isError, no structuredContent.
func toolError(text string) any {
	return map[string]any{
		"content": []any{map[string]any{"type": "text", "text": text}},
		"isError": true,
	}
}

// reply writes one response line under the write lock.
func (s *Server) reply(id json.RawMessage, result any, err error) {
	r := response{JSONRPC: "2.0", ID: id}
	if err != nil {
		r.Error = asRPCError(err)
	} else {
		if result == nil {
			result = struct{}{}
		}
		r.Result = result
	}
	b, merr := marshal(r)
	if merr != nil {
		b, _ = marshal(response{JSONRPC: "2.0", ID: id, Error: rpcErrorf(CodeInternalError, "encoding response: %v", merr)})
	}
	b = append(b, '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(b); err != nil {
		fmt.Fprintf(s.opts.Log, "mcp: writing response: %v\n", err)
	}
}

// marshal is compact JSON without HTML escaping, so ids and texts go out byte for byte
// as they came in ("<" stays "<", never "\u003c").
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
