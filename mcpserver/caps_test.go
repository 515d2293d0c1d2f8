package mcpserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
)

// TestRequestLineCap: a request line of exactly fsbus.MaxRPCRequest bytes (16 MiB) is
// read and answered; one byte more is read to its end, dropped, and answered -32600
// with id null naming its size and the cap — and the session goes on
// (docs/mcp.md "Transport").
func TestRequestLineCap(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeTools(nil), nil)
	s := startSession(t, srv, nil)
	frame := func(id int, n int) string {
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`, id)
		tail := `"}}}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	at := frame(1, fsbus.MaxRPCRequest)
	if len(at) != fsbus.MaxRPCRequest {
		t.Fatalf("frame is %d bytes", len(at))
	}
	go s.send(at)
	if r := s.recv(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("a request of exactly the cap: id %s, error %+v", r.ID, r.Error)
	}
	go s.send(frame(2, fsbus.MaxRPCRequest+1))
	r := s.recv()
	if string(r.ID) != "null" || r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest ||
		r.Error.Message != fmt.Sprintf("request line is %d bytes; the limit is %d", fsbus.MaxRPCRequest+1, fsbus.MaxRPCRequest) {
		t.Fatalf("one byte over the cap: id %s, error %+v", r.ID, r.Error)
	}
	s.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if r := s.recv(); string(r.ID) != "3" || r.Error != nil {
		t.Fatalf("ping after the refused line: %+v", r)
	}
	s.close()
}

// TestInputCapsMCP: the caps hold through MCP as on the command line: one over is
// invalid naming the field, its size and the cap; nothing is written.
func TestInputCapsMCP(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})
	var made struct {
		Order struct {
			ID string `json:"id"`
		} `json:"order"`
	}
	r.ok("ferry_orders", map[string]any{"action": "new", "title": "held"}, &made)
	r.ok("ferry_orders", map[string]any{"action": "claim", "id": made.Order.ID}, nil)
	id := made.Order.ID
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"ferry_orders", map[string]any{"action": "new", "title": strings.Repeat("é", fsbus.MaxTitle+1)}, "order title is 201 characters; the limit is 200"},
		{"ferry_orders", map[string]any{"action": "new", "title": "t", "body": strings.Repeat("x", fsbus.MaxOrderBody+1)}, "order body is 65537 bytes; the limit is 65536"},
		{"ferry_talk", map[string]any{"action": "post", "to": "all", "text": strings.Repeat("x", fold.MaxMessageBody+1)}, "message body is 65537 bytes; the limit is 65536"},
		{"ferry_orders", map[string]any{"action": "progress", "id": id, "note": strings.Repeat("x", fsbus.MaxNote+1)}, "progress note is 2049 bytes; the limit is 2048"},
		{"ferry_orders", map[string]any{"action": "submit", "id": id, "ref": "main", "note": strings.Repeat("x", fsbus.MaxNote+1)}, "result summary is 2049 bytes; the limit is 2048"},
		{"ferry_orders", map[string]any{"action": "submit", "id": id, "ref": strings.Repeat("x", fsbus.MaxReference+1)}, "result reference is 501 bytes; the limit is 500"},
		{"ferry_ask_human", map[string]any{"action": "raise", "title": "t", "recommendation": "r", "reasoning": strings.Repeat("é", fsbus.MaxAskText+1)}, "reasoning is 1201 characters; the limit is 1200"},
		{"ferry_ask_human", map[string]any{"action": "raise", "title": strings.Repeat("é", fsbus.MaxAskTitle+1), "recommendation": "r"}, "ask title is 201 characters; the limit is 200"},
	}
	for _, tc := range cases {
		before := dirState(t, b.dir)
		if text := r.fail(tc.tool, tc.args); !strings.HasPrefix(text, "invalid: ") || !strings.Contains(text, tc.want) {
			t.Errorf("%s %s: %s; want %q", tc.tool, tc.args["action"], text, tc.want)
		}
		if dirState(t, b.dir) != before {
			t.Errorf("%s %s: a refusal changed the channel", tc.tool, tc.args["action"])
		}
	}
}
