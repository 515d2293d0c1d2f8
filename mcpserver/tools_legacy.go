package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/textsafe"
	"github.com/ferryhq/ferry/ledger"
)

// The legacy group (`ferry mcp serve --tools legacy`, and all `--read-only` serves):
// the predecessor's eight read tools (docs/design.md §4 "Opt-in groups"), by the same
// names and inputs, over this channel's real data. They read; none writes or takes the
// identity lease. Every list is capped like the core reads (maxItems, maxChars) and
// paged with `cursor` (pass the last result's next).

// ---- channel_status ----

// ChannelStatusOut is channel_status's output: the channel in a few numbers.
type ChannelStatusOut struct {
	Project   string         `json:"project"`
	Entries   int            `json:"entries"`
	Agents    int            `json:"agents"` // seated, not retired
	Joined    int            `json:"joined"` // announced, seated or not
	Orders    map[string]int `json:"orders"` // by state
	Primary   string         `json:"primary,omitempty"`
	Messages  int            `json:"messages"`
	Asks      int            `json:"asks_pending"`
	Decisions int            `json:"decisions"`
}

func (f *Ferry) channelStatus(ctx context.Context, args json.RawMessage) (any, error) {
	var in struct{}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	ch, v, err := f.read()
	if err != nil {
		return nil, err
	}
	st := v.State
	out := &ChannelStatusOut{Project: ch.Project(), Entries: st.Entries, Orders: map[string]int{}, Primary: st.Primary.Holder,
		Messages: len(st.Messages), Asks: len(st.PendingAsks()), Decisions: len(st.Decisions)}
	for _, a := range st.AgentList() {
		if a.JoinKey != "" || a.Seated {
			out.Joined++
		}
		if a.Seated && !a.Retired {
			out.Agents++
		}
	}
	for state, n := range st.OrderCounts() {
		out.Orders[string(state)] = n
	}
	return out, nil
}

// ---- discover ----

// PageIn is the input of the legacy lists: a page cursor and detail.
type PageIn struct {
	Cursor string `json:"cursor,omitempty" jsonschema:"description=next of the last result"`
	Detail bool   `json:"detail,omitempty" jsonschema:"description=more fields per row"`
}

// DiscoverOut is discover's output: the agents of the channel, by name.
type DiscoverOut struct {
	Agents    []AgentLine `json:"agents"`
	Total     int         `json:"total"`
	Truncated bool        `json:"truncated,omitempty"`
	Next      string      `json:"next,omitempty"`
}

// AgentLine is one agent: what it announced, its seat, and this machine's view of its
// liveness; detail adds its seated key, devices and first join (HLC).
type AgentLine struct {
	Name     string   `json:"name"`
	Level    string   `json:"level"`
	Engine   string   `json:"engine"`
	Machine  string   `json:"machine,omitempty"`
	Liveness string   `json:"liveness"`
	AgeS     int64    `json:"age_s"`
	Retired  bool     `json:"retired,omitempty"`
	Key      string   `json:"key,omitempty"`
	Devices  []string `json:"devices,omitempty"`
	Joined   string   `json:"joined,omitempty"`
}

func (f *Ferry) discover(ctx context.Context, args json.RawMessage) (any, error) {
	var in PageIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	ch, v, err := f.read()
	if err != nil {
		return nil, err
	}
	engines := engineOf(v)
	rows := ch.Agents(v) // sorted by name
	start, err := parsePage(in.Cursor, len(rows))
	if err != nil {
		return nil, err
	}
	rest := rows[start:]
	build := func(k int) any {
		out := &DiscoverOut{Agents: []AgentLine{}, Total: len(rows)}
		for _, r := range rest[:k] {
			l := AgentLine{Name: r.Name, Level: r.Level, Engine: engines[r.Name], Machine: r.Machine, Liveness: r.Liveness, AgeS: r.AgeS, Retired: r.Retired}
			if in.Detail {
				l.Key, l.Devices, l.Joined = r.Key, r.Devices, r.Joined
			}
			out.Agents = append(out.Agents, l)
		}
		if k < len(rest) {
			out.Truncated, out.Next = true, pageCursor(start+k)
		}
		return out
	}
	return build(fit(min(len(rest), maxItems), build)), nil
}

