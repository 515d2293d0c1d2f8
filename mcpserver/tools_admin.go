package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/search"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/selfupdate"
)

// The admin group (`ferry mcp serve --tools admin`, docs/design.md §4): ferry_search,
// ferry_get, ferry_status and ferry_update. Not in the default list, so they cost
// nothing unless the owner opts in; their definitions count in the admin_tools_list
// budget figure.

// ---- ferry_search ----

// SearchIn is ferry_search's input.
type SearchIn struct {
	Query  string `json:"query" jsonschema:"description=words that must all appear (any case)"`
	Kind   string `json:"kind,omitempty" jsonschema:"enum=order,enum=message,enum=decision,enum=ask,enum=memory"`
	Cursor string `json:"cursor,omitempty" jsonschema:"description=next of the last result"`
}

// SearchOut is ferry_search's output: one page of hits, newest first (memory notes,
// which have no time, last, by file name).
type SearchOut struct {
	Hits      []SearchHit `json:"hits"`
	Total     int         `json:"total"`
	Truncated bool        `json:"truncated,omitempty"`
	Next      string      `json:"next,omitempty"`
}

// SearchHit is one match: where it is (a ferry:// URI for ferry_get), what it is, and
// at most fsbus.SearchSnippet characters around the first word found.
type SearchHit struct {
	URI     string `json:"uri"`
	Kind    string `json:"kind"`
	Title   string `json:"title,omitempty"`
	By      string `json:"by,omitempty"`
	At      string `json:"at,omitempty"`   // HLC of its newest entry
	Line    int    `json:"line,omitempty"` // memory: 1-based line of the snippet
	Snippet string `json:"snippet"`
}

