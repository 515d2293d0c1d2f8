package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver"
)

// The protocol: the two eras, resources routing, batches, EOF and long-polls.
// Most rules are conformance transcripts (testdata/conformance); what a transcript
// cannot show — what a tool sees of its contexts, bytes compared across eras, a
// server stopped by its context — is tested here.

// fakeResourcesFixture is the "-- resources --" section of a conformance transcript:
// the fake Options.Resources of that case.
type fakeResourcesFixture struct {
	// Resources are listed Page at a time (all at once when Page is 0); the cursor of
	// the next page is "p<offset>", anything else is an invalid cursor.
	Resources []mcpserver.Resource `json:"resources"`
	Page      int                  `json:"page"`
	// Stuck makes List answer a cursor with that same cursor as the next one, like
	// the servers of DeusData/codebase-memory-mcp#1247.
	Stuck     bool                         `json:"stuck"`
	Templates []mcpserver.ResourceTemplate `json:"templates"`
	// Contents are the texts Read returns, by uri. Read of ferry://t/slow waits for
	// its context or the client's EOF; ferry://t/boom panics; ferry://t/internal fails
	// with a plain error; any other uri is not_found.
	Contents map[string]string `json:"contents"`
}

// fakeResources implements mcpserver.Resources over a fixture.
type fakeResources struct {
	fx  fakeResourcesFixture
	eof <-chan struct{}
}

func (f *fakeResources) List(ctx context.Context, cursor string) ([]mcpserver.Resource, string, error) {
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(cursor, "p"))
		if !strings.HasPrefix(cursor, "p") || err != nil || n < 0 || n > len(f.fx.Resources) {
			return nil, "", errs.Errorf(errs.Invalid, "list again without a cursor", "%q is not a cursor of resources/list", cursor)
		}
		start = n
	}
	end := len(f.fx.Resources)
	if f.fx.Page > 0 && start+f.fx.Page < end {
		end = start + f.fx.Page
	}
	next := ""
	if end < len(f.fx.Resources) {
		next = "p" + strconv.Itoa(end)
	}
	if f.fx.Stuck && cursor != "" {
		next = cursor
	}
	return f.fx.Resources[start:end], next, nil
}

func (f *fakeResources) Templates() []mcpserver.ResourceTemplate { return f.fx.Templates }

func (f *fakeResources) Read(ctx context.Context, uri string) ([]mcpserver.ResourceContents, error) {
	switch uri {
	case "ferry://t/slow":
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.eof:
			return []mcpserver.ResourceContents{{URI: uri, MimeType: "text/plain", Text: "slow"}}, nil
		}
	case "ferry://t/boom":
		panic("boom")
	case "ferry://t/internal":
		return nil, errors.New("disk on fire")
	}
	text, ok := f.fx.Contents[uri]
	if !ok {
		return nil, errs.Errorf(errs.NotFound, "list them with resources/list", "no resource %s", uri)
	}
	mime := ""
	for _, r := range f.fx.Resources {
		if r.URI == uri {
			mime = r.MimeType
		}
	}
	return []mcpserver.ResourceContents{{URI: uri, MimeType: mime, Text: text}}, nil
}

// newConformanceServer builds the server of a conformance case: the fake tools, and a
// fake Resources when the case has a fixture (JSON of fakeResourcesFixture).
func newConformanceServer(t *testing.T, eof <-chan struct{}, fixture []byte) *mcpserver.Server {
	t.Helper()
	opts := mcpserver.Options{
		Name:         "ferry-test",
		Version:      "0.0.0-test",
		Instructions: "test instructions",
		Tools:        fakeTools(eof),
	}
	if len(bytes.TrimSpace(fixture)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(fixture))
		dec.DisallowUnknownFields()
		f := &fakeResources{eof: eof}
		if err := dec.Decode(&f.fx); err != nil {
			t.Fatalf("resources fixture: %v", err)
		}
		opts.Resources = f
	}
	srv, err := mcpserver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// modernMeta is the params._meta of a 2026-07-28 request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestEOFContextEndsWaitAtEOF: a call waiting with EOFContext — a long-poll — is woken
