package main

// The permission matrix (issue 8): every level a writer can be at × every write a user
// can cause × {CLI, MCP} → allow or deny, as the level table of DESIGN §2 (and the
// code's copy of it, docs/format.md §13) says. Each row is one channel on disk: the
// owner's machine (its own FERRY_HOME) made it and seats the actor; the actor works from
// a machine of its own (another FERRY_HOME: no master key there), through the real
// ferry binary and a real `ferry mcp serve` child. Each write is one line of permWrites.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
)

// Matrix rows: the actor's standing when it writes.
var permRows = []struct {
	name  string
	level fsbus.Level // the level the table judges by (none: unseated or revoked)
}{
	{"worker", fsbus.LevelWorker},
	{"member", fsbus.LevelMember},
	{"orchestrator", fsbus.LevelOrchestrator},
	{"master", fsbus.LevelMaster},
	{"unseated", fsbus.LevelNone},
	{"revoked", fsbus.LevelNone},
}

// permPrep is what a write needs, made before the actor's level is set: ids of things
// the actor holds or wrote (while seated as an orchestrator), or that others made.
type permPrep struct {
	id   string
	args []string // extra CLI flags (a workspace)
}

// permWrite is one write a user can cause: its entry type, the lowest level the table
// allows it at, what must exist first, and the call over the CLI and over MCP (no
// mcpTool: no MCP tool makes it — the table's last row never is, DESIGN §2). In cli
// and mcpArgs, "{id}" stands for the prepared thing's id.
type permWrite struct {
	typ     string
	what    string // how the row is told apart when one type has several rows
	min     fsbus.Level
	prep    func(w *permWorld, via string) permPrep
	cli     []string
	mcpTool string
	mcpArgs map[string]any
	flags   permFlags
}

// permFlags say how a row differs from a plain write.
type permFlags int

const (
	// owner: the last row of the table: only the owner, never over MCP.
	owner permFlags = 1 << iota
	// notMaster: the row does not apply to the owner: it is no agent (joins, retiring
	// oneself), and it answers asks rather than raising them (invalid, ask.go).
	notMaster
	// again: a second call in the same state writes nothing (idempotent), so the MCP
	// cell, which runs after the CLI one, may answer ok without writing.
	again
	// final: the write ends something the other cells need; it runs after both passes.
	final
)

func (pw permWrite) has(f permFlags) bool { return pw.flags&f != 0 }

// cliArgs is the row's command line for prepared p.
func (pw permWrite) cliArgs(p permPrep) []string {
	out := make([]string, 0, len(pw.cli)+len(p.args))
	for _, a := range pw.cli {
		out = append(out, strings.ReplaceAll(a, "{id}", p.id))
	}
	return append(out, p.args...)
}

// mcpCall is the row's MCP tool call for prepared p.
func (pw permWrite) mcpCall(p permPrep) (string, map[string]any) {
	args := map[string]any{}
	for k, v := range pw.mcpArgs {
		if s, ok := v.(string); ok {
			v = strings.ReplaceAll(s, "{id}", p.id)
		}
		args[k] = v
	}
	return pw.mcpTool, args
}

type m = map[string]any

