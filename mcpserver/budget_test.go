package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/ferryhq/ferry/mcpserver"
)

// The token budget (DESIGN §4, ADR T1/T3/T10): every byte of the tool list is paid in
// every agent's context on every turn. Tokens are estimated as characters/4 of compact
// JSON, rounded up. The measured figures live in mcp_budget.json, committed, so growth
// shows in review: the test fails when the file is stale; `go test ./mcpserver -run
// TestBudget -update` rewrites it.

// Caps (fail the build) and aims (reported in mcp_budget.json).
const (
	capCoreList      = 1500 // names, descriptions, input schemas of the core tools
	aimCoreList      = 1100
	capOutputSchemas = 1000 // the core tools' output schemas together
	capInstructions  = 250
	aimInstructions  = 200
)

const budgetFile = "mcp_budget.json"

func init() {
	// Another test file of this binary may have registered -update already.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files (mcp_budget.json) with the measured figures")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// tokens estimates the tokens of s: characters/4, rounded up.
func tokens(s []byte) int { return (utf8.RuneCount(s) + 3) / 4 }

// compactMarshal is compact JSON as the server writes it (no HTML escaping).
func compactMarshal(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// budgetFigure is one measured figure against its cap.
type budgetFigure struct {
	Tokens int `json:"tokens"`
	Cap    int `json:"cap"`
	Aim    int `json:"aim,omitempty"`
}

// toolFigures is one tool's share.
type toolFigures struct {
	Listed       int `json:"listed"`        // name, description, input schema
	OutputSchema int `json:"output_schema"` // its output schema
}

// budget is the content of mcp_budget.json.
type budget struct {
	Method        string                 `json:"method"`
	CoreList      budgetFigure           `json:"core_tools_list"`
	OutputSchemas budgetFigure           `json:"output_schemas"`
	Instructions  budgetFigure           `json:"instructions"`
	ToolsListAll  int                    `json:"tools_list_tokens_with_output_schemas"`
	Tools         map[string]toolFigures `json:"tools"`
}

func measureBudget(t *testing.T) budget {
	t.Helper()
	tools := ferryTools(t)
	type visible struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	var vis []visible
	b := budget{
		Method:       "characters/4 of compact JSON, rounded up",
		Instructions: budgetFigure{Tokens: tokens([]byte(mcpserver.Instructions)), Cap: capInstructions, Aim: aimInstructions},
		Tools:        map[string]toolFigures{},
	}
	outChars := 0
	for _, tool := range tools {
		v := visible{tool.Name, tool.Description, tool.InputSchema}
		vis = append(vis, v)
		b.Tools[tool.Name] = toolFigures{Listed: tokens(compactMarshal(t, v)), OutputSchema: tokens(tool.OutputSchema)}
		outChars += utf8.RuneCount(tool.OutputSchema)
	}
	b.CoreList = budgetFigure{Tokens: tokens(compactMarshal(t, vis)), Cap: capCoreList, Aim: aimCoreList}
	b.OutputSchemas = budgetFigure{Tokens: (outChars + 3) / 4, Cap: capOutputSchemas}
	b.ToolsListAll = tokens(newFerry(t, "budget", new(atomic.Int32)).ToolsList())
	return b
}

func TestBudget(t *testing.T) {
	b := measureBudget(t)
	for _, f := range []struct {
		name string
		fig  budgetFigure
	}{
		{"core tools/list (names, descriptions, input schemas)", b.CoreList},
		{"output schemas", b.OutputSchemas},
		{"instructions", b.Instructions},
	} {
		t.Logf("%s: %d tokens (cap %d, aim %d)", f.name, f.fig.Tokens, f.fig.Cap, f.fig.Aim)
		if f.fig.Tokens > f.fig.Cap {
			t.Errorf("%s: %d tokens, over the cap of %d (DESIGN §4): shrink descriptions or schemas, never drop fields", f.name, f.fig.Tokens, f.fig.Cap)
		}
	}
	got, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if updating() {
		if err := os.WriteFile(budgetFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(budgetFile)
	if err != nil {
		t.Fatalf("reading %s: %v (run go test ./mcpserver -run TestBudget -update)", budgetFile, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: the tool list changed size; run go test ./mcpserver -run TestBudget -update and commit it\n--- measured ---\n%s--- committed ---\n%s", budgetFile, got, want)
	}
}