// the moment the client's input ends, while its own context lives on (short calls read
// before EOF still finish and answer). DrainTimeout is an hour: a server that made the
// wait last until the drain deadline would hang the test.
func TestEOFContextEndsWaitAtEOF(t *testing.T) {
	t.Parallel()
	setDrainTimeout(t, time.Hour)
	type seen struct{ waitErr, callErr error }
	woke := make(chan seen, 1)
	started := make(chan struct{})
	tool := &mcpserver.Tool{
		Name: "long_poll", Description: "Wait for something new.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Call: func(ctx context.Context, args json.RawMessage) (any, error) {
			w := mcpserver.EOFContext(ctx)
			if w == ctx || mcpserver.EOFContext(w) != w {
				t.Error("EOFContext inside Serve must be the call's own wait context, and stable")
			}
			close(started)
			<-w.Done()
			woke <- seen{w.Err(), ctx.Err()}
			return map[string]any{"messages": []string{}}, nil
		},
	}
	srv := newFakeServer(t, []*mcpserver.Tool{tool}, nil)
	s := startSession(t, srv, nil)
	s.send(`{"jsonrpc":"2.0","id":"poll","method":"tools/call","params":{"name":"long_poll","arguments":{}}}`)
	<-started
	select {
	case w := <-woke:
		t.Fatalf("the wait ended before EOF: %+v", w)
	default:
	}
	rest := s.close()
	w := <-woke
	if !errors.Is(w.waitErr, context.Canceled) || w.callErr != nil {
		t.Fatalf("at EOF: wait context %v, call context %v; want the wait cancelled and the call alive", w.waitErr, w.callErr)
	}
	if len(rest) != 1 || string(rest[0].ID) != `"poll"` {
		t.Fatalf("the long-poll woken by EOF was not answered: %+v", rest)
	}
	if text, isErr := toolText(t, rest[0]); isErr || text != `{"messages":[]}` {
		t.Fatalf("answer %q (isError %v)", text, isErr)
	}
}

// TestEOFContextCancelled: notifications/cancelled ends the wait context too, and the
// cancelled call is not answered.
func TestEOFContextCancelled(t *testing.T) {
	t.Parallel()
	woke := make(chan error, 1)
	tool := &mcpserver.Tool{
		Name: "long_poll", Description: "Wait for something new.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Call: func(ctx context.Context, args json.RawMessage) (any, error) {
			<-mcpserver.EOFContext(ctx).Done()
			woke <- ctx.Err()
			return map[string]any{}, nil
		},
	}
	srv := newFakeServer(t, []*mcpserver.Tool{tool}, nil)
	s := startSession(t, srv, nil)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"long_poll","arguments":{}}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	if err := <-woke; !errors.Is(err, context.Canceled) {
		t.Fatalf("call context after notifications/cancelled: %v", err)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if r := s.recv(); string(r.ID) != "2" {
		t.Fatalf("got %s, want only ping's answer: the cancelled call must not be answered", r.ID)
	}
	if rest := s.close(); len(rest) != 0 {
		t.Fatalf("unexpected output: %+v", rest)
	}
}

// TestEOFContextOutsideServe: a tool called directly (tests, the CLI) waits with its
// own context.
func TestEOFContextOutsideServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if mcpserver.EOFContext(ctx) != ctx {
		t.Fatal("EOFContext outside Serve must return ctx itself")
	}
}

// TestServeEndsWithContext: Serve returns when its context ends even though the input
// stays open and silent (SIGINT in `ferry mcp serve`); a server stuck in its read
// would hang the test.
func TestServeEndsWithContext(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeTools(nil), nil)
	inR, inW := io.Pipe()
	defer inW.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, inR, io.Discard) }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestToolsArrayAcrossEras: the tools array of tools/list is the same bytes in the
