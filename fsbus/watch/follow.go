package watch

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/internal/textsafe"
)

// Following a channel (`ferry watch`): a long-running reader that reports
// each new thing once, in the order it arrived on this machine.

// Kinds of FollowEvent.
const (
	FollowEntry   = "entry"   // a ledger entry arrived
	FollowOrder   = "order"   // an order that concerns the follower moved
	FollowMessage = "message" // a message to the follower arrived (its text too)
	FollowContest = "contest" // a thing's chain branched; the event names the winner
	FollowProblem = "problem" // the channel could not be read this time (it is retried)
)

// FollowEvent is one thing Follow reports: one line of `ferry watch`. Kind says which
// fields are set.
type FollowEvent struct {
	Kind string `json:"kind"`
	// Cursor is where to go on from after this event; `ferry watch --since` and
	// `ferry catchup --since` accept it. The events reported together share the cursor
	// of where they began, but the last, which names where they ended: going on from
	// an event before the last reports them again (at least once, never lost).
	Cursor string `json:"cursor"`
	// entry: the entry's writer, type, ref and HLC. order: its last move's HLC.
	// message: the post's HLC.
	Writer string `json:"writer,omitempty"`
	Type   string `json:"type,omitempty"`
	Ref    string `json:"ref,omitempty"`
	HLC    string `json:"hlc,omitempty"`
	// order and message: the thing's id; order: title, state, author, holder, offered
	// to; message: from, to and the preview.
	ID        string `json:"id,omitempty"`
	Title     string `json:"title,omitempty"`
	State     string `json:"state,omitempty"`
	Author    string `json:"author,omitempty"`
	Holder    string `json:"holder,omitempty"`
	OfferedTo string `json:"offered_to,omitempty"`
	From      string `json:"from,omitempty"`
	To        string `json:"to,omitempty"`
	Preview   string `json:"preview,omitempty"`
	// contest: the winner ("bob: order.claim") and the superseded steps.
	Winner string   `json:"winner,omitempty"`
	Lost   []string `json:"lost,omitempty"`
	// problem: what went wrong.
	Error string `json:"error,omitempty"`
}

// FollowOptions configure Follow.
type FollowOptions struct {
	// As is the follower: orders that concern it and messages to it are reported too.
	// "" reports entries and contests only.
	As string
	// Since is a cursor from this machine (an earlier event's Cursor, or a catchup's
	// next): everything that arrived after it is reported first. "" (or a cursor from
	// elsewhere) starts from now: nothing already there is reported. A value not shaped
	// like a cursor (CursorShape) is refused: Follow returns errs.Invalid.
	Since string
	// Watch configures the watcher (FERRY_WATCH=poll forces polling).
	Watch WatchOptions
	// OnReady, when not nil, is called once the first view is loaded and the watcher
	// is on: anything written after it is reported.
	OnReady func(polling bool)
}

// CursorShape describes a cursor for error hints: "<log id>.<arrival number>"
// (docs/design.md §2 "The local arrival log, cursors and sightings"), such as 3KD9QX0A.42.
const CursorShape = "<log id>.<number>, such as 3KD9QX0A.42"

// cursorRE is the shape of a cursor: an arrival log id (Crockford base32, as
// randomBase32 makes) and an arrival number.
var cursorRE = lazyre.New(`^[0-9A-Za-z]{1,32}\.[0-9]{1,20}$`)

// ValidCursor reports whether s is shaped like a cursor ("<log id>.<number>"). A
// well-shaped cursor from another machine or a lost arrival log is valid: readers fall
// back (Follow starts from now, Catchup gives the whole digest).
func ValidCursor(s string) bool { return cursorRE.MatchString(s) }

// Follow reports new things in the channel to emit until ctx ends, then returns nil
// (`ferry watch`). It watches the channel (fsnotify on directories, debounced,
// temp names ignored, rescans on overflow and every opt.Watch.Rescan, polling where
// no events come: see Watch) and after every hint loads the channel and emits, in
// this order:
//
//   - entry: every ledger entry that arrived on this machine since the last load, in
//     arrival order (an old entry arriving late is new: docs/design.md §2 "The local
//     arrival log, cursors and sightings");
//   - order (with As): each move, arrived since the start, of an order that concerns
//     As: open for anyone, offered to As, authored or held by As — once per move, and
//     only once its object file has arrived;
//   - message (with As): each message to As (by name or "all") whose post arrived
//     since the start, once its text has arrived too; no read receipt is written;
//   - contest: each branched chain (docs/design.md §2 "Races across machines") with a
//     step that arrived since the start, once per branch point, naming the winner; with
//     As, only those As is involved in.
//
// A load that fails after the first (a file half-delivered by a sync tool, say) is
// reported as a problem event, once per distinct error, and retried on the next hint.
// Follow returns the error of the first load, or the first error emit returns.
func Follow(ctx context.Context, c *fsbus.Channel, opt FollowOptions, emit func(FollowEvent) error) error {
	if opt.Since != "" && !ValidCursor(opt.Since) {
		return errs.Errorf(errs.Invalid, "pass a cursor printed by `ferry watch --json` (cursor) or `ferry catchup` (next), "+CursorShape+", or leave it out to start from now",
			"%q is not a cursor", opt.Since)
	}
	w := Watch(c, opt.Watch)
	defer w.Close()
	v, err := c.Load()
	if err != nil {
		return err
	}
	f := &follower{c: c, me: opt.As, orders: map[string]string{}, msgs: map[string]bool{}, contests: map[string]bool{}, sent: map[uint64]bool{}}
	f.start = v.Arrivals.Complete()
	if n, ok := v.Arrivals.ParseCursor(opt.Since); ok && opt.Since != "" {
		f.start = n
	}
	f.last = f.start
	if err := f.report(v, emit); err != nil {
		return err
	}
	if opt.OnReady != nil {
		opt.OnReady(w.Polling())
	}
	lastProblem := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.C:
		}
		v, err := c.Load()
		if err != nil {
			if msg := err.Error(); msg != lastProblem {
				lastProblem = msg
				if err := emit(FollowEvent{Kind: FollowProblem, Error: msg}); err != nil {
					return err
				}
			}
			continue
		}
		lastProblem = ""
		if err := f.report(v, emit); err != nil {
			return err
		}
	}
}

