package search

import (
	"cmp"
	"encoding/base64"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// Search kinds.
var searchKinds = []string{"order", "message", "decision", "ask"}

// Hit is one match, newest first by At (the HLC of its newest entry).
type Hit struct {
	Kind    string `json:"kind"` // order|message|decision|ask (ferry_search adds memory)
	ID      string `json:"id"`
	Title   string `json:"title,omitempty"`
	By      string `json:"by,omitempty"`
	At      string `json:"at,omitempty"`
	Line    int    `json:"line,omitempty"` // memory notes: 1-based line of the snippet
	Snippet string `json:"snippet"`
}

// Options is one search.
type Options struct {
	Query string // words that must all appear; 1–MaxSearchQuery characters
	Kind  string // "" for all, or order|message|decision|ask
	// Agent limits messages to those it sent or was sent (to it or to all), as an
	// agent's view; "" searches every message (the owner's view).
	Agent  string
	Limit  int    // hits per page, 1–MaxSearchLimit; 0 means DefaultSearchMax
	Cursor string // Next of the previous page; "" for the first
}

// Page is one page of hits. Total counts every hit of the query; Next, when
// set, is the cursor of the following page. The cursor names the last hit returned,
// not a position, so hits that arrive between pages do not shift the next page.
type Page struct {
	Hits  []Hit  `json:"hits"`
	Total int    `json:"total"`
	Next  string `json:"next,omitempty"`
}

// Terms validates a query and returns its lower-cased words. Errors: invalid for
// a query with no words or longer than MaxSearchQuery characters.
func Terms(q string) ([]string, error) {
	terms := strings.Fields(strings.ToLower(q))
	switch {
	case len(terms) == 0:
		return nil, errs.Errorf(errs.Invalid, "pass one or more words to search for", "empty query")
	case utf8.RuneCountInString(q) > fsbus.MaxSearchQuery:
		return nil, errs.Errorf(errs.Invalid, "search for a few words", "query is longer than %d characters", fsbus.MaxSearchQuery)
	}
	return terms, nil
}

// checkSearchKind returns invalid for a kind that is not "" or one of searchKinds.
func checkSearchKind(kind string) error {
	if kind == "" {
		return nil
	}
	for _, k := range searchKinds {
		if k == kind {
			return nil
		}
	}
	return errs.Errorf(errs.Invalid, "use order, message, decision or ask", "unknown kind %q", kind)
}

// Search returns one page of the hits of opt.Query in v, newest first. Errors: invalid
// for an empty or too long query, an unknown kind, a limit outside 0–MaxSearchLimit,
// or a cursor this search did not make (hint: pass the previous page's next).
func Find(c *fsbus.Channel, v *fsbus.View, opt Options) (*Page, error) {
	terms, err := Terms(opt.Query)
	if err != nil {
		return nil, err
	}
	if err := checkSearchKind(opt.Kind); err != nil {
		return nil, err
	}
	limit := opt.Limit
	switch {
	case limit == 0:
		limit = fsbus.DefaultSearchMax
	case limit < 0 || limit > fsbus.MaxSearchLimit:
		return nil, errs.Errorf(errs.Invalid, "pass a limit from 1 to 100", "limit %d is out of range", limit)
	}
	hits := Hits(c, v, terms, opt.Kind, opt.Agent)
	start := 0
	if opt.Cursor != "" {
		at, key, err := parseSearchCursor(opt.Cursor)
		if err != nil {
			return nil, err
		}
		start = sort.Search(len(hits), func(i int) bool { return hitAfter(hits[i], at, key) })
	}
	page := &Page{Hits: []Hit{}, Total: len(hits)}
	end := min(len(hits), start+limit)
	page.Hits = append(page.Hits, hits[start:end]...)
	if end < len(hits) {
		last := hits[end-1]
		page.Next = searchCursor(last.At, last.Kind+"/"+last.ID)
	}
	return page, nil
}

// hitAfter reports whether h sorts after the hit (at, key) in search order (At
// descending, then kind/id ascending).
func hitAfter(h Hit, at, key string) bool {
	if h.At != at {
		return h.At < at
	}
	return h.Kind+"/"+h.ID > key
}

const searchCursorPrefix = "s1."

func searchCursor(at, key string) string {
	return searchCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(at+"\x00"+key))
}

