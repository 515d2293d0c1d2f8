package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/ijson"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
)

// DrainTimeout is how long Serve, at EOF, waits for calls already read to finish
// before cancelling them.
var DrainTimeout = 10 * time.Second

// Tool is one MCP tool. Call receives the raw "arguments" object (never nil: "{}" when
// absent) and returns a JSON-marshalable result or an error; a *protocol.Error (returned or wrapped, to choose the code) becomes a
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
	// nil means the server has no resources capability.
	Resources Resources
	// OnClientInfo, if set, receives the client's self-reported name and version
	// (clientInfo) from each initialize, and from each 2026-07-28 request that carries
	// _meta["io.modelcontextprotocol/clientInfo"]. It is for display and logs only (MCP
	// 2026-07-28: never for behaviour or security), must be quick, and may be called
	// from several goroutines at once.
	OnClientInfo func(name, version string)
	// More, if set, adds tools found at run time (the gateway's, docs/design.md §4):
	// tools/list appends them to Tools, and a tools/call naming no tool of Tools looks
	// the name up in them. It may start processes, so it runs off the read loop.
	More ToolSource
	// Gate, if set, is asked before every tools/call (the gateway's tools included): a
	// non-nil error is the call's answer, rendered by ToolError, and the tool does not
	// run (the pause switch).
	Gate func(ctx context.Context, tool string, args json.RawMessage) error
	// MaxRequest bounds one request line in bytes; 0 means fsbus.MaxRPCRequest
	// (16 MiB). A longer line is read to its end, dropped, and answered with -32600.
	MaxRequest int
}

// ToolSource supplies tools known only at run time. Implementations MUST be safe for
// concurrent use and SHOULD cache: Tools is called on every tools/list, and on every
// tools/call of a name not among Options.Tools. Names must not repeat those of
// Options.Tools (the server drops a repeat and logs it).
type ToolSource interface {
	Tools(ctx context.Context) []*Tool
}

// RawToolResult, returned by a Tool's Call, is the tools/call result verbatim (a JSON
// object): the gateway forwards another server's answer, isError included, unchanged.
type RawToolResult json.RawMessage

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

// Server is a stdio MCP server. It holds no channel state of its own: tools do. One
// Server serves one connection (one Serve at a time); the version the last initialize
// negotiated belongs to it.
type Server struct {
	opts       Options
	listed     []listedTool // the static tools as tools/list shows them, sorted
	tools      map[string]*Tool
	toolsList  json.RawMessage // the tools/list result, built once: byte-identical always
	toolsArray json.RawMessage // its "tools" array, the same bytes in both eras

	wmu sync.Mutex // one write of one whole line per message
	out io.Writer

	mu         sync.Mutex
	negotiated string               // the legacy version of the last initialize; "" before
	inflight   map[string]*inflight // raw id → a running request
	eof        context.Context      // done when the client's input ends
	wg         sync.WaitGroup
}

// MaxInflight is the most requests one server runs at once; one more is answered
// CodeServerBusy at once (a client flooding calls must not exhaust the machine).
var MaxInflight = 64

// inflight is one request running in its own goroutine.
type inflight struct{ cancel context.CancelFunc }

// New builds a server. It returns an error when two tools share a name or a tool's
// schemas are not JSON.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, tools: map[string]*Tool{}, inflight: map[string]*inflight{}, eof: context.Background()}
	if s.opts.Log == nil {
		s.opts.Log = io.Discard
	}
	var list []listedTool
	for _, t := range opts.Tools {
		if _, dup := s.tools[t.Name]; dup {
			return nil, fmt.Errorf("mcpserver: tool %q registered twice", t.Name)
		}
		if !json.Valid(t.InputSchema) || (t.OutputSchema != nil && !json.Valid(t.OutputSchema)) {
			return nil, fmt.Errorf("mcpserver: tool %q has a schema that is not JSON", t.Name)
		}
		s.tools[t.Name] = t
		list = append(list, listedTool{t.Name, t.Description, t.InputSchema, t.OutputSchema})
	}
	slices.SortFunc(list, func(a, b listedTool) int { return strings.Compare(a.Name, b.Name) })
	if list == nil {
		list = []listedTool{}
	}
	s.listed = list
	arr, err := marshal(list)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: encoding tools/list: %w", err)
	}
	s.toolsArray = arr
	s.toolsList = append(append([]byte(`{"tools":`), arr...), '}')
	return s, nil
}

