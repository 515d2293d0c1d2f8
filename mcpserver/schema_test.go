package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
)

// Schema lint over the six core tools (docs/design.md §4 "Schemas clients accept"): the
// shapes some clients reject a whole server for.

// coreTools are the tools of docs/design.md §4, sorted.
var coreTools = []string{"ferry_ask_human", "ferry_catchup", "ferry_join", "ferry_orders", "ferry_primary", "ferry_talk"}

// listedTool is one entry of tools/list.
type listedTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// countingOpen returns an Open func that counts its calls and fails with not_found.
func countingOpen(n *atomic.Int32) func() (*fsbus.Channel, error) {
	return func() (*fsbus.Channel, error) {
		n.Add(1)
		return nil, errs.Errorf(errs.NotFound, "run ferry init", "no channel here")
	}
}

// newFerry builds the real ferry server for agent; its Open only counts.
func newFerry(t *testing.T, agent string, opens *atomic.Int32) *mcpserver.Server {
	t.Helper()
	srv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{Agent: agent, Open: countingOpen(opens), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return srv
}

// ferryTools returns the ferry tools as listed.
func ferryTools(t *testing.T) []listedTool {
	t.Helper()
	var opens atomic.Int32
	srv := newFerry(t, "lint", &opens)
	var list struct {
		Tools []listedTool `json:"tools"`
	}
	if err := json.Unmarshal(srv.ToolsList(), &list); err != nil {
		t.Fatal(err)
	}
	if opens.Load() != 0 {
		t.Fatalf("building the server and its tools/list opened the channel %d times", opens.Load())
	}
	return list.Tools
}

// toolsArray returns the tools member of a tools/list result, byte for byte.
func toolsArray(t *testing.T, result []byte) []byte {
	t.Helper()
	var r struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(result, &r); err != nil || len(r.Tools) == 0 {
		t.Fatalf("not a tools/list result (%v): %.200s", err, result)
	}
	return r.Tools
}

var toolNameRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

func TestSchemaLint(t *testing.T) {
	t.Parallel()
	tools := ferryTools(t)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if !reflect.DeepEqual(names, coreTools) {
		t.Fatalf("tools %v, want the six core tools %v (sorted)", names, coreTools)
	}
	for _, tool := range tools {
		t.Run(tool.Name, func(t *testing.T) {
			if !toolNameRE.MatchString(tool.Name) {
				t.Errorf("name %q does not match %s", tool.Name, toolNameRE)
			}
			if strings.TrimSpace(tool.Description) == "" {
				t.Error("no description")
			}
			in := decodeSchema(t, "inputSchema", tool.InputSchema)
			if in["type"] != "object" {
				t.Errorf("inputSchema type %v, want object", in["type"])
			}
			props, ok := in["properties"].(map[string]any)
			if !ok {
				t.Errorf("inputSchema has no properties object (some clients reject it): %s", tool.InputSchema)
			}
			for _, k := range []string{"oneOf", "anyOf", "allOf", "not", "if", "then", "else"} {
				if _, ok := in[k]; ok {
					t.Errorf("inputSchema has a top-level %s", k)
				}
			}
			for name, p := range props {
				if !toolNameRE.MatchString(name) {
					t.Errorf("input field %q is not snake_case ASCII", name)
				}
				if pm, _ := p.(map[string]any); pm["type"] == nil {
					t.Errorf("input field %q has no type", name)
				}
			}
			if req, ok := in["required"].([]any); ok {
				for _, r := range req {
					if _, ok := props[r.(string)]; !ok {
						t.Errorf("required field %v is not a property", r)
					}
				}
			}
			lintTree(t, "inputSchema", in)

			if tool.OutputSchema == nil {
				t.Fatal("no outputSchema (docs/design.md §4: always listed)")
			}
			out := decodeSchema(t, "outputSchema", tool.OutputSchema)
			if out["type"] != "object" {
				t.Errorf("outputSchema type %v, want object (MCP: structuredContent is an object)", out["type"])
			}
			lintOutputSchema(t, "outputSchema", out)
		})
	}
}

// lintOutputSchema checks an output schema: an object whose properties declare every
// top-level member of the result, each with its type (docs/design.md §4: a schema
// trimmed to fit the budget still names what the tool returns); the rest as lintTree.
func lintOutputSchema(t *testing.T, path string, out map[string]any) {
	t.Helper()
	props, ok := out["properties"].(map[string]any)
	if !ok || len(props) == 0 {
		t.Errorf("%s declares no properties", path)
	}
	for name, p := range props {
		if pm, _ := p.(map[string]any); pm["type"] == nil {
			t.Errorf("%s: member %q has no type", path, name)
		}
	}
	lintTree(t, path, out)
}

func decodeSchema(t *testing.T, what string, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not a JSON object: %v", what, err)
	}
	if compact := compactJSON(t, raw); !bytes.Equal(compact, raw) {
		t.Errorf("%s is not compact JSON", what)
	}
	return m
}

func compactJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lintTree checks every node of a schema: no references or definitions, no
// $schema/$id, every array with items, every type a known one.
func lintTree(t *testing.T, path string, v any) {
	t.Helper()
	switch n := v.(type) {
	case map[string]any:
		for _, k := range []string{"$ref", "$defs", "definitions", "$schema", "$id", "$anchor", "$dynamicRef"} {
			if _, ok := n[k]; ok {
				t.Errorf("%s has %s (clients want everything inlined and compact)", path, k)
			}
		}
		if hasType(n, "array") {
			if it, ok := n["items"].(map[string]any); !ok || len(it) == 0 {
				t.Errorf("%s is an array without items (rejected by some clients)", path)
			}
		}
		if ty, ok := n["type"]; ok {
			types := []any{ty}
			if l, ok := ty.([]any); ok {
				types = l
			}
			for _, x := range types {
				switch x {
				case "object", "array", "string", "integer", "number", "boolean", "null":
				default:
					t.Errorf("%s has type %v", path, x)
				}
			}
		}
		keys := make([]string, 0, len(n))
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lintTree(t, path+"."+k, n[k])
		}
	case []any:
		for _, x := range n {
			lintTree(t, path+"[]", x)
		}
	}
}

func hasType(n map[string]any, want string) bool {
	switch ty := n["type"].(type) {
	case string:
		return ty == want
	case []any:
		for _, x := range ty {
			if x == want {
				return true
			}
		}
	}
	return false
}

