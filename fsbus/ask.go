package fsbus

import (
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Limits of an ask (docs/format.md §11 caps reasoning at 1,200 characters). The title is
// in bytes like an order's; recommendation and reasoning in characters (Unicode code
// points), so a non-English ask gets the same room as an English one.
const (
	MaxAskTitle = MaxTitle // characters, one line
	MaxAskText  = 1200     // characters, for recommendation and for reasoning
)

// AskRaiseOptions are the arguments of AskRaise. Their JSON form (Key excluded) is what
// data.args hashes (docs/format.md §15).
type AskRaiseOptions struct {
	Title          string `json:"title"`               // one line, at most 200 bytes
	Recommendation string `json:"recommendation"`      // what the asker proposes, ≤ 1,200 characters
	Reasoning      string `json:"reasoning,omitempty"` // why, ≤ 1,200 characters
	Key            string `json:"-"`                   // idempotency key
}

func (o *AskRaiseOptions) validate() error {
	o.Title = strings.TrimSpace(o.Title)
	o.Recommendation = strings.TrimSpace(o.Recommendation)
	o.Reasoning = strings.TrimSpace(o.Reasoning)
	switch {
	case o.Title == "":
		return errs.Errorf(errs.Invalid, "give the ask a one-line title", "empty title")
	case strings.ContainsAny(o.Title, "\n\r"):
		return errs.Errorf(errs.Invalid, "keep the title to one line; put detail in the reasoning", "ask title is multi-line")
	case utf8.RuneCountInString(o.Title) > MaxAskTitle:
		return capError("ask title", utf8.RuneCountInString(o.Title), MaxAskTitle, UnitChars, "keep the title short; put detail in the reasoning")
	case !utf8.ValidString(o.Title + o.Recommendation + o.Reasoning):
		return errs.Errorf(errs.Invalid, "", "title, recommendation and reasoning must be UTF-8")
	case o.Recommendation == "":
		return errs.Errorf(errs.Invalid, "pass --recommendation: what you propose the owner decide", "an ask needs a recommendation")
	}
	if n := utf8.RuneCountInString(o.Recommendation); n > MaxAskText {
		return errs.Errorf(errs.Invalid, "keep it short; put detail in the work repo and reference it",
			"recommendation is %d characters; the limit is %d", n, MaxAskText)
	}
	if n := utf8.RuneCountInString(o.Reasoning); n > MaxAskText {
		return errs.Errorf(errs.Invalid, "keep it short; put detail in the work repo and reference it",
			"reasoning is %d characters; the limit is %d", n, MaxAskText)
	}
	return nil
}

// AskRaise asks the owner to decide before a risky step (docs/design.md §2): it
// publishes the signed object asks/<a-id>.json, then appends ask.raise naming the
// object's hash; the ask is pending until the owner answers. Errors: invalid for an
// empty or multi-line title, a missing recommendation, or a recommendation or reasoning
// over 1,200 characters; denied below member level; conflict when the idempotency key
// was used with other arguments. A replayed key returns the ask the first call made
// and writes nothing.
func (s *Session) AskRaise(opt AskRaiseOptions) (*fold.Ask, error) {
	if s.Name == fold.MasterWriter {
		return nil, errs.Errorf(errs.Invalid, "asks are how agents ask the owner; record your own call with `ferry decision record`",
			"the owner answers asks and cannot raise one")
	}
	if err := opt.validate(); err != nil {
		return nil, err
	}
	args := argsHash(opt)
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if ref, replay, err := s.checkIdem(v.State, opt.Key, args); err != nil || replay {
			id = ref
			return nil, nil, err
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeAskRaise); err != nil {
			return nil, nil, err
		}
		id = fold.NewID(fold.PrefixAsk)
		obj := &fold.AskObject{Envelope: fold.Envelope{V: 1, ID: id, Author: s.Name, Device: s.Device},
			Title: opt.Title, Recommendation: opt.Recommendation, Reasoning: opt.Reasoning}
		data, hash, err := sealObject(obj, func(sig string) { obj.Sig = sig }, s.Signer, s.Project())
		if err != nil {
			return nil, nil, err
		}
		d := fold.EntryData{Object: hash}
		if opt.Key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: fold.TypeAskRaise, Ref: id, Data: mustJSON(d), Idem: opt.Key},
			[]pendingObject{{path: verify.ObjectPath(s.Root, s.Name, id), data: data}}, nil
	})
	if err != nil {
		return nil, err
	}
	return s.askAfter(v, e, id)
}