// listedTool is one entry of tools/list.
type listedTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// listTools is the tools/list result: the static bytes, or with Options.More the static
// tools and the run-time ones, sorted by name.
func (s *Server) listTools(ctx context.Context) (any, error) {
	if s.opts.More == nil {
		return s.toolsList, nil
	}
	list := append([]listedTool(nil), s.listed...)
	for _, t := range s.opts.More.Tools(ctx) {
		if s.tools[t.Name] != nil {
			fmt.Fprintf(s.opts.Log, "mcp: run-time tool %s repeats a static tool; dropped\n", t.Name)
			continue
		}
		if !json.Valid(t.InputSchema) {
			continue
		}
		list = append(list, listedTool{t.Name, t.Description, t.InputSchema, t.OutputSchema})
	}
	slices.SortFunc(list, func(a, b listedTool) int { return strings.Compare(a.Name, b.Name) })
	arr, err := marshal(list)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "encoding tools/list: %v", err)
	}
	return json.RawMessage(append(append([]byte(`{"tools":`), arr...), '}')), nil
}

// lookup finds the tool called name: a static one, else a run-time one.
func (s *Server) lookup(ctx context.Context, name string) *Tool {
	if t := s.tools[name]; t != nil || s.opts.More == nil {
		return t
	}
	for _, t := range s.opts.More.Tools(ctx) {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// ToolsList returns the tools/list result bytes (for budget tests and benchmarks).
func (s *Server) ToolsList() json.RawMessage { return s.toolsList }

// Serve reads messages from in until EOF or ctx ends, answering on out.
//
// At EOF the requests still running are answered when they finish — one that wrote to
// the channel must say so — for up to DrainTimeout; then they are cancelled and their
// answers dropped. A call waiting for something new (a long-poll) waits with
// EOFContext, which ends at EOF at once. Serve returns nil at EOF and when ctx ends; a
// read error other than EOF is returned. When ctx ends first, the goroutine reading in
// stays blocked in its Read until in is closed.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	s.out = out
	ctx, cancel := context.WithCancel(ctx)
	eofCtx, eof := context.WithCancel(ctx)
	s.mu.Lock()
	s.eof = eofCtx
	s.mu.Unlock()
	defer func() {
		eof()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(DrainTimeout):
		}
		cancel()
		s.wg.Wait()
	}()
	type read struct {
		line []byte
		err  error
	}
	// The reader reads the next line only once the last one is handled, so nothing —
	// EOF included — is seen before the lines ahead of it; it runs apart only so that
	// the end of ctx does not wait for input.
	lines := make(chan read)
	handled := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		lr := newLineReader(in)
		lr.max = s.opts.MaxRequest
		if lr.max <= 0 {
			lr.max = fsbus.MaxRPCRequest
		}
		for {
			line, err := lr.next()
			select {
			case lines <- read{line, err}:
			case <-stop:
				return
			}
			if big := (*lineTooLong)(nil); err != nil && !errors.As(err, &big) {
				return
			}
			select {
			case <-handled:
			case <-stop:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-lines:
			var big *lineTooLong
			if errors.As(r.err, &big) {
				// Not read as a message: its id is unknown, so the answer has id null.
				s.write(protocol.EncodeResponse(protocol.Response{JSONRPC: "2.0", ID: protocol.NullID,
					Error: protocol.Errorf(protocol.CodeInvalidRequest, "request line is %d bytes; the limit is %d", big.n, big.max)}))
				handled <- struct{}{}
				continue
			}
			if len(r.line) > 0 {
				s.handleLine(ctx, r.line)
			}
			if errors.Is(r.err, io.EOF) {
				return nil
			}
			if r.err != nil {
				return fmt.Errorf("reading stdin: %w", r.err)
			}
			handled <- struct{}{}
		}
	}
}

