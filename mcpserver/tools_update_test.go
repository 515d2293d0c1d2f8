package mcpserver_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/search"
	"github.com/ferryhq/ferry/internal/selfupdate"
	"github.com/ferryhq/ferry/mcpserver"
)

// updateOut is ferry_update's result as the model reads it.
type updateOut struct {
	Check struct {
		Current   string   `json:"current"`
		Available bool     `json:"available"`
		Latest    string   `json:"latest"`
		Refused   []string `json:"refused"`
	} `json:"check"`
	Apply *struct {
		Applied bool   `json:"applied"`
		To      string `json:"to"`
		SHA256  string `json:"sha256"`
	} `json:"apply"`
}

// TestUpdateTool: ferry_update check reports the owner's approval to any agent; apply
// is denied to a member and installs the approved bytes over a copy of a real binary
// (this test binary) for the orchestrator; an unknown action (approve) is invalid: the
// MCP surface never approves.
func TestUpdateTool(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "ferry")
	if err := os.WriteFile(exe, old, 0o755); err != nil {
		t.Fatal(err)
	}
	// A marker line before the binary: the release differs from it, and its Go build
	// information cannot be read, so approving it is not a question of its version.
	rel := append([]byte("release 2.0.0\n"), old...)
	if err := os.WriteFile(filepath.Join(b.dir, "releases", "ferry-2"), rel, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := b.ch.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ApproveRelease("2.0.0", map[string]string{selfupdate.Platform(): "releases/ferry-2"}); err != nil {
		t.Fatal(err)
	}

	member := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"admin"}, Version: "1.0.0", UpdateExe: exe})
	var out updateOut
	member.ok("ferry_update", map[string]any{"action": "check"}, &out)
	if !out.Check.Available || out.Check.Latest != "2.0.0" || out.Check.Current != "1.0.0" || out.Apply != nil {
		t.Fatalf("check: %+v", out)
	}
	if got := member.fail("ferry_update", map[string]any{"action": "apply"}); !strings.HasPrefix(got, "denied") {
		t.Fatalf("member apply: %s", got)
	}
	if got := member.fail("ferry_update", map[string]any{"action": "approve"}); !strings.HasPrefix(got, "invalid") {
		t.Fatalf("approve: %s", got)
	}
	if now, _ := os.ReadFile(exe); !bytes.Equal(now, old) {
		t.Fatal("a refused apply changed the binary")
	}

	orch := newRig(t, mcpserver.FerryConfig{Agent: "claude-code-laptop", Open: b.open, Groups: []string{"admin"}, Version: "1.0.0", UpdateExe: exe})
	out = updateOut{}
	orch.ok("ferry_update", map[string]any{"action": "apply"}, &out)
	if out.Apply == nil || !out.Apply.Applied || out.Apply.To != "2.0.0" || out.Check.Available {
		t.Fatalf("apply: %+v", out)
	}
	if now, _ := os.ReadFile(exe); !bytes.Equal(now, rel) {
		t.Fatal("the binary does not hold the release")
	}
}

// TestSearchMatchesFsbus: ferry_search's channel hits are fsbus's Channel.Search hits
// for the same agent, in the same order, with the same snippets (the CLI's `ferry
// search` calls Channel.Search), so the two surfaces agree.
func TestSearchMatchesFsbus(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"admin"}})
	for _, q := range []string{"the", "speed", "small test"} {
		var got []string
		for cursor := ""; ; {
			var p searchPage
			r.ok("ferry_search", map[string]any{"query": q, "cursor": cursor}, &p)
			for _, h := range p.Hits {
				got = append(got, h.URI+" "+h.Snippet)
			}
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		v, err := b.ch.Load()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for cursor := ""; ; {
			page, err := search.Find(b.ch, v, search.Options{Query: q, Agent: "codex-laptop", Limit: 7, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range page.Hits {
				want = append(want, "ferry://busy/"+h.Kind+"/"+h.ID+" "+h.Snippet)
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("query %q: ferry_search gave %d hits, Channel.Search %d; they differ:\n%s\n----\n%s", q, len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