// permWrites is every write a user can cause (docs/commands.md), one line each, in the
// order a row runs them: every CLI cell, then every MCP cell, then the final ones
// (retirements). Not here: order.expire (written by a machine's own settle, never by a
// command), policy.set and release.approve (no command writes policy; release approval
// is `ferry update approve`, tested in update_test.go).
var permWrites = []permWrite{
	{typ: "agent.join", min: fsbus.LevelNone, flags: notMaster, cli: []string{"join", "--app", "matrix-cli"}, mcpTool: "ferry_join", mcpArgs: m{}},
	{typ: "msg.ack", min: fsbus.LevelWorker, prep: (*permWorld).messageToActor, cli: []string{"talk", "ack", "{id}"}, mcpTool: "ferry_talk", mcpArgs: m{"action": "read"}},
	{typ: "handin.add", min: fsbus.LevelWorker, cli: []string{"handin", "add", "--ref", "commit:abc123"}},
	// docs/format.md §13: standby needs member (issue 3), not worker as DESIGN's table.
	{typ: "presence.standby", min: fsbus.LevelMember, flags: again, cli: []string{"primary", "standby"}, mcpTool: "ferry_primary", mcpArgs: m{"action": "standby"}},
	{typ: "msg.post", min: fsbus.LevelMember, cli: []string{"talk", "send", "--to", "author", "hello"}, mcpTool: "ferry_talk", mcpArgs: m{"action": "post", "to": "author", "text": "hello"}},
	{typ: "ask.raise", min: fsbus.LevelMember, flags: notMaster, cli: []string{"ask", "raise", "Drop the table?", "--recommendation", "yes"}, mcpTool: "ferry_ask_human", mcpArgs: m{"action": "raise", "title": "Drop the table?", "recommendation": "yes"}},
	{typ: "order.create", min: fsbus.LevelMember, cli: []string{"order", "new", "A new order"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "new", "title": "A new order"}},
	{typ: "order.claim", min: fsbus.LevelMember, prep: (*permWorld).openOrder, cli: []string{"order", "claim", "{id}"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "claim", "id": "{id}"}},
	{typ: "order.progress", what: "holder", min: fsbus.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "progress", "{id}", "halfway"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "progress", "id": "{id}", "note": "halfway"}},
	{typ: "order.extend", what: "holder", min: fsbus.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "extend", "{id}"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "extend", "id": "{id}"}},
	{typ: "order.submit", what: "holder", min: fsbus.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "submit", "{id}", "--ref", "commit:abc123"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "submit", "id": "{id}", "ref": "commit:abc123"}},
	{typ: "order.release", what: "holder", min: fsbus.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "release", "{id}"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "release", "id": "{id}"}},
	{typ: "order.fail", what: "holder", min: fsbus.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "fail", "{id}", "--reason", "blocked"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "fail", "id": "{id}", "note": "blocked"}},
	{typ: "order.cancel", what: "author", min: fsbus.LevelMember, prep: (*permWorld).ownOrder, cli: []string{"order", "cancel", "{id}"}},
	{typ: "order.offer", what: "author", min: fsbus.LevelMember, prep: (*permWorld).ownOrder, cli: []string{"order", "offer", "{id}", "--to", "author"}},
	{typ: "order.stale", what: "author", min: fsbus.LevelMember, prep: (*permWorld).staleOrder, cli: []string{"order", "verify", "{id}", "--mark"}},
	{typ: "order.review", min: fsbus.LevelMember, prep: (*permWorld).submittedOrder, cli: []string{"order", "review", "{id}", "--accept"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "review", "id": "{id}", "verdict": "accept"}},
	{typ: "order.offer", what: "any order", min: fsbus.LevelOrchestrator, prep: (*permWorld).openOrder, cli: []string{"order", "offer", "{id}", "--to", "author"}},
	{typ: "decision.record", min: fsbus.LevelOrchestrator, cli: []string{"decision", "record", "Ship on Friday"}},
	{typ: "primary.take", min: fsbus.LevelOrchestrator, cli: []string{"primary", "take"}, mcpTool: "ferry_primary", mcpArgs: m{"action": "takeover"}},
	{typ: "primary.brief", min: fsbus.LevelOrchestrator, cli: []string{"primary", "brief", "--objective", "Ship v2"}},
	{typ: "primary.release", min: fsbus.LevelOrchestrator, cli: []string{"primary", "release"}, mcpTool: "ferry_primary", mcpArgs: m{"action": "release"}},
	{typ: "grant.set", min: fsbus.LevelMaster, flags: owner, cli: []string{"grant", "set", "bystander", "--level", "orchestrator"}},
	{typ: "grant.revoke", min: fsbus.LevelMaster, flags: owner, cli: []string{"grant", "revoke", "bystander"}},
	{typ: "ask.answer", min: fsbus.LevelMaster, flags: owner, prep: (*permWorld).askByAuthor, cli: []string{"ask", "approve", "{id}"}},
	{typ: "agent.retire", what: "of another", min: fsbus.LevelMaster, flags: owner | final, cli: []string{"agent", "retire", "bystander"}},
	{typ: "agent.retire", what: "of itself", min: fsbus.LevelWorker, flags: notMaster | final, cli: []string{"agent", "retire", "actor"}},
}

// permWorld is one row's channel: the owner's machine (master, author and bystander
// keys) and the actor's machine.
type permWorld struct {
	t             *testing.T
	owner, agent  *mcpMachine
	dir           string
	actor         string // "actor", or "master" on the master row
	master, auth  *fsbus.Session
	actorSess     *fsbus.Session // nil on the unseated row
	ownerCh       *fsbus.Channel
	actorHomePath string
}

