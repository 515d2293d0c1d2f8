package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/mcpserver"
)

// The legacy group: the predecessor's eight read tools over real data — the busy
// fixture's 200 entries, 75 orders and five agents of three engines.

// legacyRig serves the legacy group as agent on a copy of the busy fixture.
func legacyRig(t *testing.T, readOnly bool) (*busyChannel, *rig) {
	t.Helper()
	b := copyBusy(t)
	cfg := mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, ReadOnly: readOnly}
	if !readOnly {
		cfg.Groups = []string{"legacy"}
	}
	return b, newRig(t, cfg)
}

func TestChannelStatus(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, false)
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, o := range v.State.Orders {
		counts[string(o.State)]++
	}
	var s struct {
		Project string         `json:"project"`
		Entries int            `json:"entries"`
		Agents  int            `json:"agents"`
		Joined  int            `json:"joined"`
		Orders  map[string]int `json:"orders"`
	}
	r.ok("channel_status", nil, &s)
	if s.Project != "busy" || s.Entries != 200 || s.Agents != 5 || s.Joined != 5 || !mapsEqual(s.Orders, counts) || s.Orders["open"] != 40 {
		t.Errorf("channel_status %+v, want busy: 200 entries, 5 agents, orders %v", s, counts)
	}
}

// discovered is discover's result.
type discovered struct {
	Agents []struct {
		Name     string `json:"name"`
		Level    string `json:"level"`
		Engine   string `json:"engine"`
		Machine  string `json:"machine"`
		Liveness string `json:"liveness"`
		Key      string `json:"key"`
	} `json:"agents"`
	Total int `json:"total"`
}

// TestDiscoverEngines: every agent with the engine it declared at join — also after a
// later join over MCP announced app "mcp" (the transport, not the engine) — and its
// key only with detail.
func TestDiscoverEngines(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, false)
	if _, err := fsbus.Join(b.ch, "cursor-laptop", "mcp"); err != nil {
		t.Fatal(err)
	}
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.State.Agents["cursor-laptop"].App; got != "mcp" {
		t.Fatalf("the fold says cursor-laptop's app is %q after joining over MCP: the test needs mcp", got)
	}
	var d discovered
	r.ok("discover", nil, &d)
	engines := map[string]string{}
	for _, a := range d.Agents {
		engines[a.Name] = a.Engine
		if a.Key != "" || a.Liveness != "alive" {
			t.Errorf("compact discover row %+v: no key without detail, alive on the fixed clock", a)
		}
	}
	want := map[string]string{"claude-code-desktop": "claude-code", "claude-code-laptop": "claude-code", "codex-desktop": "codex", "codex-laptop": "codex", "cursor-laptop": "cursor"}
	if fmt.Sprint(engines) != fmt.Sprint(want) || d.Total != 5 {
		t.Errorf("engines %v (total %d), want %v", engines, d.Total, want)
	}
	d = discovered{}
	r.ok("discover", map[string]any{"detail": true}, &d)
	if len(d.Agents) != 5 || d.Agents[0].Key != v.State.Agents[d.Agents[0].Name].Key {
		t.Errorf("discover detail: %+v, want each agent's seated key", d.Agents)
	}
}

// tasksPage is list_tasks' result.
type tasksPage struct {
	Tasks []struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Author string `json:"author"`
	} `json:"tasks"`
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
}

// TestListTasks: paging with next walks every order once within the caps; the last
// next then lists only what changed; a state filters; detail adds the author.
func TestListTasks(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, false)
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		var p tasksPage
		capped(t, "list_tasks page", r.ok("list_tasks", map[string]any{"cursor": cursor}, &p))
		if len(p.Tasks) > 20 || p.Next == "" {
			t.Fatalf("page %d: %d tasks, next %q", pages, len(p.Tasks), p.Next)
		}
		for _, task := range p.Tasks {
			if seen[task.ID] {
				t.Fatalf("%s listed twice", task.ID)
			}
			seen[task.ID] = true
			if task.Author != "" {
				t.Errorf("compact row carries the author: %+v", task)
			}
		}
		cursor = p.Next
		if !p.Truncated {
			break
		}
	}
	if len(seen) != 75 {
		t.Fatalf("paging listed %d orders, want 75", len(seen))
	}
	var p tasksPage
	r.ok("list_tasks", map[string]any{"cursor": cursor}, &p)
	if len(p.Tasks) != 0 || p.Truncated {
		t.Fatalf("after the last page: %+v, want nothing new", p)
	}
	s, err := b.ch.As("cursor-laptop")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := b.ch.Load()
	open := v.State.ListOrders(fold.OrderFilter{State: string(fold.StateOpen)})[0].ID
	if _, err := s.Claim(open, ""); err != nil {
		t.Fatal(err)
	}
	p = tasksPage{}
	r.ok("list_tasks", map[string]any{"cursor": cursor, "detail": true}, &p)
	if len(p.Tasks) != 1 || p.Tasks[0].ID != open || p.Tasks[0].State != "claimed" || p.Tasks[0].Author == "" {
		t.Errorf("since the last next: %+v, want only %s, claimed, with its author", p.Tasks, open)
	}
	p = tasksPage{}
	r.ok("list_tasks", map[string]any{"state": "accepted"}, &p)
	if len(p.Tasks) != 10 || slices.ContainsFunc(p.Tasks, func(x struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Author string `json:"author"`
	}) bool {
		return x.State != "accepted"
	}) {
		t.Errorf("state accepted: %d tasks, want the 10 accepted", len(p.Tasks))
	}
}

