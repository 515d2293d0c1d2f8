package main

// End to end over MCP (docs/mcp.md): separate ferry processes (ferryExe), real `ferry
// mcp serve` processes, real files, and two real MCP client libraries — the official go-sdk
// (pinned to 2025-11-25, and on its default 2026-07-28) and mark3labs/mcp-go — each
// driving two agents of one channel through the whole loop,
// with the owner answering on the CLI, and through the resources (list across pages,
// templates, reads, a missing URI); the CLI sees each client's name as the agents' app.
// Then: one identity is one session (a second
// live server under the same name is refused, start-up takes no lease), presence
// heartbeats, and the stdio framing of a real process (BOM, CRLF, nothing but
// JSON-RPC on stdout, exit on EOF).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/errs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCP runs every MCP end-to-end journey against ferry processes (ferryExe).
func TestMCP(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	for _, kind := range mcpClientKinds {
		t.Run("journey/"+kind.name, func(t *testing.T) {
			t.Parallel()
			mcpJourney(t, bin, kind)
		})
	}
	t.Run("one-identity-one-session", func(t *testing.T) {
		t.Parallel()
		mcpOneIdentity(t, bin)
	})
	t.Run("probe-takes-no-lease", func(t *testing.T) {
		t.Parallel()
		mcpProbeTakesNoLease(t, bin)
	})
	t.Run("presence-heartbeat", func(t *testing.T) {
		t.Parallel()
		mcpPresenceHeartbeat(t, bin)
	})
	t.Run("stdio-framing", func(t *testing.T) {
		t.Parallel()
		mcpStdioFraming(t, bin)
	})
	t.Run("i-json", func(t *testing.T) {
		t.Parallel()
		mcpRefusesNonIJSON(t, bin)
	})
	t.Run("cli-read-under-live-session", func(t *testing.T) {
		t.Parallel()
		mcpCLIReadUnderLease(t, bin)
	})
}

// goSDKDefaultVersion is the protocol version go-sdk v1.8.0 speaks when the client pins
// none (its latestProtocolVersion): the stateless 2026-07-28 revision. The client
// probes with server/discover and then puts the version in every request's _meta;
// initialize never answers 2026-07-28, so a session that reports it went the modern
// way end to end.
const goSDKDefaultVersion = "2026-07-28"

// connectGoSDKDefault connects go-sdk with no ClientSessionOptions at all: the version
// is the library's own choice.
func connectGoSDKDefault(ctx context.Context, cmd *exec.Cmd, _ string) (mcpClient, error) {
	c := &goSDKClient{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = c.stderr
	client := sdk.NewClient(&sdk.Implementation{Name: e2eClientGoSDKDefault, Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: mcpDeadline}, nil)
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		return nil, fmt.Errorf("go-sdk (default version) connect: %w (stderr: %s)", err, c.stderr.String())
	}
	c.cs = cs
	return c, nil
}