func fsHome(home string) *fsbus.Home {
	return &fsbus.Home{ConfigDir: filepath.Join(home, "config"), CacheDir: filepath.Join(home, "cache")}
}

func newPermWorld(t *testing.T, bin, row string) *permWorld {
	w := &permWorld{t: t, owner: newMCPMachine(t, bin), actor: "actor"}
	w.dir = w.owner.channel("acme", "author", "bystander")
	var err error
	if w.ownerCh, err = fsbus.Open(fsHome(w.owner.home), w.dir); err != nil {
		t.Fatal(err)
	}
	if w.master, err = w.ownerCh.As(fsbus.MasterWriter); err != nil {
		t.Fatal(err)
	}
	if w.auth, err = w.ownerCh.As("author"); err != nil {
		t.Fatal(err)
	}
	if row == "master" {
		w.agent, w.actor, w.actorSess = w.owner, fsbus.MasterWriter, w.master
		return w
	}
	w.agent = newMCPMachine(t, bin)
	w.agent.must("join", "--as", "actor", "--channel", w.dir)
	if row == "unseated" {
		return w
	}
	// Seated as an orchestrator first, so the actor can come to hold and author what
	// the writes need; its final standing is set by finish.
	_, err = w.master.Grant(fsbus.GrantOptions{Agent: "actor", Level: "orchestrator"})
	w.must(err)
	ach, err := fsbus.Open(fsHome(w.agent.home), w.dir)
	if err != nil {
		t.Fatal(err)
	}
	if w.actorSess, err = ach.As("actor"); err != nil {
		t.Fatal(err)
	}
	return w
}

