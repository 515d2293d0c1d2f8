package fold

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
)

// ListOrders returns matching orders, most recently updated first (ties by id).
func (st *State) ListOrders(f OrderFilter) []OrderRow {
	var out []OrderRow
	orders := st.Orders // every order that can be active or ready
	if f.State != "active" && !f.Ready && (f.State == "" || Terminal(OrderState(f.State))) {
		orders = st.AllOrders()
	}
	for _, o := range orders {
		switch {
		case f.State == "active" && Terminal(o.State):
			continue
		case f.State != "" && f.State != "active" && string(o.State) != f.State:
			continue
		case f.Mine != "" && o.Author != f.Mine && o.Holder != f.Mine:
			continue
		case f.Ready && !st.Ready(o):
			continue
		case f.Ready && f.For != "" && o.State == StateOffered && o.OfferedTo != f.For:
			continue
		case f.Ready && f.For != "" && !InScope(st.ScopesNow(f.For), o.Labels):
			continue // outside the agent's scoped grant
		}
		out = append(out, o.Row())
	}
	slices.SortFunc(out, func(a, b OrderRow) int {
		return cmp.Or(strings.Compare(b.Updated, a.Updated), strings.Compare(a.ID, b.ID))
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

// OrderFilter selects orders for ListOrders.
type OrderFilter struct {
	State string // one state, "active" (not accepted/cancelled), or "" for all
	Mine  string // author or holder
	Limit int    // 0 = no limit
	// Ready keeps only orders that can be claimed now (State.Ready); with For
	// set, only those that agent can claim (an order offered to another, or outside the
	// agent's scoped grant, is left out).
	Ready bool
	For   string
}

// Row summarises o.
func (o *Order) Row() OrderRow {
	return OrderRow{ID: o.ID, Title: o.Title, State: o.State, Author: o.Author, Holder: o.Holder, To: o.OfferedTo, Updated: o.Updated}
}

// OrderRow is an order's one-line summary.
type OrderRow struct {
	ID      string     `json:"id"`
	Title   string     `json:"title"`
	State   OrderState `json:"state"`
	Author  string     `json:"author"`
	Holder  string     `json:"holder,omitempty"`
	To      string     `json:"offered_to,omitempty"`
	Updated string     `json:"updated"`
}

// CheckReady returns a conflict naming the blocking dependencies of o (an
// order is not claimable until every order it depends on is accepted); one waiting for
// a cancelled dependency says it is blocked for good.
func (st *State) CheckReady(o *Order) error {
	if why := st.BlockedForGood(o); why != "" {
		return errs.Errorf(errs.Conflict, "the author cancels it (`ferry order cancel "+o.ID+"`) or dispatches it again without that dependency",
			"order %s is blocked for good: %s", o.ID, why)
	}
	b := st.Blocking(o)
	if len(b) == 0 {
		return nil
	}
	return errs.Errorf(errs.Conflict, "wait until they are accepted; `ferry order list --ready` lists orders that can be claimed now",
		"order %s waits for %s (not accepted yet)", o.ID, strings.Join(b, ", "))
}

// Ready reports whether o can be claimed now: it is open, offered, timed out or
// failed, and every order it depends on is accepted (docs/format.md §14 "Dependencies").
func (st *State) Ready(o *Order) bool {
	switch o.State {
	case StateOpen, StateOffered, StateTimedOut, StateFailed:
		return len(st.Blocking(o)) == 0
	}
	return false
}

// BlockedForGood is the sentence that says o waits for a cancelled dependency, or ""
// (shown by order show, the MCP view and a refused claim).
func (st *State) BlockedForGood(o *Order) string {
	dead := st.DeadDeps(o)
	if len(dead) == 0 {
		return ""
	}
	word := "dependency " + dead[0] + " was"
	if len(dead) > 1 {
		word = "dependencies " + strings.Join(dead, ", ") + " were"
	}
	return word + " cancelled: cancel or re-dispatch this order"
}

// DeadDeps returns the dependencies of o that were cancelled, in order: o can never
// become ready and waits for its author to cancel or re-dispatch it. A view
// rule, not a fold rule: the fold leaves o where it is.
func (st *State) DeadDeps(o *Order) []string {
	var out []string
	for _, d := range o.Deps {
		if dep := st.Order(d); dep != nil && dep.State == StateCancelled {
			out = append(out, d)
		}
	}
	return out
}

// Blocking returns the dependencies of o that are not accepted yet (ids as written;
// a dependency this machine has not received counts as blocking), in order. A
// cancelled dependency blocks for good: DeadDeps names those.
func (st *State) Blocking(o *Order) []string {
	var out []string
	for _, d := range o.Deps {
		if dep := st.Order(d); dep == nil || dep.State != StateAccepted {
			out = append(out, d)
		}
	}
	return out
}

// Retired reports whether the fold marked name retired.
func (st *State) Retired(name string) bool {
	a := st.Agents[name]
	return a != nil && a.Retired
}

// PendingAsks returns every ask still waiting on the owner, oldest first (the one
// waiting longest leads; ties by id), including asks whose object has not arrived
// (Missing); an empty list, never nil. It is the owner's queue for `ferry status` and
// catch-up.
func (st *State) PendingAsks() []*Ask {
	out := []*Ask{}
	for _, a := range st.Asks {
		if a.State == AskPending {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *Ask) int {
		return cmp.Or(strings.Compare(a.Raised, b.Raised), strings.Compare(a.ID, b.ID))
	})
	return out
}

// AsksBy returns the asks author raised, newest first (by raise HLC, ties by id); an
// empty list, never nil. With past false it leaves out those answered at the cut of
// the owner's checkpoint the state was folded from, which a digest of what is new
// does not list, and reads no thing chunk.
func (st *State) AsksBy(author string, past bool) []*Ask {
	out := []*Ask{}
	asks := st.Asks
	if past {
		asks = st.AllAsks()
	}
	for _, a := range asks {
		if a.Author == author {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *Ask) int {
		return cmp.Or(strings.Compare(b.Raised, a.Raised), strings.Compare(a.ID, b.ID))
	})
	return out
}

// baseError is the error of a lookup the owner's checkpoint could not answer: a chunk
// not here is a retry (it may be on its way; a recomputation restores it), one that
// does not check is internal (it is disputed).
func baseError(err error) error {
	if errors.Is(err, ErrObjectMissing) {
		return errs.Errorf(errs.RetryNeeded, "retry when the sync tool has finished; `ferry ledger verify` on a machine that holds the history below the cut restores it",
			"a file of the owner's checkpoint has not arrived here: %v", err)
	}
	return errs.Errorf(errs.Internal, "run `ferry doctor`: the owner's checkpoint may be disputed", "the owner's checkpoint does not read here: %v", err)
}

// FindAsk resolves a full ask id or a unique prefix of one (docs/design.md §2 rule 2). Errors:
// not_found for no match (saying why when the ask's raise does not count), invalid for
// an empty query or an ambiguous prefix, listing the candidates.
func (st *State) FindAsk(q string) (*Ask, error) {
	id, err := st.resolveID("ask", q, st.knownIDs(st.askIDs(), PrefixAsk, q), "`ferry ask status` lists the pending asks (`--as NAME`: that agent's asks)")
	if errs.Is(err, errs.NotFound) {
		if berr := st.base.Err(); berr != nil {
			return nil, baseError(berr)
		}
		lq := strings.ToLower(strings.TrimSpace(q))
		for _, ig := range st.Ignored {
			if ig.Type == TypeAskRaise && len(ig.Ref) > 2 && (strings.HasPrefix(ig.Ref, lq) || strings.HasPrefix(ig.Ref[2:], lq)) {
				return nil, errs.Errorf(errs.NotFound, "run `ferry ledger verify` to see every record that does not count",
					"ask %s does not count: %s", ig.Ref, ig.Reason)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return st.Ask(id), nil
}

// askIDs lists known ask ids, sorted.
func (st *State) askIDs() []string { return slices.Sorted(maps.Keys(st.Asks)) }

// AgentList returns the agents sorted by name.
func (st *State) AgentList() []*Agent {
	out := make([]*Agent, 0, len(st.Agents))
	for _, a := range st.Agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Agent) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Bounds is the last seq seen of every segment of the agent.
func (a *Agent) Bounds() map[string]uint64 {
	b := make(map[string]uint64, len(a.Segs))
	for dev, seq := range a.Segs {
		b[dev] = seq
	}
	return b
}

// FindHandin resolves a full hand-in id or unique prefix (docs/design.md §2 rule 2): not_found
// when nothing matches, invalid listing the candidates when ambiguous.
func (st *State) FindHandin(q string) (*Handin, error) {
	id, err := st.resolveID("handin", q, slices.Sorted(maps.Keys(st.Handins)), "")
	if err != nil {
		return nil, err
	}
	return st.Handins[id], nil
}

// ListHandins returns matching hand-ins newest first (by hlc, then id). Never nil.
func (st *State) ListHandins(f HandinFilter) []*Handin {
	out := []*Handin{}
	for _, h := range st.Handins {
		if f.By == "" || h.By == f.By {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b *Handin) int {
		return cmp.Or(strings.Compare(b.HLC, a.HLC), strings.Compare(a.ID, b.ID))
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

// HandinFilter selects hand-ins for ListHandins.
type HandinFilter struct {
	By    string // only this writer's ("" for all)
	Limit int    // 0 = no limit
}

// ListDecisions returns decisions newest first (by hlc, then entry hash), at most limit
// of them (0: all). The list is never nil.
func (st *State) ListDecisions(limit int) []Decision {
	out := append([]Decision{}, st.Decisions...)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// FindOrder resolves a full id or unique prefix (docs/design.md §2 rule 2).
func (st *State) FindOrder(q string) (*Order, error) {
	id, err := st.resolveID("order", q, st.knownIDs(st.OrderIDs(), PrefixOrder, q), "")
	if errs.Is(err, errs.NotFound) {
		if berr := st.base.Err(); berr != nil {
			return nil, baseError(berr)
		}
		// An order whose create entry or object does not count is not shown; say why
		// instead of "no such order".
		for _, ig := range st.Ignored {
			if ig.Type == TypeOrderCreate && q != "" && strings.HasPrefix(ig.Ref, strings.ToLower(q)) {
				return nil, errs.Errorf(errs.NotFound, "run `ferry ledger verify` to see every record that does not count",
					"order %s does not count: %s", ig.Ref, ig.Reason)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return st.Order(id), nil
}

// OrderIDs lists the ids of State.Orders, sorted: every order but those terminal at
// the cut of the checkpoint the state was folded from.
func (st *State) OrderIDs() []string { return slices.Sorted(maps.Keys(st.Orders)) }

// TalkShow returns one message with its full Body (`ferry talk show`), by full id or
// unique prefix (docs/design.md §2 rule 2). It records no read receipt. A pending message comes
// back with Pending set and no text. Errors: not_found (saying why when its msg.post
// does not count); invalid for an empty or ambiguous prefix.
func (st *State) TalkShow(q string) (*Message, error) {
	id, err := st.resolveID("message", q, st.MessageIDs(), "see `ferry talk read --peek` and `ferry talk sent`")
	if errs.Is(err, errs.NotFound) {
		for _, ig := range st.Ignored {
			if ig.Type == TypeMsgPost && q != "" && strings.HasPrefix(ig.Ref, strings.ToLower(strings.TrimSpace(q))) {
				return nil, errs.Errorf(errs.NotFound, "run `ferry ledger verify` to see every record that does not count",
					"message %s does not count: %s", ig.Ref, ig.Reason)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	m := st.Messages[id]
	out := m.View()
	out.Body = m.FullBody
	return &out, nil
}

// MessageIDs lists the ids of the messages that count, sorted.
func (st *State) MessageIDs() []string { return slices.Sorted(maps.Keys(st.Messages)) }

// unreadBy lists m's addressees that have not acknowledged it.
func (st *State) unreadBy(m *Message) []string {
	var who []string
	if m.To == ToAll {
		who = append(who, MasterWriter)
		for name, a := range st.Agents {
			if a.Seated && !a.Retired {
				who = append(who, name)
			}
		}
	} else {
		who = append(who, m.To)
	}
	out := []string{}
	for _, w := range who {
		if m.AddressedTo(w) && !m.ReadByName(w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// TalkSent lists the messages me sent, newest first, at most limit (0: TalkSentLimit;
// at most TalkSentMax), each with the addressees that have read it (read_by) and those
// that have not (unread): a file written into the folder is not a delivery.
// Errors: invalid for a bad name or a limit out of range.
func (st *State) TalkSent(me string, limit int) (*TalkSentResult, error) {
	if me != MasterWriter {
		if err := CheckName("agent name", me); err != nil {
			return nil, err
		}
	}
	if limit < 0 || limit > TalkSentMax {
		return nil, errs.Errorf(errs.Invalid, fmt.Sprintf("pass a limit from 1 to %d", TalkSentMax), "limit %d out of range", limit)
	}
	if limit == 0 {
		limit = TalkSentLimit
	}
	mine := st.MessagesWhere(func(m *Message) bool { return m.From == me })
	slices.Reverse(mine)
	res := &TalkSentResult{Agent: me, Messages: []SentMessage{}}
	for i, m := range mine {
		if i == limit {
			res.Truncated, res.Remaining = true, len(mine)-i
			break
		}
		res.Messages = append(res.Messages, SentMessage{Message: m.View(), Unread: st.unreadBy(m)})
	}
	return res, nil
}

// TalkSentResult is what TalkSent returns.
type TalkSentResult struct {
	Agent     string        `json:"agent"`
	Messages  []SentMessage `json:"messages"` // newest first
	Truncated bool          `json:"truncated,omitempty"`
	Remaining int           `json:"remaining,omitempty"`
}

// SentMessage is one of my sent messages with who has not read it yet.
type SentMessage struct {
	Message
	// Unread lists the addressees that have not acknowledged it: the recipient, or for
	// "all" every seated agent and the owner but the sender. Sorted; [] when all read.
	Unread []string `json:"unread"`
}

// Limits of messages (docs/design.md §4 token budget: bounded reads).
const (
	// MaxMessageBody is the largest message body in bytes (64 KiB).
	MaxMessageBody = 64 << 10
	// TalkReadLimit is the default and largest number of messages one read returns.
	TalkReadLimit = 20
	// TalkReadChars bounds the previews one read returns (characters, at least one
	// message always fits): the 4,000-character cap per response of docs/design.md §4.
	TalkReadChars = 4000
	// TalkSentLimit is the default number of messages TalkSent lists; TalkSentMax the
	// largest it accepts.
	TalkSentLimit = 20
	TalkSentMax   = 100
)

// RunCandidates lists the orders agent may take unattended now, offered-to-agent
// first, then by priority (high, normal, low) and age (oldest first).
func (st *State) RunCandidates(agent string, labels []string) []*Order {
	var out []*Order
	for _, id := range st.OrderIDs() {
		if ok, _ := st.runReady(st.Orders[id], agent, labels); ok {
			out = append(out, st.Orders[id])
		}
	}
	prio := map[string]int{"high": 0, "": 1, "normal": 1, "low": 2}
	offered := func(o *Order) int { // 0 for an order offered to agent: those come first
		if o.OfferedTo == agent {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b *Order) int {
		return cmp.Or(cmp.Compare(offered(a), offered(b)), cmp.Compare(prio[a.Priority], prio[b.Priority]), strings.Compare(a.Created, b.Created))
	})
	return out
}

// Ready reports whether agent may take o unattended now, and why not: o is open or
// offered to agent, its object has arrived, every dependency is accepted, and it
// carries every label in labels.
func (st *State) runReady(o *Order, agent string, labels []string) (bool, string) {
	switch {
	case o.Missing:
		return false, "pending sync"
	case o.State == StateOffered && o.OfferedTo != agent:
		return false, "offered to " + o.OfferedTo
	case o.State != StateOpen && o.State != StateOffered:
		return false, string(o.State)
	case !InScope(st.ScopesNow(agent), o.Labels):
		return false, "outside " + agent + "'s scopes" // scoped grants
	}
	if b := st.Blocking(o); len(b) > 0 {
		return false, "waits for " + strings.Join(b, ", ")
	}
	for _, l := range labels {
		found := false
		for _, have := range o.Labels {
			found = found || have == l
		}
		if !found {
			return false, "no label " + l
		}
	}
	return true, ""
}

// CheckStateFilter returns invalid for a state filter that is not "", "active" or an
// order state (an unknown state would silently list nothing), with a
// hint listing the valid ones; "ready" names --ready.
func CheckStateFilter(state string) error {
	if state == "" || state == "active" || orderRank[OrderState(state)] > 0 || OrderState(state) == StateOpen {
		return nil
	}
	if state == "ready" {
		return errs.Errorf(errs.Invalid, "ready is not a state: use --ready (orders that can be claimed now)", "unknown order state %q", state)
	}
	return errs.Errorf(errs.Invalid, "use active or a state: "+strings.Join(OrderStates(), ", "), "unknown order state %q", state)
}

// OrderStates lists every order state, in stage-rank order (docs/design.md §2).
func OrderStates() []string {
	states := slices.SortedFunc(maps.Keys(orderRank), func(a, b OrderState) int { return cmp.Compare(orderRank[a], orderRank[b]) })
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}