// engineOf maps every agent to its engine: the app (claude-code, codex, cursor …) of
// its newest agent.join that names one other than "mcp" (the app ferry_join announced
// before it learnt the client's name: the transport, not the engine), else "mcp" when
// it only ever joined over MCP, else "unknown". Only joins announcing the agent's
// current key count. The owner ("master") is "human".
func engineOf(v *fsbus.View) map[string]string {
	out := map[string]string{fold.MasterWriter: "human"}
	for _, a := range v.State.Agents {
		switch {
		case a.App != "":
			out[a.Name] = a.App
		default:
			out[a.Name] = "unknown"
		}
	}
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		a := v.State.Agents[e.Writer]
		if e.Type != fold.TypeAgentJoin || a == nil || e.Ref != e.Writer {
			continue
		}
		var d struct {
			Key string `json:"key"`
			App string `json:"app"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.App == "" || d.App == "mcp" {
			continue
		}
		if key := a.Key; d.Key == key || (key == "" && d.Key == a.JoinKey) {
			out[a.Name] = d.App // entries are in HLC order: the newest wins
		}
	}
	return out
}

// ---- list_tasks ----

// ListTasksIn is list_tasks' input.
type ListTasksIn struct {
	State  string `json:"state,omitempty" jsonschema:"description=one state\\, active\\, or all when omitted"`
	Cursor string `json:"cursor,omitempty" jsonschema:"description=next of the last result"`
	Detail bool   `json:"detail,omitempty" jsonschema:"description=more fields per row"`
}

// ListTasksOut is list_tasks' output: orders, oldest change first.
type ListTasksOut struct {
	Tasks     []OrderLine `json:"tasks"`
	Truncated bool        `json:"truncated,omitempty"`
	Next      string      `json:"next"`
}

func (f *Ferry) listTasks(ctx context.Context, args json.RawMessage) (any, error) {
	var in ListTasksIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if err := checkState(in.State); err != nil {
		return nil, err
	}
	_, v, err := f.read()
	if err != nil {
		return nil, err
	}
	return orderPage(v, in.State, in.Cursor, f.cfg.Agent, in.Detail, func(rows []OrderLine, truncated bool, next string) any {
		return &ListTasksOut{Tasks: rows, Truncated: truncated, Next: next}
	}), nil
}

// ---- get_task ----

// GetTaskIn is get_task's input.
type GetTaskIn struct {
	ID     string `json:"id" jsonschema:"description=order id or unique prefix"`
	Detail bool   `json:"detail,omitempty" jsonschema:"description=longer body and notes"`
}

// GetTaskOut is get_task's output: the order, bounded like ferry_orders show, and who
// claimed it when.
type GetTaskOut struct {
	Task      *OrderView  `json:"task"`
	Claims    []ClaimLine `json:"claims"`
	Truncated bool        `json:"truncated,omitempty"`
}

// ClaimLine is one claim of an order: who, and when (HLC).
type ClaimLine struct {
	By string `json:"by"`
	At string `json:"at"`
}

func (f *Ferry) getTask(ctx context.Context, args json.RawMessage) (any, error) {
	var in GetTaskIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if err := need("get_task", map[string]string{"id": in.ID}); err != nil {
		return nil, err
	}
	ch, v, err := f.read()
	if err != nil {
		return nil, err
	}
	o, err := v.State.FindOrder(in.ID)
	if err != nil {
		return nil, err
	}
	claims := []ClaimLine{}
	for _, s := range o.History {
		if s.Type == fold.TypeOrderClaim {
			claims = append(claims, ClaimLine{By: s.By, At: s.HLC})
		}
	}
	if len(claims) > maxItems {
		claims = claims[len(claims)-maxItems:]
	}
	ov, cutView := orderViewFit(ch.Project(), o, in.Detail, func(ov *OrderView) any { return &GetTaskOut{Task: ov, Claims: claims} })
	return &GetTaskOut{Task: ov, Claims: claims, Truncated: cutView}, nil
}

// ---- read_memory ----

// ReadMemoryIn is read_memory's input.
type ReadMemoryIn struct {
	File   string `json:"file,omitempty" jsonschema:"description=a name from the list; omit to list"`
	Cursor string `json:"cursor,omitempty" jsonschema:"description=next of the last result"`
}

// ReadMemoryOut is read_memory's output: the notes of memory/ (name and size in
// bytes), or one page of one note's text.
type ReadMemoryOut struct {
	Files     []MemoryFile `json:"files,omitempty"`
	File      string       `json:"file,omitempty"`
	Chars     int          `json:"chars,omitempty"`
	Text      string       `json:"text,omitempty"`
	Truncated bool         `json:"truncated,omitempty"`
	Next      string       `json:"next,omitempty"`
}

// MemoryFile is one note of memory/.
type MemoryFile struct {
	Name  string `json:"file"`
	Bytes int64  `json:"bytes"`
}

func (f *Ferry) readMemory(ctx context.Context, args json.RawMessage) (any, error) {
	var in ReadMemoryIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	ch, err := f.channel()
	if err != nil {
		return nil, err
	}
	if in.File == "" {
		notes, err := memoryNotes(ch)
		if err != nil {
			return nil, err
		}
		start, err := parsePage(in.Cursor, len(notes))
		if err != nil {
			return nil, err
		}
		rest := notes[start:]
		build := func(k int) any {
			out := &ReadMemoryOut{Files: append([]MemoryFile{}, rest[:k]...)}
			if k < len(rest) {
				out.Truncated, out.Next = true, pageCursor(start+k)
			}
			return out
		}
		return build(fit(min(len(rest), maxItems), build)), nil
	}
	text, _, err := readMemoryNote(ch, in.File)
	if err != nil {
		return nil, err
	}
	runes := []rune(text)
	start, err := parsePage(in.Cursor, len(runes))
	if err != nil {
		return nil, err
	}
	rest := runes[start:]
	build := func(n int) *ReadMemoryOut {
		out := &ReadMemoryOut{File: in.File, Chars: len(runes), Text: string(rest[:n])}
		if n < len(rest) {
			out.Truncated, out.Next = true, pageCursor(start+n)
		}
		return out
	}
	n := min(len(rest), maxChars)
	for n > 1 && chars(build(n)) > maxChars {
		n -= max(1, n/10)
	}
	return build(n), nil
}

// memoryNotes lists the notes of the channel's memory/ (docs/design.md §2: human
// notes): regular files named *.md directly in it, dot-names skipped, sorted by name. A
// channel without memory/ has none.
func memoryNotes(ch *fsbus.Channel) ([]MemoryFile, error) {
	dir, err := memoryDir(ch)
	if errors.Is(err, fs.ErrNotExist) {
		return []MemoryFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []MemoryFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []MemoryFile{}
	for _, de := range ents {
		name := de.Name()
		if !de.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".md") {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, MemoryFile{Name: name, Bytes: info.Size()})
	}
	slices.SortFunc(out, func(a, b MemoryFile) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// memoryDir returns the channel's memory/ directory, refusing (denied) a memory/ that
// is a symbolic link, a Windows junction or anything but a directory: os.OpenRoot
// follows a link it is handed, so `rm -r memory; ln -s /some/dir memory` would serve
// files from outside the channel (docs/threat-model.md "Hostile MCP callers"). The
// channel root itself may be a link (the user's choice). fs.ErrNotExist when there is
// none.
func memoryDir(ch *fsbus.Channel) (string, error) {
	dir := filepath.Join(ch.Root, "memory")
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		return "", errs.Errorf(errs.Denied, "replace memory/ by a real directory; ferry never follows links out of the channel (`ferry doctor` lists every link)",
			"memory is a symbolic link or not a directory: memory notes are not read through it")
	}
	return dir, nil
}

// readMemoryNote returns the text of one note of memory/ (at most maxMemoryBytes;
// cut reports a longer file), opened through os.Root so that no name, link or ".."
// reaches outside memory/; denied when memory/ or the note is a symbolic link. Invalid UTF-8 is replaced. It returns not_found for a name
// memoryNotes does not list.
func readMemoryNote(ch *fsbus.Channel, name string) (text string, cutShort bool, err error) {
	notFound := errs.Errorf(errs.NotFound, "read_memory without file lists the notes", "no memory note %q", name)
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".md") {
		return "", false, notFound
	}
	dir, err := memoryDir(ch)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, notFound
		}
		return "", false, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", false, notFound
	}
	defer root.Close()
	if fi, err := root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return "", false, errs.Errorf(errs.Denied, "replace the link by the note itself; ferry never follows links in memory/",
			"memory/%s is a symbolic link", name)
	}
	fh, err := root.Open(name)
	if err != nil {
		return "", false, notFound
	}
	defer fh.Close()
	if info, err := fh.Stat(); err != nil || !info.Mode().IsRegular() {
		return "", false, notFound
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxMemoryBytes+1))
	if err != nil {
		return "", false, err
	}
	if len(b) > maxMemoryBytes {
		b, cutShort = b[:maxMemoryBytes], true
	}
	b = []byte(strings.TrimPrefix(string(b), "\xef\xbb\xbf"))
	if !utf8.Valid(b) {
		return strings.ToValidUTF8(string(b), "\uFFFD"), cutShort, nil
	}
	return string(b), cutShort, nil
}

// ---- list_ledger ----

// LedgerIn is the input of list_ledger and list_learnings.
type LedgerIn struct {
	Limit  int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20"`
	Cursor string `json:"cursor,omitempty" jsonschema:"description=next of the last result"`
	Detail bool   `json:"detail,omitempty" jsonschema:"description=more fields per row"`
}

// limit returns in.Limit checked: 0 means maxItems.
func (in LedgerIn) limit() (int, error) {
	if in.Limit < 0 || in.Limit > maxItems {
		return 0, errs.Errorf(errs.Invalid, "pass a limit from 1 to 20", "limit %d is out of range", in.Limit)
	}
	if in.Limit == 0 {
		return maxItems, nil
	}
	return in.Limit, nil
}

// ListLedgerOut is list_ledger's output: entries newest first. Problems counts what
// reading the segments found wrong (torn tails of others excepted: not yet arrived).
type ListLedgerOut struct {
	Entries   []EntryLine `json:"entries"`
	Total     int         `json:"total"`
	Problems  int         `json:"problems"`
	Truncated bool        `json:"truncated,omitempty"`
	Next      string      `json:"next,omitempty"`
}

// EntryLine is one ledger entry: when (HLC), who, what, about what, a one-line summary
// of its data, and whether it counts (signature and grant verified by the fold);
// detail adds its device, seq and hash.
type EntryLine struct {
	HLC     string `json:"hlc"`
	Writer  string `json:"writer"`
	Type    string `json:"type"`
	Ref     string `json:"ref,omitempty"`
	Summary string `json:"summary,omitempty"`
	Counts  bool   `json:"counts"`
	Device  string `json:"device,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	Hash    string `json:"hash,omitempty"`
}

// entrySummary is an entry's data in one short line: verdict, note, reference or
// recipient, whichever it carries.
func entrySummary(e *ledger.Entry) string {
	var d struct {
		Verdict   string `json:"verdict"`
		Note      string `json:"note"`
		Reference string `json:"reference"`
		To        string `json:"to"`
		Level     string `json:"level"`
		App       string `json:"app"`
		Line      string `json:"line"`
		Objective string `json:"objective"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return ""
	}
	var parts []string
	for _, p := range []struct{ k, v string }{{"", d.Verdict}, {"to ", d.To}, {"level ", d.Level}, {"app ", d.App}, {"ref ", d.Reference}, {"", d.Note}, {"", d.Line}, {"", d.Objective}} {
		if p.v != "" {
			parts = append(parts, p.k+strings.Join(strings.Fields(p.v), " "))
		}
	}
	s, _ := textsafe.Cut(strings.Join(parts, "; "), 120)
	return s
}

