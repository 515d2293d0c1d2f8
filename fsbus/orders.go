package fsbus

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
)

// Limits of order fields (bytes unless said otherwise; all listed in caps.go).
const (
	MaxTitle     = 200 // characters, one line
	MaxOrderBody = 64 << 10
	MaxNote      = 2 << 10 // 2 KiB: progress, review, release, cancel, extend and answer notes, summaries, fail reasons
	MaxReference = 500
	MaxLabels    = 16
)

// NewOrderOptions are the arguments of NewOrder.
type NewOrderOptions struct {
	Title    string   `json:"title"`
	Body     string   `json:"body,omitempty"`
	Labels   []string `json:"labels,omitempty"`
	Priority string   `json:"priority,omitempty"` // low|normal|high
	Deps     []string `json:"deps,omitempty"`     // order ids this one waits for
	To       string   `json:"to,omitempty"`       // offer to this agent at creation
	Key      string   `json:"-"`                  // idempotency key

	// The contract, all optional. Pointers are workspace-relative paths,
	// each optionally with a line range ("path:10-40"); Diff is one such path to a
	// unified diff. NewOrder fingerprints them in Session.Workspace.
	Pointers []string        `json:"pointers,omitempty"`
	Diff     string          `json:"diff,omitempty"`
	Schema   json.RawMessage `json:"schema,omitempty"`
	Task     string          `json:"task,omitempty"`
	ReadOnly bool            `json:"read_only,omitempty"`
	Windows  *fold.Windows   `json:"windows,omitempty"`
	Heavy    bool            `json:"heavy,omitempty"`
	Hints    *fold.Hints     `json:"hints,omitempty"`
}

func (o *NewOrderOptions) validate() error {
	o.Title = strings.TrimSpace(o.Title)
	switch {
	case o.Title == "":
		return errs.Errorf(errs.Invalid, "give the order a title", "empty title")
	case strings.ContainsAny(o.Title, "\n\r"):
		return errs.Errorf(errs.Invalid, "keep the title to one line; put detail in the body", "order title is multi-line")
	case utf8.RuneCountInString(o.Title) > MaxTitle:
		return capError("order title", utf8.RuneCountInString(o.Title), MaxTitle, UnitChars, "keep the title short; put detail in the body")
	case len(o.Body) > MaxOrderBody:
		return capError("order body", len(o.Body), MaxOrderBody, unitBytes, "put large material in the work repo and reference it")
	case !utf8.ValidString(o.Title + o.Body):
		return errs.Errorf(errs.Invalid, "", "title and body must be UTF-8")
	case contract.HasControl(o.Title, false) || contract.HasControl(o.Body, true):
		return errs.Errorf(errs.Invalid, "remove terminal escapes and other control characters", "title or body holds control characters (only newlines and tabs are allowed in a body)")
	case len(o.Labels) > MaxLabels:
		return errs.Errorf(errs.Invalid, "", "at most %d labels", MaxLabels)
	case o.To != "" && !fold.ValidName(o.To):
		return errs.Errorf(errs.Invalid, "", "cannot offer to %s: not an agent name", secretguard.Quote(o.To))
	}
	if err := secretguard.Check("offer recipient", o.To); err != nil {
		return err
	}
	for _, l := range o.Labels {
		if !fold.ValidName(l) {
			return errs.Errorf(errs.Invalid, "labels use a-z, 0-9 and '-'", "bad label %s", secretguard.Quote(l))
		}
	}
	switch o.Priority {
	case "", "low", "normal", "high":
	default:
		return errs.Errorf(errs.Invalid, "use low, normal or high", "unknown priority %q", o.Priority)
	}
	for _, d := range o.Deps {
		if strings.TrimSpace(d) == "" {
			return errs.Errorf(errs.Invalid, "name dependencies by order id or a unique prefix", "empty dependency")
		}
	}
	return nil
}

