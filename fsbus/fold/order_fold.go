package fold

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// OrderState is the state of an order (docs/design.md §2 "Orders, asks, presence").
type OrderState string

// Order states.
const (
	StateOpen             OrderState = "open"
	StateOffered          OrderState = "offered"
	StateClaimed          OrderState = "claimed"
	StateSubmitted        OrderState = "submitted"
	StateChangesRequested OrderState = "changes_requested"
	StateAccepted         OrderState = "accepted"
	StateCancelled        OrderState = "cancelled"
	StateFailed           OrderState = "failed"
	StateTimedOut         OrderState = "timed_out"
	StateValidationFailed OrderState = "validation_failed"
	StatePointerStale     OrderState = "pointer_stale"
)

// orderRank is the stage rank of each order state for the branch rule of docs/design.md §2
// "Races across machines": the branch that reached the highest rank wins. Pinned by
// docs/format.md §14.
var orderRank = map[OrderState]int{
	StateOpen:             0,
	StateOffered:          1,
	StateTimedOut:         2,
	StateFailed:           3,
	StatePointerStale:     4,
	StateClaimed:          5,
	StateChangesRequested: 6,
	StateValidationFailed: 7,
	StateSubmitted:        8,
	StateCancelled:        9,
	StateAccepted:         10,
}

// Terminal reports whether an order state takes no further lifecycle entry.
func Terminal(state OrderState) bool {
	return state == StateAccepted || state == StateCancelled
}

// lifecycle entry types of an order's chain (each names data.basis).
var orderLifecycle = map[string]bool{
	TypeOrderCreate: true, TypeOrderOffer: true, TypeOrderClaim: true, TypeOrderSubmit: true,
	TypeOrderReview: true, TypeOrderRelease: true, TypeOrderCancel: true, TypeOrderExpire: true,
	TypeOrderFail: true, TypeOrderStale: true,
}

// knownType reports whether this binary knows the entry type.
func knownType(t string) bool { _, ok := minLevel[t]; return ok }

// Step is one entry of an order's history.
type Step struct {
	Type string `json:"type"`
	By   string `json:"by"`
	HLC  string `json:"hlc"`
	Hash string `json:"hash"`
	Note string `json:"note,omitempty"`
	To   string `json:"to,omitempty"`
	// Verdict is a review's accept|changes.
	Verdict string `json:"verdict,omitempty"`
	// Act names what a lifecycle entry did when its type alone does not say:
	// decline (a release of an offer), retirement (a release for a retired agent),
	// reassign (an offer of a claimed order).
	Act string `json:"act,omitempty"`
}

// Submission is the current result of an order.
type Submission struct {
	By        string `json:"by"`
	Reference string `json:"reference"`
	Note      string `json:"note,omitempty"`
	Result    string `json:"result,omitempty"` // r- id of the result object
	HLC       string `json:"hlc"`
}

// Review is one review verdict.
type Review struct {
	By      string `json:"by"`
	Verdict string `json:"verdict"` // accept|changes
	Note    string `json:"note,omitempty"`
	HLC     string `json:"hlc"`
}

// Contest is a branched chain resolved by the rule of docs/design.md §2: it names the winner
// and every superseded branch, and everyone involved (both holders, the author, the
// reviewers) so each can be told.
type Contest struct {
	Ref      string   `json:"ref"`   // the order (or other thing) contested
	Basis    string   `json:"basis"` // the entry both branches named
	Winner   Step     `json:"winner"`
	Losers   []Step   `json:"losers"`
	Involved []string `json:"involved"`
	// Rival is set when the branches are creates of one id by different writers
	// (rival.go): a forgery or replay, reported as an error. Basis is empty.
	Rival bool `json:"rival,omitempty"`
	// Checkpoint is set when the winner is the state an owner's checkpoint of that
	// epoch holds as final and the losers are entries above its cut (from.go): Winner
	// then names the thing's last entry at the cut. Basis is empty.
	Checkpoint int `json:"checkpoint,omitempty"`
}