// TestGetTask: one order, with its claims, its progress and reviews, bounded.
func TestGetTask(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, false)
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	var id string
	claims := 0
	for _, oid := range v.State.OrderIDs() {
		n := 0
		for _, s := range v.State.Order(oid).History {
			if s.Type == fold.TypeOrderClaim {
				n++
			}
		}
		if n > claims {
			id, claims = oid, n
		}
	}
	var g struct {
		Task struct {
			ID      string `json:"id"`
			Title   string `json:"title"`
			Reviews []struct {
				By string `json:"by"`
			} `json:"reviews"`
		} `json:"task"`
		Claims []struct {
			By string `json:"by"`
			At string `json:"at"`
		} `json:"claims"`
	}
	capped(t, "get_task", r.ok("get_task", map[string]any{"id": id[:6]}, &g))
	o := v.State.Order(id)
	if g.Task.ID != id || g.Task.Title != o.Title || len(g.Claims) != claims || claims < 1 || len(g.Task.Reviews) != len(o.Reviews) {
		t.Errorf("get_task %s: %+v, want %d claims and %d reviews", id, g, claims, len(o.Reviews))
	}
	if got := r.fail("get_task", map[string]any{"id": "o-zzzz"}); !strings.HasPrefix(got, "not_found:") {
		t.Errorf("get_task of nothing: %q", got)
	}
}

// TestReadMemory: the notes of memory/ are listed, read whole or in pages, and nothing
// else is reachable.
func TestReadMemory(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, false)
	var empty struct {
		Files []any `json:"files"`
	}
	r.ok("read_memory", nil, &empty)
	if len(empty.Files) != 0 {
		t.Errorf("the fixture has no notes, got %v", empty.Files)
	}
	mem := filepath.Join(b.dir, "memory")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(mem, 0o755)) // git keeps no empty directory: a clone of the fixture has no memory/
	must(os.WriteFile(filepath.Join(mem, "b-decisions.md"), []byte("# Decisions\n\nWe ship on Fridays.\n"), 0o644))
	must(os.WriteFile(filepath.Join(mem, "a-people.md"), []byte("\xef\xbb\xbfalice: backend\n"), 0o644))
	must(os.WriteFile(filepath.Join(mem, ".draft.md"), []byte("hidden"), 0o644))
	must(os.WriteFile(filepath.Join(mem, "notes.txt"), []byte("not a note"), 0o644))
	must(os.Mkdir(filepath.Join(mem, "sub.md"), 0o755))
	var list struct {
		Files []struct {
			File  string `json:"file"`
			Bytes int64  `json:"bytes"`
		} `json:"files"`
	}
	r.ok("read_memory", nil, &list)
	if fmt.Sprint(list.Files) != "[{a-people.md 18} {b-decisions.md 33}]" {
		t.Errorf("notes %v, want the two *.md files by name with their sizes", list.Files)
	}
	var f struct {
		File string `json:"file"`
		Text string `json:"text"`
	}
	r.ok("read_memory", map[string]any{"file": "a-people.md"}, &f)
	if f.File != "a-people.md" || f.Text != "alice: backend\n" {
		t.Errorf("read a-people.md: %+v (the BOM is not text)", f)
	}
	for _, name := range []string{"../channel.toml", "..\\channel.toml", ".draft.md", "notes.txt", "sub.md", "missing.md", "/etc/passwd"} {
		if got := r.fail("read_memory", map[string]any{"file": name}); !strings.HasPrefix(got, "not_found:") {
			t.Errorf("read_memory %q: %q, want not_found", name, got)
		}
	}
}

// ledgerPage is list_ledger's result.
type ledgerPage struct {
	Entries []struct {
		HLC    string `json:"hlc"`
		Writer string `json:"writer"`
		Type   string `json:"type"`
		Counts bool   `json:"counts"`
		Seq    uint64 `json:"seq"`
		Hash   string `json:"hash"`
	} `json:"entries"`
	Total     int    `json:"total"`
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
}

