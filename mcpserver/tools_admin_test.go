package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/mcpserver"
)

// The admin group: ferry_search, ferry_get, ferry_status over a copy of the busy
// fixture, through the wire.

// searchPage is ferry_search's result as the model reads it.
type searchPage struct {
	Hits []struct {
		URI     string `json:"uri"`
		Kind    string `json:"kind"`
		Title   string `json:"title"`
		By      string `json:"by"`
		Line    int    `json:"line"`
		Snippet string `json:"snippet"`
	} `json:"hits"`
	Total     int    `json:"total"`
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
}

// maxResponse is the hard cap of every read: 4,000 characters of compact JSON
// (docs/design.md §4).
const maxResponse = 4000

// capped fails the test when a response is over the hard cap.
func capped(t *testing.T, what, text string) {
	t.Helper()
	if n := utf8.RuneCountInString(text); n > maxResponse {
		t.Errorf("%s: %d characters, over the cap of %d", what, n, maxResponse)
	}
}

// TestSearch: every kind is searched, all words must appear, messages of others stay
// out, memory hits name their line, and paging walks every hit exactly once within
// the caps.
func TestSearch(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	as := func(name string) *fsbus.Session {
		s, err := b.ch.As(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := as("codex-laptop").TalkSend(fsbus.TalkSendOptions{To: "codex-desktop", Body: "the zebra crossing test is flaky on Windows"}); err != nil {
		t.Fatal(err)
	}
	if _, err := as("codex-desktop").TalkSend(fsbus.TalkSendOptions{To: "cursor-laptop", Body: "zebra: a private note between two others"}); err != nil {
		t.Fatal(err)
	}
	if _, err := as("claude-code-laptop").DecisionRecord("Zebra stripes stay in the logo", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := as("cursor-laptop").AskRaise(fsbus.AskRaiseOptions{Title: "Paint the bikeshed", Recommendation: "zebra stripes, they are cheap"}); err != nil {
		t.Fatal(err)
	}
	note := "# Notes\n\nfirst line\nsecond line\nthe ZEBRA lives on line five\n"
	if err := os.WriteFile(filepath.Join(b.dir, "memory", "notes.md"), []byte(note), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"admin"}})

	var p searchPage
	r.ok("ferry_search", map[string]any{"query": "zebra"}, &p)
	kinds := map[string]int{}
	for _, h := range p.Hits {
		kinds[h.Kind]++
		if !strings.Contains(strings.ToLower(h.Snippet+h.Title), "zebra") {
			t.Errorf("hit %s: snippet %q does not show the word", h.URI, h.Snippet)
		}
		if h.Kind == "memory" && (h.URI != "ferry://busy/memory/notes.md" || h.Line != 5) {
			t.Errorf("memory hit %+v, want notes.md line 5", h)
		}
		if h.Kind == "message" && h.By != "codex-laptop" {
			t.Errorf("a message between two other agents was returned: %+v", h)
		}
	}
	if want := map[string]int{"message": 1, "decision": 1, "ask": 1, "memory": 1}; !mapsEqual(kinds, want) || p.Total != 4 {
		t.Errorf("search zebra: kinds %v (total %d), want %v", kinds, p.Total, want)
	}
	p = searchPage{}
	r.ok("ferry_search", map[string]any{"query": "ZEBRA stripes", "kind": "decision"}, &p)
	if len(p.Hits) != 1 || p.Hits[0].Kind != "decision" || p.Hits[0].By != "claude-code-laptop" {
		t.Errorf("kind decision: %+v, want the one decision", p.Hits)
	}
	p = searchPage{}
	r.ok("ferry_search", map[string]any{"query": "zebra unicorn"}, &p)
	if len(p.Hits) != 0 || p.Total != 0 || p.Next != "" {
		t.Errorf("all words must appear: %+v", p)
	}

	// Paging: every order says "See the linked issue", so 75 hits.
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		args := map[string]any{"query": "linked issue", "kind": "order"}
		if cursor != "" {
			args["cursor"] = cursor
		}
		p = searchPage{}
		text := r.ok("ferry_search", args, &p)
		capped(t, "search page", text)
		pages++
		if len(p.Hits) > 20 || len(p.Hits) == 0 {
			t.Fatalf("page %d has %d hits", pages, len(p.Hits))
		}
		for _, h := range p.Hits {
			if seen[h.URI] {
				t.Fatalf("hit %s on two pages", h.URI)
			}
			seen[h.URI] = true
		}
		if !p.Truncated {
			if p.Next != "" {
				t.Errorf("last page carries next %q", p.Next)
			}
			break
		}
		cursor = p.Next
	}
	if len(seen) != 75 || p.Total != 75 || pages < 4 {
		t.Errorf("paging saw %d hits in %d pages (total %d), want all 75 in at least 4", len(seen), pages, p.Total)
	}

	for args, want := range map[string]string{
		`{"query":"  "}`:                  "invalid: empty query",
		`{"query":"x","kind":"secrets"}`:  `invalid: unknown kind "secrets"`,
		`{"query":"x","cursor":"p99999"}`: `invalid: cursor "p99999" is not a page of this list`,
		`{"query":"x","cursor":"3"}`:      `invalid: cursor "3" is not a page of this list`,
		// No limit here (the CLI refuses > 100); never silently ignored.
		`{"query":"x","limit":1000}`: `invalid: unknown argument limit`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(args), &m); err != nil {
			t.Fatal(err)
		}
		if got := r.fail("ferry_search", m); !strings.HasPrefix(got, want) {
			t.Errorf("search %s: %q, want %q", args, got, want)
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// getPage is ferry_get's result.
type getPage struct {
	URI       string `json:"uri"`
	MimeType  string `json:"mime_type"`
	Chars     int    `json:"chars"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
	Next      string `json:"next"`
}

// TestGet: ferry_get serves what resources/read serves for channel things, memory
// notes as markdown, long text in pages that add up to the whole within the cap, and
// nothing outside memory/.
func TestGet(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"admin"}})
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	id := v.State.OrderIDs()[0]
	u := "ferry://busy/order/" + id
	var g getPage
	r.ok("ferry_get", map[string]any{"uri": u}, &g)
	read := r.request("resources/read", `{"uri":"`+u+`"}`)
	var rr struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(read, &rr); err != nil || len(rr.Contents) != 1 {
		t.Fatalf("resources/read %s: %s", u, read)
	}
	if g.Text != rr.Contents[0].Text || g.Truncated || g.MimeType != "application/json" || !strings.Contains(g.Text, v.State.Order(id).Title) {
		t.Errorf("ferry_get %s = %+v, want the resource's text %s", u, g, rr.Contents[0].Text)
	}

	// A long note comes in pages that add up to the file, each within the cap.
	var long strings.Builder
	for i := 0; long.Len() < 20000; i++ {
		long.WriteString(`line "quoted" and \ escaped — ünïcode ` + strings.Repeat("x", i%50) + "\n")
	}
	if err := os.WriteFile(filepath.Join(b.dir, "memory", "long.md"), []byte(long.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var whole strings.Builder
	cursor, pages := "", 0
	for {
		args := map[string]any{"uri": "ferry://busy/memory/long.md"}
		if cursor != "" {
			args["cursor"] = cursor
		}
		g = getPage{}
		capped(t, "get page", r.ok("ferry_get", args, &g))
		whole.WriteString(g.Text)
		pages++
		if !g.Truncated {
			break
		}
		cursor = g.Next
	}
	if whole.String() != long.String() || g.MimeType != "text/markdown" || g.Chars != utf8.RuneCountInString(long.String()) || pages < 5 {
		t.Errorf("the note in %d pages: %d characters back of %d (chars %d, type %s)", pages, utf8.RuneCountInString(whole.String()), utf8.RuneCountInString(long.String()), g.Chars, g.MimeType)
	}

	// Nothing outside memory/, and only notes.
	if err := os.WriteFile(filepath.Join(b.dir, "memory", "script.sh"), []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.md")
	if err := os.WriteFile(outside, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := []string{"ferry://busy/memory/../channel.toml", "ferry://busy/memory/..%2fchannel.toml", "ferry://busy/memory/script.sh",
		"ferry://busy/memory/missing.md", "ferry://other/memory/long.md", "ferry://busy/order/o-0000000000000", "ferry://busy/secrets/x", "file:///etc/passwd"}
	if err := os.Symlink(outside, filepath.Join(b.dir, "memory", "link.md")); err == nil {
		// A note that is a link is refused outright, not read.
		if got := r.fail("ferry_get", map[string]any{"uri": "ferry://busy/memory/link.md"}); !strings.HasPrefix(got, "denied:") || strings.Contains(got, "secret") {
			t.Errorf("ferry_get of a linked note: %q, want denied", got)
		}
	}
	for _, u := range bad {
		if got := r.fail("ferry_get", map[string]any{"uri": u}); !strings.HasPrefix(got, "not_found:") {
			t.Errorf("ferry_get %s: %q, want not_found", u, got)
		}
	}
	if got := r.fail("ferry_get", map[string]any{}); !strings.HasPrefix(got, "invalid:") {
		t.Errorf("ferry_get without uri: %q, want invalid", got)
	}
}

// statusOut is ferry_status's result.
type statusOut struct {
	Project   string            `json:"project"`
	Entries   int               `json:"entries"`
	Orders    map[string]int    `json:"orders"`
	Reviews   []json.RawMessage `json:"reviews_due"`
	Channel   string            `json:"channel"`
	Truncated bool              `json:"truncated"`
}

// TestStatus: ferry_status is the owner's view, compact (5 rows a list) unless detail.
func TestStatus(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open, Groups: []string{"admin"}})
	v, err := b.ch.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := b.ch.Status(v)
	var s statusOut
	capped(t, "status", r.ok("ferry_status", nil, &s))
	if s.Project != "busy" || s.Entries != 200 || !mapsEqual(s.Orders, want.Counts) || len(s.Reviews) != 5 || !s.Truncated || s.Channel != "" {
		t.Errorf("compact status %+v, want the owner's counts %v, 5 of %d reviews due, truncated, no path", s, want.Counts, len(want.Reviews))
	}
	s = statusOut{}
	capped(t, "status detail", r.ok("ferry_status", map[string]any{"detail": true}, &s))
	if len(s.Reviews) != len(want.Reviews) || len(want.Reviews) != 6 || s.Truncated || s.Channel != b.ch.Root {
		t.Errorf("detailed status: %d reviews (want %d), truncated %v, channel %q", len(s.Reviews), len(want.Reviews), s.Truncated, s.Channel)
	}
}

// TestAdminNotDefault: without --tools admin the admin tools do not exist.
func TestAdminNotDefault(t *testing.T) {
	t.Parallel()
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: copyBusy(t).open})
	for _, name := range adminNames {
		if slices.Contains(r.tools, name) {
			t.Errorf("%s is listed without --tools admin", name)
		}
	}
}