func parseSearchCursor(cur string) (at, key string, err error) {
	bad := errs.Errorf(errs.Invalid, "pass the next value of the previous page exactly, or no cursor to start over", "cursor %q is not a search cursor", cur)
	rest, ok := strings.CutPrefix(cur, searchCursorPrefix)
	if !ok {
		return "", "", bad
	}
	b, derr := base64.RawURLEncoding.DecodeString(rest)
	if derr != nil || !utf8.Valid(b) {
		return "", "", bad
	}
	at, key, ok = strings.Cut(string(b), "\x00")
	if !ok || !strings.Contains(key, "/") {
		return "", "", bad
	}
	return at, key, nil
}

// Hits returns every hit of terms (lower-cased words, see Terms) of kind
// ("" for all) in v, newest first (At descending, then kind/id ascending). agent
// limits messages as in Options. Messages still pending (their object not yet
// arrived) are not searched.
func Hits(c *fsbus.Channel, v *fsbus.View, terms []string, kind, agent string) []Hit {
	st := v.State
	want := func(k string) bool { return kind == "" || kind == k }
	var hits []Hit
	add := func(h Hit, text string) {
		if snip, _, ok := MatchText(h.Title, text, terms); ok {
			h.Snippet = snip
			hits = append(hits, h)
		}
	}
	if want("order") {
		all := st.AllOrders() // those terminal at the owner's checkpoint too
		for _, id := range slices.Sorted(maps.Keys(all)) {
			o := all[id]
			text := []string{o.Body}
			for _, s := range o.History {
				text = append(text, s.Note)
			}
			if o.Result != nil {
				text = append(text, o.Result.Reference, o.Result.Note)
			}
			add(Hit{Kind: "order", ID: id, Title: o.Title, By: o.Author, At: o.Updated}, joinDistinct(text))
		}
	}
	if want("message") {
		for _, id := range st.MessageIDs() {
			m := st.Messages[id]
			if m.Pending || (agent != "" && m.From != agent && m.To != agent && m.To != fold.ToAll) {
				continue
			}
			full, err := st.TalkShow(id)
			if err != nil {
				continue
			}
			add(Hit{Kind: "message", ID: id, By: m.From, At: m.HLC}, full.Body)
		}
	}
	if want("decision") {
		for _, d := range st.ListDecisions(0) {
			add(Hit{Kind: "decision", ID: d.ID, By: d.By, At: d.HLC}, d.Line)
		}
	}
	if want("ask") {
		for _, a := range st.AllAsks() {
			at := max(a.Raised, a.Answered)
			add(Hit{Kind: "ask", ID: a.ID, Title: a.Title, By: a.Author, At: at},
				joinDistinct([]string{a.Recommendation, a.Reasoning, a.Note}))
		}
	}
	slices.SortStableFunc(hits, func(a, b Hit) int {
		return cmp.Or(cmp.Compare(b.At, a.At), strings.Compare(a.Kind+"/"+a.ID, b.Kind+"/"+b.ID))
	})
	return hits
}

// joinDistinct joins the non-empty texts of one thing, one a line, each once: a
// submit's note is both a step of the history and the result's note, and a snippet
// shows it once.
func joinDistinct(texts []string) string {
	seen := map[string]bool{}
	var out []string
	for _, t := range texts {
		if k := strings.TrimSpace(t); k != "" && !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n")
}

// MatchText reports whether every term occurs in title or text (terms lower-cased,
// compared with the lower-cased title and text) and returns a snippet of at most
// SearchSnippet characters of text around the first occurrence of a term in it (its
// beginning when the terms are in the title only), whitespace collapsed and "…" marking
// a cut, and the 1-based line of text the snippet starts at.
func MatchText(title, text string, terms []string) (snippet string, line int, ok bool) {
	low := strings.ToLower(text)
	ltitle := strings.ToLower(title)
	first := -1
	for _, t := range terms {
		i := strings.Index(low, t)
		if i < 0 && !strings.Contains(ltitle, t) {
			return "", 0, false
		}
		if i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	// ToLower can change byte lengths: find the place in the original by rune position.
	at := 0
	if first > 0 {
		at = utf8.RuneCountInString(low[:first])
	}
	runes := []rune(text)
	if at > len(runes) {
		at = len(runes)
	}
	line = 1 + strings.Count(string(runes[:at]), "\n")
	from := max(0, at-fsbus.SearchSnippet/4)
	to := min(len(runes), from+fsbus.SearchSnippet)
	snip := strings.Join(strings.Fields(string(runes[from:to])), " ")
	if from > 0 {
		snip = "…" + snip
	}
	if to < len(runes) {
		snip += "…"
	}
	return snip, line, true
}