// waitKey is the context key of a request's wait context.
type waitKey struct{}

// EOFContext returns the context a tool waits with when it waits for something new
// (a long-poll such as wait_s): it is done when ctx is — the request was cancelled,
// or Serve gave up on it — and also as soon as the client's input ends (EOF), when
// ctx itself lives on for DrainTimeout so that short calls still finish and answer.
// A tool that waits should select on EOFContext(ctx).Done(), then return what it has
// (an empty "nothing new" result, not an error); the answer is still written. Outside
// a request served by Serve it returns ctx.
func EOFContext(ctx context.Context) context.Context {
	if w, ok := ctx.Value(waitKey{}).(context.Context); ok {
		return w
	}
	return ctx
}

// lineReader splits the input into messages: one per line, each at most max bytes
// (0: no bound).
type lineReader struct {
	r     *bufio.Reader
	first bool
	max   int
}

// lineTooLong is next's error for a line over the bound: the line was read to its end
// and dropped, so the next call reads the line after it.
type lineTooLong struct{ n, max int }

func (e *lineTooLong) Error() string {
	return fmt.Sprintf("request line of %d bytes is over the %d-byte limit", e.n, e.max)
}

// readBounded reads up to and including the next "\n" (or to EOF), keeping at most max
// bytes (0: all); a longer line is consumed whole and reported as *lineTooLong.
func (lr *lineReader) readBounded() ([]byte, error) {
	if lr.max <= 0 {
		return lr.r.ReadBytes('\n')
	}
	var buf []byte
	over, n := false, 0
	for {
		chunk, err := lr.r.ReadSlice('\n')
		n += len(chunk)
		if !over {
			buf = append(buf, chunk...)
			if len(bytes.TrimRight(buf, "\r\n")) > lr.max {
				over, buf = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !over {
			return buf, err
		}
		if err != nil {
			return nil, err // EOF inside an over-long line: nothing to answer
		}
		return nil, &lineTooLong{n: len(bytes.TrimRight(chunk, "\r\n")) + n - len(chunk), max: lr.max}
	}
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), first: true}
}

// next returns the next line that is not blank, without its line end (every trailing
// "\r" and "\n") and, on the first line of the input, without a UTF-8 BOM. err is the
// reader's error — io.EOF at the end — and may come with a last line that had no "\n"
// (line is nil when there is none).
func (lr *lineReader) next() ([]byte, error) {
	for {
		raw, err := lr.readBounded()
		var big *lineTooLong
		if errors.As(err, &big) {
			lr.first = false
			return nil, err
		}
		line := bytes.TrimRight(raw, "\r\n")
		if lr.first && len(raw) > 0 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
			lr.first = false
		}
		blank := len(bytes.TrimSpace(line)) == 0
		if blank {
			line = nil
		}
		if !blank || err != nil {
			return line, err
		}
	}
}

// handleLine handles one line: a message or a batch.
func (s *Server) handleLine(ctx context.Context, line []byte) {
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '[' {
		s.handleBatch(ctx, t)
		return
	}
	m, ok, bad := protocol.DecodeMessage(line, secretguard.RedactIJSON)
	if bad != nil {
		s.write(protocol.EncodeResponse(*bad))
	}
	if !ok {
		s.logDropped(line, bad)
		return
	}
	if m.IsNotification() {
		s.notify(m)
		return
	}
	s.handle(ctx, m, false, s.write)
}

