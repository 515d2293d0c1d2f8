package main

// Parity of the CLI and MCP (docs/design.md §3: "the CLI and the MCP tools both call
// [one fsbus function], so permission checks, signing and entries are identical").
// Two channels set up alike on one machine; the same operations, by the same agents,
// go through `ferry …` processes in one and through `ferry mcp serve` processes (driven
// by the official go-sdk client) in the other. After each operation the test reads the
// ledger entries each path wrote and requires the same entry types and data — ids,
// hashes and clocks aside — and the same object files, signed by the same writer on
// the same device with the key the roster binds to it.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

func TestMCPParity(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	m := newMCPMachine(t, bin)
	cli := newParityLane(t, m, "viacli")
	mcp := newParityLane(t, m, "viamcp")
	kind := mcpClientKinds[0]
	alice := startAgent(t, m, kind, "alice", mcp.project)
	bob := startAgent(t, m, kind, "bob", mcp.project)

	// Ids of the things the steps made, per lane, as the ledger named them.
	var cliOrder, mcpOrder, cliOffered, mcpOffered string
	steps := []struct {
		name     string
		writer   string
		types    []string // the entry types the step writes, in ledger order
		sameArgs bool     // data.args hashes only arguments that hold no id: equal across paths
		viaCLI   func()
		viaMCP   func()
		after    func(cliEntries, mcpEntries []ledger.Entry)
	}{
		{
			name: "order new", writer: "alice", types: []string{"order.create"}, sameArgs: true,
			viaCLI: func() {
				cli.ferry("order", "new", "Parity order", "--body", "Same body either way.", "--key", "k-new", "--as", "alice")
			},
			viaMCP: func() {
				alice.ok("ferry_orders", map[string]any{"action": "new", "title": "Parity order", "body": "Same body either way.", "key": "k-new"}, nil)
			},
			after: func(c, p []ledger.Entry) { cliOrder, mcpOrder = c[0].Ref, p[0].Ref },
		},
		{
			name: "order new offered", writer: "alice", types: []string{"order.create"}, sameArgs: true,
			viaCLI: func() { cli.ferry("order", "new", "Offered order", "--to", "bob", "--as", "alice") },
			viaMCP: func() {
				alice.ok("ferry_orders", map[string]any{"action": "new", "title": "Offered order", "to": "bob"}, nil)
			},
			after: func(c, p []ledger.Entry) { cliOffered, mcpOffered = c[0].Ref, p[0].Ref },
		},
		{
			name: "order claim", writer: "bob", types: []string{"order.claim"},
			viaCLI: func() { cli.ferry("order", "claim", cliOrder, "--key", "k-claim", "--as", "bob") },
			viaMCP: func() {
				bob.ok("ferry_orders", map[string]any{"action": "claim", "id": mcpOrder, "key": "k-claim"}, nil)
			},
		},
		{
			name: "order claim offered", writer: "bob", types: []string{"order.claim"},
			viaCLI: func() { cli.ferry("order", "claim", cliOffered, "--as", "bob") },
			viaMCP: func() { bob.ok("ferry_orders", map[string]any{"action": "claim", "id": mcpOffered}, nil) },
		},
		{
			name: "order progress", writer: "bob", types: []string{"order.progress"},
			viaCLI: func() { cli.ferry("order", "progress", cliOrder, "--note", "half way there", "--as", "bob") },
			viaMCP: func() {
				bob.ok("ferry_orders", map[string]any{"action": "progress", "id": mcpOrder, "note": "half way there"}, nil)
			},
		},
		{
			name: "order submit", writer: "bob", types: []string{"order.submit"},
			viaCLI: func() {
				cli.ferry("order", "submit", cliOrder, "--ref", "commit 1234abc", "--note", "done", "--as", "bob")
			},
			viaMCP: func() {
				bob.ok("ferry_orders", map[string]any{"action": "submit", "id": mcpOrder, "ref": "commit 1234abc", "note": "done"}, nil)
			},
		},
		{
			name: "order review changes", writer: "alice", types: []string{"order.review"},
			viaCLI: func() { cli.ferry("order", "review", cliOrder, "--changes", "--note", "add a test", "--as", "alice") },
			viaMCP: func() {
				alice.ok("ferry_orders", map[string]any{"action": "review", "id": mcpOrder, "verdict": "changes", "note": "add a test"}, nil)
			},
		},
		{
			name: "order resubmit", writer: "bob", types: []string{"order.submit"},
			viaCLI: func() { cli.ferry("order", "submit", cliOrder, "--ref", "commit 5678def", "--as", "bob") },
			viaMCP: func() {
				bob.ok("ferry_orders", map[string]any{"action": "submit", "id": mcpOrder, "ref": "commit 5678def"}, nil)
			},
		},
		{
			name: "order review accept", writer: "alice", types: []string{"order.review"},
			viaCLI: func() { cli.ferry("order", "review", cliOrder, "--accept", "--note", "good", "--as", "alice") },
			viaMCP: func() {
				alice.ok("ferry_orders", map[string]any{"action": "review", "id": mcpOrder, "verdict": "accept", "note": "good"}, nil)
			},
		},
		{
			name: "talk send", writer: "alice", types: []string{"msg.post"}, sameArgs: true,
			viaCLI: func() { cli.ferry("talk", "send", "--to", "bob", "hello bob", "--key", "k-talk", "--as", "alice") },
			viaMCP: func() {
				alice.ok("ferry_talk", map[string]any{"action": "post", "to": "bob", "text": "hello bob", "key": "k-talk"}, nil)
			},
		},
		{
			name: "talk read", writer: "bob", types: []string{"msg.ack"},
			viaCLI: func() { cli.ferry("talk", "read", "--as", "bob") },
			viaMCP: func() { bob.ok("ferry_talk", map[string]any{"action": "read"}, nil) },
		},
		{
			name: "ask raise", writer: "bob", types: []string{"ask.raise"}, sameArgs: true,
			viaCLI: func() {
				cli.ferry("ask", "raise", "Delete the old bucket?", "--recommendation", "yes, it is empty",
					"--reasoning", "nothing has read it for a year", "--key", "k-ask", "--as", "bob")
			},
			viaMCP: func() {
				bob.ok("ferry_ask_human", map[string]any{"action": "raise", "title": "Delete the old bucket?",
					"recommendation": "yes, it is empty", "reasoning": "nothing has read it for a year", "key": "k-ask"}, nil)
			},
		},
		{
			name: "primary standby", writer: "bob", types: []string{"presence.standby"}, sameArgs: true,
			viaCLI: func() { cli.ferry("primary", "standby", "--key", "k-standby", "--as", "bob") },
			viaMCP: func() { bob.ok("ferry_primary", map[string]any{"action": "standby", "key": "k-standby"}, nil) },
		},
	}

	for _, st := range steps {
		st.viaCLI()
		st.viaMCP()
		ce, me := cli.newEntries(), mcp.newEntries()
		for lane, es := range map[string][]ledger.Entry{"CLI": ce, "MCP": me} {
			var types []string
			for _, e := range es {
				types = append(types, e.Type)
			}
			if !reflect.DeepEqual(types, st.types) {
				t.Fatalf("%s via %s wrote %v, want %v", st.name, lane, types, st.types)
			}
		}
		for i := range ce {
			c, p := cli.normal(&ce[i]), mcp.normal(&me[i])
			if c.Writer != st.writer || p.Writer != st.writer {
				t.Errorf("%s: written by %s (CLI) and %s (MCP), want %s", st.name, c.Writer, p.Writer, st.writer)
			}
			if !reflect.DeepEqual(c, p) {
				cj, _ := json.MarshalIndent(c, "", "  ")
				pj, _ := json.MarshalIndent(p, "", "  ")
				t.Errorf("%s: entry %d differs between the paths\nCLI: %s\nMCP: %s", st.name, i, cj, pj)
			}
			cli.checkSigned(&ce[i])
			mcp.checkSigned(&me[i])
			if st.sameArgs {
				ca, pa := dataField(&ce[i], "args"), dataField(&me[i], "args")
				if ca != pa {
					t.Errorf("%s: data.args %q (CLI) ≠ %q (MCP): a retry through the other path would not be a replay", st.name, ca, pa)
				}
			}
		}
		if st.after != nil {
			st.after(ce, me)
		}
	}
	// Both ledgers verify as a whole.
	cli.m.must("ledger", "verify", "--project", cli.project)
	cli.m.must("ledger", "verify", "--project", mcp.project)
}

