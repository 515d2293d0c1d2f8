package main

// The permission matrix: every level a writer can be at × every write a user can cause
// × {CLI, MCP} → allow or deny, as the level table of docs/design.md §2 (and the code's
// copy of it, docs/format.md §13) says. Each row is one channel on disk: the owner's
// machine (its own FERRY_HOME) made it and seats the actor; the actor works from a
// machine of its own (another FERRY_HOME: no master key there), through separate ferry
// processes and a real `ferry mcp serve` child. Each write is one line of permWrites.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// Matrix rows: the actor's standing when it writes.
var permRows = []struct {
	name  string
	level fold.Level // the level the table judges by (none: unseated or revoked)
}{
	{"worker", fold.LevelWorker},
	{"member", fold.LevelMember},
	{"orchestrator", fold.LevelOrchestrator},
	{"master", fold.LevelMaster},
	{"unseated", fold.LevelNone},
	{"revoked", fold.LevelNone},
}

// permPrep is what a write needs, made before the actor's level is set: ids of things
// the actor holds or wrote (while seated as an orchestrator), or that others made.
type permPrep struct {
	id   string
	args []string // extra CLI flags (a workspace)
}

// permWrite is one write a user can cause: its entry type, the lowest level the table
// allows it at, what must exist first, and the call over the CLI and over MCP (no
// mcpTool: no MCP tool makes it — the table's last row never is, docs/design.md §2). In
// cli and mcpArgs, "{id}" stands for the prepared thing's id.
type permWrite struct {
	typ     string
	what    string // how the row is told apart when one type has several rows
	min     fold.Level
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
// command), policy.set and release.approve (the owner's alone, never over MCP:
// `ferry policy set` and `ferry update approve` are TestPermissionMatrixMasterOnly's
// rows; release approval is tested in update_test.go too).
var permWrites = []permWrite{
	{typ: "agent.join", min: fold.LevelNone, flags: notMaster | again, cli: []string{"join", "--app", "matrix-cli"}, mcpTool: "ferry_join", mcpArgs: m{}}, // again: the CLI join's app stays (fsbus.JoinReporting)
	{typ: "msg.ack", min: fold.LevelWorker, prep: (*permWorld).messageToActor, cli: []string{"talk", "ack", "{id}"}, mcpTool: "ferry_talk", mcpArgs: m{"action": "read"}},
	{typ: "handin.add", min: fold.LevelWorker, cli: []string{"handin", "add", "--ref", "commit:abc123"}},
	// docs/format.md §13: standby needs member, not worker.
	{typ: "presence.standby", min: fold.LevelMember, flags: again, cli: []string{"primary", "standby"}, mcpTool: "ferry_primary", mcpArgs: m{"action": "standby"}},
	{typ: "msg.post", min: fold.LevelMember, cli: []string{"talk", "send", "--to", "author", "hello"}, mcpTool: "ferry_talk", mcpArgs: m{"action": "post", "to": "author", "text": "hello"}},
	{typ: "ask.raise", min: fold.LevelMember, flags: notMaster, cli: []string{"ask", "raise", "Drop the table?", "--recommendation", "yes"}, mcpTool: "ferry_ask_human", mcpArgs: m{"action": "raise", "title": "Drop the table?", "recommendation": "yes"}},
	{typ: "order.create", min: fold.LevelMember, cli: []string{"order", "new", "A new order"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "new", "title": "A new order"}},
	{typ: "order.claim", min: fold.LevelMember, prep: (*permWorld).openOrder, cli: []string{"order", "claim", "{id}"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "claim", "id": "{id}"}},
	{typ: "order.progress", what: "holder", min: fold.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "progress", "{id}", "halfway"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "progress", "id": "{id}", "note": "halfway"}},
	{typ: "order.extend", what: "holder", min: fold.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "extend", "{id}"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "extend", "id": "{id}"}},
	{typ: "order.submit", what: "holder", min: fold.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "submit", "{id}", "--ref", "commit:abc123"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "submit", "id": "{id}", "ref": "commit:abc123"}},
	{typ: "order.release", what: "holder", min: fold.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "release", "{id}"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "release", "id": "{id}"}},
	{typ: "order.fail", what: "holder", min: fold.LevelMember, prep: (*permWorld).heldOrder, cli: []string{"order", "fail", "{id}", "--reason", "blocked"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "fail", "id": "{id}", "note": "blocked"}},
	{typ: "order.cancel", what: "author", min: fold.LevelMember, prep: (*permWorld).ownOrder, cli: []string{"order", "cancel", "{id}"}},
	{typ: "order.offer", what: "author", min: fold.LevelMember, prep: (*permWorld).ownOrder, cli: []string{"order", "offer", "{id}", "--to", "author"}},
	{typ: "order.stale", what: "author", min: fold.LevelMember, prep: (*permWorld).staleOrder, cli: []string{"order", "verify", "{id}", "--mark"}},
	{typ: "order.review", min: fold.LevelMember, prep: (*permWorld).submittedOrder, cli: []string{"order", "review", "{id}", "--accept"}, mcpTool: "ferry_orders", mcpArgs: m{"action": "review", "id": "{id}", "verdict": "accept"}},
	{typ: "order.offer", what: "any order", min: fold.LevelOrchestrator, prep: (*permWorld).openOrder, cli: []string{"order", "offer", "{id}", "--to", "author"}},
	{typ: "decision.record", min: fold.LevelOrchestrator, cli: []string{"decision", "record", "Ship on Friday"}},
	{typ: "primary.take", min: fold.LevelOrchestrator, cli: []string{"primary", "take"}, mcpTool: "ferry_primary", mcpArgs: m{"action": "takeover"}},
	{typ: "primary.brief", min: fold.LevelOrchestrator, cli: []string{"primary", "brief", "--objective", "Ship v2"}},
	{typ: "primary.release", min: fold.LevelOrchestrator, cli: []string{"primary", "release"}, mcpTool: "ferry_primary", mcpArgs: m{"action": "release"}},
	{typ: "grant.set", min: fold.LevelMaster, flags: owner, cli: []string{"grant", "set", "bystander", "--level", "orchestrator"}},
	{typ: "grant.revoke", min: fold.LevelMaster, flags: owner, cli: []string{"grant", "revoke", "bystander"}},
	{typ: "ask.answer", min: fold.LevelMaster, flags: owner, prep: (*permWorld).askByAuthor, cli: []string{"ask", "approve", "{id}"}},
	{typ: "agent.retire", what: "of another", min: fold.LevelMaster, flags: owner | final, cli: []string{"agent", "retire", "bystander"}},
	{typ: "agent.retire", what: "of itself", min: fold.LevelWorker, flags: notMaster | final, cli: []string{"agent", "retire", "actor"}},
}