// logDropped says on the log why a message that is not I-JSON got no answer: it is
// a notification (JSON-RPC 2.0 §4.1), and nothing of it was acted on.
func (s *Server) logDropped(b []byte, bad *protocol.Response) {
	if bad != nil {
		return
	}
	if err := ijson.CheckFolded(b); err != nil {
		fmt.Fprintf(s.opts.Log, "mcp: ignoring a notification that is not I-JSON (RFC 7493) or names members that differ only in case: %s\n", secretguard.RedactIJSON(err))
	}
}

// handleBatch handles a JSON-RPC batch (JSON-RPC 2.0 §6). Only MCP 2025-03-26 has
// batches: when the last initialize negotiated another version, or none, the batch is
// refused with one -32600 (id null). Otherwise every element is handled as a message
// of its own — an initialize or a modern request inside is refused (-32600) — and the
// responses go out together as one array, in the order of the elements, once the last
// is done; a cancelled request has none, and a batch of notifications gets no answer.
func (s *Server) handleBatch(ctx context.Context, line []byte) {
	// A batch whose encoding is broken is not read at all (-32700, id null); a
	// repeated member name is refused element by element (protocol.DecodeMessage).
	var e *ijson.Error
	if errors.As(ijson.Check(line), &e) && e.Encoding() {
		s.write(protocol.EncodeResponse(protocol.Response{JSONRPC: "2.0", ID: protocol.NullID, Error: protocol.Errorf(protocol.CodeParseError, "parse error: %v", e)}))
		return
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(line, &elems); err != nil {
		s.write(protocol.EncodeResponse(protocol.Response{JSONRPC: "2.0", ID: protocol.NullID, Error: protocol.Errorf(protocol.CodeParseError, "parse error: %v", err)}))
		return
	}
	s.mu.Lock()
	v := s.negotiated
	s.mu.Unlock()
	if v != "2025-03-26" {
		why := "no version was negotiated"
		if v != "" {
			why = v + " was negotiated"
		}
		s.write(protocol.EncodeResponse(protocol.Response{JSONRPC: "2.0", ID: protocol.NullID, Error: protocol.Errorf(protocol.CodeInvalidRequest,
			"batches are not supported: only protocol version 2025-03-26 has them, and %s", why)}))
		return
	}
	if len(elems) == 0 {
		s.write(protocol.EncodeResponse(protocol.Response{JSONRPC: "2.0", ID: protocol.NullID, Error: protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: empty batch")}))
		return
	}
	out := make([][]byte, len(elems))
	var (
		pending sync.WaitGroup
		mu      sync.Mutex
		left    int // requests not answered yet
	)
	for i, el := range elems {
		m, ok, bad := protocol.DecodeMessage(el, secretguard.RedactIJSON)
		if bad != nil {
			out[i] = protocol.EncodeResponse(*bad)
		}
		if !ok {
			continue
		}
		if m.IsNotification() {
			s.notify(m)
			continue
		}
		pending.Add(1)
		mu.Lock()
		left++
		mu.Unlock()
		s.handle(ctx, m, true, func(b []byte) {
			mu.Lock()
			out[i] = b
			left--
			mu.Unlock()
			pending.Done()
		})
	}
	flush := func() {
		var arr []byte
		for _, b := range out {
			if b == nil {
				continue
			}
			if arr == nil {
				arr = []byte{'['}
			} else {
				arr = append(arr, ',')
			}
			arr = append(arr, b...)
		}
		if arr != nil {
			s.write(append(arr, ']'))
		}
	}
	mu.Lock()
	answered := left == 0
	mu.Unlock()
	if answered { // all done already: answer in line order, like a single request
		flush()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		pending.Wait()
		mu.Lock()
		defer mu.Unlock()
		flush()
	}()
}

// notify handles a notification; unknown ones are ignored (JSON-RPC 2.0 §4.1).
// notifications/cancelled cancels the request of that id in either era; its response
// is suppressed.
func (s *Server) notify(m protocol.Message) {
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && len(p.RequestID) > 0 {
			s.mu.Lock()
			if c := s.inflight[string(bytes.TrimSpace(p.RequestID))]; c != nil {
				c.cancel()
			}
			s.mu.Unlock()
		}
	case "notifications/initialized":
	default:
		fmt.Fprintf(s.opts.Log, "mcp: ignoring notification %q\n", m.Method)
	}
}

// handler answers one request; ctx is the request's own.
type handler func(ctx context.Context) (any, error)

// handle answers the request m: done receives its encoded response once, or nil when
// it has none (cancelled). Requests that may take time — tools/call, resources/list,
// resources/read — run in their own goroutine, so they never block ping or each other.
func (s *Server) handle(ctx context.Context, m protocol.Message, inBatch bool, send func([]byte)) {
	// An error's text may quote the request (a method, a URI, an argument): a
	// credential pasted into the wrong place never comes back in it.
	inputs := callInputs(m.Method, m.Params)
	done := func(b []byte) { send(redactErrorResponse(b, inputs)) }
	fail := func(id json.RawMessage, err *protocol.Error) {
		done(protocol.EncodeResponse(protocol.Response{JSONRPC: "2.0", ID: id, Error: err}))
	}
	if !protocol.ValidID(m.ID) {
		fail(protocol.NullID, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: id must be a string or an integer"))
		return
	}
	if m.JSONRPC != "2.0" {
		// The id is usable: echo it so the client can match the error to its request.
		fail(m.ID, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: jsonrpc must be \"2.0\""))
		return
	}
	e, rerr := protocol.RequestEra(m.Params)
	if rerr != nil {
		fail(m.ID, rerr)
		return
	}
	if e == protocol.Modern && s.opts.OnClientInfo != nil {
		if name, version := protocol.RequestClientInfo(m.Params); name != "" {
			s.opts.OnClientInfo(name, version)
		}
	}
	if inBatch && e == protocol.Modern {
		fail(m.ID, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: protocol version %s has no batches", protocol.ModernVersions[0]))
		return
	}
	if inBatch && m.Method == "initialize" {
		fail(m.ID, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: initialize must not be part of a batch"))
		return
	}
	h, async, rerr := s.route(e, m)
	if rerr != nil {
		fail(m.ID, rerr)
		return
	}
	if !async {
		res, err := s.safely(m.Method, h, ctx)
		done(s.encode(e, m, res, err))
		return
	}
	s.start(ctx, m, e, h, done)
}

// route picks the handler of m in era e, and whether it runs in its own goroutine.
func (s *Server) route(e protocol.Era, m protocol.Message) (h handler, async bool, err *protocol.Error) {
	if e == protocol.Modern && protocol.RemovedInModern(m.Method) {
		hint := ""
		if m.Method == "initialize" {
			hint = ": for the legacy handshake, send initialize without _meta " + protocol.MetaProtocolVersion
		}
		return nil, false, protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %s does not exist in protocol version %s%s", m.Method, protocol.ModernVersions[0], hint)
	}
	switch m.Method {
	case "initialize":
		return func(context.Context) (any, error) { return s.initialize(m.Params), nil }, false, nil
	case "ping":
		return func(context.Context) (any, error) { return struct{}{}, nil }, false, nil
	case "server/discover":
		// Answered in either era and in any state: it is how a client tells the era of
		// a server (MCP 2026-07-28, transports "stdio: Backward Compatibility").
		return func(context.Context) (any, error) {
			return protocol.Discover(s.capabilities(), s.opts.Instructions), nil
		}, false, nil
	}
	switch m.Method {
	case "tools/list":
		h, async = func(ctx context.Context) (any, error) { return s.listTools(ctx) }, s.opts.More != nil
	case "tools/call":
		h, async = func(ctx context.Context) (any, error) { return s.call(ctx, m.Params) }, true
	case "resources/list", "resources/templates/list", "resources/read":
		if s.opts.Resources == nil {
			return nil, false, protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %s (this server has no resources)", m.Method)
		}
		switch m.Method {
		case "resources/list":
			h, async = func(ctx context.Context) (any, error) { return s.listResources(ctx, e, m.Params) }, true
		case "resources/templates/list":
			h = func(context.Context) (any, error) { return s.listTemplates(), nil }
		default:
			h, async = func(ctx context.Context) (any, error) { return s.readResource(ctx, e, m.Params) }, true
		}
	default:
		return nil, false, protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %s", m.Method)
	}
	if e == protocol.Legacy {
		s.mu.Lock()
		initialized := s.negotiated != ""
		s.mu.Unlock()
		if !initialized {
			return nil, false, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: %s before initialize: send initialize first, or put %q in params._meta (protocol version %s)",
				m.Method, protocol.MetaProtocolVersion, protocol.ModernVersions[0])
		}
	}
	return h, async, nil
}

// start runs a request in its own goroutine. notifications/cancelled cancels its
// context and suppresses its response; EOF ends only its wait context (EOFContext).
func (s *Server) start(ctx context.Context, m protocol.Message, e protocol.Era, h handler, done func([]byte)) {
	key := string(bytes.TrimSpace(m.ID))
	cctx, cancel := context.WithCancel(ctx)
	wctx, wcancel := context.WithCancel(cctx)
	call := &inflight{cancel: cancel}
	s.mu.Lock()
	if len(s.inflight) >= MaxInflight {
		s.mu.Unlock()
		wcancel()
		cancel()
		// Bounded work per client: a flood of calls is refused, never queued in memory.
		done(s.encode(e, m, nil, protocol.Errorf(protocol.CodeServerBusy, "server busy: %d calls already running; retry when one has answered", MaxInflight)))
		return
	}
	stop := context.AfterFunc(s.eof, wcancel)
	s.inflight[key] = call
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			stop()
			wcancel()
			s.mu.Lock()
			if s.inflight[key] == call {
				delete(s.inflight, key)
			}
			s.mu.Unlock()
			cancel()
		}()
		res, err := s.safely(m.Method, h, context.WithValue(cctx, waitKey{}, wctx))
		if cctx.Err() != nil {
			done(nil) // cancelled: no response (MCP cancellation)
			return
		}
		done(s.encode(e, m, res, err))
	}()
}

// safely runs h; a panic becomes an internal error, its details only in the log.
func (s *Server) safely(method string, h handler, ctx context.Context) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(s.opts.Log, "mcp: %s panicked: %v\n", method, r)
			res, err = nil, protocol.Errorf(protocol.CodeInternalError, "internal: %s failed — see the server log", method)
		}
	}()
	return h(ctx)
}

