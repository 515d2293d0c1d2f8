package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/schematest"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/google/jsonschema-go/jsonschema"
)

// Tool groups (docs/design.md §4 "Opt-in groups", docs/mcp.md "Budget"): what each
// combination of --tools and --read-only serves, over the wire, against real channels.
// The helpers here (a copy of the busy fixture with a fixed clock, and a rig that
// drives a Ferry server over io.Pipe) serve the admin, legacy and budget tests too.

// busyFixture is the committed busy channel (fixtures/README.md).
var busyFixture = filepath.Join("..", "fixtures", "busy")

// busyClock is the fixed wall clock of every busy copy: four minutes after the
// fixture's newest entry, so every writer is alive and every figure repeatable.
var busyClock = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

// busyAgents are the busy fixture's agents (all of their keys are in home/).
var busyAgents = []string{"claude-code-desktop", "claude-code-laptop", "codex-desktop", "codex-laptop", "cursor-laptop"}

// busyChannel is one copy of the busy fixture: the channel opened on device A's home
// with the fixed clock. Every server of a test shares it, as processes on one machine
// share a folder.
type busyChannel struct {
	t    *testing.T
	dir  string
	home *fsbus.Home
	ch   *fsbus.Channel
}

// copyBusy copies fixtures/busy into a temp dir and opens it (never the fixture
// itself: commands write to the channel and to the home's cache).
func copyBusy(t *testing.T) *busyChannel {
	t.Helper()
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(busyFixture)); err != nil {
		t.Fatalf("copying the busy fixture: %v", err)
	}
	// git keeps no empty directory: restore the layout `ferry init` makes.
	for _, d := range []string{"ledger", "orders", "messages", "asks", "results", "presence", "handins", "memory", "releases"} {
		if err := os.MkdirAll(filepath.Join(tmp, "channel", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := &busyChannel{t: t, dir: filepath.Join(tmp, "channel"),
		home: &fsbus.Home{ConfigDir: filepath.Join(tmp, "home", "config"), CacheDir: filepath.Join(tmp, "home", "cache")}}
	ch, err := fsbus.Open(b.home, b.dir)
	if err != nil {
		t.Fatalf("opening the busy copy: %v", err)
	}
	ch.Now = func() time.Time { return busyClock }
	b.ch = ch
	return b
}

// open is a FerryConfig.Open over the shared channel.
func (b *busyChannel) open() (*fsbus.Channel, error) { return b.ch, nil }

// rig is one Ferry server serving over io.Pipe, initialized (legacy handshake), for
// calls one at a time. Every structuredContent it receives is validated against the
// tool's outputSchema as listed, closed at the top level (outputschema_test.go).
type rig struct {
	t       *testing.T
	srv     *mcpserver.Server
	f       *mcpserver.Ferry
	in      *io.PipeWriter
	out     *bufio.Reader
	done    chan error
	n       int
	tools   []string
	schemas map[string]*jsonschema.Resolved // tool → its closed output schema
}

// newRig builds NewFerry(cfg), serves it and initializes; it fails the test when
// NewFerry refuses cfg.
func newRig(t *testing.T, cfg mcpserver.FerryConfig) *rig {
	t.Helper()
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	srv, f, err := mcpserver.NewFerry(cfg)
	if err != nil {
		t.Fatalf("NewFerry(%s, groups %v, read-only %v): %v", cfg.Agent, cfg.Groups, cfg.ReadOnly, err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &rig{t: t, srv: srv, f: f, in: inW, out: bufio.NewReaderSize(outR, 1<<20), done: make(chan error, 1),
		schemas: map[string]*jsonschema.Resolved{}}
	go func() {
		err := srv.Serve(context.Background(), inR, outW)
		outW.Close()
		r.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		io.Copy(io.Discard, outR)
		<-r.done
		f.Close()
	})
	r.request("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"rig","version":"1"}}`)
	var list struct {
		Tools []listedTool `json:"tools"`
	}
	if err := json.Unmarshal(r.request("tools/list", `{}`), &list); err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		r.tools = append(r.tools, tl.Name)
		if tl.OutputSchema == nil {
			continue
		}
		rs, err := schematest.Closed(tl.OutputSchema)
		if err != nil {
			t.Fatalf("outputSchema of %s: %v", tl.Name, err)
		}
		r.schemas[tl.Name] = rs
	}
	return r
}

// request sends one request and returns its result; a JSON-RPC error fails the test.
func (r *rig) request(method, params string) json.RawMessage {
	r.t.Helper()
	r.n++
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", r.n, method, params)
	if _, err := io.WriteString(r.in, line); err != nil {
		r.t.Fatalf("writing %s: %v", method, err)
	}
	b, err := r.out.ReadBytes('\n')
	if err != nil {
		r.t.Fatalf("reading the answer to %s: %v", method, err)
	}
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		r.t.Fatalf("%s: answer is not JSON: %.200q", method, b)
	}
	if string(resp.ID) != fmt.Sprint(r.n) {
		r.t.Fatalf("%s: answer id %s, want %d", method, resp.ID, r.n)
	}
	if resp.Error != nil {
		r.t.Fatalf("%s: JSON-RPC error %d %s", method, resp.Error.Code, resp.Error.Message)
	}
	return resp.Result
}

// reply is a tools/call result: the text the model sees and structuredContent.
type reply struct {
	Text       string
	IsError    bool
	Structured json.RawMessage
}

// call runs one tool; args may be nil.
func (r *rig) call(tool string, args map[string]any) reply {
	r.t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	p, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		r.t.Fatal(err)
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if err := json.Unmarshal(r.request("tools/call", string(p)), &res); err != nil || len(res.Content) != 1 {
		r.t.Fatalf("%s: not a one-block tool result (%v)", tool, err)
	}
	if rs := r.schemas[tool]; rs != nil && !res.IsError {
		if len(res.Structured) == 0 {
			r.t.Errorf("%s %v: no structuredContent, but the tool lists an outputSchema", tool, args)
		} else if err := checkStructured(rs, res.Structured); err != nil {
			r.t.Errorf("%s %v: structuredContent does not satisfy the outputSchema: %v\n%s", tool, args, err, res.Structured)
		} else {
			markChecked(r.t, tool)
		}
	}
	return reply{Text: res.Content[0].Text, IsError: res.IsError, Structured: res.Structured}
}

// ok runs one tool, requires success, and decodes the result into out (may be nil).
// It returns the text.
func (r *rig) ok(tool string, args map[string]any, out any) string {
	r.t.Helper()
	rep := r.call(tool, args)
	if rep.IsError {
		r.t.Fatalf("%s %v failed: %s", tool, args, rep.Text)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(rep.Text), out); err != nil {
			r.t.Fatalf("%s: decoding %s: %v", tool, rep.Text, err)
		}
	}
	return rep.Text
}

// fail runs one tool and requires an isError result; it returns the text.
func (r *rig) fail(tool string, args map[string]any) string {
	r.t.Helper()
	rep := r.call(tool, args)
	if !rep.IsError {
		r.t.Fatalf("%s %v succeeded, want an error: %s", tool, args, rep.Text)
	}
	return rep.Text
}

var (
	legacyNames = []string{"channel_status", "discover", "get_task", "list_engines", "list_learnings", "list_ledger", "list_tasks", "read_memory"}
	adminNames  = []string{"ferry_get", "ferry_search", "ferry_status", "ferry_update"}
)

// sorted merges name lists, sorted (tools/list is sorted by name).
func sorted(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

// TestGroupsServe: each combination of groups serves exactly its tools, the core
// tools' definitions are the same bytes in every combination, and --read-only serves
// the legacy tools alone with its own instructions.
func TestGroupsServe(t *testing.T) {
	t.Parallel()
	var opens atomic.Int32
	core := toolsByName(t, newFerry(t, "lint", &opens).ToolsList())
	for _, c := range []struct {
		groups   []string
		readOnly bool
		want     []string
	}{
		{nil, false, coreTools},
		{[]string{"admin"}, false, sorted(coreTools, adminNames)},
		{[]string{"legacy"}, false, sorted(coreTools, legacyNames)},
		{[]string{"legacy", "admin", "legacy"}, false, sorted(coreTools, adminNames, legacyNames)},
		{nil, true, legacyNames},
		{[]string{"legacy"}, true, legacyNames},
	} {
		name := strings.Join(c.groups, "+")
		if c.readOnly {
			name += "/read-only"
		}
		t.Run(name, func(t *testing.T) {
			srv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{Agent: "alice", Open: countingOpen(&opens), Groups: c.groups, ReadOnly: c.readOnly})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := toolsByName(t, srv.ToolsList())
			names := slices.Sorted(maps.Keys(got))
			if !reflect.DeepEqual(names, c.want) {
				t.Fatalf("tools %v, want %v", names, c.want)
			}
			for n, def := range got {
				if want, ok := core[n]; ok && !bytes.Equal(def, want) {
					t.Errorf("%s is listed differently with groups %v:\n%s\nwant\n%s", n, c.groups, def, want)
				}
			}
			res := wireSession(t, srv, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
			var init struct {
				Instructions string `json:"instructions"`
			}
			if err := json.Unmarshal(res["1"], &init); err != nil {
				t.Fatal(err)
			}
			want := mcpserver.Instructions
			if c.readOnly {
				want = mcpserver.ReadOnlyInstructions
			}
			if init.Instructions != want {
				t.Errorf("instructions %q, want %q", init.Instructions, want)
			}
		})
	}
	if opens.Load() != 0 {
		t.Errorf("building the servers opened the channel %d times", opens.Load())
	}
}

// TestGroupsRefused: an unknown group, and --read-only with admin or gateway, are refused by
// name before anything is served.
func TestGroupsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		groups   []string
		readOnly bool
		want     string
	}{
		{[]string{"gateways"}, false, `invalid: unknown tool group "gateways"`},
		{[]string{"gateway"}, true, "invalid: --read-only serves the legacy read tools only"},
		{[]string{"Admin"}, false, `invalid: unknown tool group "Admin"`},
		{[]string{"admin"}, true, "invalid: --read-only serves the legacy read tools only"},
	} {
		_, _, err := mcpserver.NewFerry(mcpserver.FerryConfig{Agent: "alice", Groups: c.groups, ReadOnly: c.readOnly})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("groups %v read-only %v: error %v, want %q", c.groups, c.readOnly, err, c.want)
		}
	}
}

