package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/mcpserver"
)

// The budget (docs/design.md §4): every byte of the tool list is paid in every
// agent's context on every turn. The tools array is measured in characters of compact
// JSON; everything else in tokens, estimated as characters/4 of compact JSON, rounded
// up. The measured figures live in mcp_budget.json, committed, so growth shows in
// review: the test fails when the file is stale; `go test ./mcpserver -run TestBudget
// -update` rewrites it.

// Caps (fail the build) and aims (reported in mcp_budget.json).
const (
	capCoreArray    = 6000 // characters: the whole compact core tools array, output schemas included
	capCoreVisible  = 3430 // characters: what the model sees of it (names, descriptions, input schemas)
	capInstructions = 250
	aimInstructions = 200
	capCatchupBusy  = 800 // ferry_catchup on the busy fixture (docs/design.md §4)
	aimCatchupBusy  = 600
)

// responseCaps cap every typical response, in tokens, per tool: the core tools' caps
// are a per-tool table (join 600, catchup 800, orders 600, talk 600, primary 300,
// ask_human 300); the opt-in tools answer within the hard cap of every read
// (docs/design.md §4: 4,000 characters, 1,000 tokens).
var responseCaps = map[string]int{
	"ferry_join": 600, "ferry_catchup": 800, "ferry_orders": 600, "ferry_talk": 600, "ferry_primary": 300, "ferry_ask_human": 300,
}

// capOptIn is the response cap of the admin and legacy tools (docs/design.md §4).
const capOptIn = 1000

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

// chars counts the characters of s.
func chars(s []byte) int { return utf8.RuneCount(s) }

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

// charFigure is one figure measured in characters against its cap.
type charFigure struct {
	Chars int `json:"chars"`
	Cap   int `json:"cap"`
}

// toolFigures is one tool's share, in characters of compact JSON.
type toolFigures struct {
	Listed       int `json:"listed"`        // name, description, input schema
	OutputSchema int `json:"output_schema"` // its output schema
}

// groupFigures are an opt-in group's own tools: what the model sees of them (names,
// descriptions, input schemas) and their output schemas, both paid only when the group
// is served (docs/design.md §4 "Opt-in groups").
type groupFigures struct {
	Listed        int `json:"listed"`
	OutputSchemas int `json:"output_schemas"`
}

// catchupFigure is ferry_catchup on the busy fixture: the largest digest among its
// agents, and whose it is.
type catchupFigure struct {
	budgetFigure
	Agent    string         `json:"agent"`
	PerAgent map[string]int `json:"per_agent"`
}

// budget is the content of mcp_budget.json.
type budget struct {
	Method string `json:"method"`
	// CoreArray is the whole compact core tools array as tools/list returns it (the
	// same bytes in every protocol era); CoreVisible is what the model sees of it.
	CoreArray            charFigure   `json:"core_tools_array"`
	CoreVisible          charFigure   `json:"core_tools_visible"`
	Instructions         budgetFigure `json:"instructions"`
	ReadOnlyInstructions budgetFigure `json:"read_only_instructions"`
	// ToolsLists is the whole tools/list result, output schemas included, of every
	// combination of groups.
	ToolsLists  map[string]int          `json:"tools_lists"`
	Groups      map[string]groupFigures `json:"groups"`
	CatchupBusy catchupFigure           `json:"catchup_busy"`
	// Responses are typical responses of every tool and action on a copy of the busy
	// fixture (see typicalResponses), each against its tool's cap.
	Responses map[string]budgetFigure `json:"responses"`
	Tools     map[string]toolFigures  `json:"tools"`
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
		Method:       "chars: characters of compact JSON; tokens: characters/4 of compact JSON, rounded up",
		Instructions: budgetFigure{Tokens: tokens([]byte(mcpserver.Instructions)), Cap: capInstructions, Aim: aimInstructions},
		Tools:        map[string]toolFigures{},
	}
	for _, tool := range tools {
		v := visible{tool.Name, tool.Description, tool.InputSchema}
		vis = append(vis, v)
		b.Tools[tool.Name] = toolFigures{Listed: chars(compactMarshal(t, v)), OutputSchema: chars(tool.OutputSchema)}
	}
	b.CoreArray = charFigure{Chars: chars(toolsArray(t, newFerry(t, "budget", new(atomic.Int32)).ToolsList())), Cap: capCoreArray}
	b.CoreVisible = charFigure{Chars: chars(compactMarshal(t, vis)), Cap: capCoreVisible}
	b.ReadOnlyInstructions = budgetFigure{Tokens: tokens([]byte(mcpserver.ReadOnlyInstructions)), Cap: capInstructions, Aim: aimInstructions}

	// The opt-in groups: every combination's whole list, and each group's own tools.
	b.ToolsLists, b.Groups = map[string]int{}, map[string]groupFigures{}
	for _, c := range []struct {
		name     string
		groups   []string
		readOnly bool
	}{{"core", nil, false}, {"core+admin", []string{"admin"}, false}, {"core+legacy", []string{"legacy"}, false},
		{"core+admin+legacy", []string{"admin", "legacy"}, false}, {"read-only", nil, true}} {
		srv, f, err := mcpserver.NewFerry(mcpserver.FerryConfig{Agent: "budget", Groups: c.groups, ReadOnly: c.readOnly})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b.ToolsLists[c.name] = tokens(srv.ToolsList())
		if len(c.groups) != 1 {
			continue
		}
		var list struct {
			Tools []listedTool `json:"tools"`
		}
		if err := json.Unmarshal(srv.ToolsList(), &list); err != nil {
			t.Fatal(err)
		}
		var g []visible
		outChars := 0
		for _, tool := range list.Tools {
			if _, core := b.Tools[tool.Name]; core {
				continue
			}
			v := visible{tool.Name, tool.Description, tool.InputSchema}
			g = append(g, v)
			b.Tools[tool.Name] = toolFigures{Listed: chars(compactMarshal(t, v)), OutputSchema: chars(tool.OutputSchema)}
			outChars += chars(tool.OutputSchema)
		}
		b.Groups[c.groups[0]] = groupFigures{Listed: tokens(compactMarshal(t, g)), OutputSchemas: (outChars + 3) / 4}
	}

	b.CatchupBusy, b.Responses = typicalResponses(t)
	return b
}

