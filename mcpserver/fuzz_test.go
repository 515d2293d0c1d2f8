package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/ijson"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
	"github.com/rogpeppe/go-internal/txtar"
)

// Fuzz targets of the transport (docs/mcp.md "Tests"): the line reader, the request
// decoder, and the whole server on arbitrary input. The seed corpus is
// fixtures/fuzz/mcp — streams/ (whole inputs) and messages/ (single lines) — plus the
// client side of every conformance transcript; plain `go test` runs every seed, `go
// test -fuzz FuzzServe` (or FuzzLineReader, FuzzDecodeMessage) explores from them.

const seedDir = "../fixtures/fuzz/mcp"

// seeds returns the files of seedDir/sub; an empty or missing directory fails the test
// (a seed corpus that silently vanished would make the fuzz tests pass vacuously).
func seeds(f *testing.F, sub string) [][]byte {
	f.Helper()
	files, err := filepath.Glob(filepath.Join(seedDir, sub, "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in %s (%v)", filepath.Join(seedDir, sub), err)
	}
	var out [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// transcriptInputs returns the client section of every conformance transcript, as the
// bytes the conformance runner sends.
func transcriptInputs(f *testing.F) [][]byte {
	f.Helper()
	files, _ := filepath.Glob("testdata/conformance/*.txtar")
	var out [][]byte
	for _, name := range files {
		ar, err := txtar.ParseFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range ar.Files {
			if file.Name == "client" {
				r := strings.NewReplacer("<BOM>", "\xef\xbb\xbf", "<CR>", "\r")
				out = append(out, []byte(r.Replace(string(file.Data))))
			}
		}
	}
	return out
}

// chunkReader returns at most n bytes per Read, and io.EOF with the last bytes: how
// pipes deliver a stream.
type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	if len(c.data) == 0 {
		return k, io.EOF
	}
	return k, nil
}

// referenceLines is what the line reader must return for data: split at "\n", every
// trailing "\r" trimmed, a BOM stripped from the first line only, blank lines dropped.
func referenceLines(data []byte) [][]byte {
	var out [][]byte
	for i, p := range bytes.Split(data, []byte("\n")) {
		p = bytes.TrimRight(p, "\r")
		if i == 0 {
			p = bytes.TrimPrefix(p, []byte("\xef\xbb\xbf"))
		}
		if len(bytes.TrimSpace(p)) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// FuzzLineReader: whatever the bytes and however the reads split them, the line
// reader returns exactly the reference lines, then io.EOF.
func FuzzLineReader(f *testing.F) {
	for _, s := range append(seeds(f, "streams"), transcriptInputs(f)...) {
		for _, n := range []uint16{1, 2, 7, 4096} {
			f.Add(s, n)
		}
	}
	f.Add([]byte("\xef\xbb\xbf\r\n\r\r\n  \n{}"), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		lr := newLineReader(&chunkReader{data: data, n: int(n%8192) + 1})
		var got [][]byte
		for {
			line, err := lr.next()
			if line != nil {
				got = append(got, line)
			}
			if err != nil {
				if err != io.EOF {
					t.Fatalf("next: %v", err)
				}
				break
			}
		}
		want := referenceLines(data)
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("lines of %q:\ngot  %q\nwant %q", data, got, want)
		}
	})
}

// FuzzDecodeMessage: the decoder never panics and classifies every line one way: a
// message to handle (I-JSON with a method, no two names of an object differing only in
// case), a response from the client or a notification that breaks that to ignore, or an error to send — -32700 exactly when
// the line is not JSON or breaks its encoding (RFC 7493 §2.1), else -32600 — whose id
// is null or the line's own, byte for byte. The era of any params decides without
// panicking, with only its two errors.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range seeds(f, "messages") {
		f.Add(s)
	}
	for _, s := range nonIJSONMessages {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, ok, bad := protocol.DecodeMessage(line, secretguard.RedactIJSON)
		ierr := ijson.CheckFolded(line)
		var ie *ijson.Error
		switch {
		case ok:
			if bad != nil || m.Method == "" || ierr != nil {
				t.Fatalf("%q: handled with method %q, error %+v, I-JSON: %v", line, m.Method, bad, ierr)
			}
		case bad == nil && ierr != nil:
			if ids, object := protocol.TopLevel(line, "id"); !object || len(ids) > 0 {
				t.Fatalf("%q: dropped without an answer, but it is not a notification (%v)", line, ierr)
			}
		case bad == nil:
			if m.Method != "" || (len(m.Result) == 0 && len(m.Error) == 0) {
				t.Fatalf("%q: dropped without an answer, but it is not a client's response", line)
			}
		default:
			wantCode := protocol.CodeInvalidRequest
			if !json.Valid(line) || errors.As(ierr, &ie) && ie.Encoding() {
				wantCode = protocol.CodeParseError
			}
			if bad.Error == nil || bad.Error.Code != wantCode {
				t.Fatalf("%q: error %+v, want code %d", line, bad.Error, wantCode)
			}
			if !bytes.Equal(bad.ID, protocol.NullID) && (!protocol.ValidID(bad.ID) || !bytes.Contains(line, bad.ID)) {
				t.Fatalf("%q: error id %s is neither null nor the request's", line, bad.ID)
			}
			if !json.Valid(protocol.EncodeResponse(*bad)) {
				t.Fatalf("%q: the error response is not JSON", line)
			}
		}
		if ok {
			e, err := protocol.RequestEra(m.Params)
			if err != nil {
				if e != protocol.Modern || (err.Code != protocol.CodeInvalidParams && err.Code != protocol.CodeUnsupportedVersion) {
					t.Fatalf("%q: era %v error %+v", line, e, err)
				}
				if err.Code == protocol.CodeUnsupportedVersion {
					var d struct {
						Supported []string `json:"supported"`
						Requested *string  `json:"requested"`
					}
					if json.Unmarshal(err.Data, &d) != nil || len(d.Supported) == 0 || d.Requested == nil {
						t.Fatalf("%q: -32022 without data {supported, requested}: %s", line, err.Data)
					}
				}
			}
		}
	})
}

