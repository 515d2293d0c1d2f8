package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSearchParity: `ferry search --as AGENT --json` and the MCP tool
// ferry_search of a server running as that agent give the same hits in the same order
// with the same snippets, on a channel with orders, messages to the agent and to
// others, a decision and an ask: both call fsbus's Channel.Search matcher. Real
// processes: the CLI and `ferry mcp serve --tools admin`, through the go-sdk client.
func TestSearchParity(t *testing.T) {
	t.Parallel()
	m := newMCPMachine(t, ferryExe(t))
	m.channel("acme", "alice", "bob", "carol")
	m.must("grant", "alice", "--level", "orchestrator", "--project", "acme")
	for i := range 6 {
		m.must("--as", "alice", "--project", "acme", "order", "new", fmt.Sprintf("Zebra task %d", i), "--body", "paint the stripes")
	}
	m.must("--as", "alice", "--project", "acme", "talk", "send", "--to", "bob", "a zebra for bob")
	m.must("--as", "alice", "--project", "acme", "talk", "send", "--to", "carol", "a zebra bob must not see")
	m.must("--as", "alice", "--project", "acme", "talk", "send", "--to", "all", "zebra news for all")
	m.must("--as", "alice", "--project", "acme", "decision", "record", "Zebras stay striped")
	m.must("--as", "carol", "--project", "acme", "ask", "raise", "Adopt a zebra?", "--recommendation", "yes")

	all := append(append([]string{}, mcpCoreTools...), mcpAdminTools...)
	slices.Sort(all)
	bob := startWith(t, m, mcpClientKinds[0], "bob", "acme", all, "--tools", "admin")
	var viaMCP []string
	for cursor := ""; ; {
		var page struct {
			Hits []struct{ URI, Snippet string } `json:"hits"`
			Next string                          `json:"next"`
		}
		args := map[string]any{"query": "zebra"}
		if cursor != "" {
			args["cursor"] = cursor
		}
		bob.ok("ferry_search", args, &page)
		for _, h := range page.Hits {
			viaMCP = append(viaMCP, h.URI+" "+h.Snippet)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	var viaCLI []string
	for cursor := ""; ; {
		args := []string{"--as", "bob", "--project", "acme", "search", "zebra", "--limit", "3", "--json"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		var page struct {
			Hits []struct{ Kind, ID, Snippet string } `json:"hits"`
			Next string                               `json:"next"`
		}
		if err := json.Unmarshal([]byte(m.must(args...)), &page); err != nil {
			t.Fatal(err)
		}
		for _, h := range page.Hits {
			viaCLI = append(viaCLI, "ferry://acme/"+h.Kind+"/"+h.ID+" "+h.Snippet)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	// 6 orders, bob's message, the message to all, the decision, the ask; not carol's.
	if len(viaCLI) != 10 || strings.Join(viaCLI, "\n") != strings.Join(viaMCP, "\n") {
		t.Fatalf("CLI and MCP differ:\nCLI:\n%s\nMCP:\n%s", strings.Join(viaCLI, "\n"), strings.Join(viaMCP, "\n"))
	}
	if strings.Contains(strings.Join(viaCLI, "\n"), "must not see") {
		t.Fatal("bob's search shows carol's message")
	}
}