// askCallArgs is what data.args hashes for an ask.answer: the entry type, the resolved
// ask id and the call's data fields (docs/format.md §15).
type askCallArgs struct {
	Call string         `json:"call"`
	Ask  string         `json:"ask"`
	Data fold.EntryData `json:"data"`
}

// AskAnswer records the owner's verdict on a pending ask as a master-signed ask.answer
// naming the ask's head as basis (a compare-and-set on this machine). verdict is
// approve, reject or send_back ("send-back" is accepted); the note is optional, at
// most 2,000 bytes. Errors: denied unless s is the master (an agent, and the MCP surface,
// never answers: docs/design.md §2 level table); invalid for an unknown verdict, a long note or
// an ambiguous prefix; not_found for an unknown ask; conflict when the ask is already
// answered or the idempotency key was used with other arguments; retry_needed while the
// ask's object has not arrived. A replayed key returns the ask and writes nothing.
func (s *Session) AskAnswer(q, verdict string, opt NoteOptions) (*fold.Ask, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "only the owner answers asks, on the machine holding the master key: `ferry ask approve|reject|send-back ID` there, without --as",
			"%s may not answer asks; ask.answer needs level master", s.Name)
	}
	if verdict == "send-back" {
		verdict = fold.VerdictSendBack
	}
	if _, ok := fold.AskVerdictState(verdict); !ok {
		return nil, errs.Errorf(errs.Invalid, "use approve, reject or send_back", "unknown verdict %q", verdict)
	}
	note, key := strings.TrimSpace(opt.Note), opt.Key
	if err := checkCap("answer note", note, MaxNote, unitBytes, "keep the note short"); err != nil {
		return nil, err
	}
	if !utf8.ValidString(note) {
		return nil, errs.Errorf(errs.Invalid, "", "note must be UTF-8")
	}
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		a, err := v.State.FindAsk(q)
		if err != nil {
			return nil, nil, err
		}
		id = a.ID
		d := fold.EntryData{Verdict: verdict, Note: note}
		args := argsHash(askCallArgs{Call: fold.TypeAskAnswer, Ask: a.ID, Data: d})
		if _, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			return nil, nil, err
		}
		if a.Missing {
			return nil, nil, errs.Errorf(errs.RetryNeeded, "wait for the sync tool to deliver asks/"+a.ID+".json, then retry",
				"ask %s has not fully arrived on this machine", a.ID)
		}
		if _, err := a.C.Step(fold.TypeAskAnswer, s.Name, v.State.LevelOf(s.Name), d); err != nil {
			if errs.Is(err, errs.Conflict) {
				return nil, nil, errs.Errorf(errs.Conflict, "see the verdict with `ferry ask status "+a.ID+"`",
					"ask %s is already %s (by %s at %s)", a.ID, a.State, fold.OrNone(a.AnsweredBy), a.Answered)
			}
			return nil, nil, err
		}
		d.Basis = a.Head
		if key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: fold.TypeAskAnswer, Ref: a.ID, Data: mustJSON(d), Idem: key}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return s.askAfter(v, e, id)
}

// askAfter folds the view plus the entry just written (no second read of the channel)
// and returns the ask.
func (s *Session) askAfter(v *View, e ledger.Entry, id string) (*fold.Ask, error) {
	a := s.viewWithEntry(v, e).State.Ask(id)
	if a == nil {
		return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify`", "ask %s is not in the state after writing it", id)
	}
	return a, nil
}