// encode is the response line of request m: its error, or its result — in the modern
// era, and for server/discover always, with the members of a modern result.
func (s *Server) encode(e protocol.Era, m protocol.Message, result any, err error) []byte {
	r := protocol.Response{JSONRPC: "2.0", ID: m.ID}
	switch {
	case err != nil:
		r.Error = protocol.AsError(err)
	case e == protocol.Modern || m.Method == "server/discover":
		if result == nil {
			result = struct{}{}
		}
		b, merr := protocol.ModernResult(m.Method, result, s.serverInfo())
		if merr != nil {
			r.Error = protocol.AsError(merr)
		} else {
			r.Result = b
		}
	default:
		if result == nil {
			result = struct{}{}
		}
		r.Result = result
	}
	return protocol.EncodeResponse(r)
}

// initialize answers the legacy handshake: the client's version when it is one of
// protocol.SupportedVersions, else the newest — never an error, never a channel read
// (protocol.Negotiate). It may come at any time, again too; the last one decides the
// session's version.
func (s *Server) initialize(params json.RawMessage) any {
	var p protocol.InitializeParams
	_ = json.Unmarshal(params, &p) // never an error: a bad request still gets the newest version
	if s.opts.OnClientInfo != nil && p.ClientInfo.Name != "" {
		s.opts.OnClientInfo(p.ClientInfo.Name, p.ClientInfo.Version)
	}
	version := protocol.Negotiate(p.ProtocolVersion)
	s.mu.Lock()
	s.negotiated = version
	s.mu.Unlock()
	return protocol.InitializeResult{
		Capabilities:    s.capabilities(),
		Instructions:    s.opts.Instructions,
		ProtocolVersion: version,
		ServerInfo:      s.serverInfo(),
	}
}

