package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
	"github.com/rogpeppe/go-internal/txtar"
)

// Protocol conformance transcripts (STYLE: "protocol conformance as txtar
// request/response pairs"). Each testdata/conformance/*.txtar is one case:
//
//   - the archive comment says what the case guards (and the public report, if any);
//   - "-- client --" holds the lines the client writes, in order, each followed by
//     "\n". Raw bytes a text file cannot hold safely are spelled <BOM> (EF BB BF) and
//     <CR> ("\r"); an empty line is sent as an empty line;
//   - "-- server --" holds the response lines expected, in order; "-- server-by-id --"
//     the same, compared as a set matched by id (for calls that finish in any order).
//     Lines compare as JSON values, except that "id" must match byte for byte and the
//     string "$any" matches any value. An empty section expects no output at all;
//   - an optional "-- resources --" section (JSON, see fakeResourcesFixture in
//     protocol_test.go) gives the server a fake Options.Resources; without it the
//     server has no resources capability.
//
// Each case runs against a fresh Server built with New and the fake tools below, over
// io.Pipe, to EOF; nothing but the expected lines may appear on stdout.

// eofReader closes eof when the wrapped reader reports io.EOF: the fake "slow" tool
// finishes then, so a call that was not cancelled gets an answer the transcript sees.
type eofReader struct {
	r    io.Reader
	once sync.Once
	eof  chan struct{}
}

func newEOFReader() *eofReader { return &eofReader{eof: make(chan struct{})} }

// wrap makes e read from r.
func (e *eofReader) wrap(r io.Reader) io.Reader { e.r = r; return e }

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}

// fakeTools are the tools of the conformance server:
//   - echo returns its arguments;
//   - slow waits for its context (a cancellation) or for the client's EOF, then
//     returns {"finished":true};
//   - fail returns an *errs.Error;
//   - boom panics.
func fakeTools(eof <-chan struct{}) []*mcpserver.Tool {
	return []*mcpserver.Tool{
		{
			Name:         "echo",
			Description:  "Return the arguments.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
			Call: func(ctx context.Context, args json.RawMessage) (any, error) {
				return args, nil
			},
		},
		{
			Name:         "slow",
			Description:  "Wait for cancellation or the end of input.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{}}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"finished":{"type":"boolean"}}}`),
			Call: func(ctx context.Context, args json.RawMessage) (any, error) {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-eof:
					return map[string]bool{"finished": true}, nil
				}
			},
		},
		{
			Name:        "fail",
			Description: "Fail with a conflict.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			Call: func(ctx context.Context, args json.RawMessage) (any, error) {
				return nil, errs.Errorf(errs.Conflict, "pick another order", "order %s is claimed by %s", "o-1", "carol")
			},
		},
		{
			Name:        "boom",
			Description: "Panic.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			Call: func(ctx context.Context, args json.RawMessage) (any, error) {
				panic("boom")
			},
		},
	}
}

