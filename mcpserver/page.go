package mcpserver

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/textsafe"
)

// Response caps of every read (docs/design.md §4): at most maxItems items and maxChars
// characters of compact JSON per response; what does not fit is one call away, named
// by the response's `next` cursor, with `truncated:true`.
const (
	maxItems = 20
	maxChars = 4000
)

// chars counts the characters of v's compact JSON as the server writes it (the unit
// of the token budget: tokens ≈ chars/4). A value that does not marshal counts as
// over every cap.
func chars(v any) int {
	b, err := marshal(v)
	if err != nil {
		return maxChars + 1
	}
	return utf8.RuneCount(b)
}

// fit returns the largest k ≤ n for which build(k) marshals to at most maxChars
// characters. One item always fits (k ≥ 1 when n ≥ 1), so a single oversized item is
// returned rather than an empty page that could never advance; callers bound each
// item's own size.
func fit(n int, build func(k int) any) int {
	k := n
	for k > 1 && chars(build(k)) > maxChars {
		k--
	}
	return k
}

// sinceArrival parses a `since` cursor of this machine's arrival log (the "<log
// id>.<n>" token fsbus Arrivals.Cursor makes, docs/design.md §2 "The local arrival log,
// cursors and sightings"). ok is false for an empty cursor, one from another machine or
// a lost log, or a malformed one: the caller then lists everything, never an error.
func sinceArrival(a *arrivals.Log, since string) (n uint64, ok bool) {
	id, num, found := strings.Cut(since, ".")
	if since == "" || !found || id != a.LogID {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > a.Last {
		return 0, false
	}
	return n, true
}

// arrivalCursor is the since cursor naming arrival number n of a's log.
func arrivalCursor(a *arrivals.Log, n uint64) string {
	return a.LogID + "." + strconv.FormatUint(n, 10)
}

// lastArrivals maps each ref (order, ask, message, agent id …) to the arrival number,
// on this machine, of its newest entry: the order in which things were last seen to
// change, which is what `since` paging walks.
func lastArrivals(v *fsbus.View) map[string]uint64 {
	out := map[string]uint64{}
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if e.Ref == "" {
			continue
		}
		if n := v.Arrivals.Number(e.Hash()); n > out[e.Ref] {
			out[e.Ref] = n
		}
	}
	return out
}

// Position cursors page a list that has no arrival order (search hits, memory files,
// the ledger newest first): "p" + the index the next page starts from.
const pagePrefix = "p"

// pageCursor is the cursor of the page starting at index i.
func pageCursor(i int) string { return pagePrefix + strconv.Itoa(i) }

// parsePage returns the index a position cursor names, 0 for "", and invalid for a
// cursor this tool did not make or that points past n.
func parsePage(cursor string, n int) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	i, err := strconv.Atoi(strings.TrimPrefix(cursor, pagePrefix))
	if !strings.HasPrefix(cursor, pagePrefix) || err != nil || i < 0 || i > n {
		return 0, errs.Errorf(errs.Invalid, "pass the next of the previous result, or no cursor to start over", "cursor %q is not a page of this list", cursor)
	}
	return i, nil
}

// OrderLine is an order in a list: compact by default (what a model needs to pick it);
// detail adds its author and when it last changed (HLC).
type OrderLine struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	State   string `json:"state"`
	Holder  string `json:"holder,omitempty"`
	To      string `json:"offered_to,omitempty"`
	Author  string `json:"author,omitempty"`
	Updated string `json:"updated,omitempty"`
}

// orderLine renders r compact, or with detail.
func orderLine(r fold.OrderRow, detail bool) OrderLine {
	l := OrderLine{ID: r.ID, Title: r.Title, State: string(r.State), Holder: r.Holder, To: r.To}
	if detail {
		l.Author, l.Updated = r.Author, r.Updated
	}
	return l
}

// checkState returns invalid for a filter that is not an order state (docs/design.md
// §2 "Orders", fold.OrderStates), "active" (not accepted or cancelled), "ready" or ""
// (all); the hint lists them all.
func checkState(state string) error {
	states := fold.OrderStates()
	if state == "" || state == "active" || state == "ready" || slices.Contains(states, state) {
		return nil
	}
	return errs.Errorf(errs.Invalid, "use active, ready, or a state: "+strings.Join(states, ", "),
		"unknown order state %q", state)
}