// Order is an order as folded.
type Order struct {
	ID        string      `json:"id"`
	Title     string      `json:"title"`
	Body      string      `json:"body,omitempty"`
	Labels    []string    `json:"labels,omitempty"`
	Priority  string      `json:"priority,omitempty"`
	Deps      []string    `json:"deps,omitempty"`
	Author    string      `json:"author"`
	Created   string      `json:"created"`
	Updated   string      `json:"updated"`
	State     OrderState  `json:"state"`
	OfferedTo string      `json:"offered_to,omitempty"`
	Holder    string      `json:"holder,omitempty"`
	Claim     string      `json:"claim,omitempty"` // hash of the current claim entry
	Result    *Submission `json:"result,omitempty"`
	Reviews   []Review    `json:"reviews,omitempty"`
	Progress  []Step      `json:"progress,omitempty"`
	History   []Step      `json:"history"`
	Contests  []Contest   `json:"contests,omitempty"`
	// Pending counts lifecycle entries whose basis has not arrived (pending sync).
	Pending int `json:"pending,omitempty"`
	// Head is the hash of the last lifecycle entry on the winning chain: the basis the
	// next lifecycle entry names.
	Head string `json:"head"`
	// Missing is true while the order's object file has not arrived (pending sync).
	Missing bool `json:"missing,omitempty"`
	// Releases counts holder releases of a claim (at most MaxReleases).
	Releases int `json:"releases,omitempty"`
	// Contract is the order's contract, its members beside the others.
	Contract
	// SchemaFailures counts the results refused by the order's schema, over every
	// claim (a release keeps the count); PointerFailures the submits refused because
	// pointed files changed, on the current claim. Both come from order.progress
	// entries with data.failure (ADR 0003 §4 retry ladders).
	SchemaFailures  int `json:"schema_failures,omitempty"`
	PointerFailures int `json:"pointer_failures,omitempty"`
	// Warnings are set only on the order a call returns (a pointer edited seconds
	// before dispatch, a claim made on the diff): never folded.
	Warnings []string `json:"warnings,omitempty"`

	C      OrderCore `json:"-"` // state machine view of the chain head
	Device string    `json:"-"` // the device of the order.create (the author's machine)
}

// OrderCore is the part of an order its state machine decides on.
type OrderCore struct {
	State     OrderState
	Author    string
	Holder    string
	Claim     string
	OfferedTo string
	Submitter string
	// Releases counts the holder releases of a claim on the winning chain (at
	// most MaxReleases; a retirement's release and a decline do not count).
	Releases int
}

// ErrNotAllowed is wrapped by the state machine's refusals.
var errNotAllowed = errors.New("not allowed")