// newFakeServer builds the conformance server; log receives its diagnostics.
func newFakeServer(t *testing.T, tools []*mcpserver.Tool, log io.Writer) *mcpserver.Server {
	t.Helper()
	srv, err := mcpserver.New(mcpserver.Options{
		Name:         "ferry-test",
		Version:      "0.0.0-test",
		Instructions: "test instructions",
		Tools:        tools,
		Log:          log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// runLines serves what write writes, to EOF, over io.Pipe, and returns every output
// line (without its "\n"); wrap, if not nil, wraps the server's end of stdin. It fails
// the test if the output does not end in "\n" or Serve errs.
func runLines(t *testing.T, srv *mcpserver.Server, wrap func(io.Reader) io.Reader, write func(w io.Writer)) []string {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	var r io.Reader = inR
	if wrap != nil {
		r = wrap(inR)
	}
	go func() {
		err := srv.Serve(context.Background(), r, outW)
		outW.Close()
		done <- err
	}()
	go func() {
		write(inW)
		inW.Close()
	}()
	out, err := io.ReadAll(outR)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if len(out) == 0 {
		return nil
	}
	if out[len(out)-1] != '\n' {
		t.Fatalf("output does not end with a newline: %q", tail(out))
	}
	return strings.Split(string(out[:len(out)-1]), "\n")
}

func tail(b []byte) []byte {
	if len(b) > 200 {
		return b[len(b)-200:]
	}
	return b
}

// decodeClientLine turns a transcript line into the bytes sent.
func decodeClientLine(s string) string {
	return strings.NewReplacer("<BOM>", "\xef\xbb\xbf", "<CR>", "\r").Replace(s)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/conformance/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d conformance transcripts, want the full set", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var client, server, resources []byte
			haveClient, haveServer, byID := false, false, false
			for _, f := range ar.Files {
				switch f.Name {
				case "client":
					client, haveClient = f.Data, true
				case "server":
					server, haveServer = f.Data, true
				case "server-by-id":
					server, haveServer, byID = f.Data, true, true
				case "resources":
					resources = f.Data
				default:
					t.Fatalf("unknown section %q", f.Name)
				}
			}
			if !haveClient || !haveServer || len(bytes.TrimSpace(ar.Comment)) == 0 {
				t.Fatal("a transcript needs a comment, a client section and a server section")
			}
			clientLines := strings.Split(strings.TrimSuffix(string(client), "\n"), "\n")
			var want []string
			for _, l := range strings.Split(string(server), "\n") {
				if strings.TrimSpace(l) != "" {
					want = append(want, l)
				}
			}

			eof := newEOFReader()
			srv := newConformanceServer(t, eof.eof, resources)
			got := runLines(t, srv, eof.wrap, func(w io.Writer) {
				for _, l := range clientLines {
					if _, err := io.WriteString(w, decodeClientLine(l)+"\n"); err != nil {
						t.Error(err)
						return
					}
				}
			})
			if t.Failed() {
				return
			}
			compareTranscript(t, want, got, byID)
		})
	}
}

// lockedWriter serialises writes to a buffer shared by goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// compareTranscript checks the output lines against the expected ones.
func compareTranscript(t *testing.T, want, got []string, byID bool) {
	t.Helper()
	show := func() string {
		return "\n--- got ---\n" + strings.Join(got, "\n") + "\n--- want ---\n" + strings.Join(want, "\n")
	}
	if len(got) != len(want) {
		t.Fatalf("got %d response lines, want %d%s", len(got), len(want), show())
	}
	if !byID {
		for i := range want {
			if err := matchLine(want[i], got[i]); err != nil {
				t.Errorf("line %d: %v%s", i+1, err, show())
			}
		}
		return
	}
	used := make([]bool, len(got))
	for i, w := range want {
		wid := rawID(t, w)
		found := false
		for j, g := range got {
			if !used[j] && bytes.Equal(wid, rawID(t, g)) {
				used[j], found = true, true
				if err := matchLine(w, g); err != nil {
					t.Errorf("response with id %s: %v%s", wid, err, show())
				}
				break
			}
		}
		if !found {
			t.Errorf("expected line %d (id %s) has no response%s", i+1, wid, show())
		}
	}
}

// rawID returns the bytes of a line's "id" member exactly as written.
func rawID(t *testing.T, line string) json.RawMessage {
	t.Helper()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("not JSON: %q: %v", line, err)
	}
	return m.ID
}