// TestListLedger: newest first; pages walk all 200 entries once, in order, within the
// caps; limit bounds a page; detail adds seq and hash.
func TestListLedger(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, false)
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	es := v.Snapshot.Entries
	var got []string
	cursor := ""
	for {
		var p ledgerPage
		capped(t, "list_ledger page", r.ok("list_ledger", map[string]any{"cursor": cursor, "detail": true}, &p))
		for _, e := range p.Entries {
			got = append(got, e.Hash)
			if !e.Counts || e.Seq == 0 {
				t.Errorf("fixture entry %+v: every one counts and has a seq", e)
			}
		}
		if !p.Truncated {
			break
		}
		cursor = p.Next
	}
	if len(got) != len(es) || len(es) != 200 {
		t.Fatalf("walked %d entries, want %d", len(got), len(es))
	}
	for i, h := range got {
		if want := es[len(es)-1-i].Hash(); h != want {
			t.Fatalf("entry %d is %s, want %s (newest first)", i, h, want)
		}
	}
	var p ledgerPage
	r.ok("list_ledger", map[string]any{"limit": 3}, &p)
	if len(p.Entries) != 3 || p.Next != "p197" || p.Entries[0].Hash != "" || p.Entries[0].HLC != es[199].HLC {
		t.Errorf("limit 3: %+v", p)
	}
	for _, n := range []int{-1, 21} {
		if got := r.fail("list_ledger", map[string]any{"limit": n}); !strings.HasPrefix(got, "invalid:") {
			t.Errorf("limit %d: %q, want invalid", n, got)
		}
	}
}

// learningsPage is list_learnings' result.
type learningsPage struct {
	Learnings []struct {
		Engine    string `json:"engine"`
		Submitter string `json:"submitter"`
		Order     string `json:"order"`
		Kept      bool   `json:"kept"`
		Reviewer  string `json:"reviewer"`
		At        string `json:"at"`
	} `json:"learnings"`
	Total     int    `json:"total"`
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
}

// engineFor is the engine the fixture's agents declared.
func engineFor(agent string) string {
	e, _, _ := strings.Cut(agent, "-laptop")
	e, _, _ = strings.Cut(e, "-desktop")
	return e
}

// TestLearningsAndEngines: every review of the fixture, paired with the submitter's
// engine and verdict, newest first; list_engines adds them up per engine.
func TestLearningsAndEngines(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, false)
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	// What the fold says: each review judges the newest submit before it.
	type judged struct {
		engine, submitter, order string
		kept                     bool
	}
	var want []judged
	submitted := map[string]int{}
	for _, o := range v.State.Orders {
		by := ""
		for _, s := range o.History {
			switch s.Type {
			case fold.TypeOrderSubmit:
				by = s.By
				submitted[engineFor(by)]++
			case fold.TypeOrderReview:
				want = append(want, judged{engineFor(by), by, o.ID, s.Verdict == "accept"})
			}
		}
	}
	var all learningsPage
	cursor := ""
	for {
		var p learningsPage
		capped(t, "list_learnings page", r.ok("list_learnings", map[string]any{"cursor": cursor}, &p))
		all.Learnings = append(all.Learnings, p.Learnings...)
		all.Total = p.Total
		if !p.Truncated {
			break
		}
		cursor = p.Next
	}
	if len(all.Learnings) != len(want) || all.Total != len(want) || len(want) < 10 {
		t.Fatalf("learnings: %d (total %d), want the fixture's %d reviews", len(all.Learnings), all.Total, len(want))
	}
	kept := map[string][2]int{}
	for i, l := range all.Learnings {
		if i > 0 && l.At > all.Learnings[i-1].At {
			t.Errorf("learning %d is newer than the one before: not newest first", i)
		}
		if !slices.Contains(want, judged{l.Engine, l.Submitter, l.Order, l.Kept}) || l.Reviewer == l.Submitter {
			t.Errorf("learning %+v is not one of the fixture's reviews", l)
		}
		k := kept[l.Engine]
		if l.Kept {
			k[0]++
		} else {
			k[1]++
		}
		kept[l.Engine] = k
	}
	var only learningsPage
	r.ok("list_learnings", map[string]any{"engine": "cursor"}, &only)
	if only.Total != kept["cursor"][0]+kept["cursor"][1] || only.Total == 0 {
		t.Errorf("engine cursor: %d learnings, want %d", only.Total, kept["cursor"][0]+kept["cursor"][1])
	}

	var e struct {
		Engines []struct {
			Engine    string   `json:"engine"`
			Agents    []string `json:"agents"`
			Submitted int      `json:"submitted"`
			Accepted  int      `json:"accepted"`
			Changes   int      `json:"changes"`
		} `json:"engines"`
	}
	r.ok("list_engines", nil, &e)
	var names []string
	for _, x := range e.Engines {
		names = append(names, x.Engine)
		if x.Submitted != submitted[x.Engine] || x.Accepted != kept[x.Engine][0] || x.Changes != kept[x.Engine][1] {
			t.Errorf("engine %+v, want submitted %d, accepted %d, changes %d", x, submitted[x.Engine], kept[x.Engine][0], kept[x.Engine][1])
		}
		for _, a := range x.Agents {
			if engineFor(a) != x.Engine {
				t.Errorf("agent %s listed under %s", a, x.Engine)
			}
		}
	}
	if fmt.Sprint(names) != "[claude-code codex cursor]" {
		t.Errorf("engines %v, want claude-code, codex, cursor", names)
	}
}

