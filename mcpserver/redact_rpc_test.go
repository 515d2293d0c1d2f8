package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
)

// missingResources has no resource: Read answers not_found quoting the uri lowercased,
// as a lookup by id does.
type missingResources struct{}

func (missingResources) List(context.Context, string) ([]Resource, string, error) {
	return nil, "", nil
}
func (missingResources) Templates() []ResourceTemplate { return nil }
func (missingResources) Read(_ context.Context, uri string) ([]ResourceContents, error) {
	return nil, errs.Errorf(errs.NotFound, "", "no resource %s", strings.ToLower(uri))
}

// TestRPCErrorsNeverEchoSecrets: a JSON-RPC error answering a request whose method,
// URI or arguments hold a credential-looking value shows it as "[secret removed: …]"
// in its message and data, in any case; the id is echoed as it came.
func TestRPCErrorsNeverEchoSecrets(t *testing.T) {
	t.Parallel()
	const token = "AKIA39ZZZZG4ZDMEN2KH"
	srv, err := New(Options{Name: "t", Version: "1", Instructions: "t", Resources: missingResources{}})
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"` + token + `"}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"ferry://p/order/` + token + `"}}`,
		`{"jsonrpc":"2.0","id":"` + token + `","method":"nope"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := srv.Serve(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d answers, want 4:\n%s", len(lines), out.String())
	}
	echoed := false
	for _, l := range lines[1:] { // answers to tools and resources may come in any order
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *protocol.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Error == nil {
			t.Fatalf("%s: not an error (%v)", l, err)
		}
		if strings.Contains(strings.ToLower(r.Error.Message+string(r.Error.Data)), strings.ToLower(token)) {
			t.Errorf("the answer echoes the credential: %s", l)
		}
		switch string(r.ID) {
		case "1", "2":
			if !strings.Contains(r.Error.Message, "[secret removed: ") {
				t.Errorf("the answer does not say what was removed: %s", l)
			}
		case `"` + token + `"`:
			echoed = true
		}
	}
	if !echoed {
		t.Errorf("no answer echoes the id %q as it came:\n%s", token, out.String())
	}
}