// orderPage lists the orders of state (fsbus OrderFilter.State: one state, "active" or
// "" for all) in the order this machine last saw them change, oldest first; with a
// since cursor of this machine only those that changed after it. It returns at most
// maxItems rows and maxChars characters, and next: the cursor of the last row
// returned when truncated, else of everything seen (pass it as since: nothing is
// skipped, nothing repeats unless it changed again). agent, when set, leaves orders
// offered to another agent out of "ready".
func orderPage(v *fsbus.View, state, since, agent string, detail bool, build func(rows []OrderLine, truncated bool, next string) any) any {
	last := lastArrivals(v)
	after, ok := sinceArrival(v.Arrivals, since)
	var rows []fold.OrderRow
	f := fold.OrderFilter{State: state}
	if state == "ready" { // claimable now: every dependency accepted
		f = fold.OrderFilter{Ready: true, For: agent} // not those offered to another agent
	}
	for _, r := range v.State.ListOrders(f) {
		if !ok || last[r.ID] > after {
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b fold.OrderRow) int {
		return cmp.Or(cmp.Compare(last[a.ID], last[b.ID]), strings.Compare(a.ID, b.ID))
	})
	page := func(k int) any {
		lines := make([]OrderLine, 0, k)
		for _, r := range rows[:k] {
			lines = append(lines, orderLine(r, detail))
		}
		if k < len(rows) {
			return build(lines, true, arrivalCursor(v.Arrivals, last[rows[k-1].ID]))
		}
		return build(lines, false, v.Arrivals.Cursor())
	}
	return page(fit(min(len(rows), maxItems), page))
}

// AskLine is an ask in ferry_ask_human: compact, its id, title, state and the owner's
// note (cut to 300 characters); detail adds the recommendation and reasoning (at most
// 1,200 characters each, fsbus.MaxAskText), the note whole, and when it was raised and
// answered (HLCs).
type AskLine struct {
	ID             string `json:"id,omitempty"`
	Title          string `json:"title,omitempty"`
	State          string `json:"state,omitempty"`
	Note           string `json:"note,omitempty"`
	Recommendation string `json:"recommendation,omitempty"`
	Reasoning      string `json:"reasoning,omitempty"`
	Raised         string `json:"raised,omitempty"`
	Answered       string `json:"answered,omitempty"`
}

// askLine renders a compact, or with detail.
func askLine(a *fold.Ask, detail bool) AskLine {
	l := AskLine{ID: a.ID, Title: a.Title, State: string(a.State)}
	if !detail {
		l.Note, _ = textsafe.Cut(a.Note, 300)
		return l
	}
	l.Note, l.Recommendation, l.Reasoning, l.Raised, l.Answered = a.Note, a.Recommendation, a.Reasoning, a.Raised, a.Answered
	return l
}

// askPage lists agent's asks like orderPage lists orders: in the order this machine
// last saw them change, oldest first, after since; at most maxItems and maxChars.
func askPage(v *fsbus.View, agent, since string, detail bool) *AskOut {
	last := lastArrivals(v)
	after, ok := sinceArrival(v.Arrivals, since)
	var asks []*fold.Ask
	for _, a := range v.State.AsksBy(agent, true) {
		if !ok || last[a.ID] > after {
			asks = append(asks, a)
		}
	}
	slices.SortStableFunc(asks, func(a, b *fold.Ask) int {
		return cmp.Or(cmp.Compare(last[a.ID], last[b.ID]), strings.Compare(a.ID, b.ID))
	})
	page := func(k int) any {
		out := &AskOut{Asks: []AskLine{}, Next: v.Arrivals.Cursor()}
		for _, a := range asks[:k] {
			out.Asks = append(out.Asks, askLine(a, detail))
		}
		if k < len(asks) {
			out.Truncated, out.Next = true, arrivalCursor(v.Arrivals, last[asks[k-1].ID])
		}
		return out
	}
	return page(fit(min(len(asks), maxItems), page)).(*AskOut)
}

