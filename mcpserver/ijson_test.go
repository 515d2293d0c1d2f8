package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
)

// nonIJSONCases are messages that are not I-JSON (RFC 7493) with the answer the rule
// gives: code 0 means no answer (a notification). Each would call the tool "write".
var nonIJSONCases = []struct {
	name string
	line string
	code int
	id   string // the answer's id as JSON
}{
	{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"write","arguments":{}}}`, protocol.CodeInvalidRequest, "1"},
	{"duplicate params", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"ping"},"params":{"name":"write","arguments":{}}}`, protocol.CodeInvalidRequest, `"a"`},
	{"duplicate nested", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write","arguments":{"x":{"k":1,"k":2}}}}`, protocol.CodeInvalidRequest, "2"},
	{"duplicate id", `{"jsonrpc":"2.0","id":3,"id":4,"method":"tools/call","params":{"name":"write","arguments":{}}}`, protocol.CodeInvalidRequest, "null"},
	{"duplicate id, one invalid", `{"jsonrpc":"2.0","id":null,"id":5,"method":"tools/call","params":{"name":"write","arguments":{}}}`, protocol.CodeInvalidRequest, "null"},
	{"invalid id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"write","arguments":{"k":1,"k":2}}}`, protocol.CodeInvalidRequest, "null"},
	{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"write\",\"arguments\":{\"t\":\"\xff\"}}}", protocol.CodeParseError, "null"},
	{"invalid UTF-8 in a name", "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"write\",\"arguments\":{\"\xe2\x82\":1}}}", protocol.CodeParseError, "null"},
	{"lone high surrogate", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"write","arguments":{"t":"\ud800"}}}`, protocol.CodeParseError, "null"},
	{"lone low surrogate", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"write","arguments":{"t":"\uDC00x"}}}`, protocol.CodeParseError, "null"},
	{"duplicate and invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":10,\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":\"write\",\"arguments\":{\"t\":\"\xff\"}}}", protocol.CodeParseError, "null"},
	{"duplicate secret-looking name", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"write","arguments":{"sk-ant-api03-Q7xv9Lr2Q7xv9Lr2Q7xv9Lr2Q7xv9Lr2":1,"sk-ant-api03-Q7xv9Lr2Q7xv9Lr2Q7xv9Lr2Q7xv9Lr2":2}}}`, protocol.CodeInvalidRequest, "11"},
	{"notification, duplicate", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}`, 0, ""},
	{"notification, invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\xff\"}", 0, ""},
	{"notification, lone surrogate", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write","arguments":{"t":"\ud800"}}}`, 0, ""},
	// Names that differ only in case: encoding/json reads "METHOD" as method, the last wins.
	{"method in another case", `{"jsonrpc":"2.0","id":12,"method":"ping","METHOD":"tools/call","params":{"name":"write","arguments":{}}}`, protocol.CodeInvalidRequest, "12"},
	{"argument in another case", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"write","arguments":{"t":"a","T":"b"}}}`, protocol.CodeInvalidRequest, "13"},
	{"notification, name in another case", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"RequestID":2}}`, 0, ""},
}

// nonIJSONMessages are the lines of nonIJSONCases (fuzz seeds).
var nonIJSONMessages = func() []string {
	var out []string
	for _, c := range nonIJSONCases {
		out = append(out, c.line)
	}
	return out
}()

// TestNonIJSONRefused: over a served stream, each message that is not I-JSON answers
// the code and id of the rule (docs/mcp.md "Strict JSON") or, as a notification,
// nothing; the tool it names never runs; the server goes on answering.
func TestNonIJSONRefused(t *testing.T) {
	t.Parallel()
	for _, c := range nonIJSONCases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			srv, err := New(Options{Name: "t", Version: "1", Instructions: "t", Tools: []*Tool{{
				Name: "write", InputSchema: json.RawMessage(`{"type":"object"}`),
				Call: func(ctx context.Context, args json.RawMessage) (any, error) {
					calls.Add(1)
					return map[string]any{}, nil
				}}}})
			if err != nil {
				t.Fatal(err)
			}
			in := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}` + "\n" +
				c.line + "\n" + `{"jsonrpc":"2.0","id":"after","method":"ping"}` + "\n"
			var out bytes.Buffer
			var log bytes.Buffer
			srv.opts.Log = &log
			if err := srv.Serve(context.Background(), strings.NewReader(in), &out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			want := 3
			if c.code == 0 {
				want = 2
			}
			if len(lines) != want {
				t.Fatalf("%d answers, want %d:\n%s", len(lines), want, out.String())
			}
			if calls.Load() != 0 {
				t.Fatalf("the tool ran")
			}
			if c.code == 0 {
				if !strings.Contains(log.String(), "ignoring a notification that is not I-JSON") {
					t.Errorf("log %q", log.String())
				}
				return
			}
			var r struct {
				ID    json.RawMessage `json:"id"`
				Error *protocol.Error `json:"error"`
			}
			if err := json.Unmarshal([]byte(lines[1]), &r); err != nil {
				t.Fatal(err)
			}
			if string(r.ID) != c.id || r.Error == nil || r.Error.Code != c.code {
				t.Fatalf("answered %s, want code %d with id %s", lines[1], c.code, c.id)
			}
			if strings.Contains(out.String()+log.String(), "sk-ant-api03") {
				t.Errorf("a secret-looking name is echoed: %s", out.String())
			}
			if !strings.Contains(r.Error.Message, "byte offset") {
				t.Errorf("the message does not say where: %q", r.Error.Message)
			}
		})
	}
}