// fuzzResources is a small Resources for FuzzServe.
type fuzzResources struct{}

func (fuzzResources) List(ctx context.Context, cursor string) ([]Resource, string, error) {
	switch cursor {
	case "":
		return []Resource{{URI: "ferry://t/order/o-1", Name: "o-1"}}, "p1", nil
	case "p1":
		return []Resource{{URI: "ferry://t/order/o-2", Name: "o-2"}}, "", nil
	}
	return nil, "", errs.Errorf(errs.Invalid, "list again", "bad cursor")
}

func (fuzzResources) Templates() []ResourceTemplate {
	return []ResourceTemplate{{URITemplate: "ferry://t/order/{id}", Name: "order"}}
}

func (fuzzResources) Read(ctx context.Context, uri string) ([]ResourceContents, error) {
	if uri == "ferry://t/order/o-1" {
		return []ResourceContents{{URI: uri, Text: "{}"}}, nil
	}
	return nil, errs.Errorf(errs.NotFound, "list them", "no %s", uri)
}

// fuzzOut is a bytes.Buffer written under the server's write lock and read after
// Serve returns.
type fuzzOut struct{ bytes.Buffer }

// FuzzServe: on any input the server never panics, returns nil at EOF, and writes
// nothing but JSON-RPC responses, one per line: an object (or, for a batch, an array
// of objects) with jsonrpc "2.0", an id, and exactly one of result and error, the
// error's code one the server defines.
func FuzzServe(f *testing.F) {
	for _, s := range append(seeds(f, "streams"), transcriptInputs(f)...) {
		f.Add(s)
	}
	codes := []int{protocol.CodeParseError, protocol.CodeInvalidRequest, protocol.CodeMethodNotFound, protocol.CodeInvalidParams, protocol.CodeInternalError, protocol.CodeResourceNotFound, protocol.CodeUnsupportedVersion}
	f.Fuzz(func(t *testing.T, input []byte) {
		srv, err := New(Options{
			Name: "fuzz", Version: "1", Instructions: "fuzz",
			Resources: fuzzResources{},
			Tools: []*Tool{
				{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`),
					Call: func(ctx context.Context, args json.RawMessage) (any, error) { return args, nil }},
				{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`),
					Call: func(ctx context.Context, args json.RawMessage) (any, error) {
						<-EOFContext(ctx).Done() // a long-poll: ends at EOF
						return map[string]any{}, nil
					}},
				{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`),
					Call: func(ctx context.Context, args json.RawMessage) (any, error) { return nil, errors.New("no") }},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var out fuzzOut
		if err := srv.Serve(context.Background(), bytes.NewReader(input), &out); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		b := out.Bytes()
		if len(b) == 0 {
			return
		}
		if b[len(b)-1] != '\n' {
			t.Fatalf("output does not end with a newline")
		}
		for _, line := range bytes.Split(b[:len(b)-1], []byte("\n")) {
			var objs []json.RawMessage
			if len(line) > 0 && line[0] == '[' {
				if err := json.Unmarshal(line, &objs); err != nil || len(objs) == 0 {
					t.Fatalf("a batch answer that is not a non-empty array: %q", line)
				}
			} else {
				objs = []json.RawMessage{line}
			}
			for _, o := range objs {
				if err := checkResponse(o, codes); err != nil {
					t.Fatalf("%v: %s", err, o)
				}
			}
		}
	})
}

// checkResponse checks one JSON-RPC response object.
func checkResponse(o []byte, codes []int) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(o, &m); err != nil {
		return fmt.Errorf("not a JSON object")
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return fmt.Errorf("jsonrpc %s", m["jsonrpc"])
	}
	id, hasID := m["id"]
	if !hasID || (!bytes.Equal(id, protocol.NullID) && !protocol.ValidID(id)) {
		return fmt.Errorf("id %s", id)
	}
	_, res := m["result"]
	e, hasErr := m["error"]
	if res == hasErr || len(m) != 3 {
		return fmt.Errorf("not exactly one of result and error")
	}
	if hasErr {
		var re protocol.Error
		if err := json.Unmarshal(e, &re); err != nil || !slices.Contains(codes, re.Code) || re.Message == "" {
			return fmt.Errorf("error object %s", e)
		}
	}
	return nil
}
