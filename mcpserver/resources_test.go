package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/watch"
	"github.com/ferryhq/ferry/internal/errs"
)

// Resources and long-poll over a real channel: fsbus.Init, real keys, real writes by
// real sessions. Waits run under a generous deadline only a hang reaches; no assertion
// is on elapsed time.

// rsDeadline bounds every wait of these tests: far above a wake-up, below wait_s 50.
const rsDeadline = 25 * time.Second

// rsWorld is a channel "acme" on one machine: alice (orchestrator) and bob (member).
type rsWorld struct {
	home  *fsbus.Home
	dir   string
	alice *fsbus.Session // on a Channel of its own, as another process would be
}

func newRSWorld(t *testing.T) *rsWorld {
	t.Helper()
	d := t.TempDir()
	h := &fsbus.Home{ConfigDir: filepath.Join(d, "config"), CacheDir: filepath.Join(d, "cache")}
	c, err := fsbus.Init(h, fsbus.InitOptions{Dir: filepath.Join(d, "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"alice", "bob"} {
		if _, err := fsbus.Join(c, n, "test"); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	for n, lvl := range map[string]string{"alice": "orchestrator", "bob": "member"} {
		if _, err := m.Grant(fsbus.GrantOptions{Agent: n, Level: lvl}); err != nil {
			t.Fatal(err)
		}
	}
	w := &rsWorld{home: h, dir: c.Root}
	w.alice = w.session(t, "alice")
	return w
}

// session opens the channel anew and returns name's session on it.
func (w *rsWorld) session(t *testing.T, name string) *fsbus.Session {
	t.Helper()
	c, err := fsbus.Open(w.home, w.dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testCatalog is the command catalog bob's server serves.
const testCatalog = `{"name":"ferry","globals":[],"commands":[{"path":"order new","help":"Dispatch an order."}]}`

// ferry builds bob's server; opens counts the channel opens.
func (w *rsWorld) ferry(t *testing.T, watch watch.WatchOptions, opens *atomic.Int32) (*Server, *Ferry) {
	t.Helper()
	srv, f, err := NewFerry(FerryConfig{
		Agent:    "bob",
		Version:  "9.9.9-test",
		Commands: func() (json.RawMessage, error) { return json.RawMessage(testCatalog), nil },
		Watch:    watch,
		Open: func() (*fsbus.Channel, error) {
			if opens != nil {
				opens.Add(1)
			}
			return fsbus.Open(w.home, w.dir)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return srv, f
}

// ---- resources ----

// rsFixture writes 25 orders (the first with a body longer than a tool shows), a
// message, an ask, a result and a decision, and returns the URIs of every object.
func rsFixture(t *testing.T, w *rsWorld) (uris []string, longOrder, longBody string, submitted *fold.Order) {
	t.Helper()
	longBody = strings.Repeat("Rebuild the index, then check every shard. ", 40)
	var orders []*fold.Order
	for i := range 25 {
		body := ""
		if i == 0 {
			body = longBody
		}
		o, err := w.alice.NewOrder(fsbus.NewOrderOptions{Title: fmt.Sprintf("order %d", i), Body: body})
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, o)
		uris = append(uris, "ferry://acme/order/"+o.ID)
	}
	bob := w.session(t, "bob")
	msg, err := w.alice.TalkSend(fsbus.TalkSendOptions{To: "bob", Body: "the index is rebuilt"})
	if err != nil {
		t.Fatal(err)
	}
	ask, err := bob.AskRaise(fsbus.AskRaiseOptions{Title: "drop the old shards?", Recommendation: "yes, after a backup"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Claim(orders[1].ID, ""); err != nil {
		t.Fatal(err)
	}
	submitted, err = bob.Submit(orders[1].ID, fsbus.SubmitOptions{Reference: "commit 4f2a9c1", Note: "rebuilt and checked"})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := w.alice.DecisionRecord("shards are rebuilt nightly", "")
	if err != nil {
		t.Fatal(err)
	}
	uris = append(uris, "ferry://acme/message/"+msg.ID, "ferry://acme/ask/"+ask.ID,
		"ferry://acme/result/"+submitted.Result.Result, "ferry://acme/decision/"+dec.ID)
	return uris, orders[0].ID, longBody, submitted
}

func TestResourcesListPagesEveryObject(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	want, _, _, _ := rsFixture(t, w)
	_, f := w.ferry(t, watch.WatchOptions{}, nil)
	res := f.Resources()
	ctx := context.Background()

	var got []string
	byURI := map[string]Resource{}
	cursor, pages := "", 0
	for {
		page, next, err := res.List(ctx, cursor)
		if err != nil {
			t.Fatalf("List(%q): %v", cursor, err)
		}
		pages++
		if len(page) > maxItems {
			t.Fatalf("page %d holds %d resources, over the cap of %d", pages, len(page), maxItems)
		}
		for _, r := range page {
			if _, dup := byURI[r.URI]; dup {
				t.Errorf("%s listed twice (page %d)", r.URI, pages)
			}
			byURI[r.URI] = r
			got = append(got, r.URI)
		}
		if next == "" {
			break
		}
		if next == cursor {
			t.Fatalf("the cursor did not advance: %q", next)
		}
		if pages > 10 {
			t.Fatal("listing never ends")
		}
		cursor = next
	}
	if pages < 2 {
		t.Fatalf("%d resources came in %d page: the test needs more than one", len(got), pages)
	}
	want = append(want, "ferry://acme/capabilities", "ferry://acme/commands")
	for _, u := range want {
		if _, ok := byURI[u]; !ok {
			t.Errorf("%s is missing from the listing (a gap)", u)
		}
	}
	if len(got) != len(want) {
		t.Errorf("listed %d resources, want %d", len(got), len(want))
	}

	// Summaries only: id, author, time, bytes and digest — the digest and size of
	// exactly what a read returns; no title or body.
	for _, u := range want {
		r := byURI[u]
		rc, err := res.Read(ctx, u)
		if err != nil {
			t.Fatalf("Read(%s): %v", u, err)
		}
		if len(rc) != 1 || rc[0].URI != u || rc[0].MimeType != "application/json" || !json.Valid([]byte(rc[0].Text)) {
			t.Fatalf("Read(%s) = %+v", u, rc)
		}
		text := rc[0].Text
		if r.Size != int64(len(text)) || !strings.Contains(r.Description, digestOf(text)) {
			t.Errorf("%s: listed size %d and %q; the read has %d bytes, %s", u, r.Size, r.Description, len(text), digestOf(text))
		}
		if strings.Contains(u, "/order/") && (!strings.Contains(r.Description, "order by alice at ") || strings.Contains(r.Description, "order 1")) {
			t.Errorf("%s: summary %q, want kind, author, time and digest, no title", u, r.Description)
		}
		if id := u[strings.LastIndex(u, "/")+1:]; strings.Count(u, "/") == 4 && r.Name != id {
			t.Errorf("%s: name %q, want the id", u, r.Name)
		}
	}

	if _, _, err := res.List(ctx, "nonsense.3"); !errs.Is(err, errs.Invalid) {
		t.Errorf("List with a foreign cursor: %v, want invalid", err)
	}
}

func TestResourcesReadEveryKind(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	uris, longOrder, longBody, submitted := rsFixture(t, w)
	_, f := w.ferry(t, watch.WatchOptions{}, nil)
	res := f.Resources()
	ctx := context.Background()
	read := func(uri string, v any) {
		t.Helper()
		rc, err := res.Read(ctx, uri)
		if err != nil {
			t.Fatalf("Read(%s): %v", uri, err)
		}
		if err := json.Unmarshal([]byte(rc[0].Text), v); err != nil {
			t.Fatalf("Read(%s): %v\n%s", uri, err, rc[0].Text)
		}
	}
	kinds := map[string]string{}
	for _, u := range uris {
		parts := strings.Split(u, "/")
		kinds[parts[3]] = u
	}

	var order fold.OrderObject
	read("ferry://acme/order/"+longOrder, &order)
	if order.ID != longOrder || order.Body != longBody || order.Author != "alice" || order.Sig == "" {
		t.Errorf("order: %+v, want the full body of %d bytes, signed by alice", order.Envelope, len(longBody))
	}
	var msg fold.MessageObject
	read(kinds["message"], &msg)
	if msg.Body != "the index is rebuilt" || msg.To != "bob" || msg.Author != "alice" {
		t.Errorf("message: %+v", msg)
	}
	// An editor's BOM, CRLF and indentation change no meaning (docs/design.md §2 rule
	// 9): the read serves the same canonical text, whose digest is the signed object
	// hash.
	before, err := res.Read(ctx, kinds["message"])
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(w.dir, "messages", msg.ID+".json")
	var pretty map[string]any
	if err := json.Unmarshal([]byte(before[0].Text), &pretty); err != nil {
		t.Fatal(err)
	}
	indented, _ := json.MarshalIndent(pretty, "", "    ")
	edited := "\ufeff" + strings.ReplaceAll(string(indented), "\n", "\r\n") + "\r\n"
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, err := res.Read(ctx, kinds["message"]); err != nil || after[0].Text != before[0].Text {
		t.Errorf("re-indented message: %v, text changed: %v", err, err == nil && after[0].Text != before[0].Text)
	}
	var ask struct {
		fold.Envelope
		Title          string `json:"title"`
		Recommendation string `json:"recommendation"`
	}
	read(kinds["ask"], &ask)
	if ask.Title != "drop the old shards?" || ask.Recommendation != "yes, after a backup" || ask.Author != "bob" {
		t.Errorf("ask: %+v", ask)
	}
	var result fold.ResultObject
	read(kinds["result"], &result)
	if result.ID != submitted.Result.Result || result.Order != submitted.ID || result.Reference != "commit 4f2a9c1" || result.Summary != "rebuilt and checked" {
		t.Errorf("result: %+v", result)
	}
	var dec struct {
		Type   string `json:"type"`
		Ref    string `json:"ref"`
		Writer string `json:"writer"`
		Sig    string `json:"sig"`
		Data   struct {
			Line string `json:"line"`
		} `json:"data"`
	}
	read(kinds["decision"], &dec)
	if dec.Type != fold.TypeDecisionRecord || dec.Data.Line != "shards are rebuilt nightly" || dec.Writer != "alice" || dec.Sig == "" {
		t.Errorf("decision: %+v", dec)
	}

	var caps struct {
		Server     string   `json:"server"`
		Project    string   `json:"project"`
		Agent      string   `json:"agent"`
		Version    string   `json:"version"`
		Mode       string   `json:"mode"`
		Groups     []string `json:"groups"`
		Exclusions []string `json:"exclusions"`
		Tools      []string `json:"tools"`
		Resources  []string `json:"resources"`
		Commands   struct {
			Leaves int    `json:"leaves"`
			Digest string `json:"digest"`
		} `json:"commands"`
	}
	read("ferry://acme/capabilities", &caps)
	if caps.Server != "ferry" || caps.Project != "acme" || caps.Agent != "bob" || caps.Version != "9.9.9-test" ||
		caps.Mode != "read-write" || !slices.Contains(caps.Groups, GroupCore) || !slices.Contains(caps.Tools, "ferry_talk") ||
		!slices.Contains(caps.Resources, "ferry://{project}/order/{id}") || caps.Commands.Leaves != 1 {
		t.Errorf("capabilities: %+v", caps)
	}
	for _, never := range []string{"grants", "ask answers", "secrets", "passphrases"} {
		if !slices.ContainsFunc(caps.Exclusions, func(s string) bool { return strings.HasPrefix(s, never+":") }) {
			t.Errorf("capabilities exclusions %q do not name %s", caps.Exclusions, never)
		}
	}
	rc, err := res.Read(ctx, "ferry://acme/commands")
	if err != nil || rc[0].Text != testCatalog || digestOf(rc[0].Text) != caps.Commands.Digest {
		t.Errorf("commands: %v %+v", err, rc)
	}
}

func TestResourcesReadNotFound(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	uris, longOrder, _, _ := rsFixture(t, w)
	var opens atomic.Int32
	_, f := w.ferry(t, watch.WatchOptions{}, &opens)
	res := f.Resources()
	msgID := strings.TrimPrefix(uris[25], "ferry://acme/message/")
	for _, uri := range []string{
		"ferry://acme/order/o-0000000000000",              // the shape of an id, but no such order
		"ferry://other/order/" + longOrder,                // another project
		"ferry://acme/order/" + msgID,                     // a message id under order
		"ferry://acme/order/../../channel.toml",           // not an id: never reaches the disk
		"ferry://acme/order/o-" + strings.Repeat("a", 12), // one character short
		"ferry://acme/widget/" + longOrder,                // no such kind
		"ferry://acme/handin/h-0000000000000",             // not a resource kind
		"ferry://acme/order/" + longOrder + "/body",       // extra segment
		"ferry://acme/order/" + longOrder + "?x=1",        // a query
		"ferry://acme/orders/" + longOrder,                // the directory is not the kind
		"ferry://ACME/order/" + longOrder,                 // not a portable project name
		"http://acme/order/" + longOrder,                  // another scheme
		"",
	} {
		if _, err := res.Read(context.Background(), uri); !errs.Is(err, errs.NotFound) {
			t.Errorf("Read(%q) = %v, want not_found", uri, err)
		}
	}
	if n := opens.Load(); n > 1 {
		t.Errorf("the channel was opened %d times", n)
	}
}

func TestResourcesNoChannelReadAtStart(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	var opens atomic.Int32
	_, f := w.ferry(t, watch.WatchOptions{}, &opens)
	tpl := f.Resources().Templates()
	var names []string
	for _, x := range tpl {
		names = append(names, x.Name)
		if x.URITemplate != "ferry://{project}/"+x.Name+"/{id}" || x.MimeType != "application/json" || x.Description == "" {
			t.Errorf("template %+v", x)
		}
	}
	if !slices.Equal(names, []string{"order", "message", "ask", "result", "decision"}) {
		t.Errorf("templates %v", names)
	}
	if n := opens.Load(); n != 0 {
		t.Errorf("NewFerry and Templates opened the channel %d times; start-up reads nothing", n)
	}
}

// TestResourcesRefuseLinks: an object file that is a symbolic link — even one whose
// target holds the very bytes its signed entry names — is never read, nor is a
// directory that links out of the channel.
func TestResourcesRefuseLinks(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	uris, longOrder, _, _ := rsFixture(t, w)
	_, f := w.ferry(t, watch.WatchOptions{}, nil)
	res := f.Resources()
	ctx := context.Background()
	outside := t.TempDir()

	file := filepath.Join(w.dir, "orders", longOrder+".json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "secret.json")
	if err := os.WriteFile(target, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, file); err != nil {
		t.Fatal(err)
	}
	uri := "ferry://acme/order/" + longOrder
	if _, err := res.Read(ctx, uri); !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Read through a link out of the channel = %v, want denied", err)
	}
	if page := listAll(t, res); slices.Contains(page, uri) {
		t.Errorf("the listing offers %s, which a read refuses", uri)
	}

	// The results directory itself links out of the channel.
	resultURI := uris[27]
	dir := filepath.Join(w.dir, "results")
	moved := filepath.Join(outside, "results")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Read(ctx, resultURI); err == nil || errs.Is(err, errs.NotFound) {
		t.Fatalf("Read through a linked directory = %v, want refused", err)
	}
}

// listAll lists every page and returns the URIs.
func listAll(t *testing.T, res Resources) []string {
	t.Helper()
	var out []string
	cursor := ""
	for range 20 {
		page, next, err := res.List(context.Background(), cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			out = append(out, r.URI)
		}
		if next == "" {
			return out
		}
		cursor = next
	}
	t.Fatal("listing never ends")
	return nil
}

// ---- long-poll ----

// rsConn is one client of a Server over pipes: lines in, responses out by id.
type rsConn struct {
	t    *testing.T
	in   *io.PipeWriter
	mu   sync.Mutex
	got  map[string]json.RawMessage
	more chan struct{}
	done chan error
}

func rsServe(t *testing.T, srv *Server) *rsConn {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &rsConn{t: t, in: inW, got: map[string]json.RawMessage{}, more: make(chan struct{}, 1), done: make(chan error, 1)}
	go func() {
		err := srv.Serve(context.Background(), inR, outW)
		outW.Close()
		c.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			line := append([]byte{}, sc.Bytes()...)
			if json.Unmarshal(line, &m) == nil {
				c.mu.Lock()
				c.got[string(m.ID)] = line
				c.mu.Unlock()
				select {
				case c.more <- struct{}{}:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { inW.Close() })
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	c.await("0")
	return c
}

func (c *rsConn) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// call sends a tools/call of tool with args under id.
func (c *rsConn) call(id int, tool string, args map[string]any) {
	c.t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(string(b))
}

// await returns the response to id, failing the test when none comes in rsDeadline.
func (c *rsConn) await(id string) json.RawMessage {
	c.t.Helper()
	deadline := time.After(rsDeadline)
	for {
		c.mu.Lock()
		r, ok := c.got[id]
		c.mu.Unlock()
		if ok {
			return r
		}
		select {
		case <-c.more:
		case <-deadline:
			c.t.Fatalf("no response to id %s: the call did not return", id)
		}
	}
}

// result returns the structured result of a tools/call response, failing on an
// error; errText returns the text of an isError result.
func (c *rsConn) result(id string, v any) {
	c.t.Helper()
	var r struct {
		Result struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	raw := c.await(id)
	if err := json.Unmarshal(raw, &r); err != nil || r.Result.IsError {
		c.t.Fatalf("call %s failed: %s", id, raw)
	}
	if err := json.Unmarshal(r.Result.StructuredContent, v); err != nil {
		c.t.Fatalf("call %s: %v\n%s", id, err, raw)
	}
}

func (c *rsConn) errText(id string) string {
	c.t.Helper()
	var r struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	raw := c.await(id)
	if err := json.Unmarshal(raw, &r); err != nil || !r.Result.IsError || len(r.Result.Content) == 0 {
		c.t.Fatalf("call %s did not fail: %s", id, raw)
	}
	return r.Result.Content[0].Text
}

// onWait returns watch options that close the returned channel when a wait first
// waits.
func onWait(opt watch.WatchOptions) (watch.WatchOptions, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	opt.OnWait = func() { once.Do(func() { close(ch) }) }
	return opt, ch
}

// waitModes are fsnotify alone (the timed rescan out of reach) and the forced
// polling fallback.
var waitModes = []struct {
	name string
	opt  watch.WatchOptions
}{
	{"fsnotify", watch.WatchOptions{Rescan: time.Hour}},
	{"poll", watch.WatchOptions{Poll: true, Rescan: 50 * time.Millisecond}},
}

// awaitSignal waits for a wait to begin, failing the test if it never does.
func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(rsDeadline):
		t.Fatalf("%s never started waiting", what)
	}
}

func TestLongPollTalkReadWakes(t *testing.T) {
	t.Parallel()
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			w := newRSWorld(t)
			opt, waiting := onWait(mode.opt)
			srv, _ := w.ferry(t, opt, nil)
			c := rsServe(t, srv)
			c.call(1, "ferry_talk", map[string]any{"action": "read", "wait_s": 50})
			awaitSignal(t, waiting, "ferry_talk read")
			sent, err := w.alice.TalkSend(fsbus.TalkSendOptions{To: "bob", Body: "the index is rebuilt"})
			if err != nil {
				t.Fatal(err)
			}
			var out TalkOut
			c.result("1", &out)
			if len(out.Messages) != 1 || out.Messages[0].ID != sent.ID || out.Messages[0].Preview != "the index is rebuilt" {
				t.Fatalf("woken read = %+v, want alice's message", out)
			}
		})
	}
}

func TestLongPollCatchupWakes(t *testing.T) {
	t.Parallel()
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			w := newRSWorld(t)
			opt, waiting := onWait(mode.opt)
			srv, _ := w.ferry(t, opt, nil)
			c := rsServe(t, srv)
			var first fsbus.Catchup
			c.call(1, "ferry_catchup", map[string]any{})
			c.result("1", &first)
			c.call(2, "ferry_catchup", map[string]any{"since": first.Next, "wait_s": 50})
			awaitSignal(t, waiting, "ferry_catchup")
			o, err := w.alice.NewOrder(fsbus.NewOrderOptions{Title: "rebuild the index"})
			if err != nil {
				t.Fatal(err)
			}
			var out fsbus.Catchup
			c.result("2", &out)
			if !out.Since || len(out.Open) != 1 || out.Open[0].ID != o.ID || out.Next == first.Next {
				t.Fatalf("woken catchup = %+v, want only alice's new order", out)
			}
		})
	}
}

// TestLongPollTimesOut: with nothing new, wait_s 1 answers as usual when the time
// runs out: nothing new.
func TestLongPollTimesOut(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	srv, _ := w.ferry(t, watch.WatchOptions{}, nil)
	c := rsServe(t, srv)
	var first fsbus.Catchup
	c.call(1, "ferry_catchup", map[string]any{})
	c.result("1", &first)
	c.call(2, "ferry_catchup", map[string]any{"since": first.Next, "wait_s": 1})
	c.call(3, "ferry_talk", map[string]any{"action": "read", "wait_s": 1})
	var cu fsbus.Catchup
	c.result("2", &cu)
	if !cu.Since || len(cu.Open)+len(cu.Mine)+len(cu.Decisions)+len(cu.Asks)+len(cu.Reviews) != 0 || cu.Messages.Waiting != 0 {
		t.Errorf("catchup after wait_s 1 with nothing new = %+v, want nothing", cu)
	}
	var tr TalkOut
	c.result("3", &tr)
	if len(tr.Messages) != 0 {
		t.Errorf("talk read after wait_s 1 with nothing new = %+v, want no message", tr)
	}
}

func TestLongPollWaitSBounds(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	srv, _ := w.ferry(t, watch.WatchOptions{}, nil)
	c := rsServe(t, srv)
	for i, args := range []struct {
		tool string
		args map[string]any
	}{
		{"ferry_catchup", map[string]any{"wait_s": 51}},
		{"ferry_catchup", map[string]any{"wait_s": -1}},
		{"ferry_talk", map[string]any{"action": "read", "wait_s": 51}},
		{"ferry_talk", map[string]any{"action": "read", "wait_s": 1.5}},
	} {
		c.call(10+i, args.tool, args.args)
		if txt := c.errText(fmt.Sprint(10 + i)); !strings.HasPrefix(txt, "invalid:") {
			t.Errorf("%s %v: %q, want invalid", args.tool, args.args, txt)
		}
	}
	// The schemas say so too.
	for _, name := range []string{"ferry_catchup", "ferry_talk"} {
		var s struct {
			Properties map[string]struct {
				Type    string  `json:"type"`
				Minimum float64 `json:"minimum"`
				Maximum float64 `json:"maximum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(srv.tools[name].InputSchema, &s); err != nil {
			t.Fatal(err)
		}
		if p, ok := s.Properties["wait_s"]; !ok || p.Type != "integer" || p.Minimum != 0 || p.Maximum != maxWaitS {
			t.Errorf("%s input schema wait_s = %+v, want an integer from 0 to %d", name, p, maxWaitS)
		}
	}
}

// TestLongPollCancel: a cancelled call stops waiting at once and returns its context's
// error, with fsnotify and with polling.
func TestLongPollCancel(t *testing.T) {
	t.Parallel()
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			w := newRSWorld(t)
			v, err := w.session(t, "bob").Load()
			if err != nil {
				t.Fatal(err)
			}
			cursor := v.Arrivals.Cursor() // nothing is new after it
			for _, call := range []struct{ tool, args string }{
				{"ferry_talk", `{"action":"read","wait_s":50}`},
				{"ferry_catchup", `{"since":"` + cursor + `","wait_s":50}`},
			} {
				// Rescan out of reach in both modes: only the cancel can end the wait.
				opt, waiting := onWait(watch.WatchOptions{Poll: mode.opt.Poll, Rescan: time.Hour})
				srv, _ := w.ferry(t, opt, nil)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := srv.tools[call.tool].Call(ctx, json.RawMessage(call.args))
					done <- err
				}()
				awaitSignal(t, waiting, call.tool)
				cancel()
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("%s cancelled: %v, want context.Canceled", call.tool, err)
					}
				case <-time.After(rsDeadline):
					t.Fatalf("%s did not return when cancelled", call.tool)
				}
			}
		})
	}
}

// TestLongPollEOF: when the client's input ends, a waiting call stops waiting and
// answers (nothing new), and Serve returns.
func TestLongPollEOF(t *testing.T) {
	t.Parallel()
	w := newRSWorld(t)
	opt, waiting := onWait(watch.WatchOptions{Rescan: time.Hour})
	srv, _ := w.ferry(t, opt, nil)
	c := rsServe(t, srv)
	c.call(1, "ferry_talk", map[string]any{"action": "read", "wait_s": 50})
	awaitSignal(t, waiting, "ferry_talk read")
	c.in.Close()
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(rsDeadline):
		t.Fatal("Serve did not return at EOF: the wait went on")
	}
	var out TalkOut
	c.result("1", &out)
	if len(out.Messages) != 0 {
		t.Fatalf("read at EOF = %+v", out)
	}
}