// follower is the state of one Follow: what it has reported.
type follower struct {
	c        *fsbus.Channel
	me       string
	start    uint64            // arrival number Follow started after
	last     uint64            // arrival number up to which everything was reported
	sent     map[uint64]bool   // entries reported numbered above last
	orders   map[string]string // order id → head last reported
	msgs     map[string]bool   // message ids reported
	contests map[string]bool   // ref + basis reported
}

// report emits what is new in v.
func (f *follower) report(v *fsbus.View, emit func(FollowEvent) error) error {
	arr := v.Arrivals
	cursor := func(n uint64) string { return fmt.Sprintf("%s.%d", arr.LogID, n) }
	now := arr.Cursor()
	before := cursor(f.last)
	// The events of one report are collected, then emitted with their cursors: each
	// but the last names where this report began, the last where it ended. Going on
	// from an event before the last reports this batch again — at least once, never
	// lost (else a message event after its entry would be lost by a consumer that
	// stopped between the two).
	var out []FollowEvent
	type arrived struct {
		n uint64
		i int
	}
	var fresh []arrived
	for i := range v.Snapshot.Entries {
		if n := arr.Number(v.Snapshot.Entries[i].Hash()); n > f.last && !f.sent[n] {
			fresh = append(fresh, arrived{n, i})
		}
	}
	slices.SortFunc(fresh, func(a, b arrived) int { return cmp.Compare(a.n, b.n) })
	for _, a := range fresh {
		e := &v.Snapshot.Entries[a.i]
		out = append(out, FollowEvent{Kind: FollowEntry, Writer: e.Writer, Type: e.Type, Ref: e.Ref, HLC: e.HLC})
		f.sent[a.n] = true
	}
	// Everything up to Complete is reported; above it, entries another process logged
	// while this view was read may still come, so the ones reported are remembered.
	if c := arr.Complete(); c > f.last {
		f.last = c
		for n := range f.sent {
			if n <= c {
				delete(f.sent, n)
			}
		}
	}
	st := v.State
	if f.me != "" {
		for _, id := range slices.Sorted(maps.Keys(st.Orders)) {
			o := st.Orders[id]
			concerns := o.State == fold.StateOpen || o.OfferedTo == f.me || o.Author == f.me || o.Holder == f.me
			if !concerns || o.Missing || o.Head == "" || f.orders[id] == o.Head || arr.Number(o.Head) <= f.start {
				continue
			}
			f.orders[id] = o.Head
			out = append(out, FollowEvent{Kind: FollowOrder, ID: o.ID, Title: o.Title, State: string(o.State), Author: o.Author, Holder: o.Holder, OfferedTo: o.OfferedTo, HLC: o.Updated})
		}
		for _, m := range st.MessagesWhere(func(m *fold.Message) bool { return m.AddressedTo(f.me) && !m.Pending }) {
			if f.msgs[m.ID] || arr.Number(m.Post) <= f.start {
				continue
			}
			f.msgs[m.ID] = true
			out = append(out, FollowEvent{Kind: FollowMessage, ID: m.ID, From: m.From, To: m.To, HLC: m.HLC, Preview: followPreview(m.Preview)})
		}
	}
	for _, ct := range st.Contested {
		key := ct.Ref + " " + ct.Basis
		if f.contests[key] || (f.me != "" && !slices.Contains(ct.Involved, f.me)) {
			continue
		}
		newest := arr.Number(ct.Winner.Hash)
		for _, l := range ct.Losers {
			newest = max(newest, arr.Number(l.Hash))
		}
		if newest <= f.start {
			continue
		}
		f.contests[key] = true
		r := fsbus.ContestRowOf(ct)
		out = append(out, FollowEvent{Kind: FollowContest, Ref: ct.Ref, Winner: r.Winner, Lost: r.Lost})
	}
	for i, ev := range out {
		ev.Cursor = before
		if i == len(out)-1 {
			ev.Cursor = now
		}
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// followPreview cuts a message's preview to CatchupPreview runes, as catch-up shows it.
func followPreview(s string) string {
	s, _ = textsafe.Cut(s, fsbus.CatchupPreview)
	return s
}