// matchLine compares one response line with its expectation: the id byte for byte,
// everything else as JSON values with "$any" as a wildcard. A batch's answer (an
// array) matches element by element.
func matchLine(want, got string) error {
	if strings.HasPrefix(strings.TrimSpace(want), "[") {
		var w, g []json.RawMessage
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			return fmt.Errorf("expectation is not a JSON array: %q", want)
		}
		if err := json.Unmarshal([]byte(got), &g); err != nil || len(g) != len(w) {
			return fmt.Errorf("got %q, want a batch answer of %d responses", got, len(w))
		}
		for i := range w {
			if err := matchLine(string(w[i]), string(g[i])); err != nil {
				return fmt.Errorf("batch element %d: %v", i, err)
			}
		}
		return nil
	}
	var wid, gid struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(got), &gid); err != nil {
		return fmt.Errorf("response is not JSON: %q", got)
	}
	if err := json.Unmarshal([]byte(want), &wid); err != nil {
		return fmt.Errorf("expectation is not JSON: %q", want)
	}
	if !bytes.Equal(wid.ID, gid.ID) {
		return fmt.Errorf("id %s, want %s byte for byte", gid.ID, wid.ID)
	}
	w, err := decodeValue(want)
	if err != nil {
		return err
	}
	g, err := decodeValue(got)
	if err != nil {
		return err
	}
	return matchValue("$", w, g)
}

func decodeValue(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding %q: %v", s, err)
	}
	return v, nil
}

func matchValue(path string, want, got any) error {
	if want == "$any" {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v, want an object", path, got)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				return fmt.Errorf("%s: unexpected member %q", path, k)
			}
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: missing member %q", path, k)
			}
			if err := matchValue(path+"."+k, wv, gv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %v, want %v", path, got, want)
		}
		for i := range w {
			if err := matchValue(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: got %#v, want %#v", path, got, want)
	}
	return nil
}

// setDrainTimeout overrides mcpserver.DrainTimeout for one (non-parallel) test.
func setDrainTimeout(t *testing.T, d time.Duration) {
	old := mcpserver.DrainTimeout
	mcpserver.DrainTimeout = d
	t.Cleanup(func() { mcpserver.DrainTimeout = old })
}

// session is a live connection to a Server over io.Pipe, for tests that interleave
// writes and reads; startSession has done the initialize handshake (id "init").
type session struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func startSession(t *testing.T, srv *mcpserver.Server, wrap func(io.Reader) io.Reader) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	var r io.Reader = inR
	if wrap != nil {
		r = wrap(inR)
	}
	go func() {
		err := srv.Serve(context.Background(), r, outW)
		outW.Close()
		s.done <- err
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	// The legacy handshake first: a request before initialize is refused.
	go s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"session","version":"1"}}}`)
	if r := s.recv(); string(r.ID) != `"init"` || r.Error != nil {
		t.Fatalf("initialize: %+v", r)
	}
	return s
}

// send writes one line (it may be called from any goroutine).
func (s *session) send(line string) {
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Errorf("writing %.80q: %v", line, err)
	}
}

// recv reads one response line and decodes it.
func (s *session) recv() rpcResponse {
	s.t.Helper()
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		s.t.Fatalf("reading a response: %v", err)
	}
	var r rpcResponse
	if err := json.Unmarshal(line, &r); err != nil {
		s.t.Fatalf("response is not JSON: %q", tail(line))
	}
	return r
}

// close sends EOF and returns every line still written before Serve returned.
func (s *session) close() []rpcResponse {
	s.t.Helper()
	s.in.Close()
	var rest []rpcResponse
	for {
		line, err := s.out.ReadBytes('\n')
		if len(line) > 0 {
			var r rpcResponse
			if err := json.Unmarshal(line, &r); err != nil {
				s.t.Fatalf("response is not JSON: %q", tail(line))
			}
			rest = append(rest, r)
		}
		if err != nil {
			break
		}
	}
	if err := <-s.done; err != nil {
		s.t.Fatalf("Serve: %v", err)
	}
	return rest
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// toolText returns the text of a tools/call result's single content block.
func toolText(t *testing.T, r rpcResponse) (string, bool) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("id %s: JSON-RPC error %d %s", r.ID, r.Error.Code, r.Error.Message)
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) != 1 || res.Content[0].Type != "text" {
		t.Fatalf("id %s: not a one-text-block tool result: %s", r.ID, r.Result)
	}
	return res.Content[0].Text, res.IsError
}

// TestLongLine: an 8 MiB request line is read whole and answered (no 64 KiB scanner
// limit; guards mark3labs/mcp-go#588, "bufio.Scanner: token too long").
func TestLongLine(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeTools(nil), nil)
	s := startSession(t, srv, nil)
	big := strings.Repeat("x", 8<<20)
	go s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + big + `"}}}`)
	r := s.recv()
	if string(r.ID) != "7" {
		t.Fatalf("id %s, want 7", r.ID)
	}
	text, isErr := toolText(t, r)
	if isErr || text != `{"text":"`+big+`"}` {
		t.Fatalf("the 8 MiB argument did not come back whole (isError %v, %d chars)", isErr, len(text))
	}
	s.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if r := s.recv(); string(r.ID) != "8" || r.Error != nil {
		t.Fatalf("ping after the long line: %+v", r)
	}
	s.close()
}