func (f *Ferry) listLedger(ctx context.Context, args json.RawMessage) (any, error) {
	var in LedgerIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	limit, err := in.limit()
	if err != nil {
		return nil, err
	}
	_, v, err := f.read()
	if err != nil {
		return nil, err
	}
	es := v.Snapshot.Entries // oldest first; a cursor names how many of them remain to show
	end, err := newestFirst(in.Cursor, len(es))
	if err != nil {
		return nil, err
	}
	problems := len(v.Snapshot.Forks)
	for _, p := range v.Snapshot.Problems {
		if p.Kind != ledger.KindTorn && p.Kind != ledger.KindFork {
			problems++
		}
	}
	build := func(k int) any {
		out := &ListLedgerOut{Entries: []EntryLine{}, Total: len(es), Problems: problems}
		for i := end - 1; i >= end-k; i-- {
			e := &es[i]
			l := EntryLine{HLC: e.HLC, Writer: e.Writer, Type: e.Type, Ref: e.Ref, Summary: entrySummary(e), Counts: v.State.Counts(e.Hash())}
			if in.Detail {
				l.Device, l.Seq, l.Hash = e.Device, e.Seq, e.Hash()
			}
			out.Entries = append(out.Entries, l)
		}
		if end-k > 0 {
			out.Truncated, out.Next = true, pageCursor(end-k)
		}
		return out
	}
	return build(fit(min(end, limit), build)), nil
}