// serverInfo is the server's name and version (Options.Name, Options.Version).
func (s *Server) serverInfo() protocol.Implementation {
	return protocol.Implementation{Name: s.opts.Name, Version: s.opts.Version}
}

// capabilities are the server capabilities of initialize and server/discover: tools
// always, resources only when Options.Resources is set.
func (s *Server) capabilities() map[string]any {
	return protocol.Capabilities(s.opts.Resources != nil)
}

// listResources answers resources/list: one page after params.cursor. A page whose
// next cursor is the cursor it was asked with would loop a client forever; the server
// ends the listing there instead, and logs it.
func (s *Server) listResources(ctx context.Context, e protocol.Era, params json.RawMessage) (any, error) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if !absent(params) && json.Unmarshal(params, &p) != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "resources/list takes params {cursor?: string}")
	}
	page, next, err := s.opts.Resources.List(ctx, p.Cursor)
	if err != nil {
		return nil, s.resourceError(e, "", err)
	}
	if next != "" && next == p.Cursor {
		fmt.Fprintf(s.opts.Log, "mcp: resources/list: the cursor %q did not advance; listing ends here\n", next)
		next = ""
	}
	if page == nil {
		page = []Resource{}
	}
	res := map[string]any{"resources": page}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}

// listTemplates answers resources/templates/list: one page, static.
func (s *Server) listTemplates() any {
	t := s.opts.Resources.Templates()
	if t == nil {
		t = []ResourceTemplate{}
	}
	return map[string]any{"resourceTemplates": t}
}