// Step applies one lifecycle entry to c, returning the next core or a refusal (*errs.Error,
// denied or conflict) saying why. It is the one rule both the fold and every write
// path use, so a write the local fold would ignore is never made.
func (c OrderCore) Step(typ, writer, hash string, lvl Level, d EntryData) (OrderCore, error) {
	deny := func(hint, format string, args ...any) (OrderCore, error) {
		return c, errs.Errorf(errs.Denied, hint, format, args...)
	}
	busy := func(hint, format string, args ...any) (OrderCore, error) {
		if hint == "" {
			hint = "`ferry order show ID` shows its state and history"
		}
		return c, errs.Errorf(errs.Conflict, hint, format, args...)
	}
	n := c
	switch typ {
	case TypeOrderOffer:
		if writer != c.Author && lvl < LevelOrchestrator {
			return deny("only the author or an orchestrator offers an order", "%s is not the author of this order and not an orchestrator", writer)
		}
		if !ValidName(d.To) {
			return c, errs.Errorf(errs.Invalid, "name the agent to offer it to", "offer needs a valid agent name")
		}
		switch c.State {
		case StateOpen, StateOffered, StateTimedOut, StateFailed:
		case StateClaimed, StateChangesRequested:
			// Reassignment (docs/design.md §2 level table: the author, or an orchestrator): the
			// holder's claim ends here, its later submit or progress counts for nothing.
			if d.To == c.Holder {
				return busy("", "order is already held by %s", c.Holder)
			}
		default:
			return busy("", "order is %s; it can no longer be offered", c.State)
		}
		n.State, n.OfferedTo, n.Holder, n.Claim = StateOffered, d.To, "", ""
	case TypeOrderClaim:
		switch c.State {
		case StateOpen, StateTimedOut, StateFailed:
		case StateOffered:
			if c.OfferedTo != writer {
				return busy("the order is reserved for "+c.OfferedTo, "order is offered to %s", c.OfferedTo)
			}
		case StateClaimed, StateSubmitted, StateChangesRequested:
			return busy("pick another open order (`ferry order list`)", "order is already claimed by %s", c.Holder)
		default:
			return busy("pick another open order (`ferry order list`)", "order is %s", c.State)
		}
		n.State, n.Holder, n.Claim, n.OfferedTo, n.Submitter = StateClaimed, writer, hash, "", ""
	case TypeOrderSubmit:
		if writer != c.Holder {
			return deny("only the holder submits", "%s does not hold this order (holder: %s)", writer, OrNone(c.Holder))
		}
		if c.State != StateClaimed && c.State != StateChangesRequested {
			return busy("", "order is %s; nothing to submit", c.State)
		}
		if strings.TrimSpace(d.Reference) == "" {
			return c, errs.Errorf(errs.Invalid, "pass --ref COMMIT|BRANCH|h-ID", "a submit needs a reference to the work")
		}
		n.State, n.Submitter = StateSubmitted, writer
		if err := n.submitOutcome(d.Outcome); err != nil {
			return c, err
		}
	case TypeOrderStale:
		if err := c.CheckStale(writer); err != nil {
			return c, err
		}
		n.State, n.OfferedTo = StatePointerStale, ""
	case TypeOrderReview:
		if c.State != StateSubmitted {
			return busy("", "order is %s; only a submitted order is reviewed", c.State)
		}
		if writer == c.Submitter {
			return deny("ask another agent to review it", "%s submitted this result and cannot review it", writer)
		}
		switch d.Verdict {
		case "accept":
			n.State = StateAccepted
		case "changes":
			n.State = StateChangesRequested
		default:
			return c, errs.Errorf(errs.Invalid, "use accept or changes", "unknown verdict %q", d.Verdict)
		}
	case TypeOrderRelease:
		if c.State == StateOffered {
			// A decline: the agent an order is offered to hands the offer back;
			// with data.agent, a retirement declines it for the retired agent.
			switch {
			case d.Agent != "" && (d.Agent != c.OfferedTo || (writer != d.Agent && lvl < LevelMaster)):
				return deny("", "%s cannot decline an offer to %s", writer, c.OfferedTo)
			case d.Agent == "" && writer != c.OfferedTo:
				return deny("only the agent it is offered to declines an offer", "order is offered to %s, not %s", c.OfferedTo, writer)
			}
			n.State, n.OfferedTo = StateOpen, ""
			break
		}
		if c.State != StateClaimed && c.State != StateChangesRequested {
			return busy("", "order is %s; nothing to release", c.State)
		}
		switch {
		case d.Agent != "":
			// A retirement's release (`ferry agent retire`): by the retired
			// holder itself or by the master; the fold counts it only when the agent
			// is retired. It does not use up the holder's releases.
			if d.Agent != c.Holder {
				return deny("", "%s does not hold this order (holder: %s)", d.Agent, OrNone(c.Holder))
			}
			if writer != c.Holder && lvl < LevelMaster {
				return deny("the agent itself or the owner retires an agent", "%s cannot release %s's claim", writer, c.Holder)
			}
		case writer != c.Holder:
			return deny("only the holder releases its claim", "%s does not hold this order (holder: %s)", writer, OrNone(c.Holder))
		case c.Releases >= MaxReleases:
			return busy("submit what you have, or end the attempt with `ferry order fail ID --reason TEXT`",
				"order was released %d times already; at most %d releases per order", c.Releases, MaxReleases)
		default:
			n.Releases++
		}
		n.State, n.Holder, n.Claim, n.Submitter = StateOpen, "", "", ""
	case TypeOrderFail:
		if writer != c.Holder {
			return deny("only the holder fails its claim", "%s does not hold this order (holder: %s)", writer, OrNone(c.Holder))
		}
		if c.State != StateClaimed && c.State != StateChangesRequested {
			return busy("", "order is %s", c.State)
		}
		if strings.TrimSpace(d.Note) == "" {
			return c, errs.Errorf(errs.Invalid, "pass --reason TEXT: what went wrong, for whoever takes it next", "a fail needs a reason")
		}
		n.State, n.Holder, n.Claim = StateFailed, "", ""
	case TypeOrderExpire:
		switch d.Window {
		case "execution":
			if writer != c.Holder || (c.State != StateClaimed && c.State != StateChangesRequested) {
				return deny("only the holder expires its execution window", "%s does not hold a running claim on this order", writer)
			}
		case "queue":
			if writer != c.Author || (c.State != StateOpen && c.State != StateOffered) {
				return deny("only the author expires the queue window of an unclaimed order", "%s cannot expire this order's queue window", writer)
			}
		default:
			return c, errs.Errorf(errs.Invalid, "use queue or execution", "unknown window %q", d.Window)
		}
		n.State, n.Holder, n.Claim = StateTimedOut, "", ""
	case TypeOrderCancel:
		if writer != c.Author {
			return deny("only the author cancels an order", "%s is not the author of this order (author: %s)", writer, c.Author)
		}
		if Terminal(c.State) {
			return busy("", "order is already %s", c.State)
		}
		n.State, n.Holder, n.Claim = StateCancelled, "", ""
	default:
		if knownType(typ) {
			return c, fmt.Errorf("%w: %s is not a lifecycle entry", errNotAllowed, typ)
		}
		// A type this binary does not know that names a basis keeps its place in the
		// chain (docs/format.md §17) without changing the state, so entries a newer
		// binary chains after it are not left pending here.
	}
	if err := CheckLevel(writer, lvl, typ); err != nil {
		return c, err
	}
	return n, nil
}