// TestReadOnly: --read-only serves the legacy tools alone: a core tool is unknown, and
// nothing is written, not even the arrival of a lease.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	b, r := legacyRig(t, true)
	if !slices.Equal(r.tools, legacyNames) {
		t.Fatalf("read-only tools %v, want %v", r.tools, legacyNames)
	}
	before := ledgerBytes(t, b)
	for _, name := range legacyNames {
		args := map[string]any{}
		if name == "get_task" {
			args["id"] = "o-"
		}
		rep := r.call(name, args)
		if rep.IsError && !strings.HasPrefix(rep.Text, "invalid:") {
			t.Errorf("%s: %s", name, rep.Text)
		}
	}
	p, _ := json.Marshal(map[string]any{"name": "ferry_orders", "arguments": map[string]any{"action": "new", "title": "x"}})
	r.n++
	fmt.Fprintf(r.in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`+"\n", r.n, p)
	line, err := r.out.ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), `"error"`) || !strings.Contains(string(line), "ferry_orders") {
		t.Errorf("ferry_orders on a read-only server: %s (%v), want an unknown-tool error", line, err)
	}
	if after := ledgerBytes(t, b); after != before {
		t.Errorf("a read-only server changed the ledger")
	}
	if _, err := os.Stat(b.home.SessionLeasePath("busy", "codex-laptop")); err == nil {
		t.Errorf("a read-only server took the identity lease")
	}
}

// ledgerBytes is the size of every segment of the channel, as one string.
func ledgerBytes(t *testing.T, b *busyChannel) string {
	t.Helper()
	var out []string
	err := filepath.Walk(filepath.Join(b.dir, "ledger"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			out = append(out, fmt.Sprint(p, info.Size()))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestStateFilterChecked: a state that is not one is refused by name, by list_tasks
// and ferry_orders list alike.
func TestStateFilterChecked(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"legacy"}})
	if got := r.fail("list_tasks", map[string]any{"state": "done"}); !strings.HasPrefix(got, `invalid: unknown order state "done"`) {
		t.Errorf("list_tasks state done: %q", got)
	}
	if got := r.fail("ferry_orders", map[string]any{"action": "list", "state": "Open"}); !strings.HasPrefix(got, `invalid: unknown order state "Open"`) {
		t.Errorf("ferry_orders list state Open: %q", got)
	}
}

// TestMemoryRefusesLinks (docs/threat-model.md "Hostile MCP callers"): a memory/
// replaced by a link to another directory (`rm -r memory; ln -s /some/dir memory`), or
// a note that is a link, is never read: read_memory, ferry_get and ferry_search answer
// denied, and a search of every kind still answers from the channel's own things.
func TestMemoryRefusesLinks(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "k.md"), []byte("outside secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := copyBusy(t)
	mem := filepath.Join(b.dir, "memory")
	if err := os.RemoveAll(mem); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, mem); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"legacy", "admin"}})
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"read_memory", nil},
		{"read_memory", map[string]any{"file": "k.md"}},
		{"ferry_get", map[string]any{"uri": "ferry://busy/memory/k.md"}},
		{"ferry_search", map[string]any{"query": "outside", "kind": "memory"}},
	} {
		if got := r.fail(call.tool, call.args); !strings.HasPrefix(got, "denied:") || strings.Contains(got, "outside secret") {
			t.Errorf("%s %v through a linked memory/: %q, want denied", call.tool, call.args, got)
		}
	}
	if got := r.ok("ferry_search", map[string]any{"query": "outside"}, nil); strings.Contains(got, "outside secret") {
		t.Errorf("ferry_search of every kind read through the link: %s", got)
	}

	// A note that is a link, even to a file inside the channel.
	if err := os.Remove(mem); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mem, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(b.dir, "channel.toml"), filepath.Join(mem, "k.md")); err != nil {
		t.Fatal(err)
	}
	if got := r.fail("read_memory", map[string]any{"file": "k.md"}); !strings.HasPrefix(got, "denied:") {
		t.Errorf("read_memory of a linked note: %q, want denied", got)
	}
}
