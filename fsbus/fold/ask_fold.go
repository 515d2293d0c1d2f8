package fold

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// AskState is the state of an ask (docs/design.md §2 "Orders, asks, presence").
type AskState string

// Ask states.
const (
	AskPending  AskState = "pending"
	AskApproved AskState = "approved"
	AskRejected AskState = "rejected"
	AskSentBack AskState = "sent_back"
)

// Verdicts of an ask.answer (docs/format.md §12) and the state each leads to.
const (
	VerdictApprove  = "approve"
	VerdictReject   = "reject"
	VerdictSendBack = "send_back"
)

// askVerdicts maps each verdict of an ask.answer to the ask state it leads to.
var askVerdicts = map[string]AskState{
	VerdictApprove:  AskApproved,
	VerdictReject:   AskRejected,
	VerdictSendBack: AskSentBack,
}

// AskVerdictState is the ask state a verdict leads to; ok is false for a word that is
// no verdict.
func AskVerdictState(verdict string) (state AskState, ok bool) {
	state, ok = askVerdicts[verdict]
	return state, ok
}

// askRank is the stage rank of each ask state for the branch rule of docs/design.md §2 "Races
// across machines": any answer (1) beats pending (0); between two answers the lower
// entry hash wins. Pinned by docs/format.md §14.
var askRank = map[string]int{
	string(AskPending):  0,
	string(AskApproved): 1,
	string(AskRejected): 1,
	string(AskSentBack): 1,
}

// Ask is a question to the owner as folded (docs/design.md §2): the text of its
// signed object asks/<id>.json and the owner's verdict from the winning ask.answer.
// Raised and Answered are HLCs (docs/format.md §6).
type Ask struct {
	ID             string   `json:"id"`
	Title          string   `json:"title"`
	Author         string   `json:"author"`
	State          AskState `json:"state"` // pending|approved|rejected|sent_back
	Recommendation string   `json:"recommendation,omitempty"`
	Reasoning      string   `json:"reasoning,omitempty"`
	Note           string   `json:"note,omitempty"`        // the owner's note with the verdict
	AnsweredBy     string   `json:"answered_by,omitempty"` // always "master" once answered
	Raised         string   `json:"raised"`
	Answered       string   `json:"answered,omitempty"`
	// Contests are the branches of this ask's chain (two owner machines answering at
	// once); Superseded are the answers that lost, for telling the asker and the owner.
	Contests   []Contest   `json:"contests,omitempty"`
	Superseded []AskAnswer `json:"superseded,omitempty"`
	// Missing is true while asks/<id>.json has not arrived (pending sync): the ask is
	// shown, titled "(pending sync)", and cannot be answered yet.
	Missing bool `json:"missing,omitempty"`
	// Pending counts entries of this ask whose basis has not arrived (pending sync).
	Pending int `json:"pending,omitempty"`
	// Head is the hash of the last entry on the winning chain: the basis an answer names.
	Head string `json:"head"`

	C askCore `json:"-"`
}

// AskAnswer is one ask.answer entry: a verdict and its note.
type AskAnswer struct {
	By      string `json:"by"`
	Verdict string `json:"verdict"` // approve|reject|send_back
	Note    string `json:"note,omitempty"`
	HLC     string `json:"hlc"`
	Hash    string `json:"hash"`
}

// askCore is the part of an ask its state machine decides on.
type askCore struct {
	State  AskState
	Author string
}

// Step applies one entry of an ask's chain to c: an ask.answer by the owner moves a
// pending ask to the verdict's state. It is the one rule both the fold and AskAnswer
// use. Refusals: denied below master level (an agent never answers, docs/design.md §2 level
// table), conflict when the ask is already answered, invalid for an unknown verdict. An
// entry type this binary does not know keeps its place in the chain unchanged
// (docs/format.md §17).
func (c askCore) Step(typ, writer string, lvl Level, d EntryData) (askCore, error) {
	n := c
	switch typ {
	case TypeAskAnswer:
		if err := CheckLevel(writer, lvl, typ); err != nil {
			return c, err
		}
		if c.State != AskPending {
			return c, errs.Errorf(errs.Conflict, "see the verdict with `ferry ask status ID`", "ask is already %s", c.State)
		}
		st, ok := askVerdicts[d.Verdict]
		if !ok {
			return c, errs.Errorf(errs.Invalid, "use approve, reject or send_back", "unknown verdict %q", d.Verdict)
		}
		n.State = st
	default:
		if knownType(typ) {
			return c, errs.Errorf(errs.Invalid, "", "%s is not a step of an ask's chain", typ)
		}
		if err := CheckLevel(writer, lvl, typ); err != nil {
			return c, err
		}
	}
	return n, nil
}

// askNode is a node of an ask's chain.
type askNode = chainNode[askCore]

// askRules is the ask state machine for resolveChain.
var askRules = chainRules[askCore]{
	step: func(c askCore, n *askNode) (askCore, error) {
		return c.Step(n.e.Type, n.e.Writer, n.lvl, n.d)
	},
	rank: func(c askCore) int { return askRank[string(c.State)] },
}