// TestSchemaDescriptionsWhole guards the input types' jsonschema tags: invopop splits
// a tag on every unescaped comma, so "description=commit, branch or hand-in id" would
// silently become "commit" plus an unknown option. Every description in a tag must
// reach the schema whole.
func TestSchemaDescriptionsWhole(t *testing.T) {
	t.Parallel()
	tools := map[string]listedTool{}
	for _, tool := range ferryTools(t) {
		tools[tool.Name] = tool
	}
	inputs := map[string]any{
		"ferry_join":      mcpserver.JoinIn{},
		"ferry_catchup":   mcpserver.CatchupIn{},
		"ferry_orders":    mcpserver.OrdersIn{},
		"ferry_talk":      mcpserver.TalkIn{},
		"ferry_primary":   mcpserver.PrimaryIn{},
		"ferry_ask_human": mcpserver.AskIn{},
	}
	known := regexp.MustCompile(`^[a-zA-Z_]+(=|$)`)
	checked := 0
	for name, v := range inputs {
		tool, ok := tools[name]
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			tag := f.Tag.Get("jsonschema")
			if tag == "" {
				continue
			}
			field := strings.Split(f.Tag.Get("json"), ",")[0]
			for _, part := range splitUnescaped(tag) {
				if !known.MatchString(part) {
					t.Errorf("%s.%s: jsonschema tag part %q: escape the comma before it (\\\\,)", rt.Name(), f.Name, part)
				}
				if d, ok := strings.CutPrefix(part, "description="); ok {
					checked++
					if got := schema.Properties[field].Description; got != d {
						t.Errorf("%s field %s: description %q in the schema, %q in the tag", name, field, got, d)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no description tags found: the test checks nothing")
	}
}

// splitUnescaped splits a jsonschema tag on commas not preceded by a backslash, and
// unescapes the escaped ones.
func splitUnescaped(tag string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(tag); i++ {
		switch {
		case tag[i] == '\\' && i+1 < len(tag) && tag[i+1] == ',':
			cur.WriteByte(',')
			i++
		case tag[i] == ',':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(tag[i])
		}
	}
	return append(parts, cur.String())
}

// wireSession runs lines through srv to EOF and returns the raw result of each response
// by id.
func wireSession(t *testing.T, srv *mcpserver.Server, lines ...string) map[string]json.RawMessage {
	t.Helper()
	out := runLines(t, srv, nil, func(w io.Writer) {
		for _, l := range lines {
			io.WriteString(w, l+"\n")
		}
	})
	res := map[string]json.RawMessage{}
	for _, l := range out {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		if r.Error != nil {
			t.Fatalf("error response: %s", l)
		}
		res[string(r.ID)] = r.Result
	}
	return res
}

// TestToolsListIdentityFree (docs/design.md §4): tools/list is byte-identical for
// different agents, Open funcs and negotiated versions: no agent name, version or time
// inside, so prompt caches survive across agents and restarts.
func TestToolsListIdentityFree(t *testing.T) {
	t.Parallel()
	var opensA, opensB atomic.Int32
	a := newFerry(t, "alice", &opensA)
	srvB, fB, err := mcpserver.NewFerry(mcpserver.FerryConfig{
		Agent:   "bob-the-second-session",
		Open:    func() (*fsbus.Channel, error) { opensB.Add(1); return nil, io.ErrUnexpectedEOF },
		Version: "9.9.9",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fB.Close()
	if !bytes.Equal(a.ToolsList(), srvB.ToolsList()) {
		t.Fatalf("ToolsList differs between agents:\n%s\n%s", a.ToolsList(), srvB.ToolsList())
	}
	for _, who := range []string{"alice", "bob-the-second"} {
		if bytes.Contains(a.ToolsList(), []byte(who)) {
			t.Errorf("tools/list names agent %q", who)
		}
	}
	ra := wireSession(t, a,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	rb := wireSession(t, srvB,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if !bytes.Equal(ra["2"], rb["2"]) || len(ra["2"]) == 0 {
		t.Fatalf("tools/list on the wire differs:\n%s\n%s", ra["2"], rb["2"])
	}
	// The tools array is the same bytes in every protocol era: after each legacy
	// handshake, and in a modern request (whose result adds members beside it).
	want := toolsArray(t, a.ToolsList())
	for _, v := range protocol.SupportedVersions {
		r := wireSession(t, srvB,
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`"}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if got := toolsArray(t, r["2"]); !bytes.Equal(got, want) {
			t.Errorf("protocol %s: the tools array differs:\n%s\n%s", v, got, want)
		}
	}
	for _, v := range protocol.ModernVersions {
		r := wireSession(t, srvB, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"`+
			protocol.MetaProtocolVersion+`":"`+v+`","`+protocol.MetaClientCapabilities+`":{}}}}`)
		if got := toolsArray(t, r["1"]); !bytes.Equal(got, want) {
			t.Errorf("protocol %s: the tools array differs:\n%s\n%s", v, got, want)
		}
	}
	if opensA.Load()+opensB.Load() != 0 {
		t.Fatalf("listing tools opened the channel (%d, %d times)", opensA.Load(), opensB.Load())
	}
}

// TestStartupReadsNoChannel: initialize, notifications/initialized, ping and
// tools/list never open the channel (some clients spawn a short-lived probe process
// first, and initialize must not wait for a fold); the first tool call does.
func TestStartupReadsNoChannel(t *testing.T) {
	t.Parallel()
	var opens atomic.Int32
	srv := newFerry(t, "probe", &opens)
	res := wireSession(t, srv,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if len(res) != 3 {
		t.Fatalf("got %d responses, want 3", len(res))
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		Instructions    string `json:"instructions"`
	}
	if err := json.Unmarshal(res["1"], &init); err != nil || init.ProtocolVersion != "2025-06-18" || init.Instructions != mcpserver.Instructions {
		t.Fatalf("initialize: %s", res["1"])
	}
	if n := opens.Load(); n != 0 {
		t.Fatalf("start-up opened the channel %d times", n)
	}
	// The counter is wired: the first tool call opens the channel, and its failure
	// comes back as an isError result in "category: message — hint" form.
	res = wireSession(t, srv, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ferry_catchup","arguments":{}}}`)
	if n := opens.Load(); n != 1 {
		t.Fatalf("a tool call opened the channel %d times, want 1", n)
	}
	var call struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res["4"], &call); err != nil || !call.IsError || len(call.Content) != 1 ||
		call.Content[0].Text != "not_found: no channel here — run ferry init" {
		t.Fatalf("tool call without a channel: %s", res["4"])
	}
}
