package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver"
	"github.com/ferryhq/ferry/mcpserver/client"
)

// demoStep is one line of `ferry demo`'s report.
type demoStep struct {
	N    int    `json:"n"`
	Name string `json:"step"`
	OK   bool   `json:"ok"`
	Fact string `json:"fact"`
	Ms   int64  `json:"ms"` // wall time of the step's ferry process, for the curious
}

// demo runs the order loop in a sandbox: its own FERRY_HOME and channel under the OS
// temp dir, every step a separate ferry process (the running binary), so it never
// touches the user's real setup.
type demo struct {
	g       *Globals
	self    string
	home    string
	channel string
	steps   []demoStep
	failed  bool
}

// run executes one ferry process and returns its stdout, stderr and exit code.
func (d *demo) run(args ...string) (stdout, stderr string, code int, ms int64) {
	cmd := exec.Command(d.self, args...)
	cmd.Env = d.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	ms = time.Since(start).Milliseconds()
	code = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code, ms
}

// env is the environment of every ferry process of the demo: the sandbox's home and
// channel, none of the caller's ferry variables.
func (d *demo) env() []string {
	return append(filteredEnv(), fsbus.EnvHome+"="+d.home, "FERRY_CHANNEL="+d.channel)
}

// selfPath is the running ferry binary: argv[0] as the shell found it (which keeps a
// symlink's name, as test harnesses need), else os.Executable.
func selfPath() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the ferry binary: %w", err)
	}
	return p, nil
}

// filteredEnv is the environment without ferry's own variables.
func filteredEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FERRY_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// record adds a step line and prints it unless --json.
func (d *demo) record(name string, ok bool, ms int64, fact string) {
	s := demoStep{N: len(d.steps) + 1, Name: name, OK: ok, Fact: fact, Ms: ms}
	d.steps = append(d.steps, s)
	if !ok {
		d.failed = true
	}
	if !d.g.JSON {
		mark := "✔"
		if !ok {
			mark = "✘"
		}
		d.g.printf("%s %2d %-22s %s\n", mark, s.N, name, fact)
	}
}

// expectOK runs a step that must succeed; it returns stdout.
func (d *demo) expectOK(name, fact string, args ...string) string {
	return d.expectOKf(name, func(string) string { return fact }, args...)
}