// mcpJourney: alice and bob, each a `ferry mcp serve` process driven by kind's client,
// run the order loop; the owner answers bob's ask with the CLI. Then the resources:
// every page of the listing, the templates, reads, and a missing URI. Every core tool
// is called with success at least once per client kind.
func mcpJourney(t *testing.T, bin string, kind mcpClientKind) {
	m := newMCPMachine(t, bin)
	m.channel("acme", "alice", "bob")
	// alice announces an app from the CLI first (bob announced none).
	m.must("join", "--as", "alice", "--project", "acme", "--app", "cursor")
	if apps := mcpAgentApps(m, "acme"); apps["alice"] != "cursor" || apps["bob"] != "" {
		t.Fatalf("ferry agents before any MCP join: apps %v, want alice cursor and bob none", apps)
	}
	alice := startAgent(t, m, kind, "alice", "acme")
	bob := startAgent(t, m, kind, "bob", "acme")

	// join → catchup
	for _, a := range []*mcpAgent{alice, bob} {
		var j wireJoin
		a.ok("ferry_join", nil, &j)
		if j.Agent != a.name || j.Project != "acme" || j.Level != "member" || !j.Granted || j.Next != "ferry_catchup" {
			t.Errorf("%s: ferry_join = %+v, want a granted member told to catch up", a.name, j)
		}
	}
	// ferry_join announces the MCP client's own name (its clientInfo, made portable) as
	// the app only of an agent announced without one, and a separate CLI process sees
	// it: bob (no app) now shows the client's name, alice keeps the "cursor" her CLI join
	// gave (fsbus.JoinReporting). A CLI join without --app keeps what was announced (it
	// writes nothing).
	if apps := mcpAgentApps(m, "acme"); apps["alice"] != "cursor" || apps["bob"] != kind.app {
		t.Errorf("ferry agents after ferry_join over %s: apps %v, want cursor for alice and %q for bob", kind.name, apps, kind.app)
	}
	m.must("join", "--as", "alice", "--project", "acme")
	if apps := mcpAgentApps(m, "acme"); apps["alice"] != "cursor" {
		t.Errorf("ferry agents after a CLI join without --app: alice's app %q, want cursor kept", apps["alice"])
	}
	var cu wireCatchup
	bob.ok("ferry_catchup", nil, &cu)
	if cu.Agent != "bob" || cu.Level != "member" || cu.Next == "" {
		t.Errorf("bob: ferry_catchup = %+v, want bob's digest with a next cursor", cu)
	}

	// new (alice) → claim (bob) → a second claim refused
	var o wireOrders
	alice.ok("ferry_orders", map[string]any{"action": "new", "title": "Fix the flaky upload test", "body": "It fails one run in ten."}, &o)
	if o.Order == nil || o.Order.State != "open" || o.Order.Author != "alice" || o.Order.Body != "It fails one run in ten." {
		t.Fatalf("alice: new = %+v, want an open order by alice", o.Order)
	}
	id := o.Order.ID
	o = wireOrders{}
	bob.ok("ferry_orders", map[string]any{"action": "claim", "id": id}, &o)
	if o.Order == nil || o.Order.State != "claimed" || o.Order.Holder != "bob" {
		t.Fatalf("bob: claim = %+v, want claimed by bob", o.Order)
	}
	if msg := alice.fail("ferry_orders", map[string]any{"action": "claim", "id": id}); !strings.HasPrefix(msg, "conflict:") || !strings.Contains(msg, "bob") {
		t.Errorf("alice: second claim = %q, want a conflict naming bob", msg)
	}

	// progress → submit
	o = wireOrders{}
	bob.ok("ferry_orders", map[string]any{"action": "progress", "id": id, "note": "found the race in the retry loop"}, &o)
	if o.Order == nil || len(o.Order.Progress) == 0 || !strings.Contains(o.Order.Progress[len(o.Order.Progress)-1], "found the race") {
		t.Errorf("bob: progress = %+v, want the note listed", o.Order)
	}
	o = wireOrders{}
	bob.ok("ferry_orders", map[string]any{"action": "submit", "id": id, "ref": "commit 4f2a9c1", "note": "retry loop fixed"}, &o)
	if o.Order == nil || o.Order.State != "submitted" || o.Order.Result == nil || o.Order.Result.Reference != "commit 4f2a9c1" || o.Order.Result.By != "bob" {
		t.Fatalf("bob: submit = %+v, want submitted with the reference", o.Order)
	}

	// review: refused for the submitter, accepted by the other
	if msg := bob.fail("ferry_orders", map[string]any{"action": "review", "id": id, "verdict": "accept"}); !strings.HasPrefix(msg, "denied:") {
		t.Errorf("bob: review of his own result = %q, want denied", msg)
	}
	o = wireOrders{}
	bob.ok("ferry_orders", map[string]any{"action": "show", "id": id}, &o)
	if o.Order == nil || o.Order.State != "submitted" {
		t.Errorf("after the refused review the order is %+v, want still submitted", o.Order)
	}
	o = wireOrders{}
	alice.ok("ferry_orders", map[string]any{"action": "review", "id": id, "verdict": "accept", "note": "good catch"}, &o)
	if o.Order == nil || o.Order.State != "accepted" || len(o.Order.Reviews) != 1 || o.Order.Reviews[0].By != "alice" {
		t.Errorf("alice: review = %+v, want accepted by alice", o.Order)
	}

	// talk: post alice → bob, read by bob with since; the next cursor returns nothing new
	var posted wireTalk
	alice.ok("ferry_talk", map[string]any{"action": "post", "to": "bob", "text": "thanks, merged"}, &posted)
	if !strings.HasPrefix(posted.ID, "m-") {
		t.Fatalf("alice: post = %+v, want a message id", posted)
	}
	var read wireTalk
	bob.ok("ferry_talk", map[string]any{"action": "read", "since": cu.Next}, &read)
	if len(read.Messages) != 1 || read.Messages[0].ID != posted.ID || read.Messages[0].From != "alice" || read.Messages[0].Preview != "thanks, merged" || read.Next == "" {
		t.Fatalf("bob: read since the catchup cursor = %+v, want alice's message and a next cursor", read)
	}
	var again wireTalk
	bob.ok("ferry_talk", map[string]any{"action": "read", "since": read.Next}, &again)
	if len(again.Messages) != 0 {
		t.Errorf("bob: read with the returned next cursor = %+v, want nothing new", again.Messages)
	}
	var second wireTalk
	alice.ok("ferry_talk", map[string]any{"action": "post", "to": "bob", "text": "one more"}, &second)
	var newer wireTalk
	bob.ok("ferry_talk", map[string]any{"action": "read", "since": again.Next}, &newer)
	if len(newer.Messages) != 1 || newer.Messages[0].ID != second.ID {
		t.Errorf("bob: read since the last cursor = %+v, want only %s", newer.Messages, second.ID)
	}
	var sent wireTalk
	alice.ok("ferry_talk", map[string]any{"action": "read", "peek": true}, &sent)
	if len(sent.Messages) != 0 {
		t.Errorf("alice: read = %+v, want nothing (bob's reading must not leak to her)", sent.Messages)
	}

	// primary: status, standby
	var ps wirePrimary
	alice.ok("ferry_primary", map[string]any{"action": "status"}, &ps)
	if ps.Holder != "" || ps.Rule == "" {
		t.Errorf("alice: primary status = %+v, want no holder and a take rule", ps)
	}
	ps = wirePrimary{}
	bob.ok("ferry_primary", map[string]any{"action": "standby"}, &ps)
	if len(ps.Standbys) != 1 || ps.Standbys[0].Name != "bob" {
		t.Errorf("bob: standby = %+v, want bob listed on standby", ps)
	}
	ps = wirePrimary{}
	alice.ok("ferry_primary", map[string]any{"action": "status"}, &ps)
	if len(ps.Standbys) != 1 || ps.Standbys[0].Name != "bob" {
		t.Errorf("alice: primary status = %+v, want bob on standby", ps)
	}

	// ask: raise (bob), the owner approves with the CLI, status shows it approved
	var ask wireAsk
	bob.ok("ferry_ask_human", map[string]any{"action": "raise", "title": "Drop the flaky test's retries?",
		"recommendation": "yes: the race is fixed", "reasoning": "retries hid the race for months"}, &ask)
	if !strings.HasPrefix(ask.ID, "a-") || ask.State != "pending" {
		t.Fatalf("bob: raise = %+v, want a pending ask", ask)
	}
	m.must("ask", "approve", ask.ID, "--project", "acme", "--note", "go ahead")
	var st wireAsk
	bob.ok("ferry_ask_human", map[string]any{"action": "status", "id": ask.ID}, &st)
	if st.ID != ask.ID || st.State != "approved" {
		t.Errorf("bob: ask status = %+v, want approved", st)
	}
	st = wireAsk{}
	bob.ok("ferry_ask_human", map[string]any{"action": "status"}, &st)
	if len(st.Asks) != 1 || st.Asks[0].ID != ask.ID || st.Asks[0].State != "approved" {
		t.Errorf("bob: his asks = %+v, want the one approved", st.Asks)
	}
	// An agent can ask, never answer.
	if msg := bob.fail("ferry_ask_human", map[string]any{"action": "approve", "id": ask.ID}); !strings.HasPrefix(msg, "invalid:") {
		t.Errorf("bob: approve = %q, want invalid", msg)
	}

	// resources. Fourteen more messages (to the owner: bob's inbox stays as it is) take
	// the listing past one page of 20, so the client must follow nextCursor.
	for i := range 14 {
		alice.ok("ferry_talk", map[string]any{"action": "post", "to": "master", "text": fmt.Sprintf("status %d", i)}, nil)
	}
	mcpJourneyResources(t, kind, bob, o.Order.Title, o.Order.Body, "ferry://acme/order/"+id,
		"ferry://acme/ask/"+ask.ID, "ferry://acme/message/"+posted.ID, "ferry://acme/message/"+second.ID)

	// Every core tool was called with success over this client kind.
	for _, tool := range mcpCoreTools {
		if !alice.succeeded[tool] && !bob.succeeded[tool] {
			t.Errorf("%s: the journey never called %s with success", kind.name, tool)
		}
	}

	// The CLI, a separate process, sees what the MCP processes wrote; the ledger verifies.
	if out := m.must("order", "show", id, "--project", "acme", "--json"); !strings.Contains(out, `"accepted"`) {
		t.Errorf("ferry order show after the MCP loop:\n%s", out)
	}
	m.must("ledger", "verify", "--project", "acme")

	// EOF: each server exits by itself, status 0.
	for _, a := range []*mcpAgent{alice, bob} {
		_ = a.c.Close()
		if !a.c.Exited() {
			t.Errorf("%s (%s): the server did not exit cleanly when its stdin closed\nstderr:\n%s", a.name, kind.name, a.c.Stderr())
		}
	}
}