// onlyKnownArgs refuses an argument object with a member not in known (invalid, naming
// it): ferry_search has no limit, and a limit it silently ignored would read as
// honoured (`ferry search` refuses --limit over 100; pages here hold at most 20 hits).
func onlyKnownArgs(args json.RawMessage, known ...string) error {
	var m map[string]json.RawMessage
	if len(args) == 0 || json.Unmarshal(args, &m) != nil {
		return nil // decode reported it
	}
	var bad []string
	for k := range m {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return errs.Errorf(errs.Invalid, "pass only "+strings.Join(known, ", ")+"; pages hold at most 20 hits: pass next as cursor for more",
		"unknown argument %s", strings.Join(bad, ", "))
}

// maxMemoryBytes bounds how much of one memory note is read (1 MiB, as @FILE).
const maxMemoryBytes = 1 << 20

func (f *Ferry) search(ctx context.Context, args json.RawMessage) (any, error) {
	var in SearchIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if err := onlyKnownArgs(args, "query", "kind", "cursor"); err != nil {
		return nil, err
	}
	terms, err := search.Terms(in.Query)
	if err != nil {
		return nil, err
	}
	switch in.Kind {
	case "", "order", "message", "decision", "ask", "memory":
	default:
		return nil, errs.Errorf(errs.Invalid, "use order, message, decision, ask or memory", "unknown kind %q", in.Kind)
	}
	ch, v, err := f.read()
	if err != nil {
		return nil, err
	}
	hits, err := f.searchHits(ch, v, terms, in.Kind)
	if err != nil {
		return nil, err
	}
	start, err := parsePage(in.Cursor, len(hits))
	if err != nil {
		return nil, err
	}
	rest := hits[start:]
	build := func(k int) any {
		out := &SearchOut{Hits: append([]SearchHit{}, rest[:k]...), Total: len(hits)}
		if k < len(rest) {
			out.Truncated, out.Next = true, pageCursor(start+k)
		}
		return out
	}
	return build(fit(min(len(rest), maxItems), build)), nil
}

// searchHits finds what ferry_search looks through: the channel's orders, messages
// the agent sent or was sent (to it or to all), decisions and asks through
// fsbus.Channel.SearchHits (the matcher and order `ferry search` uses), newest
// first, then memory/*.md notes by name.
func (f *Ferry) searchHits(ch *fsbus.Channel, v *fsbus.View, terms []string, kind string) ([]SearchHit, error) {
	p := ch.Project()
	var hits []SearchHit
	if kind != "memory" {
		for _, h := range search.Hits(ch, v, terms, kind, f.cfg.Agent) {
			hits = append(hits, SearchHit{URI: uri(p, h.Kind, h.ID), Kind: h.Kind, Title: h.Title, By: h.By, At: h.At, Snippet: h.Snippet})
		}
	}
	if kind == "" || kind == "memory" {
		notes, err := memoryNotes(ch)
		if err != nil && kind == "" && errs.Is(err, errs.Denied) {
			return hits, nil // memory/ is a link: the channel's own things still answer
		}
		if err != nil {
			return nil, err
		}
		for _, n := range notes {
			text, _, err := readMemoryNote(ch, n.Name)
			if err != nil {
				continue // vanished or unreadable since listed: not a hit
			}
			if snip, line, ok := search.MatchText(n.Name, text, terms); ok {
				hits = append(hits, SearchHit{URI: uri(p, "memory", n.Name), Kind: "memory", Title: n.Name, Line: line, Snippet: snip})
			}
		}
	}
	return hits, nil
}

// uri is the ferry:// URI of one thing of project (docs/design.md §4: bodies come by
// URI).
func uri(project, kind, id string) string { return "ferry://" + project + "/" + kind + "/" + id }

// ---- ferry_get ----

// GetIn is ferry_get's input.
type GetIn struct {
	URI    string `json:"uri" jsonschema:"description=ferry://project/kind/id"`
	Cursor string `json:"cursor,omitempty" jsonschema:"description=next of the last result"`
}

// GetOut is ferry_get's output: one page of the thing's text (JSON for channel things,
// markdown for memory notes). Chars is the whole text's length in characters.
type GetOut struct {
	URI       string `json:"uri"`
	MimeType  string `json:"mime_type"`
	Chars     int    `json:"chars"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
	Next      string `json:"next,omitempty"`
}

func (f *Ferry) get(ctx context.Context, args json.RawMessage) (any, error) {
	var in GetIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.URI) == "" {
		return nil, errs.Errorf(errs.Invalid, "pass uri, e.g. ferry://<project>/order/<id> (ferry_search and resources/list give them)", "ferry_get needs uri")
	}
	contents, err := f.readURI(ctx, in.URI)
	if err != nil {
		return nil, err
	}
	var text []string
	mime := ""
	for _, c := range contents {
		text = append(text, c.Text)
		if mime == "" {
			mime = c.MimeType
		}
	}
	runes := []rune(strings.Join(text, "\n"))
	start, err := parsePage(in.Cursor, len(runes))
	if err != nil {
		return nil, err
	}
	rest := runes[start:]
	build := func(n int) *GetOut {
		out := &GetOut{URI: in.URI, MimeType: mime, Chars: len(runes), Text: string(rest[:n])}
		if n < len(rest) {
			out.Truncated, out.Next = true, pageCursor(start+n)
		}
		return out
	}
	// The largest page whose JSON (escapes included) fits the cap.
	n := min(len(rest), maxChars)
	for n > 1 && chars(build(n)) > maxChars {
		n -= max(1, n/10)
	}
	return build(n), nil
}

// ---- ferry_status ----

// StatusIn is ferry_status's input.
type StatusIn struct {
	Detail bool `json:"detail,omitempty" jsonschema:"description=list more rows"`
}

// StatusOut is the owner's view (fsbus Channel.Status), compact: names and rows, at
// most statusRows per list (detail: maxItems), and the whole within maxChars.
type StatusOut struct {
	Project   string                `json:"project"`
	Entries   int                   `json:"entries"`
	Orders    map[string]int        `json:"orders"`
	Primary   fsbus.CatchupPrimary  `json:"primary"`
	ToSeat    []string              `json:"to_seat"`
	KeyChange []string              `json:"key_changes"`
	Reviews   []OrderLine           `json:"reviews_due"`
	Contested []fsbus.ContestRow    `json:"contested"`
	Quiet     []fsbus.HolderRow     `json:"holders_not_seen"`
	Asks      []fsbus.AskRow        `json:"asks_waiting"`
	Messages  fsbus.CatchupMessages `json:"messages_waiting"`
	Ignored   int                   `json:"ignored_entries"`
	Problems  int                   `json:"ledger_problems"`
	Ahead     []string              `json:"clock_ahead,omitempty"`
	Channel   string                `json:"channel,omitempty"` // detail: the folder on this machine
	Truncated bool                  `json:"truncated,omitempty"`
}

// statusRows is how many rows each list of a compact ferry_status holds.
const statusRows = 5

func (f *Ferry) status(ctx context.Context, args json.RawMessage) (any, error) {
	var in StatusIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	ch, v, err := f.read()
	if err != nil {
		return nil, err
	}
	s := ch.Status(v)
	build := func(rows int) *StatusOut {
		out := &StatusOut{Project: s.Project, Entries: s.Entries, Orders: s.Counts, Primary: s.Primary,
			ToSeat: []string{}, KeyChange: []string{}, Reviews: []OrderLine{}, Contested: []fsbus.ContestRow{},
			Quiet: []fsbus.HolderRow{}, Asks: []fsbus.AskRow{}, Messages: s.Messages, Ignored: s.Ignored, Problems: s.Problems, Ahead: s.Ahead}
		if in.Detail {
			out.Channel = s.Channel
		}
		take := func(n int) int {
			if n > rows {
				out.Truncated = true
				return rows
			}
			return n
		}
		for _, a := range s.ToSeat[:take(len(s.ToSeat))] {
			out.ToSeat = append(out.ToSeat, a.Name)
		}
		for _, a := range s.KeyChanges[:take(len(s.KeyChanges))] {
			out.KeyChange = append(out.KeyChange, a.Name)
		}
		for _, r := range s.Reviews[:take(len(s.Reviews))] {
			out.Reviews = append(out.Reviews, orderLine(r, in.Detail))
		}
		// Newest contests first: the ones someone may still act on.
		n := take(len(s.Contests))
		for i := len(s.Contests) - 1; i >= len(s.Contests)-n; i-- {
			out.Contested = append(out.Contested, fsbus.ContestRowOf(s.Contests[i]))
		}
		out.Quiet = append(out.Quiet, s.Quiet[:take(len(s.Quiet))]...)
		out.Asks = append(out.Asks, s.Asks[:take(len(s.Asks))]...)
		return out
	}
	rows := statusRows
	if in.Detail {
		rows = maxItems
	}
	out := build(rows)
	for rows > 1 && chars(out) > maxChars {
		rows--
		out = build(rows)
	}
	return out, nil
}

// ---- ferry_update ----

// UpdateIn is ferry_update's input.
type UpdateIn struct {
	Action string `json:"action" jsonschema:"enum=check,enum=apply"`
}

// UpdateOut is ferry_update's output: the check (both actions) and, for apply, what was
// installed. The MCP surface never approves a release (docs/design.md §2: the master
// row).
type UpdateOut struct {
	Check *fsbus.UpdateCheck  `json:"check"`
	Apply *fsbus.UpdateResult `json:"apply,omitempty"`
}

// update checks for, or applies, a newer master-approved ferry release (ADR 0005,
// fsbus.View.CheckUpdate and Session.ApplyUpdate). apply needs level orchestrator and
// replaces cfg.UpdateExe ("" the running binary); the server keeps running the old code
// until restarted. Errors: invalid for another action; those of ApplyUpdate.
func (f *Ferry) update(ctx context.Context, args json.RawMessage) (any, error) {
	var in UpdateIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	switch in.Action {
	case "check":
		_, v, err := f.read()
		if err != nil {
			return nil, err
		}
		return &UpdateOut{Check: v.CheckUpdate(f.cfg.Version, selfupdate.Platform())}, nil
	case "apply":
		s, err := f.session()
		if err != nil {
			return nil, err
		}
		res, err := s.ApplyUpdate(fsbus.ApplyOptions{Exe: f.cfg.UpdateExe, Current: f.cfg.Version})
		if err != nil {
			return nil, err
		}
		v, err := s.Load()
		if err != nil {
			return nil, err
		}
		current := f.cfg.Version
		if res.Applied {
			current = res.To
		}
		return &UpdateOut{Check: v.CheckUpdate(current, selfupdate.Platform()), Apply: res}, nil
	}
	return nil, errs.Errorf(errs.Invalid, "use action check or apply (approving is the owner's `ferry update approve`)", "unknown action %q", in.Action)
}

// adminTools lists the admin group (names, descriptions, schemas fixed:
// docs/design.md §4).
func (f *Ferry) adminTools() []*Tool {
	return []*Tool{
		{Name: "ferry_search", Description: "Search orders, messages, decisions, asks and memory notes for words (all must appear). Paged: pass next as cursor; open a hit with ferry_get.",
			InputSchema: inputSchema(&SearchIn{}), OutputSchema: outputSchema(&SearchOut{}), Call: f.search},
		{Name: "ferry_get", Description: "Fetch one thing by its ferry:// URI: order, message, ask, result, decision or memory note. Long text comes in pages: pass next as cursor.",
			InputSchema: inputSchema(&GetIn{}), OutputSchema: outputSchema(&GetOut{}), Call: f.get},
		{Name: "ferry_status", Description: "The owner's view: agents to seat, reviews due, contested orders, silent holders, asks and messages waiting on the owner.",
			InputSchema: inputSchema(&StatusIn{}), OutputSchema: outputSchema(&StatusOut{}), Call: f.status},
		{Name: "ferry_update", Description: "Check for a newer owner-approved ferry release, or apply it over this binary (orchestrator; checksum verified). Restart to run it.",
			InputSchema: inputSchema(&UpdateIn{}), OutputSchema: outputSchema(&UpdateOut{}), Call: f.update},
	}
}

// readURI reads one ferry:// URI for ferry_get: memory notes
// (ferry://<project>/memory/<name>.md, text/markdown) here, everything else through
// the resources implementation (Ferry.Resources), so ferry_get and resources/read
// serve the same bytes under the same checks. Errors: not_found for a URI nothing
// answers to; those of Resources.Read.
func (f *Ferry) readURI(ctx context.Context, u string) ([]ResourceContents, error) {
	project, rest, ok := splitURI(u)
	name, isMemory := strings.CutPrefix(rest, "memory/")
	if !ok || !isMemory {
		return f.Resources().Read(ctx, u)
	}
	ch, err := f.channel()
	if err != nil {
		return nil, err
	}
	if project != ch.Project() {
		return nil, notFound(u, "this server serves project "+ch.Project())
	}
	text, _, err := readMemoryNote(ch, name)
	if err != nil {
		return nil, err
	}
	return []ResourceContents{{URI: u, MimeType: "text/markdown", Text: text}}, nil
}