// expectOKf is expectOK with the step's fact computed from its stdout.
func (d *demo) expectOKf(name string, fact func(stdout string) string, args ...string) string {
	out, stderr, code, ms := d.run(args...)
	if code != 0 {
		d.record(name, false, ms, fmt.Sprintf("exit %d: %s", code, firstLine(stderr)))
		return ""
	}
	d.record(name, true, ms, fact(out))
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func runDemo(g *Globals, keep bool) error {
	self, err := selfPath()
	if err != nil {
		return err
	}
	box, err := os.MkdirTemp("", "ferry-demo-")
	if err != nil {
		return fmt.Errorf("making the sandbox: %w", err)
	}
	start := time.Now()
	d := &demo{g: g, self: self, home: filepath.Join(box, "home"), channel: filepath.Join(box, "sync", "demo")}
	if !g.JSON {
		g.printf("ferry demo: sandbox %s (its own FERRY_HOME; your setup is untouched)\n", box)
	}
	d.script()
	if g.JSON {
		out := map[string]any{"ok": !d.failed, "sandbox": box, "kept": keep, "steps": d.steps}
		if err := g.printJSON(out); err != nil {
			return err
		}
	}
	if keep {
		if !g.JSON {
			g.printf("sandbox kept: FERRY_HOME=%s ferry --channel %s status\n", d.home, d.channel)
		}
	} else if err := os.RemoveAll(box); err != nil {
		fmt.Fprintf(g.stderr, "ferry: warning: removing sandbox %s: %v\n", box, err)
	}
	if d.failed {
		return errs.Errorf(errs.Internal, "rerun with --keep and inspect the sandbox", "demo: a step failed")
	}
	if !g.JSON {
		g.printf("all %d steps passed in %.1f s: two agents ran the order loop through a plain folder, one of them over MCP\n",
			len(d.steps), time.Since(start).Seconds())
	}
	return nil
}

// script is the walkthrough: a channel and its owner, two seated agents, the primary
// role taken and briefed, a decision recorded, an order dispatched, claimed (a second
// claim refused), progressed, handed in, submitted, reviewed and accepted by the other
// agent, an ask raised and approved by the owner, messages both ways with read
// receipts, a second order cancelled by its author, the digest, the role released; then
// a second loop in which bob works through a `ferry mcp serve` child over JSON-RPC
// (mcpLoop); then a fresh process folds the first order and the ledger is verified;
// last, a stale file pointer is caught at claim (stalePointer).
func (d *demo) script() {
	const alice, bob = "alice", "bob"
	d.expectOK("init channel", "channel 'demo' and the owner's master key", "init", d.channel, "--project", "demo")
	d.expectOK("join alice", "alice announced with her own ed25519 key", "join", "--as", alice, "--app", "demo")
	d.expectOK("join bob", "bob announced with his own ed25519 key", "join", "--as", bob, "--app", "demo")
	d.expectOK("seat alice", "owner seats alice as orchestrator (master-signed grant)", "grant", alice, "--level", "orchestrator")
	d.expectOK("seat bob", "owner seats bob as member", "grant", bob, "--level", "member")
	if d.failed {
		return
	}
	d.expectOK("take primary", "alice takes the primary role (nobody held it)", "primary", "take", "--as", alice)
	d.expectOK("brief", "alice briefs: objective and constraints, shown in every catch-up", "primary", "brief", "--as", alice,
		"--objective", "Ship the login fix this week", "--constraint", "no schema changes", "--constraint", "keep CI green")
	d.expectOK("decision", "alice records: use the staging DB for e2e tests", "decision", "record", "Use the staging DB for e2e tests", "--as", alice)

	out := d.expectOKf("dispatch order", func(out string) string {
		return "alice dispatches \"Fix the flaky login test\" as " + jsonID(out)
	}, "order", "new", "Fix the flaky login test", "--as", alice, "--label", "tests", "--json",
		"--body", "The login test fails one run in ten. Find why and fix it.")
	id := jsonID(out)
	if id == "" {
		d.record("read order id", false, 0, "no order id in: "+firstLine(out))
		return
	}
	d.expectOK("bob claims", "bob holds "+id, "order", "claim", id, "--as", bob)
	_, stderr, code, ms := d.run("order", "claim", id, "--as", alice)
	d.record("second claim refused", code == exitCodes[errs.Conflict] && strings.Contains(stderr, bob), ms,
		"alice's claim refused: "+strings.TrimPrefix(firstLine(stderr), "ferry: error: "))
	d.expectOK("progress", "bob reports progress on his claim", "order", "progress", id, "found the race in session setup", "--as", bob)
	out = d.expectOKf("hand-in", func(out string) string {
		return "bob names his work: branch fix/login-race as " + jsonID(out)
	}, "handin", "add", "--ref", "fix/login-race@4f2c9e1", "--note", "one commit, tests included", "--as", bob, "--json")
	hid := jsonID(out)
	d.expectOK("submit", "bob submits hand-in "+hid+" (work stays in the repo)", "order", "submit", id, "--ref", hid, "--note", "wait for session before asserting", "--as", bob)
	_, stderr, code, ms = d.run("order", "review", id, "--accept", "--as", bob)
	d.record("self-review refused", code == exitCodes[errs.Denied], ms, "bob cannot review his own result: "+strings.TrimPrefix(firstLine(stderr), "ferry: error: "))
	d.expectOK("review accepted", "alice accepts: order "+id+" is accepted", "order", "review", id, "--accept", "--note", "verified locally", "--as", alice)

	out = d.expectOKf("ask the owner", func(out string) string {
		return "bob asks before a risky step: " + jsonID(out) + " pending"
	}, "ask", "raise", "Drop the old session table?", "--recommendation", "Yes: nothing reads it since v2",
		"--reasoning", "grep finds no reader; a backup exists", "--as", bob, "--json")
	aid := jsonID(out)
	_, stderr, code, ms = d.run("ask", "approve", aid, "--as", bob)
	d.record("agent cannot answer", code == exitCodes[errs.Denied], ms, "bob cannot approve his own ask: "+strings.TrimPrefix(firstLine(stderr), "ferry: error: "))
	d.expectOK("owner approves", "the owner approves with a master-signed answer", "ask", "approve", aid, "--note", "go ahead, keep the backup")
	out = d.expectOKf("ask answered", func(out string) string {
		return "bob sees " + aid + ": " + jsonField(out, "state") + ", note \"" + jsonField(out, "note") + "\""
	}, "ask", "status", aid, "--as", bob, "--json")
	if st := jsonField(out, "state"); st != string(fold.AskApproved) && len(d.steps) > 0 {
		d.steps[len(d.steps)-1].OK, d.failed = false, true
	}

	out = d.expectOKf("message alice→bob", func(out string) string {
		return "alice writes to bob: " + jsonID(out)
	}, "talk", "send", "--to", bob, "Thanks! Next: the signup test, same pattern.", "--as", alice, "--json")
	mid := jsonID(out)
	out = d.expectOKf("bob reads", func(out string) string {
		return "bob reads only what is new to him (" + mid + ") and acknowledges it"
	}, "talk", "read", "--as", bob, "--json")
	if !strings.Contains(out, mid) && len(d.steps) > 0 {
		d.steps[len(d.steps)-1].OK, d.failed = false, true
	}
	d.expectOK("message bob→alice", "bob replies", "talk", "send", "--to", alice, "On it after lunch.", "--as", bob)
	d.expectOK("alice reads", "alice reads the reply", "talk", "read", "--as", alice)
	out = d.expectOKf("read receipt", func(out string) string {
		return "alice sees who read " + mid + ": " + strings.Join(readBy(out, mid), ", ")
	}, "talk", "sent", "--as", alice, "--json")
	if !slices.Contains(readBy(out, mid), bob) && len(d.steps) > 0 {
		d.steps[len(d.steps)-1].OK, d.failed = false, true
	}

	out = d.expectOKf("second order", func(out string) string {
		return "alice dispatches \"Rewrite the docs\" as " + jsonID(out)
	}, "order", "new", "Rewrite the docs", "--as", alice, "--json")
	id2 := jsonID(out)
	d.expectOK("cancel", "alice cancels "+id2+" (only the author may)", "order", "cancel", id2, "--note", "not needed", "--as", alice)
	out = d.expectOKf("catch-up", func(out string) string {
		var c fsbus.Catchup
		if json.Unmarshal([]byte(out), &c) != nil || c.Brief == nil {
			return "no digest"
		}
		return fmt.Sprintf("bob's digest: primary %s, brief %q, %s, %s, %d messages waiting",
			c.Primary.Holder, c.Brief.Objective, plural(len(c.Decisions), "decision", "decisions"), plural(len(c.Asks), "ask", "asks"), c.Messages.Waiting)
	}, "catchup", "--as", bob, "--json")
	var cu fsbus.Catchup
	if (json.Unmarshal([]byte(out), &cu) != nil || cu.Primary.Holder != alice || cu.Brief == nil || len(cu.Decisions) != 1) && len(d.steps) > 0 {
		d.steps[len(d.steps)-1].OK, d.failed = false, true
	}
	d.expectOK("release primary", "alice hands the role back: anyone may take it now", "primary", "release", "--as", alice)
	d.mcpLoop()

	out, stderr, code, ms = d.run("order", "show", id, "--json")
	var o fold.Order
	ok := code == 0 && json.Unmarshal([]byte(out), &o) == nil && o.State == fold.StateAccepted && o.Holder == bob
	d.record("fold from files", ok, ms, fmt.Sprintf("a fresh process folds %s: %s, holder %s, %d history entries", id, o.State, o.Holder, len(o.History)))
	if !ok && stderr != "" {
		d.steps[len(d.steps)-1].Fact += ": " + firstLine(stderr)
	}
	d.expectOKf("ledger verify", func(out string) string {
		return strings.TrimPrefix(firstLine(out), "✔ ")
	}, "ledger", "verify")
	d.stalePointer()
}

// stalePointer is the demo's last step: alice dispatches an order pointing
// at a file of a sandbox workspace, the file changes, and bob's claim is refused on
// his machine with stale — nothing written, the order still open.
func (d *demo) stalePointer() {
	const name = "stale pointer caught"
	ws := filepath.Join(filepath.Dir(d.home), "work")
	file := filepath.Join(ws, "src", "login_test.go")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		d.record(name, false, 0, err.Error())
		return
	}
	if err := os.WriteFile(file, []byte("package login\n\n// TestLogin waits for the session.\n"), 0o644); err != nil {
		d.record(name, false, 0, err.Error())
		return
	}
	out, stderr, code, ms := d.run("order", "new", "Review the login test", "--as", "alice", "--json",
		"--pointer", "src/login_test.go", "--workspace", ws, "--task", "code_review", "--read-only")
	id := jsonID(out)
	if code != 0 || id == "" {
		d.record(name, false, ms, fmt.Sprintf("dispatch with a pointer: exit %d: %s", code, firstLine(stderr)))
		return
	}
	if err := os.WriteFile(file, []byte("package login\n\n// TestLogin waits for the session (edited after dispatch).\n"), 0o644); err != nil {
		d.record(name, false, 0, "editing the pointed file: "+err.Error())
		return
	}
	_, stderr, code, ms2 := d.run("order", "claim", id, "--as", "bob", "--workspace", ws)
	state, _, _, _ := d.run("order", "show", id, "--json")
	ok := code == exitCodes[errs.Stale] && strings.Contains(stderr, "src/login_test.go") && jsonField(state, "state") == string(fold.StateOpen)
	d.record(name, ok, ms+ms2, fmt.Sprintf("alice points %s at src/login_test.go (size + sha256); it changes; bob's claim refused locally: stale (exit %d), order still %s",
		id, code, orDash(jsonField(state, "state"))))
}

