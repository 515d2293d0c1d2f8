package mcpserver_test

import (
	"testing"

	"github.com/ferryhq/ferry/mcpserver"
)

// TestJoinKeepsTheAppGivenAtJoin: an agent joined with its app (`ferry join --app
// codex`) keeps that app after an MCP session's ferry_join, whose client calls itself
// "rig" (clientInfo.name): `ferry agents` shows the app the agent was joined with.
func TestJoinKeepsTheAppGivenAtJoin(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	was := v.State.Agents["codex-laptop"]
	if was == nil || was.App != "codex" {
		t.Fatalf("the busy channel's codex-laptop: %+v, want app codex", was)
	}
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})
	r.ok("ferry_join", map[string]any{}, nil)
	if v, err = b.ch.Load(); err != nil {
		t.Fatal(err)
	}
	if got := v.State.Agents["codex-laptop"].App; got != "codex" {
		t.Errorf("after ferry_join from client rig, codex-laptop's app is %q, want codex", got)
	}
}