// parityLane is one channel of the parity test and what the test has seen of its ledger.
type parityLane struct {
	t       *testing.T
	m       *mcpMachine
	project string
	root    string
	seen    map[string]bool   // entry hashes already returned by newEntries
	ids     map[string]string // object id → its placeholder, numbered in order of appearance
}

// newParityLane creates project's channel on m, alice and bob members, and marks its
// set-up entries as seen.
func newParityLane(t *testing.T, m *mcpMachine, project string) *parityLane {
	l := &parityLane{t: t, m: m, project: project, seen: map[string]bool{}, ids: map[string]string{}}
	l.root = m.channel(project, "alice", "bob")
	l.newEntries()
	return l
}

// ferry runs one CLI command against the lane's project; it must succeed.
func (l *parityLane) ferry(args ...string) {
	l.t.Helper()
	l.m.must(append(args, "--project", l.project)...)
}

// newEntries reads every segment of the channel and returns the entries not returned
// before, in merged ledger order.
func (l *parityLane) newEntries() []ledger.Entry {
	l.t.Helper()
	lg, err := ledger.Open(ledger.Options{Root: l.root})
	if err != nil {
		l.t.Fatal(err)
	}
	snap, err := lg.Read()
	if err != nil {
		l.t.Fatal(err)
	}
	if len(snap.Problems) != 0 || len(snap.Forks) != 0 {
		l.t.Fatalf("%s: ledger problems %+v forks %+v", l.project, snap.Problems, snap.Forks)
	}
	var out []ledger.Entry
	for _, e := range snap.Entries {
		if h := e.Hash(); !l.seen[h] {
			l.seen[h] = true
			out = append(out, e)
		}
	}
	return out
}