// jsonID extracts "id" from a --json result.
func jsonID(out string) string { return jsonField(out, "id") }

// jsonField extracts a top-level string field from a --json result ("" if absent).
func jsonField(out, name string) string {
	var m map[string]any
	if json.Unmarshal([]byte(out), &m) != nil {
		return ""
	}
	v, _ := m[name].(string)
	return v
}

// readBy returns who read message id, from `talk sent --json`.
func readBy(out, id string) []string {
	var r struct {
		Messages []struct {
			ID     string   `json:"id"`
			ReadBy []string `json:"read_by"`
		} `json:"messages"`
	}
	if json.Unmarshal([]byte(out), &r) != nil {
		return nil
	}
	for _, m := range r.Messages {
		if m.ID == id {
			return m.ReadBy
		}
	}
	return nil
}

// Timeouts of the demo's MCP child: generous, so a loaded machine still passes; on
// expiry the child is killed and the step fails.
const (
	demoMCPStart = 15 * time.Second
	demoMCPCall  = 15 * time.Second
)

// mcpLoop is the demo's second loop: alice stays on the CLI while bob works through a
// `ferry mcp serve --as bob` child — the same binary, the same sandbox — driven over
// real JSON-RPC on its stdin/stdout, as an AI app drives it: initialize, ferry_join,
// ferry_catchup, claim, submit with a reference, ferry_talk read. Alice accepts with
// the CLI, and the child must exit when its stdin closes.
func (d *demo) mcpLoop() {
	const alice, bob = "alice", "bob"
	out := d.expectOKf("dispatch for MCP", func(out string) string {
		return "alice dispatches \"Fix the flaky signup test\" as " + jsonID(out)
	}, "order", "new", "Fix the flaky signup test", "--as", alice, "--json",
		"--body", "Same pattern as the login test: wait for the session before asserting.")
	id := jsonID(out)
	out = d.expectOKf("message for MCP", func(out string) string {
		return "alice writes to bob: " + jsonID(out)
	}, "talk", "send", "--to", bob, "The signup test is yours if you want it: "+id, "--as", alice, "--json")
	mid := jsonID(out)
	if id == "" || mid == "" {
		d.record("read ids", false, 0, "no order or message id to drive the MCP loop with")
		return
	}

	start := time.Now()
	cmd := exec.Command(d.self, "mcp", "serve", "--as", bob, "--project", "demo")
	cmd.Env = d.env()
	c, err := client.Start(context.Background(), cmd, client.Options{
		StartTimeout: demoMCPStart, CallTimeout: demoMCPCall, Name: "ferry-demo", Version: currentVersion(),
	})
	if err != nil {
		d.record("mcp initialize", false, time.Since(start).Milliseconds(), err.Error())
		return
	}
	defer c.Kill() // a no-op once Close below has reaped it
	d.record("mcp initialize", c.Init.ServerInfo.Name == "ferry", time.Since(start).Milliseconds(),
		fmt.Sprintf("`ferry mcp serve --as bob` spawned (pid %d), answers initialize: protocol %s", c.Pid(), c.Init.ProtocolVersion))

	var join mcpserver.JoinOut
	if ms, err := d.tool(c, "ferry_join", nil, &join); err != nil {
		d.record("mcp ferry_join", false, ms, err.Error())
	} else {
		d.record("mcp ferry_join", join.Granted && join.Agent == bob && join.Next == "ferry_catchup", ms,
			fmt.Sprintf("bob joins over JSON-RPC: level %s, next %s", join.Level, join.Next))
	}

	var cu fsbus.Catchup
	if ms, err := d.tool(c, "ferry_catchup", nil, &cu); err != nil {
		d.record("mcp ferry_catchup", false, ms, err.Error())
	} else {
		listed := slices.ContainsFunc(cu.Open, func(r fsbus.DigestRow) bool { return r.ID == id })
		d.record("mcp ferry_catchup", listed && cu.Messages.Waiting >= 1, ms,
			fmt.Sprintf("bob's digest over MCP: %s open (%s among them), %s waiting",
				plural(len(cu.Open), "order", "orders"), id, plural(cu.Messages.Waiting, "message", "messages")))
	}

	var ord mcpserver.OrdersOut
	if ms, err := d.tool(c, "ferry_orders", map[string]any{"action": "claim", "id": id}, &ord); err != nil {
		d.record("mcp claim", false, ms, err.Error())
	} else {
		d.record("mcp claim", ord.Order != nil && ord.Order.Holder == bob && ord.Order.State == fold.StateClaimed, ms,
			fmt.Sprintf("bob claims %s with ferry_orders: %s, holder %s", id, orderState(ord), orderHolder(ord)))
	}

	const ref = "fix/signup-race@9b1d2a7"
	ord = mcpserver.OrdersOut{}
	if ms, err := d.tool(c, "ferry_orders", map[string]any{"action": "submit", "id": id, "ref": ref, "note": "same fix as login"}, &ord); err != nil {
		d.record("mcp submit", false, ms, err.Error())
	} else {
		d.record("mcp submit", ord.Order != nil && ord.Order.State == fold.StateSubmitted && ord.Order.Result != nil, ms,
			fmt.Sprintf("bob submits a reference, %s: %s", ref, orderState(ord)))
	}

	var talk mcpserver.TalkOut
	if ms, err := d.tool(c, "ferry_talk", map[string]any{"action": "read"}, &talk); err != nil {
		d.record("mcp ferry_talk read", false, ms, err.Error())
	} else {
		got := slices.ContainsFunc(talk.Messages, func(m mcpserver.TalkLine) bool { return m.ID == mid && m.From == alice })
		d.record("mcp ferry_talk read", got, ms, fmt.Sprintf("bob reads %s from alice over MCP and acknowledges it", mid))
	}

	d.expectOK("accept MCP result", "alice (CLI) accepts "+id+", submitted over MCP", "order", "review", id, "--accept", "--note", "thanks", "--as", alice)

	start = time.Now()
	err = c.Close()
	fact := "stdin closed (EOF): the server exited 0"
	if err != nil {
		fact = err.Error()
	}
	d.record("mcp server exits", err == nil, time.Since(start).Milliseconds(), fact)
}

// tool runs one tools/call on c and decodes its structuredContent into v; a tool
// failure (isError) is an error carrying its text.
func (d *demo) tool(c *client.Conn, name string, args, v any) (int64, error) {
	start := time.Now()
	r, err := c.CallTool(context.Background(), name, args)
	ms := time.Since(start).Milliseconds()
	if err != nil {
		return ms, err
	}
	if r.IsError {
		return ms, fmt.Errorf("%s: %s", name, r.Text())
	}
	if err := json.Unmarshal(r.StructuredContent, v); err != nil {
		return ms, fmt.Errorf("%s: decoding structuredContent: %w", name, err)
	}
	return ms, nil
}

func orderState(o mcpserver.OrdersOut) string {
	if o.Order == nil {
		return "no order"
	}
	return string(o.Order.State)
}

func orderHolder(o mcpserver.OrdersOut) string {
	if o.Order == nil {
		return "none"
	}
	return o.Order.Holder
}