// newestFirst returns how many items of an oldest-first list of n are still to be
// listed newest first: n without a cursor, else the count the cursor names. The cursor
// counts from the oldest item, so items added meanwhile shift nothing.
func newestFirst(cursor string, n int) (int, error) {
	if cursor == "" {
		return n, nil
	}
	return parsePage(cursor, n)
}

// ---- list_learnings ----

// LearningsIn is list_learnings' input.
type LearningsIn struct {
	Engine string `json:"engine,omitempty" jsonschema:"description=only this engine's"`
	Limit  int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20"`
	Cursor string `json:"cursor,omitempty" jsonschema:"description=next of the last result"`
}

// ListLearningsOut is list_learnings' output: reviews newest first.
type ListLearningsOut struct {
	Learnings []Learning `json:"learnings"`
	Total     int        `json:"total"`
	Truncated bool       `json:"truncated,omitempty"`
	Next      string     `json:"next,omitempty"`
}

// Learning is one review of submitted work, by the engine of whoever submitted it:
// what the engine did (the order, the reference it handed in) and whether it was kept
// (verdict accept) or sent back (changes).
type Learning struct {
	Engine    string `json:"engine"`
	Submitter string `json:"submitter"`
	Order     string `json:"order"`
	Title     string `json:"title"`
	Reference string `json:"reference,omitempty"`
	Kept      bool   `json:"kept"`
	Reviewer  string `json:"reviewer"`
	Note      string `json:"note,omitempty"`
	At        string `json:"at"`
}