// TestEOFIdle: at EOF with nothing in flight Serve returns at once, not after
// DrainTimeout (set to an hour here: a Serve that waited would hang the test).
func TestEOFIdle(t *testing.T) {
	setDrainTimeout(t, time.Hour)
	srv := newFakeServer(t, fakeTools(nil), nil)
	s := startSession(t, srv, nil)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if r := s.recv(); string(r.ID) != "1" {
		t.Fatalf("ping: %+v", r)
	}
	if rest := s.close(); len(rest) != 0 {
		t.Fatalf("unexpected output after EOF: %+v", rest)
	}
}

// TestDrainAnswersRunningCall: a call still running when stdin ends is answered once
// it finishes (it may have written to the channel: the client must learn so).
func TestDrainAnswersRunningCall(t *testing.T) {
	setDrainTimeout(t, time.Hour)
	eof := newEOFReader()
	tool := &mcpserver.Tool{
		Name: "after_eof", Description: "Finish only after the client's EOF.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Call: func(ctx context.Context, args json.RawMessage) (any, error) {
			<-eof.eof
			return map[string]string{"wrote": "yes"}, nil
		},
	}
	srv := newFakeServer(t, []*mcpserver.Tool{tool}, nil)
	s := startSession(t, srv, eof.wrap)
	s.send(`{"jsonrpc":"2.0","id":"w1","method":"tools/call","params":{"name":"after_eof","arguments":{}}}`)
	rest := s.close()
	if len(rest) != 1 || string(rest[0].ID) != `"w1"` {
		t.Fatalf("the call running at EOF was not answered: %+v", rest)
	}
	if text, isErr := toolText(t, rest[0]); isErr || text != `{"wrote":"yes"}` {
		t.Fatalf("drained answer: %q (isError %v)", text, isErr)
	}
}

// TestDrainTimeoutCancels: a call still running when DrainTimeout expires after EOF
// is cancelled, its answer dropped, and Serve returns.
func TestDrainTimeoutCancels(t *testing.T) {
	setDrainTimeout(t, time.Millisecond)
	cancelled := make(chan struct{})
	tool := &mcpserver.Tool{
		Name: "forever", Description: "Wait for cancellation.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Call: func(ctx context.Context, args json.RawMessage) (any, error) {
			<-ctx.Done()
			close(cancelled)
			return map[string]string{"late": "yes"}, nil
		},
	}
	srv := newFakeServer(t, []*mcpserver.Tool{tool}, nil)
	s := startSession(t, srv, nil)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forever","arguments":{}}}`)
	if rest := s.close(); len(rest) != 0 {
		t.Fatalf("a call cancelled at the drain deadline was answered: %+v", rest)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("Serve returned without cancelling the running call")
	}
}