// foldAsks folds ask.raise and ask.answer chains into st.Asks (docs/format.md §14): an
// ask.raise is the root of its ask's chain (two raises under one id: the lower entry
// hash counts); answers name their basis and resolve by the branch rule — answered
// beats pending, then the lower hash — so two owner machines answering at once leave
// one verdict everywhere and a contest naming the asker and the owner. An answer not
// allowed from its parent's state (an answer to an answered ask) is ignored with
// everything built on it. Nothing here reads a clock.
func foldAsks(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
	raises := map[string][]*askNode{}
	var rest []*askNode
	for _, e := range entries {
		d := st.dataOf(e)
		n := &askNode{e: e, d: d, lvl: st.LevelAt(e)}
		switch {
		case e.Type == TypeAskRaise:
			if !ValidID(e.Ref) || !strings.HasPrefix(e.Ref, PrefixAsk) {
				ignore(e, "ask.raise with a bad ask id")
				continue
			}
			addRival(raises, n, "second ask.raise for an existing ask id", ignore)
		case e.Type == TypeAskAnswer:
			rest = append(rest, n)
		case d.Basis != "" && !knownType(e.Type):
			rest = append(rest, n) // unknown type with a basis: holds its place
		}
	}
	byHash := map[string]*askNode{}
	for _, list := range raises {
		for _, n := range list {
			byHash[n.e.Hash()] = n
		}
	}
	for _, n := range rest {
		byHash[n.e.Hash()] = n
	}
	pending := linkChain(rest, byHash, ignore, func(b, ref string) { st.noteDangling(b, "a"+ref) })

	ids := slices.Sorted(maps.Keys(raises))
	for _, id := range ids {
		cands := raises[id]
		asks := map[*askNode]*Ask{}
		for _, root := range cands {
			a := &Ask{ID: id, Author: root.e.Writer, Raised: root.e.HLC, State: AskPending, Pending: pending[id]}
			if why := loadAskObject(a, in, root); why != "" {
				if len(cands) == 1 {
					ignore(root.e, why)
					for _, ch := range root.children {
						ignoreSubtree(ch, "built on an entry that does not count", ignore)
					}
					continue
				}
				// A rival raise (rival.go): the object file decides nothing.
				*a = Ask{ID: id, Author: root.e.Writer, Raised: root.e.HLC, State: AskPending, Pending: pending[id],
					Title: "(object replaced by another writer; restore it from the author's machine)"}
			}
			root.state = askCore{State: AskPending, Author: a.Author}
			asks[root] = a
		}
		if len(asks) == 0 {
			continue
		}
		root := cands[0]
		var rival []Contest
		if len(cands) > 1 {
			var c Contest
			root, c = pickRival(st, cands, func(n *askNode) int { return witnessRank(n, askRules) }, ignore)
			rival = []Contest{c}
		}
		a := asks[root]
		path, contests := resolveChain(id, root, askRules, []string{a.Author, MasterWriter}, ignore)
		for _, n := range path {
			a.apply(n)
		}
		a.Contests = append(rival, contests...)
		for _, ct := range contests {
			for _, l := range ct.Losers {
				if n := byHash[l.Hash]; n != nil && n.e.Type == TypeAskAnswer {
					a.Superseded = append(a.Superseded, answerOf(n))
				}
			}
		}
		st.Contested = append(st.Contested, a.Contests...)
		st.Asks[id] = a
	}
}

// loadAskObject fills the ask's text from asks/<id>.json. It returns why the ask.raise
// does not count when the file exists but its hash differs from the one the entry
// names (edited or forged), it does not parse, or its id, author or device differ
// from the entry's; a file not yet arrived leaves the ask Missing (pending sync) and counts.
func loadAskObject(a *Ask, in FoldInput, root *askNode) string {
	if in.Objects == nil {
		a.Missing, a.Title = true, "(pending sync)"
		return ""
	}
	c, hash, err := in.Objects(root.e.Writer, a.ID)
	if errors.Is(err, ErrObjectMissing) {
		a.Missing, a.Title = true, "(pending sync)"
		return ""
	}
	if err != nil || hash != root.d.Object {
		return "ask object differs from the hash its ask.raise names"
	}
	var obj AskObject
	if err := JSONUnmarshal(c, &obj); err != nil || obj.ID != a.ID || obj.Author != root.e.Writer || obj.Device != root.e.Device {
		return "ask object does not match its ask.raise (id, author or device)"
	}
	a.Title, a.Recommendation, a.Reasoning = obj.Title, obj.Recommendation, obj.Reasoning
	return ""
}

// apply records a winning-chain node in the ask's view.
func (a *Ask) apply(n *askNode) {
	a.C = n.state
	a.State = n.state.State
	a.Head = n.e.Hash()
	if n.e.Type == TypeAskAnswer {
		a.Note, a.AnsweredBy, a.Answered = n.d.Note, n.e.Writer, n.e.HLC
	}
}

func answerOf(n *askNode) AskAnswer {
	return AskAnswer{By: n.e.Writer, Verdict: n.d.Verdict, Note: n.d.Note, HLC: n.e.HLC, Hash: n.e.Hash()}
}