// learnings derives every review of the channel's orders, oldest first, each paired
// with the submit it judged: an order's history is its winning chain, in order, so a
// review judges the newest submit before it.
func learnings(v *fsbus.View) []Learning {
	engines := engineOf(v)
	var out []Learning
	all := v.State.AllOrders() // those terminal at the owner's checkpoint too
	for _, id := range slices.Sorted(maps.Keys(all)) {
		o := all[id]
		title, _ := textsafe.Cut(o.Title, 80)
		var by, ref string
		for _, s := range o.History {
			switch s.Type {
			case fold.TypeOrderSubmit:
				by, ref = s.By, ""
				if o.Result != nil && o.Result.By == s.By && o.Result.HLC == s.HLC {
					ref = o.Result.Reference
				}
			case fold.TypeOrderReview:
				if by == "" {
					continue
				}
				note, _ := textsafe.Cut(s.Note, 200)
				eng := engines[by]
				if eng == "" {
					eng = "unknown"
				}
				out = append(out, Learning{Engine: eng, Submitter: by, Order: o.ID, Title: title, Reference: ref,
					Kept: s.Verdict == "accept", Reviewer: s.By, Note: note, At: s.HLC})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Learning) int {
		return cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.Order, b.Order))
	})
	return out
}

func (f *Ferry) listLearnings(ctx context.Context, args json.RawMessage) (any, error) {
	var in LearningsIn
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	limit, err := LedgerIn{Limit: in.Limit}.limit()
	if err != nil {
		return nil, err
	}
	_, v, err := f.read()
	if err != nil {
		return nil, err
	}
	var all []Learning
	for _, l := range learnings(v) {
		if in.Engine == "" || l.Engine == in.Engine {
			all = append(all, l)
		}
	}
	end, err := newestFirst(in.Cursor, len(all))
	if err != nil {
		return nil, err
	}
	build := func(k int) any {
		out := &ListLearningsOut{Learnings: []Learning{}, Total: len(all)}
		for i := end - 1; i >= end-k; i-- {
			out.Learnings = append(out.Learnings, all[i])
		}
		if end-k > 0 {
			out.Truncated, out.Next = true, pageCursor(end-k)
		}
		return out
	}
	return build(fit(min(end, limit), build)), nil
}

// ---- list_engines ----

// ListEnginesOut is list_engines' output: every engine agents declared, by name.
type ListEnginesOut struct {
	Engines   []EngineLine `json:"engines"`
	Truncated bool         `json:"truncated,omitempty"`
}