// permWorld is one row's channel: the owner's machine (master, author and bystander
// keys) and the actor's machine.
type permWorld struct {
	t            *testing.T
	owner, agent *mcpMachine
	dir          string
	actor        string // "actor", or "master" on the master row
	master, auth *fsbus.Session
	actorSess    *fsbus.Session // nil on the unseated row
	ownerCh      *fsbus.Channel
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
	if w.master, err = w.ownerCh.As(fold.MasterWriter); err != nil {
		t.Fatal(err)
	}
	if w.auth, err = w.ownerCh.As("author"); err != nil {
		t.Fatal(err)
	}
	if row == "master" {
		w.agent, w.actor, w.actorSess = w.owner, fold.MasterWriter, w.master
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
	_, err = w.auth.Submit(p.id, fsbus.SubmitOptions{Reference: "commit:def456", Note: "done"})
	w.must(err)
	return p
}

func (w *permWorld) messageToActor(string) permPrep {
	m, err := w.auth.TalkSend(fsbus.TalkSendOptions{To: "all", Body: "read me"}) // to all: the unseated actor too
	w.must(err)
	return permPrep{id: m.ID}
}

func (w *permWorld) askByAuthor(string) permPrep {
	a, err := w.auth.AskRaise(fsbus.AskRaiseOptions{Title: "May I?", Recommendation: "yes"})
	w.must(err)
	return permPrep{id: a.ID}
}

// entries returns the hashes of every entry and whether each counts, and the view
// they were read from.
func (w *permWorld) entries() (all []string, counts map[string]bool, v *fsbus.View) {
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
	return all, counts, v
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
	all, counts, v := w.entries()
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

// TestPermissionMatrix: {worker, member, orchestrator, master, unseated,
// revoked} × every write × {CLI, MCP}. An allowed cell exits 0 (or answers without
// isError) and writes entries that count; a denied one is refused with `denied` (on an
// agent's machine an owner-only command finds no master key: `not_found`) and writes
// nothing. A write no MCP tool makes is listed as such, and
// TestPermissionMatrixCoversMCP checks that every MCP write is a row here. The rows
// run in parallel, each on its own channel and machines.
func TestPermissionMatrix(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	var mu sync.Mutex // guards results
	results := map[string]map[string]string{}
	record := func(write, row, cell string) {
		mu.Lock()
		defer mu.Unlock()
		if results[write] == nil {
			results[write] = map[string]string{}
		}
		results[write][row] += cell
	}
	// The matrix as it ran, for the log and for docs/threat-model.md, once every row
	// has run.
	t.Cleanup(func() {
		var table strings.Builder
		fmt.Fprintf(&table, "%-30s", "write")
		for _, r := range permRows {
			fmt.Fprintf(&table, " %-12s", r.name)
		}
		table.WriteString("\n")
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
	})
	for _, row := range permRows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
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
					via := pass.via
					cell := name + " × " + via
					if row.name == "master" && pw.has(notMaster) {
						record(name, row.name, via+":n/a ")
						continue
					}
					if via == "mcp" && pw.mcpTool == "" {
						record(name, row.name, "mcp:none ")
						continue
					}
					want := row.level >= pw.min
					before, _, _ := w.entries()
					p := preps[i][via]
					var out cellOutcome
					if via == "cli" {
						args := append(pw.cliArgs(p), "--channel", w.dir)
						if w.actor != fold.MasterWriter || !pw.has(owner) {
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
					record(name, row.name, via+":"+mark+" ")
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
					case !want && out.category != string(errs.Denied) && !(pw.has(owner) && via == "cli" && out.category == string(errs.NotFound) && strings.Contains(out.detail, "no master key")):
						t.Errorf("%s as %s: refused as %q (%s), want denied", cell, row.name, out.category, out.detail)
					}
				}
			}
		})
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

