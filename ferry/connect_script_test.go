package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// scriptClaude stands in for Claude Code's `claude` in the scripts: `claude mcp
// add-json --scope user NAME JSON` and `claude mcp remove --scope user NAME` edit the
// top-level mcpServers of $CLAUDE_CONFIG_DIR/.claude.json or ~/.claude.json as the real
// one does (it rewrites the whole file, here with members sorted by name), refusing to
// add a name that is there or remove one that is not; every call is logged to
// claude-calls.log beside that file. FAKE_CLAUDE_FAIL=1 makes it fail;
// FAKE_CLAUDE_NOOP=1 makes it exit 0 having written nothing.
func scriptClaude() {
	args := os.Args[1:]
	dir := os.Getenv("CLAUDE_CONFIG_DIR")
	if dir == "" {
		dir, _ = os.UserHomeDir()
	}
	file := filepath.Join(dir, ".claude.json")
	logf, err := os.OpenFile(filepath.Join(dir, "claude-calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(logf, strings.Join(args, " "))
		logf.Close()
	}
	if os.Getenv("FAKE_CLAUDE_NOOP") == "1" {
		os.Exit(0) // claims success, writes nothing
	}
	if os.Getenv("FAKE_CLAUDE_FAIL") == "1" {
		fmt.Fprintln(os.Stderr, "claude: something went wrong")
		os.Exit(1)
	}
	if len(args) < 5 || args[0] != "mcp" || args[2] != "--scope" || args[3] != "user" {
		fmt.Fprintln(os.Stderr, "fake claude: unsupported call")
		os.Exit(2)
	}
	doc := map[string]json.RawMessage{}
	if data, _ := os.ReadFile(file); len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &doc); err != nil {
			fmt.Fprintln(os.Stderr, "fake claude:", err)
			os.Exit(1)
		}
	}
	servers := map[string]json.RawMessage{}
	if raw, ok := doc["mcpServers"]; ok {
		if err := json.Unmarshal(raw, &servers); err != nil {
			fmt.Fprintln(os.Stderr, "fake claude:", err)
			os.Exit(1)
		}
	}
	name := args[4]
	_, had := servers[name]
	switch {
	case args[1] == "add-json" && len(args) == 6:
		if had {
			fmt.Fprintf(os.Stderr, "MCP server %s already exists in user config\n", name)
			os.Exit(1)
		}
		servers[name] = json.RawMessage(args[5])
	case args[1] == "remove" && len(args) == 5:
		if !had {
			fmt.Fprintf(os.Stderr, "No user-scoped MCP server found with name: %s\n", name)
			os.Exit(1)
		}
		delete(servers, name)
	default:
		fmt.Fprintln(os.Stderr, "fake claude: unsupported call")
		os.Exit(2)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	doc["mcpServers"], _ = json.Marshal(servers)
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintln(os.Stderr, "fake claude:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "fake claude:", err)
		os.Exit(1)
	}
}