// EngineLine is one engine (the app an agent declared at join): its agents, how many
// results they submitted, and how the reviews went (accepted: kept; changes: sent
// back).
type EngineLine struct {
	Engine    string   `json:"engine"`
	Agents    []string `json:"agents"`
	Submitted int      `json:"submitted"`
	Accepted  int      `json:"accepted"`
	Changes   int      `json:"changes"`
}

func (f *Ferry) listEngines(ctx context.Context, args json.RawMessage) (any, error) {
	var in struct{}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	_, v, err := f.read()
	if err != nil {
		return nil, err
	}
	engines := engineOf(v)
	byEngine := map[string]*EngineLine{}
	line := func(e string) *EngineLine {
		if byEngine[e] == nil {
			byEngine[e] = &EngineLine{Engine: e, Agents: []string{}}
		}
		return byEngine[e]
	}
	for _, a := range v.State.AgentList() {
		if a.JoinKey == "" && !a.Seated {
			continue
		}
		l := line(engines[a.Name])
		l.Agents = append(l.Agents, a.Name)
	}
	for _, o := range v.State.AllOrders() {
		for _, s := range o.History {
			if s.Type == fold.TypeOrderSubmit && engines[s.By] != "" {
				line(engines[s.By]).Submitted++
			}
		}
	}
	for _, l := range learnings(v) {
		if l.Kept {
			line(l.Engine).Accepted++
		} else {
			line(l.Engine).Changes++
		}
	}
	names := slices.Sorted(maps.Keys(byEngine))
	build := func(k int) any {
		out := &ListEnginesOut{Engines: []EngineLine{}, Truncated: k < len(names)}
		for _, e := range names[:k] {
			out.Engines = append(out.Engines, *byEngine[e])
		}
		return out
	}
	return build(fit(min(len(names), maxItems), build)), nil
}

// legacyTools lists the legacy group (names and inputs of the predecessor's read
// tools; descriptions and schemas fixed: docs/design.md §4).
func (f *Ferry) legacyTools() []*Tool {
	return []*Tool{
		{Name: "channel_status", Description: "Summarize this channel: project, agents, orders by state, the primary, messages, pending asks, decisions.",
			InputSchema: inputSchema(&struct{}{}), OutputSchema: outputSchema(&ChannelStatusOut{}), Call: f.channelStatus},
		{Name: "discover", Description: "The agents of this channel: level, engine (the app it joined from), machine, liveness. Paged: pass next as cursor.",
			InputSchema: inputSchema(&PageIn{}), OutputSchema: outputSchema(&DiscoverOut{}), Call: f.discover},
		{Name: "list_tasks", Description: "List orders (tasks), optionally of one state, oldest change first. Paged: pass next as cursor; it then lists only what changed.",
			InputSchema: inputSchema(&ListTasksIn{}), OutputSchema: outputSchema(&ListTasksOut{}), Call: f.listTasks},
		{Name: "get_task", Description: "One order: body (bounded), claims, progress, result and reviews.",
			InputSchema: inputSchema(&GetTaskIn{}), OutputSchema: outputSchema(&GetTaskOut{}), Call: f.getTask},
		{Name: "read_memory", Description: "The project's memory notes (memory/*.md): list them, or read one file. Long files come in pages: pass next as cursor.",
			InputSchema: inputSchema(&ReadMemoryIn{}), OutputSchema: outputSchema(&ReadMemoryOut{}), Call: f.readMemory},
		{Name: "list_ledger", Description: "The newest ledger entries (who did what, signed), newest first, each saying whether it counts. Paged: pass next as cursor.",
			InputSchema: inputSchema(&LedgerIn{}), OutputSchema: outputSchema(&ListLedgerOut{}), Call: f.listLedger},
		{Name: "list_learnings", Description: "Reviews of submitted work by the submitter's engine: what each engine did and whether it was kept, newest first.",
			InputSchema: inputSchema(&LearningsIn{}), OutputSchema: outputSchema(&ListLearningsOut{}), Call: f.listLearnings},
		{Name: "list_engines", Description: "The apps (engines) agents declared when they joined, with their agents, results submitted, accepted and sent back.",
			InputSchema: inputSchema(&struct{}{}), OutputSchema: outputSchema(&ListEnginesOut{}), Call: f.listEngines},
	}
}