// typicalResponses measures ferry_catchup on the busy fixture for each of its agents,
// then one typical response of every tool and action, on copies of the fixture with
// a fixed clock (so every figure repeats): three agents of it, over the wire, work an
// order from new to review, talk, take the primary role, ask the owner, and read with
// the admin and legacy tools. Figures are tokens of the text the model sees (compact
// JSON). The one machine-dependent string, the host name ferry_join announces, is
// measured as "machine".
func typicalResponses(t *testing.T) (catchupFigure, map[string]budgetFigure) {
	t.Helper()
	out := map[string]budgetFigure{}
	record := func(key, text string) {
		tool, _, _ := strings.Cut(key, " ")
		c, ok := responseCaps[tool]
		if !ok {
			c = capOptIn
		}
		out[key] = budgetFigure{Tokens: tokens([]byte(text)), Cap: c}
	}

	// ferry_catchup on the fixture as it is, for every agent: the largest is the figure.
	busy := copyBusy(t)
	cu := catchupFigure{budgetFigure: budgetFigure{Cap: capCatchupBusy, Aim: aimCatchupBusy}, PerAgent: map[string]int{}}
	for _, agent := range busyAgents {
		text := newRig(t, mcpserver.FerryConfig{Agent: agent, Open: busy.open}).ok("ferry_catchup", nil, nil)
		n := tokens([]byte(text))
		cu.PerAgent[agent] = n
		if n > cu.Tokens {
			cu.Tokens, cu.Agent = n, agent
		}
	}
	record("ferry_catchup", strings.Repeat("x", 4*cu.Tokens))

	// ferry_join, on a copy of its own (it announces this machine's host name).
	joined := copyBusy(t)
	var j map[string]any
	newRig(t, mcpserver.FerryConfig{Agent: "cursor-laptop", Open: joined.open}).ok("ferry_join", nil, &j)
	j["machine"] = "machine"
	record("ferry_join", string(compactMarshal(t, j)))

	all := []string{"admin", "legacy"}
	a := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: busy.open, Groups: all})
	b := newRig(t, mcpserver.FerryConfig{Agent: "codex-desktop", Open: busy.open})
	lead := newRig(t, mcpserver.FerryConfig{Agent: "claude-code-laptop", Open: busy.open})

	var list struct {
		Orders []struct {
			ID string `json:"id"`
		} `json:"orders"`
	}
	record("ferry_orders list", a.ok("ferry_orders", map[string]any{"action": "list"}, &list))
	v, err := busy.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	shown, steps := "", 0
	for _, id := range v.State.OrderIDs() {
		if o := v.State.Order(id); len(o.History) > steps && !fold.Terminal(o.State) {
			shown, steps = id, len(o.History) // the longest story still open: a full order
		}
	}
	record("ferry_orders show", a.ok("ferry_orders", map[string]any{"action": "show", "id": shown}, nil))
	body := "The upload client retries forever when the server answers 503. Give it a budget: at most five retries " +
		"with exponential backoff from 200 ms, then fail with the last error. Keep the public API unchanged; add a test " +
		"with a fake server that answers 503 six times."
	record("ferry_orders new", a.ok("ferry_orders", map[string]any{"action": "new", "title": "Add a retry budget to the upload client", "body": body}, nil))
	id := list.Orders[0].ID
	record("ferry_orders claim", a.ok("ferry_orders", map[string]any{"action": "claim", "id": id}, nil))
	record("ferry_orders progress", a.ok("ferry_orders", map[string]any{"action": "progress", "id": id, "note": "parser swapped; two fixtures still fail on CRLF"}, nil))
	record("ferry_orders submit", a.ok("ferry_orders", map[string]any{"action": "submit", "id": id, "ref": "commit 4f2a9c1 on fix/toml-parser", "note": "all fixtures pass; CRLF handled"}, nil))
	record("ferry_orders review", b.ok("ferry_orders", map[string]any{"action": "review", "id": id, "verdict": "accept", "note": "read the diff; tests pass here too"}, nil))
	record("ferry_talk post", a.ok("ferry_talk", map[string]any{"action": "post", "to": "codex-desktop",
		"text": "Thanks for the review. I will take the CRLF follow-up next; tell me if you are on it already so we do not both fix it."}, nil))
	record("ferry_talk read", b.ok("ferry_talk", map[string]any{"action": "read"}, nil))
	record("ferry_primary status", a.ok("ferry_primary", map[string]any{"action": "status"}, nil))
	record("ferry_primary standby", a.ok("ferry_primary", map[string]any{"action": "standby"}, nil))
	record("ferry_primary takeover", lead.ok("ferry_primary", map[string]any{"action": "takeover"}, nil))
	record("ferry_ask_human raise", a.ok("ferry_ask_human", map[string]any{"action": "raise", "title": "Drop Python 3.8 from the CI matrix?",
		"recommendation": "yes: it is end of life and blocks the TOML upgrade", "reasoning": "3.8 is EOL since October 2024; the new parser needs 3.9."}, nil))
	record("ferry_ask_human status", a.ok("ferry_ask_human", map[string]any{"action": "status"}, nil))

	// The admin group.
	var hits struct {
		Hits []struct {
			URI string `json:"uri"`
		} `json:"hits"`
	}
	record("ferry_search", a.ok("ferry_search", map[string]any{"query": "toml parser"}, &hits))
	record("ferry_get", a.ok("ferry_get", map[string]any{"uri": hits.Hits[0].URI}, nil))
	record("ferry_status", a.ok("ferry_status", nil, nil))

	// The legacy group, with a memory note to read.
	note := "# Conventions\n\n" + strings.Repeat("- Commit messages say why, not what; one change per commit.\n", 12)
	if err := os.WriteFile(filepath.Join(busy.dir, "memory", "conventions.md"), []byte(note), 0o644); err != nil {
		t.Fatal(err)
	}
	record("channel_status", a.ok("channel_status", nil, nil))
	record("discover", a.ok("discover", nil, nil))
	record("list_tasks", a.ok("list_tasks", nil, nil))
	record("get_task", a.ok("get_task", map[string]any{"id": shown}, nil))
	record("read_memory list", a.ok("read_memory", nil, nil))
	record("read_memory file", a.ok("read_memory", map[string]any{"file": "conventions.md"}, nil))
	record("list_ledger", a.ok("list_ledger", nil, nil))
	record("list_learnings", a.ok("list_learnings", nil, nil))
	record("list_engines", a.ok("list_engines", nil, nil))
	return cu, out
}

