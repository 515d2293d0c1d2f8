package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/internal/schematest"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/rogpeppe/go-internal/txtar"
)

// Output schemas hold every result: each structuredContent is validated with a JSON
// Schema validator against its tool's outputSchema closed at the top level
// (additionalProperties false), so a top-level member the schema does not declare
// fails however much else of the schema is cut. The rig checks every result it sees,
// in every test of this package; TestOutputSchemasHoldResults requires that a journey
// through every core, admin and legacy tool was checked, and
// TestConformanceOutputSchemas checks the results in the conformance transcripts.

// checkStructured validates structured against the closed outputSchema rs.
func checkStructured(rs *jsonschema.Resolved, structured json.RawMessage) error {
	var v any
	if err := json.Unmarshal(structured, &v); err != nil {
		return fmt.Errorf("structuredContent is not JSON: %w", err)
	}
	return rs.Validate(v)
}

// checkedTools records, per test, the tools whose results a rig validated against
// their output schemas.
var checkedTools = struct {
	sync.Mutex
	m map[*testing.T]map[string]bool
}{m: map[*testing.T]map[string]bool{}}

// markChecked records that t validated a result of tool.
func markChecked(t *testing.T, tool string) {
	checkedTools.Lock()
	defer checkedTools.Unlock()
	if checkedTools.m[t] == nil {
		checkedTools.m[t] = map[string]bool{}
		t.Cleanup(func() {
			checkedTools.Lock()
			defer checkedTools.Unlock()
			delete(checkedTools.m, t)
		})
	}
	checkedTools.m[t][tool] = true
}

// checkedBy returns the tools whose results t validated, sorted.
func checkedBy(t *testing.T) []string {
	checkedTools.Lock()
	defer checkedTools.Unlock()
	var out []string
	for tool := range checkedTools.m[t] {
		out = append(out, tool)
	}
	slices.Sort(out)
	return out
}

// TestOutputSchemasHoldResults runs the typical responses of every tool and action on
// the busy fixture (the budget test's journey) and ferry_update check: every result
// was validated against its tool's closed outputSchema, and every tool of the core,
// admin and legacy groups had one.
func TestOutputSchemasHoldResults(t *testing.T) {
	t.Parallel()
	typicalResponses(t)
	b := copyBusy(t)
	newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"admin"}}).
		ok("ferry_update", map[string]any{"action": "check"}, nil)
	if want, got := sorted(coreTools, adminNames, legacyNames), checkedBy(t); !slices.Equal(got, want) {
		t.Fatalf("results checked against their output schemas: %v, want every tool %v", got, want)
	}
}

// TestOutputSchemaClosed: the check fails on a top-level member the schema does not
// declare and on a member of the wrong type, and holds a result with members left out.
func TestOutputSchemaClosed(t *testing.T) {
	t.Parallel()
	rs, err := schematest.Closed(json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"hits":{"type":"array","items":{"type":"object"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		structured string
		ok         bool
	}{
		{`{"id":"o-1","hits":[{"uri":"ferry://p/order/o-1"}]}`, true},
		{`{"id":"o-1"}`, true},
		{`{"id":"o-1","undeclared":true}`, false},
		{`{"id":1}`, false},
		{`{"hits":["x"]}`, false},
	} {
		if err := checkStructured(rs, json.RawMessage(c.structured)); (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok %v", c.structured, err, c.ok)
		}
	}
}

// TestConformanceOutputSchemas: every structuredContent in the conformance transcripts
// (testdata/conformance) satisfies the closed outputSchema of the fake tool that
// answered it; a transcript result from a tool without an outputSchema fails.
func TestConformanceOutputSchemas(t *testing.T) {
	t.Parallel()
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range fakeTools(nil) {
		if tool.OutputSchema == nil {
			continue
		}
		rs, err := schematest.Closed(tool.OutputSchema)
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		schemas[tool.Name] = rs
	}
	files, err := filepath.Glob("testdata/conformance/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		calls := map[string]string{} // request id → the tool it called
		for _, f := range ar.Files {
			if f.Name != "client" {
				continue
			}
			for _, l := range strings.Split(string(f.Data), "\n") {
				for _, msg := range jsonMessages(decodeClientLine(l)) {
					var req struct {
						ID     json.RawMessage `json:"id"`
						Method string          `json:"method"`
						Params struct {
							Name string `json:"name"`
						} `json:"params"`
					}
					if json.Unmarshal(msg, &req) != nil || req.Method != "tools/call" || len(req.ID) == 0 {
						continue
					}
					id := string(compactJSON(t, req.ID))
					if prev, ok := calls[id]; ok && prev != req.Params.Name {
						t.Fatalf("%s: id %s calls both %s and %s: the result's tool is ambiguous", name, id, prev, req.Params.Name)
					}
					calls[id] = req.Params.Name
				}
			}
		}
		for _, f := range ar.Files {
			if f.Name != "server" && f.Name != "server-by-id" {
				continue
			}
			for _, l := range strings.Split(string(f.Data), "\n") {
				for _, msg := range jsonMessages(l) {
					var resp struct {
						ID     json.RawMessage `json:"id"`
						Result struct {
							Structured json.RawMessage `json:"structuredContent"`
						} `json:"result"`
					}
					if json.Unmarshal(msg, &resp) != nil || len(resp.Result.Structured) == 0 {
						continue
					}
					id := string(compactJSON(t, resp.ID))
					tool, ok := calls[id]
					if !ok {
						t.Errorf("%s: structuredContent of id %s answers no tools/call of the transcript", name, id)
						continue
					}
					rs := schemas[tool]
					if rs == nil {
						t.Errorf("%s: %s returns structuredContent %s but lists no outputSchema", name, tool, resp.Result.Structured)
						continue
					}
					if err := checkStructured(rs, resp.Result.Structured); err != nil {
						t.Errorf("%s: %s: structuredContent %s does not satisfy its outputSchema: %v", name, tool, resp.Result.Structured, err)
					}
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no structuredContent found in the conformance transcripts: the test checks nothing")
	}
}

// jsonMessages returns the JSON-RPC messages of a transcript line: the line itself, or
// the elements of a batch; nothing for a line that is not JSON.
func jsonMessages(line string) []json.RawMessage {
	line = strings.TrimSpace(strings.TrimPrefix(line, "\xef\xbb\xbf"))
	if line == "" || !json.Valid([]byte(line)) {
		return nil
	}
	if !bytes.HasPrefix([]byte(line), []byte("[")) {
		return []json.RawMessage{json.RawMessage(line)}
	}
	var batch []json.RawMessage
	_ = json.Unmarshal([]byte(line), &batch)
	return batch
}