// NewOrder dispatches an order: it publishes the signed object orders/<id>.json, then
// appends order.create naming the object's hash (and data.to when offered at
// creation). Errors: invalid for bad fields or a cancelled dependency; denied below member level; conflict when
// the idempotency key was used with other arguments. A replayed key returns the order
// the first call made and writes nothing.
func (s *Session) NewOrder(opt NewOrderOptions) (*fold.Order, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	contract, warnings, err := s.dispatchContract(&opt)
	if err != nil {
		return nil, err
	}
	args := argsHash(opt)
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if ref, replay, err := s.checkIdem(v.State, opt.Key, args); err != nil || replay {
			id = ref
			return nil, nil, err
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeOrderCreate); err != nil {
			return nil, nil, err
		}
		for i, dep := range opt.Deps {
			o, err := v.State.FindOrder(dep)
			if err != nil {
				return nil, nil, err
			}
			if o.State == fold.StateCancelled {
				// An order waiting for a cancelled one could never be claimed.
				return nil, nil, errs.Errorf(errs.Invalid, "depend on an order that can still be accepted, or leave --dep "+o.ID+" out",
					"dependency %s was cancelled: an order waiting for it would wait forever", o.ID)
			}
			opt.Deps[i] = o.ID
		}
		if err := v.State.CheckRecipient(opt.To); err != nil {
			return nil, nil, err
		}
		if err := v.State.CheckScope(s.Name, fold.TypeOrderCreate, &fold.Order{Labels: opt.Labels}, opt.To); err != nil {
			return nil, nil, err
		}
		id = fold.NewID(fold.PrefixOrder)
		obj := &fold.OrderObject{Envelope: fold.Envelope{V: 1, ID: id, Author: s.Name, Device: s.Device},
			Title: opt.Title, Body: opt.Body, Labels: opt.Labels, Priority: opt.Priority, Deps: opt.Deps, Contract: *contract}
		data, hash, err := sealObject(obj, func(sig string) { obj.Sig = sig }, s.Signer, s.Project())
		if err != nil {
			return nil, nil, err
		}
		d := fold.EntryData{Object: hash, To: opt.To}
		if opt.Key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: fold.TypeOrderCreate, Ref: id, Data: mustJSON(d), Idem: opt.Key},
			[]pendingObject{{path: verify.ObjectPath(s.Root, s.Name, id), data: data}}, nil
	})
	if err != nil {
		return nil, err
	}
	o, err := s.orderAfter(v, e, id)
	if err == nil && len(warnings) > 0 {
		cp := *o
		cp.Warnings = warnings
		o = &cp
	}
	return o, err
}