// finish sets the actor's standing for the row.
func (w *permWorld) finish(row string) {
	var err error
	switch row {
	case "worker", "member":
		_, err = w.master.Grant(fsbus.GrantOptions{Agent: "actor", Level: row})
	case "revoked":
		_, err = w.master.Revoke("actor")
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *permWorld) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// The preparations: each makes a fresh thing, so every cell starts from the state the
// write needs.
func (w *permWorld) openOrder(string) permPrep {
	o, err := w.auth.NewOrder(fsbus.NewOrderOptions{Title: "Open order"})
	w.must(err)
	return permPrep{id: o.ID}
}

func (w *permWorld) heldOrder(via string) permPrep {
	p := w.openOrder(via)
	holder := w.actorSess
	if holder == nil { // unseated: it can hold nothing; the order is the author's
		holder = w.auth
	}
	_, err := holder.Claim(p.id, "")
	w.must(err)
	return p
}

func (w *permWorld) ownOrder(string) permPrep {
	author := w.actorSess
	if author == nil {
		author = w.auth
	}
	o, err := author.NewOrder(fsbus.NewOrderOptions{Title: "My order"})
	w.must(err)
	return permPrep{id: o.ID}
}

// staleOrder is an order with a file pointer, dispatched by the actor from its own
// machine's workspace (by the author when the actor cannot), whose pointed file then
// changed: `order verify --mark` records it as pointer_stale.
func (w *permWorld) staleOrder(via string) permPrep {
	author := w.actorSess
	if author == nil {
		author = w.auth
	}
	ws := w.t.TempDir()
	file := filepath.Join(ws, "pointed.txt")
	w.must(os.WriteFile(file, []byte("before\n"), 0o644))
	s := *author
	s.Workspace = ws
	o, err := s.NewOrder(fsbus.NewOrderOptions{Title: "Pointed order", Pointers: []string{"pointed.txt"}})
	w.must(err)
	w.must(os.WriteFile(file, []byte("after, and longer\n"), 0o644))
	return permPrep{id: o.ID, args: []string{"--workspace", ws}}
}

func (w *permWorld) submittedOrder(via string) permPrep {
	p := w.openOrder(via)
	_, err := w.auth.Claim(p.id, "")
	w.must(err)
	_, err = w.auth.Submit(p.id, "commit:def456", "done", "")
	w.must(err)
	return p
}

func (w *permWorld) messageToActor(string) permPrep {
	m, err := w.auth.TalkSend("all", "read me", "") // to all: the unseated actor too
	w.must(err)
	return permPrep{id: m.ID}
}

func (w *permWorld) askByAuthor(string) permPrep {
	a, err := w.auth.AskRaise(fsbus.AskRaiseOptions{Title: "May I?", Recommendation: "yes"})
	w.must(err)
	return permPrep{id: a.ID}
}

// entries returns the hashes of every entry and whether each counts.
func (w *permWorld) entries() (all []string, counts map[string]bool, st *fsbus.State) {
	v, err := w.ownerCh.Load()
	if err != nil {
		w.t.Fatal(err)
	}
	counts = map[string]bool{}
	for i := range v.Snapshot.Entries {
		h := v.Snapshot.Entries[i].Hash()
		all = append(all, h)
		counts[h] = v.State.Counts(h)
	}
	return all, counts, v.State
}

// cellOutcome is what one call did: allowed (it wrote, and what it wrote counts) or
// denied (with the category it named, nothing written).
type cellOutcome struct {
	ok       bool
	category string
	detail   string
	wrote    []string // types of the new entries
	counted  bool     // every new entry counts
}

func (w *permWorld) observe(before []string, call func() (bool, string)) cellOutcome {
	ok, msg := call()
	all, counts, _ := w.entries()
	v, _ := w.ownerCh.Load()
	out := cellOutcome{ok: ok, detail: msg, counted: true}
	if !ok {
		out.category, _, _ = strings.Cut(strings.TrimPrefix(msg, "ferry: error: "), ":")
	}
	seen := map[string]bool{}
	for _, h := range before {
		seen[h] = true
	}
	for i, h := range all {
		if seen[h] {
			continue
		}
		out.wrote = append(out.wrote, v.Snapshot.Entries[i].Type)
		out.counted = out.counted && counts[h]
	}
	return out
}

// TestPermissionMatrix (issue 8): {worker, member, orchestrator, master, unseated,
// revoked} × every write × {CLI, MCP}. An allowed cell exits 0 (or answers without
// isError) and writes entries that count; a denied one is refused with `denied` (on an
// agent's machine an owner-only command finds no master key: `not_found`) and writes
// nothing. A write no MCP tool makes is listed as such, and
// TestPermissionMatrixCoversMCP checks that every MCP write is a row here.
func TestPermissionMatrix(t *testing.T) {
	bin := mcpBinary(t)
	var table strings.Builder
	fmt.Fprintf(&table, "%-30s", "write")
	for _, r := range permRows {
		fmt.Fprintf(&table, " %-12s", r.name)
	}
	table.WriteString("\n")
	results := map[string]map[string]string{}
	for _, row := range permRows {
		t.Run(row.name, func(t *testing.T) {
			w := newPermWorld(t, bin, row.name)
			preps := map[int]map[string]permPrep{}
			for i, pw := range permWrites {
				preps[i] = map[string]permPrep{}
				for _, via := range []string{"cli", "mcp"} {
					if pw.prep != nil && (via == "cli" || pw.mcpTool != "") {
						preps[i][via] = pw.prep(w, via)
					}
				}
			}
			w.finish(row.name)

			ctx, cancel := context.WithTimeout(context.Background(), 4*mcpDeadline)
			defer cancel()
			cl, err := connectGoSDK(ctx, w.agent.serve(w.actor, "acme"), "2025-06-18")
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()

			for _, pass := range []struct {
				via   string
				final bool
			}{{"cli", false}, {"mcp", false}, {"cli", true}} {
				for i, pw := range permWrites {
					if pw.has(final) != pass.final {
						continue
					}
					name := pw.typ
					if pw.what != "" {
						name += " (" + pw.what + ")"
					}
					if results[name] == nil {
						results[name] = map[string]string{}
					}
					via := pass.via
					cell := name + " × " + via
					if row.name == "master" && pw.has(notMaster) {
						results[name][row.name] += via + ":n/a "
						continue
					}
					if via == "mcp" && pw.mcpTool == "" {
						results[name][row.name] += "mcp:none "
						continue
					}
					want := row.level >= pw.min
					before, _, _ := w.entries()
					p := preps[i][via]
					var out cellOutcome
					if via == "cli" {
						args := append(pw.cliArgs(p), "--channel", w.dir)
						if w.actor != fsbus.MasterWriter || !pw.has(owner) {
							args = append(args, "--as", w.actor)
						}
						out = w.observe(before, func() (bool, string) {
							so, se, code := w.agent.ferry(args...)
							return code == 0, strings.TrimSpace(se + so)
						})
					} else {
						tool, targs := pw.mcpCall(p)
						out = w.observe(before, func() (bool, string) {
							r, err := cl.CallTool(ctx, tool, targs)
							if err != nil {
								return false, "transport: " + err.Error()
							}
							return !r.IsError, r.Text
						})
					}
					mark := "deny"
					if out.ok {
						mark = "allow"
					}
					results[name][row.name] += via + ":" + mark + " "
					noop := pw.has(again) && via == "mcp" && len(out.wrote) == 0
					switch {
					case want && !out.ok:
						t.Errorf("%s as %s: refused (%s), the table allows it", cell, row.name, out.detail)
					case want && !noop && (!slices.Contains(out.wrote, pw.typ) || !out.counted):
						t.Errorf("%s as %s: answered ok but wrote %v (counted %v), want a counting %s", cell, row.name, out.wrote, out.counted, pw.typ)
					case !want && out.ok:
						t.Errorf("%s as %s: allowed (wrote %v), the table denies it", cell, row.name, out.wrote)
					case !want && len(out.wrote) > 0:
						t.Errorf("%s as %s: refused but wrote %v", cell, row.name, out.wrote)
					case !want && out.category != fsbus.CatDenied && !(pw.has(owner) && via == "cli" && out.category == fsbus.CatNotFound && strings.Contains(out.detail, "no master key")):
						t.Errorf("%s as %s: refused as %q (%s), want denied", cell, row.name, out.category, out.detail)
					}
				}
			}
		})
	}
	// The matrix as it ran, for the log and for docs/threat-model.md.
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&table, "%-30s", n)
		for _, r := range permRows {
			fmt.Fprintf(&table, " %-12s", strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(results[n][r.name], "cli:", ""), "mcp:", "/")))
		}
		table.WriteString("\n")
	}
	t.Logf("permission matrix (cli /mcp):\n%s", table.String())
	if os.Getenv("FERRY_MATRIX_OUT") != "" {
		_ = os.WriteFile(os.Getenv("FERRY_MATRIX_OUT"), []byte(table.String()), 0o644)
	}
}