// readResource answers resources/read of params.uri.
func (s *Server) readResource(ctx context.Context, e protocol.Era, params json.RawMessage) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "resources/read takes params {uri: string}")
	}
	contents, err := s.opts.Resources.Read(ctx, p.URI)
	if err != nil {
		return nil, s.resourceError(e, p.URI, err)
	}
	if contents == nil {
		contents = []ResourceContents{}
	}
	return map[string]any{"contents": contents}, nil
}

// resourceError turns a Resources failure into a JSON-RPC error: a *protocol.Error as it
// is; fsbus category not_found → CodeResourceNotFound (-32002) in the legacy era,
// CodeInvalidParams (-32602) in the modern one (MCP 2026-07-28 replaced -32002), with
// data {"uri"}; invalid → -32602; anything else → -32603. The message is the text a
// tool failure would show (Options.ToolError): no internal details.
func (s *Server) resourceError(e protocol.Era, uri string, err error) error {
	var re *protocol.Error
	if errors.As(err, &re) {
		return re
	}
	text := err.Error()
	if s.opts.ToolError != nil {
		text = s.opts.ToolError(err)
	}
	switch errs.CategoryOf(err) {
	case errs.NotFound:
		r := &protocol.Error{Code: protocol.CodeResourceNotFound, Message: text}
		if e == protocol.Modern {
			r.Code = protocol.CodeInvalidParams
		}
		if uri != "" {
			r.Data, _ = marshal(map[string]string{"uri": uri})
		}
		return r
	case errs.Invalid:
		return &protocol.Error{Code: protocol.CodeInvalidParams, Message: text}
	}
	return &protocol.Error{Code: protocol.CodeInternalError, Message: text}
}