// normalEntry is an entry with what legitimately differs between two paths replaced:
// object ids by placeholders numbered in order of appearance, hashes by "<hash>",
// clocks by "<time>"; the object the entry creates is included, without its signature.
type normalEntry struct {
	Writer string `json:"writer"`
	Device string `json:"device"`
	Type   string `json:"type"`
	Ref    any    `json:"ref"`
	Data   any    `json:"data"`
	Idem   string `json:"idem"`
	Object any    `json:"object,omitempty"`
}

var (
	parityHLC  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z(/\d{4})?$`)
	parityDirs = []string{"orders", "messages", "asks", "results", "handins"}
)

// normal returns e normalised for comparison (see normalEntry).
func (l *parityLane) normal(e *ledger.Entry) normalEntry {
	l.t.Helper()
	n := normalEntry{Writer: e.Writer, Device: e.Device, Type: e.Type, Ref: l.norm(e.Ref), Idem: e.Idem}
	var data map[string]any
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, &data); err != nil {
			l.t.Fatalf("%s: data of %s: %v", l.project, e.Type, err)
		}
	}
	if h, ok := data["object"].(string); ok {
		id := e.Ref
		if r, ok := data["result"].(string); ok {
			id = r // a submit's object is its result
		}
		n.Object = l.object(id, h)
	}
	n.Data = l.norm(data)
	return n
}

// object reads the object file of id, checks that its hash is the one the entry names,
// and returns it normalised without its signature.
func (l *parityLane) object(id, hash string) any {
	l.t.Helper()
	for _, d := range parityDirs {
		b, err := os.ReadFile(filepath.Join(l.root, d, id+".json"))
		if err != nil {
			continue
		}
		canon, err := ledger.CanonicalJSON(b)
		if err != nil {
			l.t.Fatalf("%s: object %s: %v", l.project, id, err)
		}
		if got := ledger.HashBytes(canon); got != hash {
			l.t.Errorf("%s: object %s hashes to %s, the entry names %s", l.project, id, got, hash)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			l.t.Fatalf("%s: object %s: %v", l.project, id, err)
		}
		if s, _ := obj["sig"].(string); !strings.HasPrefix(s, "ed25519:") {
			l.t.Errorf("%s: object %s is not signed: %s", l.project, id, b)
		}
		delete(obj, "sig")
		return l.norm(obj)
	}
	l.t.Fatalf("%s: no object file for %s in %v", l.project, id, parityDirs)
	return nil
}

// norm replaces ids, hashes and clocks in v (decoded JSON, or a string).
func (l *parityLane) norm(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = l.norm(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = l.norm(x)
		}
		return out
	case string:
		switch {
		case strings.HasPrefix(v, "sha256:"):
			return "<hash>"
		case parityHLC.MatchString(v):
			return "<time>"
		case fold.ValidID(v):
			p, ok := l.ids[v]
			if !ok {
				p = fmt.Sprintf("<%s%d>", v[:2], len(l.ids)+1)
				l.ids[v] = p
			}
			return p
		}
	}
	return v
}

// checkSigned verifies e's signature with the key the roster binds to its writer (the
// latest grant.set of that agent in this channel).
func (l *parityLane) checkSigned(e *ledger.Entry) {
	l.t.Helper()
	lg, err := ledger.Open(ledger.Options{Root: l.root})
	if err != nil {
		l.t.Fatal(err)
	}
	snap, err := lg.Read()
	if err != nil {
		l.t.Fatal(err)
	}
	key := ""
	for i := range snap.Entries {
		g := &snap.Entries[i]
		if g.Type == "grant.set" && g.Ref == e.Writer {
			key = dataField(g, "key")
		}
	}
	pub, err := ledger.ParseKey(key)
	if err != nil {
		l.t.Fatalf("%s: no seated key for %s: %v", l.project, e.Writer, err)
	}
	if err := e.VerifySig(pub, l.project); err != nil {
		l.t.Errorf("%s: %s by %s does not verify with %s's seated key: %v", l.project, e.Type, e.Writer, e.Writer, err)
	}
}

// dataField returns a string field of e's data ("" when absent).
func dataField(e *ledger.Entry, name string) string {
	var d map[string]any
	_ = json.Unmarshal(e.Data, &d)
	s, _ := d[name].(string)
	return s
}