// mcpAgentApps runs `ferry agents --json` on m, a process of its own, and returns each
// agent's announced app.
func mcpAgentApps(m *mcpMachine, project string) map[string]string {
	m.t.Helper()
	out := m.must("agents", "--project", project, "--json")
	var rows []struct {
		Name string `json:"name"`
		App  string `json:"app"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		m.t.Fatalf("ferry agents --json: %v\n%s", err, out)
	}
	apps := map[string]string{}
	for _, r := range rows {
		apps[r.Name] = r.App
	}
	return apps
}

// mcpJourneyResources checks a's resources as kind's client sees them, at the end of
// the journey: the listing (every page) holds the capabilities and commands documents
// first, then every object of the journey (the want URIs among them), as summaries
// that never carry the order's title; the five object templates; reads of the order
// (its title and body, the digest and size its listing entry gave), of capabilities
// and of commands; and a URI nothing has, which the client reports as an error:
// -32002 in a legacy era, -32602 in 2026-07-28.
func mcpJourneyResources(t *testing.T, kind mcpClientKind, a *mcpAgent, title, body, orderURI string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	const capsURI, cmdsURI = "ferry://acme/capabilities", "ferry://acme/commands"

	listed, pages, err := a.c.ListResources(ctx)
	if err != nil {
		t.Fatalf("%s: resources/list (page %d): %v\nserver stderr:\n%s", kind.name, pages, err, a.c.Stderr())
	}
	byURI := map[string]listedResource{}
	var uris []string
	for _, r := range listed {
		if _, dup := byURI[r.URI]; dup {
			t.Errorf("%s: resources/list lists %s twice", kind.name, r.URI)
		}
		byURI[r.URI] = r
		uris = append(uris, r.URI)
		if r.MimeType != "application/json" || r.Size <= 0 || !strings.Contains(r.Description, "digest sha256:") {
			t.Errorf("%s: listed %+v, want application/json with a size and a digest", kind.name, r)
		}
		if strings.Contains(r.Name+r.Description, title) {
			t.Errorf("%s: listed %+v carries the order's title: a listing is summaries only", kind.name, r)
		}
	}
	// capabilities, commands, the order, its result, the ask, 16 messages.
	if pages < 2 || len(listed) != 21 || uris[0] != capsURI || uris[1] != cmdsURI {
		t.Errorf("%s: resources/list took %d pages for %d resources %v, want 21 over at least 2 pages, capabilities and commands first",
			kind.name, pages, len(listed), uris)
	}
	for _, u := range append([]string{capsURI, cmdsURI, orderURI}, want...) {
		if _, ok := byURI[u]; !ok {
			t.Errorf("%s: resources/list does not list %s; it lists %v", kind.name, u, uris)
		}
	}

	templates, err := a.c.ListResourceTemplates(ctx)
	if err != nil {
		t.Fatalf("%s: resources/templates/list: %v", kind.name, err)
	}
	var got []string
	for _, tp := range templates {
		got = append(got, tp.URITemplate)
		if tp.Name == "" || tp.MimeType != "application/json" {
			t.Errorf("%s: template %+v, want a name and application/json", kind.name, tp)
		}
	}
	var wantTemplates []string
	for _, k := range []string{"order", "message", "ask", "result", "decision"} {
		wantTemplates = append(wantTemplates, "ferry://{project}/"+k+"/{id}")
	}
	if !reflect.DeepEqual(got, wantTemplates) {
		t.Errorf("%s: resources/templates/list = %v, want %v", kind.name, got, wantTemplates)
	}

	// read returns the one text content of uri, checked against its listing entry.
	read := func(uri string) string {
		t.Helper()
		cs, err := a.c.ReadResource(ctx, uri)
		if err != nil {
			t.Fatalf("%s: resources/read %s: %v\nserver stderr:\n%s", kind.name, uri, err, a.c.Stderr())
		}
		if len(cs) != 1 || cs[0].URI != uri || cs[0].MimeType != "application/json" || !json.Valid([]byte(cs[0].Text)) {
			t.Fatalf("%s: resources/read %s = %+v, want one JSON text content with that uri", kind.name, uri, cs)
		}
		text := cs[0].Text
		if l := byURI[uri]; l.Size != int64(len(text)) || !strings.Contains(l.Description, digestOfText(text)) {
			t.Errorf("%s: %s read %d bytes with digest %s, but was listed as %+v", kind.name, uri, len(text), digestOfText(text), l)
		}
		return text
	}
	if text := read(orderURI); !strings.Contains(text, title) || !strings.Contains(text, body) {
		t.Errorf("%s: resources/read %s = %s, want the order's title %q and body", kind.name, orderURI, text, title)
	}
	var caps struct {
		Server   string   `json:"server"`
		Project  string   `json:"project"`
		Agent    string   `json:"agent"`
		Mode     string   `json:"mode"`
		Tools    []string `json:"tools"`
		Commands struct {
			Leaves int    `json:"leaves"`
			Digest string `json:"digest"`
		} `json:"commands"`
	}
	if err := json.Unmarshal([]byte(read(capsURI)), &caps); err != nil || caps.Server != "ferry" || caps.Project != "acme" ||
		caps.Agent != a.name || caps.Mode != "read-write" || !reflect.DeepEqual(caps.Tools, mcpCoreTools) {
		t.Errorf("%s: resources/read %s = %+v (%v), want ferry serving %s in acme, read-write, the core tools", kind.name, capsURI, caps, err, a.name)
	}
	cmdsText := read(cmdsURI)
	var cmds struct {
		Name     string `json:"name"`
		Commands []struct {
			Path string `json:"path"`
		} `json:"commands"`
	}
	paths := map[string]bool{}
	if err := json.Unmarshal([]byte(cmdsText), &cmds); err == nil {
		for _, c := range cmds.Commands {
			paths[c.Path] = true
		}
	}
	if cmds.Name != "ferry" || !paths["mcp serve"] || !paths["order new"] || len(cmds.Commands) != caps.Commands.Leaves ||
		caps.Commands.Digest != digestOfText(cmdsText) {
		t.Errorf("%s: resources/read %s: %d commands (mcp serve %v, order new %v), want the CLI's catalog as capabilities summarises it (%+v)",
			kind.name, cmdsURI, len(cmds.Commands), paths["mcp serve"], paths["order new"], caps.Commands)
	}

	// A URI nothing has (a well-formed order id no order has): a JSON-RPC error.
	missing := "ferry://acme/order/o-0000000000000"
	wantCode := int64(-32002) // resource not found, legacy eras
	if kind.modern() {
		wantCode = -32602 // 2026-07-28: invalid params
	}
	cs, err := a.c.ReadResource(ctx, missing)
	if err == nil {
		t.Errorf("%s: resources/read %s = %+v, want an error", kind.name, missing, cs)
	} else if code, ok := rpcErrorCode(err); !ok || code != wantCode {
		t.Errorf("%s: resources/read %s: error %v (code %d, %v), want code %d", kind.name, missing, err, code, ok, wantCode)
	}
}

// digestOfText is "sha256:" and the hex of text's sha256, as listings name digests.
func digestOfText(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// mcpOneIdentity: two live `ferry mcp serve --as bob` on one machine. The first to
// write takes the lease; the second's writes and acknowledgements are refused with a
// conflict naming the first process and suggesting a name of its own, while its reads
// still work. Once the first exits, the name is free again.
func mcpOneIdentity(t *testing.T, bin string) {
	kind := mcpClientKinds[0]
	m := newMCPMachine(t, bin)
	m.channel("acme", "alice", "bob")
	alice := startAgent(t, m, kind, "alice", "acme")
	var o wireOrders
	alice.ok("ferry_orders", map[string]any{"action": "new", "title": "Shared order"}, &o)
	alice.ok("ferry_talk", map[string]any{"action": "post", "to": "bob", "text": "for bob only"}, nil)

	first := startAgent(t, m, kind, "bob", "acme")
	second := startAgent(t, m, kind, "bob", "acme")
	first.ok("ferry_talk", map[string]any{"action": "post", "to": "master", "text": "bob here"}, nil) // takes the lease

	want := fmt.Sprintf("conflict: process %d is already acting as bob", first.c.Pid())
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"ferry_orders", map[string]any{"action": "claim", "id": o.Order.ID}},
		{"ferry_talk", map[string]any{"action": "read"}}, // an acknowledgement
		{"ferry_talk", map[string]any{"action": "post", "to": "alice", "text": "hi"}},
		{"ferry_join", nil},
	} {
		msg := second.fail(call.tool, call.args)
		if !strings.HasPrefix(msg, want) || !strings.Contains(msg, "--as bob-") {
			t.Errorf("second bob: %s %v = %q, want %q… suggesting a distinct name", call.tool, call.args, msg, want)
		}
	}
	// Reads still work for the second.
	var cu wireCatchup
	second.ok("ferry_catchup", nil, &cu)
	if cu.Agent != "bob" || cu.Messages.Waiting != 1 {
		t.Errorf("second bob: catchup = %+v, want bob's digest with alice's message waiting (unread: the refused read acknowledged nothing)", cu)
	}
	second.ok("ferry_orders", map[string]any{"action": "list"}, nil)
	second.ok("ferry_orders", map[string]any{"action": "show", "id": o.Order.ID}, nil)
	second.ok("ferry_primary", map[string]any{"action": "status"}, nil)
	second.ok("ferry_ask_human", map[string]any{"action": "status"}, nil)
	// A peek neither writes nor acknowledges: it takes no lease, so it works too.
	var peek wireTalk
	second.ok("ferry_talk", map[string]any{"action": "read", "peek": true}, &peek)
	if len(peek.Messages) != 1 {
		t.Errorf("second bob: peek = %+v, want alice's message (unacknowledged)", peek.Messages)
	}

	// The first one's acknowledgement works; when it exits, the lease is free.
	var read wireTalk
	first.ok("ferry_talk", map[string]any{"action": "read"}, &read)
	if len(read.Messages) != 1 {
		t.Errorf("first bob: read = %+v, want alice's message", read.Messages)
	}
	_ = first.c.Close()
	if !first.c.Exited() {
		t.Fatalf("first bob did not exit on EOF:\n%s", first.c.Stderr())
	}
	third := startAgent(t, m, kind, "bob", "acme")
	third.ok("ferry_orders", map[string]any{"action": "claim", "id": o.Order.ID}, nil)
}

// mcpCLIReadUnderLease: while bob's MCP session lives, bob's own shell may write under
// his name, but a CLI `talk read` as bob only peeks (a one-line note on stderr says
// why) unless --ack is given; once the session ends a plain read records its receipt
// again.
func mcpCLIReadUnderLease(t *testing.T, bin string) {
	kind := mcpClientKinds[0]
	m := newMCPMachine(t, bin)
	m.channel("acme", "alice", "bob")
	m.must("talk", "send", "--to", "bob", "--as", "alice", "--project", "acme", "for bob's session")
	bob := startAgent(t, m, kind, "bob", "acme")
	bob.ok("ferry_join", nil, nil) // takes the session lease
	// bob's shell: a ferry process on m.
	cli := func(args ...string) (code int, stdout, stderr string) {
		stdout, stderr, code = m.ferry(append(args, "--as", "bob", "--project", "acme")...)
		return code, stdout, stderr
	}
	waiting := func() int {
		var cu wireCatchup
		bob.ok("ferry_catchup", nil, &cu)
		return cu.Messages.Waiting
	}

	if code, so, se := cli("talk", "send", "--to", "alice", "from bob's shell"); code != 0 {
		t.Errorf("talk send as bob while his session lives: exit %d\n%s%s", code, so, se)
	}
	code, so, se := cli("talk", "read")
	if code != 0 || !strings.Contains(so, "for bob's session") {
		t.Errorf("talk read as bob: exit %d\n%s%s", code, so, se)
	}
	note := fmt.Sprintf("ferry: note: peeked, nothing marked read: a live MCP session (process %d) holds the name bob on this machine; pass --ack to mark read\n", bob.c.Pid())
	if se != note {
		t.Errorf("talk read as bob: stderr %q, want the one-line note %q", se, note)
	}
	if n := waiting(); n != 1 {
		t.Errorf("after the CLI's talk read under bob's live session: %d messages waiting for the session, want 1 (the CLI must only peek)", n)
	}
	if code, so, se := cli("talk", "read", "--peek", "--ack"); code != exitCodes[errs.Invalid] || !strings.Contains(se, "--peek and --ack") {
		t.Errorf("talk read --peek --ack: exit %d\n%s%s, want invalid", code, so, se)
	}
	code, so, se = cli("talk", "read", "--ack")
	if code != 0 || !strings.Contains(so, "for bob's session") || se != "" {
		t.Errorf("talk read --ack as bob: exit %d\n%s%s", code, so, se)
	}
	if n := waiting(); n != 0 {
		t.Errorf("after talk read --ack: %d messages waiting, want 0", n)
	}

	_ = bob.c.Close()
	if !bob.c.Exited() {
		t.Fatalf("bob did not exit on EOF:\n%s", bob.c.Stderr())
	}
	m.must("talk", "send", "--to", "bob", "--as", "alice", "--project", "acme", "after the session")
	if code, so, se := cli("talk", "read"); code != 0 || !strings.Contains(so, "after the session") || se != "" {
		t.Errorf("talk read as bob with no session: exit %d\n%s%s", code, so, se)
	}
	if code, so, se := cli("talk", "read", "--peek"); code != 0 || !strings.Contains(so, "nothing new") {
		t.Errorf("talk read --peek after a plain read with no session: exit %d\n%s%s, want nothing new (the plain read marked it read)", code, so, se)
	}
}

// mcpProbeTakesNoLease: some apps spawn a short-lived probe process (initialize,
// tools/list, exit) before the real one. A probe takes no lease — not while it lives,
// not after — and reads no channel.
func mcpProbeTakesNoLease(t *testing.T, bin string) {
	for _, kind := range mcpClientKinds {
		m := newMCPMachine(t, bin)
		ch := m.channel("acme", "bob")
		live := startAgent(t, m, kind, "bob", "acme") // initialize + tools/list, then idle
		gone := startAgent(t, m, kind, "bob", "acme") // initialize + tools/list, then exit
		_ = gone.c.Close()
		if !gone.c.Exited() {
			t.Errorf("%s: the probe did not exit on EOF:\n%s", kind.name, gone.c.Stderr())
		}
		real := startAgent(t, m, kind, "bob", "acme")
		real.ok("ferry_talk", map[string]any{"action": "post", "to": "master", "text": "bob here"}, nil)
		real.ok("ferry_join", nil, nil)
		_ = live.c.Close()
		if !live.c.Exited() {
			t.Errorf("%s: the idle probe did not exit on EOF:\n%s", kind.name, live.c.Stderr())
		}
		// A probe against a channel that is not there still starts: initialize must not
		// read the channel.
		if err := os.Rename(ch, ch+".moved"); err != nil {
			t.Fatal(err)
		}
		blind := startAgent(t, m, kind, "bob", "acme")
		if msg := blind.fail("ferry_catchup", nil); !strings.HasPrefix(msg, "not_found:") {
			t.Errorf("%s: catchup with the channel folder gone = %q, want not_found", kind.name, msg)
		}
	}
}

// mcpPresenceHeartbeat: a server started with --presence-every 200ms writes its
// presence file after a write and rewrites it later by itself.
func mcpPresenceHeartbeat(t *testing.T, bin string) {
	kind := mcpClientKinds[0]
	m := newMCPMachine(t, bin)
	ch := m.channel("acme", "bob")
	bob := startAgent(t, m, kind, "bob", "acme", "--presence-every", "200ms")
	glob := filepath.Join(ch, "presence", "bob.*.json")
	if files, _ := filepath.Glob(glob); len(files) != 0 {
		t.Fatalf("presence written before any write: %v", files)
	}
	bob.ok("ferry_talk", map[string]any{"action": "post", "to": "master", "text": "on it"}, nil)
	files, _ := filepath.Glob(glob)
	if len(files) != 1 {
		t.Fatalf("after a write: presence files %v, want one for bob", files)
	}
	first, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Author string `json:"author"`
		At     string `json:"at"`
		Doing  string `json:"doing"`
		Sig    string `json:"sig"`
	}
	if err := json.Unmarshal(first, &p); err != nil || p.Author != "bob" || p.Doing == "" || !strings.HasPrefix(p.Sig, "ed25519:") {
		t.Fatalf("presence file %s = %s (%v), want bob's signed heartbeat saying what he does", files[0], first, err)
	}
	deadline := time.Now().Add(mcpDeadline)
	for {
		now, err := os.ReadFile(files[0])
		if err == nil && len(now) > 0 && !bytes.Equal(now, first) {
			var q struct {
				Author string `json:"author"`
				At     string `json:"at"`
			}
			if err := json.Unmarshal(now, &q); err != nil || q.Author != "bob" || q.At <= p.At {
				t.Errorf("rewritten presence %s, want bob's with a later at than %s", now, p.At)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("presence file not rewritten within %v of the write:\n%s\nstderr:\n%s", mcpDeadline, first, bob.c.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The other processes of the machine see the heartbeat: bob is alive.
	if out := m.must("agents", "--project", "acme", "--json"); !strings.Contains(out, `"bob"`) {
		t.Errorf("ferry agents:\n%s", out)
	}
}

// mcpStdioFraming drives a real process by hand: a BOM before the first line, CRLF line
// ends, a line that is not JSON, and EOF right after the last request. Every stdout
// line is one JSON-RPC response, every request is answered (the call read before EOF
// included), and the process exits by itself, status 0.
func mcpStdioFraming(t *testing.T, bin string) {
	m := newMCPMachine(t, bin)
	m.channel("acme", "bob")
	cmd := m.serve("bob", "acme")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	lines := []string{
		"\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"two","method":"tools/list"}`,
		`this is not json`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"last words"}}}`,
	}
	var in bytes.Buffer
	for _, l := range lines {
		in.WriteString(l + "\r\n")
	}
	// Everything at once, then EOF: the call read before EOF must still be answered.
	if _, err := stdin.Write(in.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}

	type readResult struct {
		out []byte
		err error
	}
	done := make(chan readResult, 1)
	go func() {
		b, err := io.ReadAll(stdout)
		done <- readResult{b, err}
	}()
	var out []byte
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("reading stdout: %v", r.err)
		}
		out = r.out
	case <-time.After(mcpDeadline):
		t.Fatalf("stdout not closed within %v of EOF on stdin\nstderr:\n%s", mcpDeadline, stderr.String())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the server exited with %v after EOF, want status 0\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(mcpDeadline):
		t.Fatalf("the server did not exit within %v of EOF on stdin\nstderr:\n%s", mcpDeadline, stderr.String())
	}

	if !bytes.HasSuffix(out, []byte("\n")) {
		t.Errorf("stdout does not end with a newline: %q", out)
	}
	byID := map[string]map[string]json.RawMessage{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(line, &msg); err != nil {
			t.Fatalf("stdout carries a line that is not JSON: %q", line)
		}
		if string(msg["jsonrpc"]) != `"2.0"` || len(msg["id"]) == 0 || (len(msg["result"]) == 0) == (len(msg["error"]) == 0) {
			t.Fatalf("stdout carries a line that is not a JSON-RPC 2.0 response: %s", line)
		}
		if bytes.ContainsAny(line, "\r") {
			t.Errorf("a response line carries a carriage return: %q", line)
		}
		id := string(msg["id"])
		if _, dup := byID[id]; dup {
			t.Errorf("two responses with id %s", id)
		}
		byID[id] = msg
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"1", `"two"`, "null", "3", "4"} {
		if byID[id] == nil {
			t.Errorf("no response with id %s; stdout:\n%s", id, out)
		}
	}
	if len(byID) != 5 {
		t.Errorf("%d responses, want 5; stdout:\n%s", len(byID), out)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(byID["1"]["result"], &init); err != nil || init.ProtocolVersion != "2025-03-26" {
		t.Errorf("initialize after a BOM = %s, want protocolVersion 2025-03-26 echoed", byID["1"]["result"])
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(byID[`"two"`]["result"], &list); err != nil || len(list.Tools) != len(mcpCoreTools) {
		t.Errorf("tools/list over CRLF = %s", byID[`"two"`]["result"])
	}
	var perr struct {
		Code int `json:"code"`
	}
	if err := json.Unmarshal(byID["null"]["error"], &perr); err != nil || perr.Code != -32700 {
		t.Errorf("the line that is not JSON got %s, want a -32700 error", byID["null"]["error"])
	}
	var call struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	var posted struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(byID["4"]["result"], &call); err != nil || call.IsError || json.Unmarshal(call.StructuredContent, &posted) != nil || !strings.HasPrefix(posted.ID, "m-") {
		t.Fatalf("the call sent just before EOF = %s, want the posted message's id", byID["4"]["result"])
	}
	// The write was done and reported: a fresh CLI process sees it.
	if out := m.must("talk", "show", posted.ID, "--project", "acme"); !strings.Contains(out, "last words") {
		t.Errorf("ferry talk show %s after the MCP post:\n%s", posted.ID, out)
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}