// absent reports whether params are missing or null.
func absent(params json.RawMessage) bool {
	p := bytes.TrimSpace(params)
	return len(p) == 0 || bytes.Equal(p, []byte("null"))
}

// call runs one tool.
func (s *Server) call(ctx context.Context, params json.RawMessage) (res any, err error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "tools/call needs params {name, arguments}")
	}
	// An error's text may quote the call's input: a credential pasted into the wrong
	// argument never comes back (docs/format.md "Input caps and the secret guard").
	inputs := callInputs(p.Name, p.Arguments)
	defer func() {
		var re *protocol.Error
		if errors.As(err, &re) {
			c := *re
			c.Message = secretguard.RedactInputs(c.Message, inputs)
			err = &c
		}
	}()
	t := s.lookup(ctx, p.Name)
	if t == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "unknown tool: %s", p.Name)
	}
	args := bytes.TrimSpace(p.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "arguments of %s must be an object", p.Name)
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(s.opts.Log, "mcp: tool %s panicked: %v\n", p.Name, r)
			res, err = protocol.ToolError("internal: the tool failed — see the server log"), nil
		}
	}()
	var out any
	if s.opts.Gate != nil {
		err = s.opts.Gate(ctx, p.Name, args)
	}
	if err == nil {
		out, err = t.Call(ctx, args)
	}
	if err != nil {
		var re *protocol.Error
		if errors.As(err, &re) {
			return nil, re
		}
		text := err.Error()
		if s.opts.ToolError != nil {
			text = s.opts.ToolError(err)
		}
		return protocol.ToolError(secretguard.RedactInputs(text, inputs)), nil
	}
	if raw, ok := out.(RawToolResult); ok {
		return json.RawMessage(raw), nil
	}
	return protocol.ToolResult(out)
}

// redactErrorResponse returns the encoded response b with credential-looking spans of
// inputs cut from its error's message and data (secretguard.RedactInputs); the id and a
// result are left as they are. b itself when it is no error response or nothing is cut.
func redactErrorResponse(b []byte, inputs []string) []byte {
	if !bytes.Contains(b, []byte(`"error"`)) {
		return b
	}
	var r protocol.Response
	if json.Unmarshal(b, &r) != nil || r.Error == nil {
		return b
	}
	msg := secretguard.RedactInputs(r.Error.Message, inputs)
	data := r.Error.Data
	if len(data) > 0 {
		if d := secretguard.RedactInputs(string(data), inputs); d != string(data) && json.Valid([]byte(d)) {
			data = json.RawMessage(d)
		}
	}
	if msg == r.Error.Message && bytes.Equal(data, r.Error.Data) {
		return b
	}
	c := *r.Error
	c.Message, c.Data = msg, data
	r.Error = &c
	return protocol.EncodeResponse(r)
}

// callInputs are the caller's strings of a tools/call: the tool name and every member
// name and string of its arguments, at any depth (what secretguard.RedactInputs looks for).
func callInputs(name string, args json.RawMessage) []string {
	out := []string{name}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				out = append(out, k)
				walk(e)
			}
		}
	}
	var v any
	if json.Unmarshal(args, &v) == nil {
		walk(v)
	}
	return out
}

// write writes one response line (b without its "\n") under the write lock; nil
// writes nothing (a cancelled request).
func (s *Server) write(b []byte) {
	if b == nil {
		return
	}
	line := make([]byte, 0, len(b)+1)
	line = append(append(line, b...), '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(line); err != nil {
		fmt.Fprintf(s.opts.Log, "mcp: writing response: %v\n", err)
	}
}

// marshal is protocol.Marshal: compact JSON without HTML escaping, the encoding of
// every message and of every size and digest the tools compute.
func marshal(v any) ([]byte, error) { return protocol.Marshal(v) }