func TestBudget(t *testing.T) {
	t.Parallel()
	b := measureBudget(t)
	for _, f := range []struct {
		name string
		fig  charFigure
	}{
		{"the compact core tools array", b.CoreArray},
		{"what the model sees of it (names, descriptions, input schemas)", b.CoreVisible},
	} {
		t.Logf("%s: %d characters (cap %d)", f.name, f.fig.Chars, f.fig.Cap)
		if f.fig.Chars > f.fig.Cap {
			t.Errorf("%s: %d characters, over the cap of %d (docs/design.md §4): shorten wording or drop schema detail, never a result's top-level member", f.name, f.fig.Chars, f.fig.Cap)
		}
	}
	figs := []struct {
		name string
		fig  budgetFigure
	}{
		{"instructions", b.Instructions},
		{"read-only instructions", b.ReadOnlyInstructions},
		{"ferry_catchup on the busy fixture as " + b.CatchupBusy.Agent, b.CatchupBusy.budgetFigure},
	}
	for _, key := range slices.Sorted(maps.Keys(b.Responses)) {
		figs = append(figs, struct {
			name string
			fig  budgetFigure
		}{"typical response of " + key, b.Responses[key]})
	}
	for _, f := range figs {
		t.Logf("%s: %d tokens (cap %d, aim %d)", f.name, f.fig.Tokens, f.fig.Cap, f.fig.Aim)
		if f.fig.Tokens > f.fig.Cap {
			t.Errorf("%s: %d tokens, over the cap of %d (docs/design.md §4): shrink descriptions or schemas, never drop fields", f.name, f.fig.Tokens, f.fig.Cap)
		}
	}
	got, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	doc, err := os.ReadFile(mcpDoc)
	if err != nil {
		t.Fatal(err)
	}
	newDoc, err := spliceBudget(doc, renderBudget(b))
	if err != nil {
		t.Fatal(err)
	}
	if updating() {
		if err := os.WriteFile(budgetFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(mcpDoc, newDoc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(doc, newDoc) {
		t.Errorf("%s: the budget tables are stale; run go test ./mcpserver -run TestBudget -update and commit it", mcpDoc)
	}
	want, err := os.ReadFile(budgetFile)
	if err != nil {
		t.Fatalf("reading %s: %v (run go test ./mcpserver -run TestBudget -update)", budgetFile, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: the tool list changed size; run go test ./mcpserver -run TestBudget -update and commit it\n--- measured ---\n%s--- committed ---\n%s", budgetFile, got, want)
	}
}

// mcpDoc holds the budget tables rendered from the measured figures between the
// budget markers, so the published figures cannot drift from mcp_budget.json.
const mcpDoc = "../docs/mcp.md"

const (
	budgetBegin = "<!-- budget:begin (generated by `go test ./mcpserver -run TestBudget -update`; do not edit) -->\n"
	budgetEnd   = "<!-- budget:end -->\n"
)

// spliceBudget replaces what lies between the budget markers of doc with tables.
func spliceBudget(doc []byte, tables string) ([]byte, error) {
	s := string(doc)
	i := strings.Index(s, budgetBegin)
	j := strings.Index(s, budgetEnd)
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s has no budget markers (%q … %q)", mcpDoc, budgetBegin, budgetEnd)
	}
	return []byte(s[:i+len(budgetBegin)] + tables + s[j:]), nil
}

// renderBudget renders the figures of b as the markdown tables of docs/mcp.md.
func renderBudget(b budget) string {
	var w strings.Builder
	row := func(cells ...any) {
		w.WriteString("|")
		for _, c := range cells {
			fmt.Fprintf(&w, " %v |", c)
		}
		w.WriteString("\n")
	}
	aim := func(f budgetFigure) string {
		if f.Aim == 0 {
			return "—"
		}
		return fmt.Sprint(f.Aim)
	}
	w.WriteString("\n| figure | characters | cap (fails the build) |\n|---|---|---|\n")
	row("the whole core `tools` array, output schemas included", b.CoreArray.Chars, b.CoreArray.Cap)
	row("what the model sees of it: names, descriptions, input schemas", b.CoreVisible.Chars, b.CoreVisible.Cap)
	w.WriteString("\n| figure | tokens | cap (fails the build) | aim |\n|---|---|---|---|\n")
	row("instructions", b.Instructions.Tokens, b.Instructions.Cap, aim(b.Instructions))
	row("instructions with `--read-only`", b.ReadOnlyInstructions.Tokens, b.ReadOnlyInstructions.Cap, aim(b.ReadOnlyInstructions))
	c := b.CatchupBusy
	row(fmt.Sprintf("`ferry_catchup` on the busy fixture (%s; the largest of its agents)", c.Agent), c.Tokens, c.Cap, c.Aim)
	w.WriteString("\nPer agent of the busy fixture, `ferry_catchup` (tokens):")
	for i, a := range slices.Sorted(maps.Keys(c.PerAgent)) {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&w, "%s %s %d", sep, a, c.PerAgent[a])
	}
	w.WriteString(".\n\nThe whole `tools/list` result, output schemas included, per surface (tokens):\n\n| surface | tokens |\n|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(b.ToolsLists)) {
		row(k, b.ToolsLists[k])
	}
	w.WriteString("\nEach opt-in group's own tools (tokens):\n\n| group | listed | output schemas |\n|---|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(b.Groups)) {
		row(k, b.Groups[k].Listed, b.Groups[k].OutputSchemas)
	}
	w.WriteString("\nPer tool (characters; \"listed\" is name, description and input schema):\n\n| tool | listed | output schema |\n|---|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(b.Tools)) {
		row("`"+k+"`", b.Tools[k].Listed, b.Tools[k].OutputSchema)
	}
	w.WriteString("\nTypical responses (tokens, against each one's cap; responses are capped at 20 items and 4,000 characters with `truncated:true` and a `next` cursor):\n\n| response | tokens | cap |\n|---|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(b.Responses)) {
		row("`"+k+"`", b.Responses[k].Tokens, b.Responses[k].Cap)
	}
	return w.String()
}