// TalkLine is a message in ferry_talk read: who wrote it to whom and, compact, its
// preview (fsbus.PreviewRunes characters; Truncated when the body is longer, URI then
// names the whole body). With detail it carries instead the whole body as Text, its
// HLC, size in bytes, who has read it and the URI always; a body too long for any
// response (whole, it would put a response of this one message over maxChars) has no
// Text and is Truncated: it is read by its URI, never cut mid-text.
type TalkLine struct {
	ID        string   `json:"id"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Preview   string   `json:"preview,omitempty"`
	Text      string   `json:"text,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	URI       string   `json:"uri,omitempty"`
	HLC       string   `json:"hlc,omitempty"`
	Bytes     int      `json:"bytes,omitempty"`
	ReadBy    []string `json:"read_by,omitempty"`
}

// talkPage reads s's messages (fsbus Session.TalkRead, with since and peek as given)
// so that the answer fits maxChars without marking read anything it leaves out: a
// peek finds how many of the messages waiting fit, then the read takes exactly that
// many (fsbus then reports the rest as Remaining, and Next, with a cursor, names the
// last one returned). With detail every body that fits a response alone comes whole,
// on this page or, when the page is full, on a later one. A read that acknowledged
// something rewrites presence.
func (f *Ferry) talkPage(s *fsbus.Session, since string, peek, detail bool) (*TalkOut, error) {
	project := s.Project()
	lines := func(r *fsbus.TalkReadResult) []TalkLine {
		ls := make([]TalkLine, len(r.Messages))
		for i, m := range r.Messages {
			l := TalkLine{ID: m.ID, From: m.From, To: m.To}
			if !detail {
				l.Preview, l.Truncated = m.Preview, m.Truncated
				if m.Truncated {
					l.URI = uri(project, "message", m.ID)
				}
				ls[i] = l
				continue
			}
			l.Text, l.URI, l.HLC, l.Bytes, l.ReadBy = m.Body, uri(project, "message", m.ID), m.HLC, m.Bytes, m.ReadBy
			// Alone on a page with the largest envelope this read can have.
			alone := &TalkOut{Messages: []TalkLine{l}, Truncated: true, Remaining: r.Remaining + len(r.Messages), Pending: r.Pending, Next: r.Next}
			if chars(alone) > maxChars {
				l.Text, l.Truncated = "", true
			}
			ls[i] = l
		}
		return ls
	}
	render := func(r *fsbus.TalkReadResult, ls []TalkLine, k int) *TalkOut {
		return &TalkOut{Messages: append([]TalkLine{}, ls[:k]...), Truncated: r.Truncated || k < len(r.Messages),
			Remaining: r.Remaining + len(r.Messages) - k, Pending: r.Pending, Next: r.Next}
	}
	p, err := s.TalkRead(fsbus.TalkReadOptions{Since: since, Peek: true, Bodies: detail})
	if err != nil {
		return nil, err
	}
	pl := lines(p)
	k := fit(len(p.Messages), func(k int) any { return render(p, pl, k) })
	if len(p.Messages) == 0 || (peek && k == len(p.Messages)) {
		return render(p, pl, k), nil
	}
	r, err := s.TalkRead(fsbus.TalkReadOptions{Since: since, Peek: peek, Limit: k, Bodies: detail})
	if err != nil {
		return nil, err
	}
	if len(r.Acked) > 0 {
		f.wrote(s, "reading messages")
	}
	return render(r, lines(r), len(r.Messages)), nil
}

// primaryContests is how many contests of the primary chain ferry_primary shows: the
// newest (the rest stay in `ferry status --json`).
const primaryContests = 3

// boundPrimary bounds a primary status to the caps of a read: at most maxItems
// standbys and the newest primaryContests contests, fewer while the answer is over
// maxChars.
func boundPrimary(ps *fsbus.PrimaryStatus) *fsbus.PrimaryStatus {
	if len(ps.Standbys) > maxItems {
		ps.Standbys = ps.Standbys[:maxItems]
	}
	if n := len(ps.Contests); n > primaryContests {
		ps.Contests = ps.Contests[n-primaryContests:]
	}
	for len(ps.Contests) > 0 && chars(ps) > maxChars {
		ps.Contests = ps.Contests[1:]
	}
	for len(ps.Standbys) > 1 && chars(ps) > maxChars {
		ps.Standbys = ps.Standbys[:len(ps.Standbys)-1]
	}
	return ps
}