// legacy result, in the modern one (which adds resultType, cache hints and _meta around
// it) and in ToolsList (docs/design.md §4: prompt caches stay warm whatever the
// version).
func TestToolsArrayAcrossEras(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeTools(nil), nil)
	lines := runLines(t, srv, nil, func(w io.Writer) {
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`+"\n")
		io.WriteString(w, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
		io.WriteString(w, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+modernMeta+`}}`+"\n")
	})
	if len(lines) != 3 {
		t.Fatalf("got %d lines", len(lines))
	}
	tools := func(b []byte) json.RawMessage {
		var r struct {
			Result struct {
				Tools      json.RawMessage `json:"tools"`
				ResultType string          `json:"resultType"`
			} `json:"result"`
		}
		if err := json.Unmarshal(b, &r); err != nil || len(r.Result.Tools) == 0 {
			t.Fatalf("no tools in %s", b)
		}
		return r.Result.Tools
	}
	legacy, modern, direct := tools([]byte(lines[1])), tools([]byte(lines[2])), tools([]byte(`{"result":`+string(srv.ToolsList())+`}`))
	if !bytes.Equal(legacy, modern) || !bytes.Equal(legacy, direct) {
		t.Fatalf("the tools array differs across eras:\nlegacy %s\nmodern %s\nToolsList %s", legacy, modern, direct)
	}
	if strings.Contains(lines[1], "resultType") || !strings.Contains(lines[2], `"resultType":"complete"`) {
		t.Fatalf("resultType belongs to the modern result only:\n%s\n%s", lines[1], lines[2])
	}
}

// TestResourcesRouting: Options.Resources receives exactly what the client asked —
// the cursor as given, the uri as given — and a server without it has no resources
// capability in either handshake.
func TestResourcesRouting(t *testing.T) {
	t.Parallel()
	rec := &recordingResources{}
	srv, err := mcpserver.New(mcpserver.Options{Name: "r", Version: "1", Resources: rec})
	if err != nil {
		t.Fatal(err)
	}
	lines := runLines(t, srv, nil, func(w io.Writer) {
		for _, l := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
			`{"jsonrpc":"2.0","id":2,"method":"resources/list"}`,
			`{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{"cursor":"c-<é>"}}`,
			`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"ferry://acme/order/o-1"}}`,
			`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{` + modernMeta + `,"uri":"ferry://acme/ask/a-2"}}`,
			`{"jsonrpc":"2.0","id":6,"method":"resources/templates/list"}`,
		} {
			io.WriteString(w, l+"\n")
		}
	})
	if len(lines) != 6 {
		t.Fatalf("got %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// The calls run concurrently: compare as sets.
	slices.Sort(rec.cursors)
	slices.Sort(rec.uris)
	if got := strings.Join(rec.cursors, "|"); got != "|c-<é>" {
		t.Errorf("List cursors %q, want the first page and the cursor as sent", got)
	}
	if got := strings.Join(rec.uris, "|"); got != "ferry://acme/ask/a-2|ferry://acme/order/o-1" {
		t.Errorf("Read uris %q", got)
	}
	if rec.templates != 1 {
		t.Errorf("Templates called %d times, want 1", rec.templates)
	}
	if !strings.Contains(lines[0], `"resources":{`) {
		t.Errorf("initialize with Resources set does not advertise the resources capability: %s", lines[0])
	}
	plain := runLines(t, newFakeServer(t, fakeTools(nil), nil), nil, func(w io.Writer) {
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`+"\n")
		io.WriteString(w, `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{`+modernMeta+`}}`+"\n")
	})
	for _, l := range plain {
		if strings.Contains(l, `"resources"`) {
			t.Errorf("a server without Resources advertises resources: %s", l)
		}
	}
}

// recordingResources records what the server passes to it.
type recordingResources struct {
	mu        sync.Mutex
	cursors   []string
	uris      []string
	templates int
}

func (r *recordingResources) List(ctx context.Context, cursor string) ([]mcpserver.Resource, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cursors = append(r.cursors, cursor)
	return []mcpserver.Resource{{URI: "ferry://acme/order/o-1", Name: "o-1"}}, "", nil
}

func (r *recordingResources) Templates() []mcpserver.ResourceTemplate {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.templates++
	return nil
}

func (r *recordingResources) Read(ctx context.Context, uri string) ([]mcpserver.ResourceContents, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uris = append(r.uris, uri)
	return []mcpserver.ResourceContents{{URI: uri, Text: "x"}}, nil
}

// TestOnClientInfo: the client's self-reported name and version reach
// Options.OnClientInfo from initialize and from modern requests that carry them — not
// from a legacy request's _meta, nor from a modern request without clientInfo.
func TestOnClientInfo(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv, err := mcpserver.New(mcpserver.Options{Name: "c", Version: "1", Tools: fakeTools(nil),
		OnClientInfo: func(name, version string) {
			mu.Lock()
			got = append(got, name+"@"+version)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	runLines(t, srv, nil, func(w io.Writer) {
		for _, l := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"claude-code","version":"2.1"}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"legacy-meta","version":"0"}}}}`,
			`{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"codex","version":"0.9"}}}}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + modernMeta + `}}`,
			`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		} {
			io.WriteString(w, l+"\n")
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, " ") != "claude-code@2.1 codex@0.9" {
		t.Fatalf("OnClientInfo saw %q, want claude-code@2.1 then codex@0.9", got)
	}
}