// mcpReads are the (tool, action) pairs of the MCP surface that write no entry: reads,
// and ferry_update (it replaces this machine's binary; approving a release is the
// owner's, over the CLI only).
var mcpReads = map[string][]string{
	"ferry_catchup": nil, "ferry_search": nil, "ferry_get": nil, "ferry_status": nil,
	"ferry_orders":    {"list", "show", "verify"},
	"ferry_primary":   {"status"},
	"ferry_ask_human": {"status"},
	"ferry_update":    {"check", "apply"},
	"channel_status":  nil, "discover": nil, "list_tasks": nil, "get_task": nil,
	"read_memory": nil, "list_ledger": nil, "list_learnings": nil, "list_engines": nil,
}

// TestPermissionMatrixCoversMCP (issue 8): every (tool, action) the MCP server offers,
// with every opt-in group, is either a read (mcpReads) or the MCP cell of a row of
// permWrites — so a write added to the MCP surface without a matrix row fails here —
// and no MCP cell makes an entry of the table's last row (DESIGN §2: grants, policy,
// answers, retiring others are never possible over MCP).
func TestPermissionMatrixCoversMCP(t *testing.T) {
	bin := mcpBinary(t)
	m := newMCPMachine(t, bin)
	m.channel("acme", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	cl, err := connectGoSDK(ctx, m.serve("alice", "acme", "--tools", "admin", "--tools", "legacy"), "2025-06-18")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tools, err := cl.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inMatrix := map[string]bool{}
	for _, pw := range permWrites {
		if pw.mcpTool == "" {
			continue
		}
		if pw.has(owner) {
			t.Errorf("%s is the table's last row but has an MCP cell", pw.typ)
		}
		tool, args := pw.mcpCall(permPrep{id: "o-0000000000000"})
		a, _ := args["action"].(string)
		inMatrix[tool+" "+a] = true
	}
	if len(tools) < 6 {
		t.Fatalf("tools/list gave %d tools", len(tools))
	}
	for _, tl := range tools {
		var schema struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil {
			t.Fatalf("%s: input schema: %v", tl.Name, err)
		}
		actions := schema.Properties["action"].Enum
		if len(actions) == 0 {
			actions = []string{""}
		}
		for _, a := range actions {
			reads, known := mcpReads[tl.Name]
			if known && (reads == nil || slices.Contains(reads, a)) {
				continue
			}
			if !inMatrix[tl.Name+" "+a] {
				t.Errorf("MCP %s action %q writes but has no row in permWrites (or add it to mcpReads if it writes nothing)", tl.Name, a)
			}
		}
	}
}