// LostClaim turns err, a denied refusal of a holder's step typ (submit, progress,
// extend, release, fail) by writer, into superseded when writer is not the holder because its
// claim lost a race across machines: a contest on o has a losing branch that starts
// with writer's order.claim (docs/design.md §2: furthest stage, then lower hash). The error
// names the winner — whose claim counts — so the loser stops work instead of asking
// for a permission it was never refused (docs/exit-codes.md: 10, superseded).
// Any other error is returned as it is.
func (o *Order) LostClaim(typ, writer string, err error) error {
	var fe *errs.Error
	if !errors.As(err, &fe) || fe.Category != errs.Denied || writer == o.Holder {
		return err
	}
	switch typ {
	case TypeOrderSubmit, TypeOrderProgress, TypeOrderExtend, TypeOrderRelease, TypeOrderFail:
	default:
		return err
	}
	for i := len(o.Contests) - 1; i >= 0; i-- {
		c := o.Contests[i]
		if c.Rival {
			continue
		}
		for _, l := range c.Losers {
			if l.Type != TypeOrderClaim || l.By != writer {
				continue
			}
			won := c.Winner.By + "'s " + strings.TrimPrefix(c.Winner.Type, "order.")
			if c.Winner.Type == TypeOrderClaim {
				won = c.Winner.By + "'s claim"
			}
			msg := fmt.Sprintf("%s's claim on order %s lost a race across machines: %s counts", writer, o.ID, won)
			if o.Holder != "" && o.Holder != c.Winner.By {
				msg += fmt.Sprintf(" (holder now: %s)", o.Holder)
			}
			return &errs.Error{Category: errs.Superseded, Message: msg, Err: err,
				Hint: "stop work on it and pick another order (`ferry order list --ready`); `ferry order show " + o.ID + "` shows the contest"}
		}
	}
	return err
}

func OrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// orderNode is a node of an order's chain.
type orderNode = chainNode[OrderCore]

// orderRules is the order state machine for resolveChain.
var orderRules = chainRules[OrderCore]{
	step: func(c OrderCore, n *orderNode) (OrderCore, error) {
		return c.Step(n.e.Type, n.e.Writer, n.e.Hash(), n.lvl, n.d)
	},
	rank: func(c OrderCore) int { return orderRank[c.State] },
}