// TestPermissionMatrixCoversMCP: every (tool, action) the MCP server offers, with every
// opt-in group, is either a read (mcpReads) or the MCP cell of a row of permWrites — so
// a write added to the MCP surface without a matrix row fails here — and no MCP cell
// makes an entry of the table's last row (docs/design.md §2: grants, policy, answers,
// retiring others are never possible over MCP).
func TestPermissionMatrixCoversMCP(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
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

// masterAction is one action that is the owner's alone: an entry type of the master
// row of docs/format.md §13's level table (or agent.retire of another agent, the same
// table's retire rule), or a machine-local act on the master key (typ ""), and the
// kong leaf that does it. args makes a fresh command line for one call (a new agent to
// seat, a new pending ask); nil args: the action has no command yet, and the test fails
// the day its leaf appears in the kong model without a row that runs it.
type masterAction struct {
	typ  string
	what string
	leaf string
	args func(w *masterWorld) []string
}

// masterActions is every master action. TestPermissionMatrixMasterOnly checks it
// against docs/format.md (every master-row type has a row, every command §12 names for
// one is a row's leaf) and against the kong model (every row's leaf is an
// ownerCommand, every ownerCommand is a row's leaf).
var masterActions = []masterAction{
	{typ: "grant.set", leaf: "grant set", args: func(w *masterWorld) []string { return []string{"grant", "set", w.joined(), "--level", "worker"} }},
	{typ: "grant.set", what: "default verb", leaf: "grant set", args: func(w *masterWorld) []string { return []string{"grant", w.joined(), "--level", "orchestrator"} }},
	{typ: "grant.revoke", leaf: "grant revoke", args: func(w *masterWorld) []string { return []string{"grant", "revoke", w.seated()} }},
	{typ: "ask.answer", what: "approve", leaf: "ask approve", args: func(w *masterWorld) []string { return []string{"ask", "approve", w.ask()} }},
	{typ: "ask.answer", what: "reject", leaf: "ask reject", args: func(w *masterWorld) []string { return []string{"ask", "reject", w.ask()} }},
	{typ: "ask.answer", what: "send back", leaf: "ask send-back", args: func(w *masterWorld) []string { return []string{"ask", "send-back", w.ask()} }},
	{typ: "agent.retire", what: "of another", leaf: "agent retire", args: func(w *masterWorld) []string { return []string{"agent", "retire", w.seated()} }},
	{typ: "release.approve", leaf: "update approve", args: (*masterWorld).release},
	{typ: "master.rotate", leaf: "master rotate", args: func(*masterWorld) []string { return []string{"master", "rotate"} }},
	{typ: "policy.set", leaf: "policy set", args: func(w *masterWorld) []string {
		w.n++ // a new value each call: setting what the policy says writes nothing
		return []string{"policy", "set", fmt.Sprintf("quiet_after_s=%d", 100+w.n)}
	}},
	{typ: "checkpoint", leaf: "compact", args: func(*masterWorld) []string { return []string{"compact", "--settle", "0s", "--force"} }},
	{what: "take the archive out", leaf: "archive move", args: func(w *masterWorld) []string { return []string{"archive", "move", w.t.TempDir()} }},
	{what: "re-pin the master key", leaf: "master repin", args: func(w *masterWorld) []string { return []string{"master", "repin", "--key", w.masterKey} }},
}

// masterWorld is the owner's machine with an agent's key on it too: an agent process
// running under the owner's own user, the case the --as / FERRY_AGENT check is for.
type masterWorld struct {
	t         *testing.T
	m         *mcpMachine
	dir       string
	ch        *fsbus.Channel
	masterKey string // the master key text channel.toml names
	n         int
}

// fresh is a new agent name.
func (w *masterWorld) fresh() string {
	w.n++
	return fmt.Sprintf("agent-%d", w.n)
}

// joined is a new agent that joined and waits to be seated.
func (w *masterWorld) joined() string {
	name := w.fresh()
	w.m.must("join", "--as", name, "--channel", w.dir)
	return name
}

// seated is a new agent seated at member.
func (w *masterWorld) seated() string {
	name := w.joined()
	w.m.must("grant", name, "--level", "member", "--channel", w.dir)
	return name
}

// ask is a new pending ask raised by the actor.
func (w *masterWorld) ask() string {
	out := w.m.must("ask", "raise", "May I?", "--recommendation", "yes", "--as", "actor", "--channel", w.dir, "--json")
	var a struct{ ID string }
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.ID == "" {
		w.t.Fatalf("ask raise --json: %v\n%s", err, out)
	}
	return a.ID
}

// release is an approval of a new version of a file in the channel's releases/.
func (w *masterWorld) release() []string {
	w.n++
	rel := fmt.Sprintf("releases/ferry-%d", w.n)
	if err := os.MkdirAll(filepath.Join(w.dir, "releases"), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, filepath.FromSlash(rel)), []byte(fmt.Sprintf("not a Go binary %d\n", w.n)), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return []string{"update", "approve", fmt.Sprintf("1.0.%d", w.n), "--platform", "linux/amd64=" + rel}
}

// state is what a refused call must leave as it was: the hash of every entry, and this
// machine's pin of the master key.
func (w *masterWorld) state() (hashes []string, pin string) {
	v, err := w.ch.Load()
	if err != nil {
		w.t.Fatal(err)
	}
	for i := range v.Snapshot.Entries {
		hashes = append(hashes, v.Snapshot.Entries[i].Hash())
	}
	b, _ := os.ReadFile(filepath.Join(w.m.home, "config", "pins", w.ch.Project()+".pub"))
	return hashes, string(b)
}

// ferryEnv runs ferry on the owner's machine with extra environment variables.
func (w *masterWorld) ferryEnv(env []string, args ...string) (stdout, stderr string, code int) {
	w.t.Helper()
	cmd := w.m.command(args...)
	cmd.Env = append(cmd.Env, env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return so.String(), se.String(), ee.ExitCode()
	}
	if err != nil {
		w.t.Fatalf("running ferry %v: %v", args, err)
	}
	return so.String(), se.String(), 0
}

// kongLeaves is every leaf of the CLI's kong model, hidden ones too, by path.
func kongLeaves(t *testing.T) map[string]*kong.Node {
	app, err := catalogModel()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*kong.Node{}
	for _, n := range app.Leaves(false) {
		out[leafPath(n)] = n
	}
	return out
}

// isOwnerCommand reports whether leaf n's command is marked as the owner's.
func isOwnerCommand(n *kong.Node) bool {
	_, ok := n.Target.Addr().Interface().(ownerCommand)
	return ok
}

// formatMasterTypes is the entry types of the master row of docs/format.md §13's level
// table, and for every entry type of §12 the kong leaves its "written by this binary"
// cell names (`ferry ask approve`, `reject`, `send-back` → ask approve, ask reject,
// ask send-back; a group word alone → its default leaf).
func formatMasterTypes(t *testing.T) (master []string, writtenBy map[string][]string) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "format.md"))
	if err != nil {
		t.Fatal(err)
	}
	app, err := catalogModel()
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	section := ""
	writtenBy = map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			section = line
			continue
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		switch {
		case strings.HasPrefix(section, "## 13.") && len(cells) >= 2 && strings.TrimSpace(cells[1]) == "master":
			for _, mm := range code.FindAllStringSubmatch(cells[0], -1) {
				master = append(master, mm[1])
			}
		case strings.HasPrefix(section, "## 12.") && len(cells) >= 4:
			typ := code.FindStringSubmatch(cells[0])
			if typ == nil {
				continue
			}
			var words []string
			for _, mm := range code.FindAllStringSubmatch(cells[len(cells)-1], -1) {
				f := strings.Fields(mm[1])
				switch {
				case len(f) > 1 && f[0] == "ferry":
					words = f[1:]
				case len(f) == 1 && len(words) > 0:
					words = append(slices.Clone(words[:len(words)-1]), f[0])
				default:
					continue
				}
				if leaf := kongLeafOf(app.Node, words); leaf != "" {
					writtenBy[typ[1]] = append(writtenBy[typ[1]], leaf)
				} else {
					t.Errorf("docs/format.md §12 names `ferry %s` for %s, which is no command of the kong model", strings.Join(words, " "), typ[1])
				}
			}
		}
	}
	if len(master) == 0 {
		t.Fatal("docs/format.md §13: no level-table row whose lowest level is master")
	}
	return master, writtenBy
}