// orderAfter folds the view plus the entry just written (no second read of the
// channel) and returns the order.
func (s *Session) orderAfter(v *View, e ledger.Entry, id string) (*fold.Order, error) {
	o := s.foldOrder(v, e, id)
	if o == nil {
		return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify`", "order %s is not in the state after writing it", id)
	}
	return o, nil
}

// callArgs is what data.args hashes for a call on an existing order: the entry type,
// the resolved order id (never the prefix the caller typed) and the call's data fields
// (docs/format.md §15).
type callArgs struct {
	Call  string         `json:"call"`
	Order string         `json:"order"`
	Data  fold.EntryData `json:"data"`
}

// lifecycle writes one lifecycle entry of an order under the channel lock: it resolves
// the id, checks the move with the fold's own state machine and names the current head
// as basis (a true compare-and-set on this machine). noop reports whether the order is
// already where the call would put it (an idempotent retry), so nothing is written.
//
// prepare, when set, publishes objects the entry names (a submit's result object) after
// every check passed.
func (s *Session) lifecycle(q, typ string, d fold.EntryData, key string, noop func(o *fold.Order) bool, prepare ...func(o *fold.Order, d *fold.EntryData) (pendingObject, error)) (*fold.Order, error) {
	if contract.HasControl(d.Note, true) || contract.HasControl(d.Reference, false) {
		return nil, errs.Errorf(errs.Invalid, "remove terminal escapes and other control characters", "note or reference holds control characters")
	}
	var id, args string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		o, err := v.State.FindOrder(q)
		if err != nil {
			return nil, nil, err
		}
		id = o.ID
		args = argsHash(callArgs{Call: typ, Order: o.ID, Data: d})
		if _, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			return nil, nil, err
		}
		if noop != nil && noop(o) {
			return nil, nil, nil
		}
		if o.Missing {
			return nil, nil, errs.Errorf(errs.RetryNeeded, "wait for the sync tool to deliver orders/"+o.ID+".json, then retry", "order %s has not fully arrived on this machine", o.ID)
		}
		if _, err := o.C.Step(typ, s.Name, "", v.State.LevelOf(s.Name), d); err != nil {
			return nil, nil, o.LostClaim(typ, s.Name, err)
		}
		if typ == fold.TypeOrderOffer {
			if err := v.State.CheckRecipient(d.To); err != nil {
				return nil, nil, err
			}
		}
		if err := v.State.CheckScope(s.Name, typ, o, d.To); err != nil {
			return nil, nil, err
		}
		if typ == fold.TypeOrderClaim {
			if v.State.Retired(s.Name) {
				return nil, nil, errs.Errorf(errs.Denied, "retirement is final: work under another agent name (`ferry join --as NAME-2`)", "%s is retired", s.Name)
			}
			if err := v.State.CheckReady(o); err != nil {
				return nil, nil, err
			}
		}
		d.Basis = o.Head
		if key != "" {
			d.Args = args
		}
		var objs []pendingObject
		for _, p := range prepare {
			obj, err := p(o, &d)
			if err != nil {
				return nil, nil, err
			}
			if obj.path != "" { // a check that publishes nothing
				objs = append(objs, obj)
			}
		}
		return &ledger.Draft{Type: typ, Ref: o.ID, Data: mustJSON(d), Idem: key}, objs, nil
	})
	if err != nil {
		return nil, err
	}
	return s.orderAfter(v, e, id)
}

// claim writes the order.claim after the checks in check (Claim's contract checks),
// which run under the channel lock on the view the claim is decided on.
func (s *Session) claim(q, key string, check func(o *fold.Order, d *fold.EntryData) (pendingObject, error)) (*fold.Order, error) {
	return s.lifecycle(q, fold.TypeOrderClaim, fold.EntryData{}, key, func(o *fold.Order) bool {
		return o.Holder == s.Name && o.State == fold.StateClaimed
	}, check)
}

// NoteOptions are what a write on an order, an ask or a hand-in carries besides its
// subject: a short note (Fail's reason) and an idempotency key.
type NoteOptions struct {
	Note string // at most MaxNote bytes, trimmed
	Key  string // idempotency key
}

// OfferOptions are the arguments of Offer.
type OfferOptions struct {
	To  string // the agent the order is offered to
	Key string // idempotency key
}

// Offer reserves an order for one agent (its author, or an orchestrator). It returns
// not_found when that agent has never joined the channel.
func (s *Session) Offer(q string, opt OfferOptions) (*fold.Order, error) {
	if err := fold.CheckName("offer recipient", opt.To); err != nil {
		return nil, err // never echo a token pasted as the name (secret guard)
	}
	return s.lifecycle(q, fold.TypeOrderOffer, fold.EntryData{To: opt.To}, opt.Key, nil)
}

// submit writes the order.submit and its result object; outcome is "" or the state
// the holder's machine recorded.
func (s *Session) submit(q, ref, note string, output json.RawMessage, outcome, key string) (*fold.Order, error) {
	return s.lifecycle(q, fold.TypeOrderSubmit, fold.EntryData{Reference: ref, Note: note, Outcome: outcome}, key, nil,
		func(o *fold.Order, d *fold.EntryData) (pendingObject, error) {
			id := fold.NewID(fold.PrefixResult)
			obj := &fold.ResultObject{Envelope: fold.Envelope{V: 1, ID: id, Author: s.Name, Device: s.Device},
				Order: o.ID, Reference: ref, Summary: note, Output: output}
			data, hash, err := sealObject(obj, func(sig string) { obj.Sig = sig }, s.Signer, s.Project())
			if err != nil {
				return pendingObject{}, err
			}
			d.Result, d.Object = id, hash
			return pendingObject{path: verify.ObjectPath(s.Root, s.Name, id), data: data}, nil
		})
}

// Review gives a verdict on a submitted result: accept or changes. The submitter can
// never review its own result (denied).
func (s *Session) Review(q, verdict string, opt NoteOptions) (*fold.Order, error) {
	if verdict != "accept" && verdict != "changes" {
		return nil, errs.Errorf(errs.Invalid, "use accept or changes", "unknown verdict %q", verdict)
	}
	if err := checkCap("review note", strings.TrimSpace(opt.Note), MaxNote, unitBytes, ""); err != nil {
		return nil, err
	}
	return s.lifecycle(q, fold.TypeOrderReview, fold.EntryData{Verdict: verdict, Note: strings.TrimSpace(opt.Note)}, opt.Key, nil)
}

// Release returns the holder's claim: the order is open again, keeping its retry
// count. Errors: denied for a non-holder; conflict when the order is not
// claimed, when it is only offered (that is `Decline`), and when it was already
// released MaxReleases times (submit or Fail instead); invalid for a note with
// control characters.
func (s *Session) Release(q string, opt NoteOptions) (*fold.Order, error) {
	if err := checkCap("release note", strings.TrimSpace(opt.Note), MaxNote, unitBytes, ""); err != nil {
		return nil, err
	}
	var refused error
	o, err := s.lifecycle(q, fold.TypeOrderRelease, fold.EntryData{Note: strings.TrimSpace(opt.Note)}, opt.Key, func(o *fold.Order) bool {
		if o.State == fold.StateOffered { // an offer is handed back by Decline
			refused = errs.Errorf(errs.Conflict, "`ferry order decline "+o.ID+"` hands an offer back",
				"order %s is offered, not claimed; nothing to release", o.ID)
		}
		return refused != nil
	})
	if refused != nil {
		return nil, refused
	}
	return o, err
}

// Cancel ends an order (author only).
func (s *Session) Cancel(q string, opt NoteOptions) (*fold.Order, error) {
	if err := checkCap("cancel note", strings.TrimSpace(opt.Note), MaxNote, unitBytes, ""); err != nil {
		return nil, err
	}
	return s.lifecycle(q, fold.TypeOrderCancel, fold.EntryData{Note: strings.TrimSpace(opt.Note)}, opt.Key, func(o *fold.Order) bool {
		return o.State == fold.StateCancelled && o.Author == s.Name
	})
}

// Progress records a progress note on the holder's current claim. It names the claim,
// not a basis (docs/design.md §2). Errors: denied for a non-holder; invalid for an empty or
// over-long note.
func (s *Session) Progress(q string, opt NoteOptions) (*fold.Order, error) {
	return s.progress(q, opt.Note, "", opt.Key)
}

// progress writes an order.progress; failure ("", "pointers", "schema") marks one that
// records a refused submit.
func (s *Session) progress(q, note, failure, key string) (*fold.Order, error) {
	note = strings.TrimSpace(note)
	if contract.HasControl(note, true) {
		return nil, errs.Errorf(errs.Invalid, "remove terminal escapes and other control characters", "note holds control characters")
	}
	if note == "" {
		return nil, errs.Errorf(errs.Invalid, "one short line of what changed", "progress needs a note")
	}
	if err := checkCap("progress note", note, MaxNote, unitBytes, "one short line of what changed; the work stays in the work repo"); err != nil {
		return nil, err
	}
	_, _, o, err := s.holderEntry(q, fold.TypeOrderProgress, note, failure, key,
		"only the holder reports progress", "progress is for work in hand", "progress is reported while it is claimed", nil)
	return o, err
}

// holderEntry writes an entry of typ (order.progress, order.extend) that the order's
// holder makes on its running claim: it names the claim (docs/design.md §2: not a basis) and
// carries note (and failure, for progress). The refusals name the rule in the
// caller's words: denied for anyone but the holder (deny), conflict when the order is
// not claimed or changes_requested (busy, then what), and whatever check returns on
// the locked view. It returns the view the write was decided on, the entry written
// and the order folded with it.
func (s *Session) holderEntry(q, typ, note, failure, key, deny, busy, what string, check func(v *View, o *fold.Order) error) (*View, ledger.Entry, *fold.Order, error) {
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		o, err := v.State.FindOrder(q)
		if err != nil {
			return nil, nil, err
		}
		id = o.ID
		args := argsHash(callArgs{Call: typ, Order: o.ID, Data: fold.EntryData{Note: note}})
		if _, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			return nil, nil, err
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), typ); err != nil {
			return nil, nil, err
		}
		if o.Holder != s.Name {
			return nil, nil, o.LostClaim(typ, s.Name, errs.Errorf(errs.Denied, deny, "%s does not hold order %s (holder: %s)", s.Name, o.ID, fold.OrNone(o.Holder)))
		}
		if o.State != fold.StateClaimed && o.State != fold.StateChangesRequested {
			return nil, nil, errs.Errorf(errs.Conflict, busy+"; `ferry order show "+o.ID+"` shows where it stands", "order %s is %s; %s", o.ID, o.State, what)
		}
		if check != nil {
			if err := check(v, o); err != nil {
				return nil, nil, err
			}
		}
		d := fold.EntryData{Claim: o.Claim, Note: note, Failure: failure}
		if key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: typ, Ref: o.ID, Data: mustJSON(d), Idem: key}, nil, nil
	})
	if err != nil {
		return nil, e, nil, err
	}
	o, err := s.orderAfter(v, e, id)
	return v, e, o, err
}