// foldOrders builds every order from its create entry and chain of lifecycle entries,
// resolving branches by the rule of docs/design.md §2: furthest stage, then lower hash of the
// branch's first entry. Losing branches are superseded and reported as contests.
func foldOrders(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
	creates := map[string][]*orderNode{}
	var rest []*orderNode
	var progress []*ledger.Entry
	for _, e := range entries {
		d := st.dataOf(e)
		n := &orderNode{e: e, d: d, lvl: st.LevelAt(e)}
		switch {
		case e.Type == TypeOrderCreate:
			if !ValidID(e.Ref) || !strings.HasPrefix(e.Ref, PrefixOrder) {
				ignore(e, "order.create with a bad order id")
				continue
			}
			addRival(creates, n, "second order.create for an existing order id", ignore)
		case e.Type == TypeOrderRelease && d.Agent != "" && !st.Retired(d.Agent):
			ignore(e, "retirement release for an agent that is not retired")
		case orderLifecycle[e.Type]:
			rest = append(rest, n)
		case n.d.Basis != "" && !knownType(e.Type):
			rest = append(rest, n) // unknown type with a basis: holds its place

		case e.Type == TypeOrderProgress || e.Type == TypeOrderExtend:
			progress = append(progress, e)
		}
	}
	byHash := map[string]*orderNode{}
	for _, list := range creates {
		for _, n := range list {
			byHash[n.e.Hash()] = n
		}
	}
	for _, n := range rest {
		byHash[n.e.Hash()] = n
	}
	pending := linkChain(rest, byHash, ignore, func(b, ref string) { st.noteDangling(b, "o"+ref) })

	ids := slices.Sorted(maps.Keys(creates))
	for _, id := range ids {
		cands := creates[id]
		orders := map[*orderNode]*Order{}
		for _, root := range cands {
			o := &Order{ID: id, Author: root.e.Writer, Created: root.e.HLC, Pending: pending[id], Device: root.e.Device}
			if !loadOrderObject(o, in, root) {
				if len(cands) == 1 {
					ignore(root.e, "order object differs from the hash its order.create names")
					continue
				}
				// A rival create (rival.go): the object file can hold only one of the
				// writers' objects, so it decides nothing; a winner without its object
				// shows no text.
				*o = Order{ID: id, Author: root.e.Writer, Created: root.e.HLC, Pending: pending[id], Device: root.e.Device,
					Title: "(object replaced by another writer; restore it from the author's machine)"}
			}
			root.state = OrderCore{State: StateOpen, Author: root.e.Writer}
			if ValidName(root.d.To) {
				root.state.State, root.state.OfferedTo = StateOffered, root.d.To
			}
			scopeChain(st, o, root, ignore) // scoped grants (scope.go)
			orders[root] = o
		}
		if len(orders) == 0 {
			continue
		}
		root := cands[0]
		var rival []Contest
		if len(cands) > 1 {
			var c Contest
			root, c = pickRival(st, cands, func(n *orderNode) int { return witnessRank(n, orderRules) }, ignore)
			rival = []Contest{c}
		}
		o := orders[root]
		path, contests := resolveChain(id, root, orderRules, []string{o.Author}, ignore)
		for _, n := range path {
			o.apply(n)
		}
		o.Contests = append(rival, contests...)
		st.Contested = append(st.Contested, o.Contests...)
		st.Orders[id] = o
	}
	// Progress and extend name their claim, not a basis: they count when that claim is
	// one of the writer's own claims on the order's chain, and show while it is the
	// order's current claim (progress on a claim since released stays valid history).
	for _, e := range progress {
		o := st.Orders[e.Ref]
		d := st.dataOf(e)
		if o == nil || d.Claim == "" || !o.claimedBy(d.Claim, e.Writer) {
			ignore(e, "progress does not name a claim of the writer")
			continue
		}
		o.countFailure(e, d)
		if d.Claim != o.Claim || e.Writer != o.Holder {
			continue
		}
		o.Progress = append(o.Progress, Step{Type: e.Type, By: e.Writer, HLC: e.HLC, Hash: e.Hash(), Note: d.Note})
		if e.HLC > o.Updated {
			o.Updated = e.HLC
		}
	}
}

// claimedBy reports whether hash is an order.claim by writer on o's winning chain.
func (o *Order) claimedBy(hash, writer string) bool {
	for _, h := range o.History {
		if h.Hash == hash && h.Type == TypeOrderClaim && h.By == writer {
			return true
		}
	}
	return false
}