// kongLeafOf is the leaf path the words name from n (flags left out; a group's
// default leaf when the words stop at a group), or "" when they name none.
func kongLeafOf(n *kong.Node, words []string) string {
	for _, w := range words {
		if strings.HasPrefix(w, "-") {
			break
		}
		var next *kong.Node
		for _, c := range n.Children {
			if c.Name == w || slices.Contains(c.Aliases, w) {
				next = c
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	if n.DefaultCmd != nil {
		n = n.DefaultCmd
	}
	if n.Type != kong.CommandNode || len(n.Children) > 0 {
		return ""
	}
	return leafPath(n)
}

// TestPermissionMatrixMasterOnly: every master action refuses, on the owner's own
// machine, when --as or FERRY_AGENT names an agent (denied, naming the agent, where the
// name came from and how to act as master; nothing written, the pin unchanged), and
// runs under --as master with FERRY_AGENT naming an agent (--as on the command line
// wins). The set of master actions comes from docs/format.md's level table and the
// kong model: a master-only command added without the ownerCommand mark, or marked
// without a row here, fails this test.
func TestPermissionMatrixMasterOnly(t *testing.T) {
	t.Parallel()
	leaves := kongLeaves(t)
	master, writtenBy := formatMasterTypes(t)
	rows := map[string][]masterAction{} // by type
	byLeaf := map[string]bool{}
	for _, a := range masterActions {
		rows[a.typ] = append(rows[a.typ], a)
		byLeaf[a.leaf] = true
	}
	for _, typ := range append(master, "agent.retire") {
		if len(rows[typ]) == 0 {
			t.Errorf("%s is on the master row of docs/format.md §13 but has no row in masterActions", typ)
		}
		for _, leaf := range writtenBy[typ] {
			if typ == "agent.retire" {
				continue // one leaf for retiring oneself and others: its row is "of another"
			}
			found := false
			for _, a := range rows[typ] {
				found = found || a.leaf == leaf
			}
			if !found {
				t.Errorf("docs/format.md §12: `ferry %s` writes %s (master row) but is no row of masterActions", leaf, typ)
			}
		}
	}
	for _, a := range masterActions {
		n := leaves[a.leaf]
		switch {
		case n == nil && a.args != nil:
			t.Errorf("masterActions names %q, which is no leaf of the kong model", a.leaf)
		case n == nil:
			t.Logf("%s: no command yet (%s)", a.typ, a.leaf)
		case !isOwnerCommand(n):
			t.Errorf("`ferry %s` does %s, the owner's alone, but its command is no ownerCommand (owner.go): it does not refuse under --as or FERRY_AGENT", a.leaf, joinWhat(a.typ, a.what))
		case a.args == nil:
			t.Errorf("`ferry %s` exists now: give its masterActions row args, so the cells below run it", a.leaf)
		}
	}
	for path, n := range leaves {
		if isOwnerCommand(n) && !byLeaf[path] {
			t.Errorf("`ferry %s` is an ownerCommand but no row of masterActions: add one (with the type it writes)", path)
		}
	}
	if t.Failed() {
		return
	}

	bin := ferryExe(t)
	w := &masterWorld{t: t, m: newMCPMachine(t, bin)}
	w.dir = w.m.channel("acme", "actor")
	w.m.must("grant", "actor", "--level", "orchestrator", "--channel", w.dir)
	var err error
	if w.ch, err = fsbus.Open(fsHome(w.m.home), w.dir); err != nil {
		t.Fatal(err)
	}
	key := strings.Fields(w.m.must("key", "show", "--channel", w.dir))
	if len(key) != 2 || key[0] != fold.MasterWriter {
		t.Fatalf("key show: %q", key)
	}
	w.masterKey = key[1]
	for _, a := range masterActions {
		if a.args == nil {
			continue
		}
		name := a.leaf
		if a.what != "" {
			name += " (" + a.what + ")"
		}
		for _, cell := range []struct {
			via, src, hint string
			env, extra     []string
		}{
			{"--as actor", "(--as actor)", "drop --as actor or pass --as master", nil, []string{"--as", "actor"}},
			{"FERRY_AGENT=actor", "(FERRY_AGENT=actor)", "pass --as master (it overrides FERRY_AGENT)", []string{"FERRY_AGENT=actor"}, nil},
		} {
			args := append(append(a.args(w), "--channel", w.dir), cell.extra...)
			before, pin := w.state()
			so, se, code := w.ferryEnv(cell.env, args...)
			after, pinAfter := w.state()
			if code != exitCodes[errs.Denied] || !strings.Contains(se, "ferry: error: denied: actor may not ") || !strings.Contains(se, cell.src) || !strings.Contains(se, cell.hint) {
				t.Errorf("%s under %s: exit %d, want denied (exit 3) naming actor, %s and %q\n%s%s", name, cell.via, code, cell.src, cell.hint, so, se)
			}
			if so != "" {
				t.Errorf("%s under %s: printed %q on a refusal", name, cell.via, so)
			}
			if !slices.Equal(before, after) || pin != pinAfter {
				t.Errorf("%s under %s: refused but changed the channel (%d → %d entries) or the pin", name, cell.via, len(before), len(after))
			}
		}
		// --as master on the command line overrides FERRY_AGENT.
		before, _ := w.state()
		so, se, code := w.ferryEnv([]string{"FERRY_AGENT=actor"}, append(append(a.args(w), "--channel", w.dir), "--as", fold.MasterWriter)...)
		if code != 0 {
			t.Errorf("%s under --as master with FERRY_AGENT=actor: exit %d\n%s%s", name, code, so, se)
			continue
		}
		if a.typ == "" {
			continue
		}
		v, err := w.ch.Load()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, h := range before {
			seen[h] = true
		}
		wrote := false
		for i := range v.Snapshot.Entries {
			e := &v.Snapshot.Entries[i]
			if !seen[e.Hash()] && e.Type == a.typ && e.Writer == fold.MasterWriter && v.State.Counts(e.Hash()) {
				wrote = true
			}
		}
		if !wrote {
			t.Errorf("%s under --as master with FERRY_AGENT=actor: exit 0 but no counting master %s was written\n%s", name, a.typ, so)
		}
	}

	// Not an ownerCommand: `ferry key export` exports the key --as names, the master's
	// only without --as or with --as master. Under an agent's name it never writes the
	// master key.
	pass := []string{EnvPassphrase + "=matrix pass"}
	for _, c := range []struct {
		via   string
		env   []string
		extra []string
		want  string
	}{
		{"--as actor", pass, []string{"--as", "actor"}, "actor"},
		{"FERRY_AGENT=actor", append(slices.Clone(pass), "FERRY_AGENT=actor"), nil, "actor"},
		{"--as master with FERRY_AGENT=actor", append(slices.Clone(pass), "FERRY_AGENT=actor"), []string{"--as", fold.MasterWriter}, fold.MasterWriter},
	} {
		so, se, code := w.ferryEnv(c.env, append([]string{"key", "export", "--channel", w.dir}, c.extra...)...)
		if code != 0 {
			t.Errorf("key export under %s: exit %d\n%s", c.via, code, se)
			continue
		}
		ik, err := fsbus.ReadExport([]byte(so), []byte("matrix pass"))
		if err != nil {
			t.Errorf("key export under %s: %v", c.via, err)
			continue
		}
		if ik.Name != c.want {
			t.Errorf("key export under %s exported the key of %s, want %s", c.via, ik.Name, c.want)
		}
	}
}

// joinWhat is a row's type and what, as one phrase.
func joinWhat(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + " (" + b + ")"
}

// TestMasterSessionRefusesAgentName: Globals.Master, the one way a command opens the
// owner's session, refuses under an agent's name wherever the name came from, so a
// command that signs as master without the ownerCommand mark still cannot do so under
// --as or FERRY_AGENT; without a name, or with master, it opens the owner's session.
func TestMasterSessionRefusesAgentName(t *testing.T) {
	t.Setenv(fsbus.EnvHome, filepath.Join(t.TempDir(), "home"))
	t.Setenv("FERRY_AGENT", "")
	dir := filepath.Join(t.TempDir(), "ch")
	var so, se strings.Builder
	if code := run([]string{"init", dir, "--project", "acme"}, &so, &se); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, se.String())
	}
	for _, from := range []string{"--as", "FERRY_AGENT"} {
		g := &Globals{Channel: dir, As: "actor", asFrom: from, stdout: &so, stderr: &se}
		s, err := g.Master()
		if !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "actor") || !strings.Contains(err.Error(), "--as master") {
			t.Errorf("Master() with As=actor (from %s): session %v, error %v; want denied naming actor and --as master", from, s != nil, err)
		}
	}
	for _, as := range []string{"", fold.MasterWriter} {
		g := &Globals{Channel: dir, As: as, stdout: &so, stderr: &se}
		if s, err := g.Master(); err != nil || s.Name != fold.MasterWriter {
			t.Errorf("Master() with As=%q: %v", as, err)
		}
	}
}