// TestGroupsToolsListStable: for every combination, two servers built for different
// agents list byte-identical tools, and so does each over the wire in two protocol
// versions (docs/design.md §4).
func TestGroupsToolsListStable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		groups   []string
		readOnly bool
	}{{nil, false}, {[]string{"admin"}, false}, {[]string{"legacy"}, false}, {[]string{"admin", "legacy"}, false}, {[]string{"legacy", "admin"}, false}, {nil, true}} {
		var lists [][]byte
		for i, agent := range []string{"alice", "claude-code-beastly-2"} {
			srv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{Agent: agent, Version: fmt.Sprint("v", i), Groups: c.groups, ReadOnly: c.readOnly})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lists = append(lists, srv.ToolsList())
			for _, version := range []string{"2024-11-05", "2025-11-25"} {
				res := wireSession(t, srv, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`"}}`,
					`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
				if !bytes.Equal(res["2"], srv.ToolsList()) {
					t.Errorf("groups %v: tools/list on the wire (%s) is not ToolsList():\n%s", c.groups, version, res["2"])
				}
			}
		}
		if !bytes.Equal(lists[0], lists[1]) {
			t.Errorf("groups %v read-only %v: tools/list differs between agents", c.groups, c.readOnly)
		}
		if bytes.Contains(lists[0], []byte("alice")) {
			t.Errorf("groups %v: the tool list names the agent", c.groups)
		}
	}
}

// toolsByName decodes a tools/list result into name → the tool's compact definition.
func toolsByName(t *testing.T, list json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var l struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(list, &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, raw := range l.Tools {
		var n struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
		out[n.Name] = raw
	}
	return out
}

// TestGroupsSchemaLint: the admin and legacy tools pass the lint of the core tools
// (docs/design.md §4 "Schemas clients accept"), and every description in their input
// types' tags reaches the schema whole.
func TestGroupsSchemaLint(t *testing.T) {
	t.Parallel()
	srv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{Agent: "lint", Groups: []string{"admin", "legacy"}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var list struct {
		Tools []listedTool `json:"tools"`
	}
	if err := json.Unmarshal(srv.ToolsList(), &list); err != nil {
		t.Fatal(err)
	}
	inputs := map[string]any{
		"ferry_search": mcpserver.SearchIn{}, "ferry_get": mcpserver.GetIn{}, "ferry_status": mcpserver.StatusIn{},
		"discover": mcpserver.PageIn{}, "list_tasks": mcpserver.ListTasksIn{}, "get_task": mcpserver.GetTaskIn{},
		"read_memory": mcpserver.ReadMemoryIn{}, "list_ledger": mcpserver.LedgerIn{}, "list_learnings": mcpserver.LearningsIn{},
	}
	linted := 0
	for _, tool := range list.Tools {
		if slices.Contains(coreTools, tool.Name) {
			continue
		}
		linted++
		if !toolNameRE.MatchString(tool.Name) || strings.TrimSpace(tool.Description) == "" {
			t.Errorf("%s: bad name or no description", tool.Name)
		}
		in := decodeSchema(t, tool.Name+" inputSchema", tool.InputSchema)
		props, ok := in["properties"].(map[string]any)
		if in["type"] != "object" || !ok {
			t.Errorf("%s: inputSchema %s is not an object with properties", tool.Name, tool.InputSchema)
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf", "not", "if", "then", "else"} {
			if _, ok := in[k]; ok {
				t.Errorf("%s: inputSchema has a top-level %s", tool.Name, k)
			}
		}
		for name, p := range props {
			if pm, _ := p.(map[string]any); !toolNameRE.MatchString(name) || pm["type"] == nil {
				t.Errorf("%s: input field %q is not snake_case or has no type", tool.Name, name)
			}
		}
		lintTree(t, tool.Name+".inputSchema", in)
		out := decodeSchema(t, tool.Name+" outputSchema", tool.OutputSchema)
		if out["type"] != "object" {
			t.Errorf("%s: outputSchema type %v, want object", tool.Name, out["type"])
		}
		lintOutputSchema(t, tool.Name+".outputSchema", out)

		v, ok := inputs[tool.Name]
		if !ok {
			continue // no input fields
		}
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			fld := rt.Field(i)
			field := strings.Split(fld.Tag.Get("json"), ",")[0]
			for _, part := range splitUnescaped(fld.Tag.Get("jsonschema")) {
				if d, ok := strings.CutPrefix(part, "description="); ok {
					pm, _ := props[field].(map[string]any)
					if got, _ := pm["description"].(string); got != d {
						t.Errorf("%s field %s: description %q in the schema, %q in the tag", tool.Name, field, got, d)
					}
				}
			}
		}
	}
	if linted != len(adminNames)+len(legacyNames) {
		t.Errorf("linted %d group tools, want %d", linted, len(adminNames)+len(legacyNames))
	}
}