// loadOrderObject fills the order's body from its object file. It reports false when
// the file exists but its hash differs from the one the create entry names (edited or
// forged: flagged, not shown); a file not yet arrived leaves the order Missing.
func loadOrderObject(o *Order, in FoldInput, root *orderNode) bool {
	if in.Objects == nil {
		o.Missing = true
		return true
	}
	c, hash, err := in.Objects(root.e.Writer, o.ID)
	if err != nil {
		if errors.Is(err, ErrObjectMissing) {
			o.Missing = true
			o.Title = "(pending sync)"
			return true
		}
		return false
	}
	if hash != root.d.Object {
		return false
	}
	var obj OrderObject
	if err := JSONUnmarshal(c, &obj); err != nil || obj.ID != o.ID {
		return false
	}
	o.Title, o.Body, o.Labels, o.Priority, o.Deps = obj.Title, obj.Body, obj.Labels, obj.Priority, obj.Deps
	o.Contract = obj.Contract
	return true
}

// apply records a winning-chain node in the order's view.
func (o *Order) apply(n *orderNode) {
	c := n.state
	prev := o.C.State
	o.C = c
	o.State, o.Holder, o.Claim, o.OfferedTo, o.Releases = c.State, c.Holder, c.Claim, c.OfferedTo, c.Releases
	o.Head = n.e.Hash()
	if n.e.HLC > o.Updated {
		o.Updated = n.e.HLC
	}
	st := stepOf(n)
	switch {
	case n.e.Type == TypeOrderRelease && n.d.Agent != "":
		st.Act = "retirement"
	case n.e.Type == TypeOrderRelease && prev == StateOffered:
		st.Act = "decline"
	case n.e.Type == TypeOrderOffer && (prev == StateClaimed || prev == StateChangesRequested):
		st.Act = "reassign"
	}
	o.History = append(o.History, st)
	switch n.e.Type {
	case TypeOrderSubmit:
		o.Result = &Submission{By: n.e.Writer, Reference: n.d.Reference, Note: n.d.Note, Result: n.d.Result, HLC: n.e.HLC}
	case TypeOrderReview:
		o.Reviews = append(o.Reviews, Review{By: n.e.Writer, Verdict: n.d.Verdict, Note: n.d.Note, HLC: n.e.HLC})
	case TypeOrderClaim:
		o.Progress = nil
	}
}

// submitOutcome applies an order.submit's data.outcome: the holder's machine
// recorded the submission as pointer_stale (pointed files changed twice) or
// validation_failed (the third result its schema refused). The result is kept either
// way; the order has no holder after it.
func (n *OrderCore) submitOutcome(outcome string) error {
	switch outcome {
	case "":
		return nil
	case string(StatePointerStale), string(StateValidationFailed):
		n.State, n.Holder, n.Claim = OrderState(outcome), "", ""
		return nil
	}
	return errs.Errorf(errs.Invalid, "", "unknown submit outcome %q", outcome)
}

// CheckStale is the rule of order.stale (ADR 0003): only the author, and only while
// nobody holds the order (open, offered, timed_out, failed) — a holder's submit
// re-verifies the pointers itself.
func (c OrderCore) CheckStale(writer string) error {
	if writer != c.Author {
		return errs.Errorf(errs.Denied, "only the author marks an order stale", "%s is not the author of this order (author: %s)", writer, c.Author)
	}
	switch c.State {
	case StateOpen, StateOffered, StateTimedOut, StateFailed:
		return nil
	case StateClaimed, StateChangesRequested:
		return errs.Errorf(errs.Conflict, "the holder's submit re-verifies the pointers; cancel the order if the work is moot",
			"order is claimed by %s; only an unclaimed order is marked stale", c.Holder)
	}
	return errs.Errorf(errs.Conflict, "`ferry order show ID` shows its state and history", "order is %s; only an unclaimed order is marked stale", c.State)
}

// countFailure counts a refused submit recorded as progress (data.failure) on a claim
// of the order's winning chain: schema failures over every claim, pointer failures on
// the current claim only.
func (o *Order) countFailure(e *ledger.Entry, d EntryData) {
	if e.Type != TypeOrderProgress {
		return
	}
	switch d.Failure {
	case "schema":
		o.SchemaFailures++
	case "pointers":
		if d.Claim == o.Claim && e.Writer == o.Holder {
			o.PointerFailures++
		}
	}
}

func EntryLess(a, b *ledger.Entry) bool {
	if a.HLC != b.HLC {
		return a.HLC < b.HLC
	}
	if a.Writer != b.Writer {
		return a.Writer < b.Writer
	}
	if a.Device != b.Device {
		return a.Device < b.Device
	}
	return a.Seq < b.Seq
}