// TestConcurrentByID: a slow call does not block ping or other calls, and every
// response carries the id of its own request.
func TestConcurrentByID(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	gate := &mcpserver.Tool{
		Name: "gate", Description: "Wait for the test.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Call: func(ctx context.Context, args json.RawMessage) (any, error) {
			select {
			case <-release:
				return map[string]string{"gate": "open"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}
	srv := newFakeServer(t, append(fakeTools(nil), gate), nil)
	s := startSession(t, srv, nil)
	s.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"gate","arguments":{}}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	// The gate is closed: the only answer possible is ping's. A server that ran calls
	// inline would never answer, and the test would hang.
	if r := s.recv(); string(r.ID) != "2" || r.Error != nil {
		t.Fatalf("first response %+v, want ping's (id 2)", r)
	}
	const n = 16
	go func() {
		for i := 0; i < n; i++ {
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"e%d","method":"tools/call","params":{"name":"echo","arguments":{"text":"t%d"}}}`, i, i))
		}
	}()
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		r := s.recv()
		var id string
		if err := json.Unmarshal(r.ID, &id); err != nil || !strings.HasPrefix(id, "e") {
			t.Fatalf("unexpected response %s while the gate is closed", r.ID)
		}
		text, _ := toolText(t, r)
		if want := `{"text":"t` + id[1:] + `"}`; text != want {
			t.Fatalf("response %s carries %s, want %s", id, text, want)
		}
		if seen[id] {
			t.Fatalf("id %s answered twice", id)
		}
		seen[id] = true
	}
	close(release)
	if r := s.recv(); string(r.ID) != `"slow"` {
		t.Fatalf("response %s, want the slow call's", r.ID)
	}
	if rest := s.close(); len(rest) != 0 {
		t.Fatalf("unexpected output: %+v", rest)
	}
}

// TestStdoutOnlyJSONRPC: whatever the client sends and whatever the tools do (fail,
// panic, log), every stdout line is a JSON-RPC 2.0 response; diagnostics go to the
// log writer only. Guards mcp-hangar/mcp-hangar#563 and the many reports like it (log
// lines on stdout corrupt the stream; strict clients drop the server).
func TestStdoutOnlyJSONRPC(t *testing.T) {
	t.Parallel()
	var logMu sync.Mutex
	var log bytes.Buffer
	lw := lockedWriter{&logMu, &log}
	// The real ferry tools too, with a channel that fails to open: their internal
	// errors are logged, and only a correlation id reaches the client.
	ferrySrv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{
		Agent: "probe",
		Open:  func() (*fsbus.Channel, error) { return nil, errors.New("disk on fire") },
		Log:   lw,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	input := []string{
		"\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`not json at all`,
		`{"jsonrpc":"2.0","id":3,"method":"nope"}`,
		`{"jsonrpc":"2.0","method":"notifications/whatever"}`,
		`[{"jsonrpc":"2.0","id":4,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		`{"id":5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":6,"result":{}}`,
		"",
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"boom","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"fail","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"ferry_catchup","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"ferry_orders","arguments":{"action":"new","title":"t"}}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"read"}}}`,
		`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bye"}}}<CR>`,
	}
	write := func(w io.Writer) {
		for _, l := range input {
			io.WriteString(w, decodeClientLine(l)+"\n")
		}
	}
	for name, srv := range map[string]*mcpserver.Server{
		"fake":  newFakeServer(t, fakeTools(nil), lw),
		"ferry": ferrySrv,
	} {
		t.Run(name, func(t *testing.T) {
			lines := runLines(t, srv, nil, write)
			// Answered: ids 1, 2, 3, the line that is not JSON, the batch, the object
			// id, 5 (no jsonrpc), 7 to 13.
			if len(lines) != 14 {
				t.Errorf("got %d response lines, want 14:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			for i, l := range lines {
				var m map[string]json.RawMessage
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("stdout line %d is not JSON: %q", i+1, l)
				}
				if string(m["jsonrpc"]) != `"2.0"` {
					t.Errorf("stdout line %d: jsonrpc %s", i+1, m["jsonrpc"])
				}
				if _, ok := m["id"]; !ok {
					t.Errorf("stdout line %d has no id: %s", i+1, l)
				}
				_, res := m["result"]
				_, rpcErr := m["error"]
				if res == rpcErr {
					t.Errorf("stdout line %d must carry exactly one of result and error: %s", i+1, l)
				}
				for k := range m {
					if k != "jsonrpc" && k != "id" && k != "result" && k != "error" {
						t.Errorf("stdout line %d has member %q: %s", i+1, k, l)
					}
				}
				if strings.Contains(l, "disk on fire") {
					t.Errorf("an internal error's details reached stdout: %s", l)
				}
			}
		})
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, want := range []string{"boom", "disk on fire"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
}

// TestToolsListStable: two servers built separately, with their tools registered in
// different orders, list byte-identical tools (docs/design.md §4: prompt caches stay
// warm).
func TestToolsListStable(t *testing.T) {
	t.Parallel()
	a := fakeTools(nil)
	b := fakeTools(nil)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	sa, sb := newFakeServer(t, a, nil), newFakeServer(t, b, nil)
	if !bytes.Equal(sa.ToolsList(), sb.ToolsList()) {
		t.Fatalf("ToolsList differs:\n%s\n%s", sa.ToolsList(), sb.ToolsList())
	}
	wire := func(srv *mcpserver.Server, version string) json.RawMessage {
		lines := runLines(t, srv, nil, func(w io.Writer) {
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`"}}`+"\n")
			io.WriteString(w, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
		})
		if len(lines) != 2 {
			t.Fatalf("got %d lines", len(lines))
		}
		var r rpcResponse
		if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || r.Result == nil {
			t.Fatalf("tools/list: %s", lines[1])
		}
		return r.Result
	}
	wa, wb := wire(sa, "2024-11-05"), wire(sb, "2025-11-25")
	if !bytes.Equal(wa, wb) {
		t.Fatalf("tools/list on the wire differs:\n%s\n%s", wa, wb)
	}
	if !bytes.Equal(wa, sa.ToolsList()) {
		t.Fatalf("tools/list on the wire is not ToolsList():\n%s\n%s", wa, sa.ToolsList())
	}
}

// TestBusyBeyondMaxInflight: calls beyond MaxInflight are answered CodeServerBusy at
// once, never queued; once a running call answers, a new one is accepted.
func TestBusyBeyondMaxInflight(t *testing.T) {
	old := mcpserver.MaxInflight
	mcpserver.MaxInflight = 2
	defer func() { mcpserver.MaxInflight = old }()
	release := make(chan struct{})
	gate := &mcpserver.Tool{
		Name: "gate", Description: "Wait for the test.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Call: func(ctx context.Context, args json.RawMessage) (any, error) {
			select {
			case <-release:
				return map[string]string{"gate": "open"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}
	srv := newFakeServer(t, append(fakeTools(nil), gate), nil)
	s := startSession(t, srv, nil)
	s.send(`{"jsonrpc":"2.0","id":"g1","method":"tools/call","params":{"name":"gate","arguments":{}}}`)
	s.send(`{"jsonrpc":"2.0","id":"g2","method":"tools/call","params":{"name":"gate","arguments":{}}}`)
	s.send(`{"jsonrpc":"2.0","id":"g3","method":"tools/call","params":{"name":"gate","arguments":{}}}`)
	r := s.recv()
	if string(r.ID) != `"g3"` || r.Error == nil || r.Error.Code != protocol.CodeServerBusy {
		t.Fatalf("third call while two run: %+v, want a busy error for g3", r)
	}
	close(release)
	got := map[string]bool{}
	for range 2 {
		got[string(s.recv().ID)] = true
	}
	if !got[`"g1"`] || !got[`"g2"`] {
		t.Fatalf("answers %v, want g1 and g2", got)
	}
	s.send(`{"jsonrpc":"2.0","id":"e1","method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`)
	if r := s.recv(); string(r.ID) != `"e1"` || r.Error != nil {
		t.Fatalf("a call after the others answered: %+v", r)
	}
	s.close()
}
