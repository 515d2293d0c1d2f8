package fold

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// PrimaryRef is the ref of every primary.take, primary.release and primary.brief
// entry: a channel has one primary role (docs/format.md §12).
const PrimaryRef = "primary"

// States of the primary role (docs/format.md §14).
const (
	PrimaryNone     = "none"     // never taken
	PrimaryHeld     = "held"     // a primary.take is the chain's head
	PrimaryReleased = "released" // its holder released it
)

// primaryRank is the stage rank of each primary state for the branch rule of docs/design.md §2
// "Races across machines", pinned by docs/format.md §14: held 2 > released 1 > none 0.
var primaryRank = map[string]int{PrimaryNone: 0, PrimaryReleased: 1, PrimaryHeld: 2}

// Limits of a primary.brief and a decision.record as this binary writes them (bytes).
const (
	MaxBriefLine       = 200 // the objective and each constraint: one line
	MaxBriefConstraint = 4   // constraints per brief: with the objective, at most 5 lines
	MaxDecisionLine    = 200
)

// Primary is the primary role as folded (docs/design.md §2): the winning path of the
// channel's one primary chain (takes and releases naming data.basis, rooted at a
// virtual root: the first take names no basis), the current brief and the standbys.
type Primary struct {
	State  string `json:"state"`            // none|held|released
	Holder string `json:"holder,omitempty"` // writer of the winning take while held
	Since  string `json:"since,omitempty"`  // HLC of the holder's take
	// Take is the hash of the holder's take entry: what the holder's primary.brief names.
	Take string `json:"take,omitempty"`
	// Previous is the holder before the current state: the one who released it, or the
	// one whose hold the current take ended.
	Previous string `json:"previous,omitempty"`
	// Head is the hash of the last lifecycle entry on the winning path: the basis the
	// next take or release names ("" while the role was never taken).
	Head string `json:"head,omitempty"`
	// Brief is the current brief: the one naming the latest take on the winning path
	// that has a brief by its taker. It survives a release until a new holder briefs.
	Brief    *Brief    `json:"brief,omitempty"`
	Standbys []Standby `json:"standbys"`
	History  []Step    `json:"history"`
	Contests []Contest `json:"contests,omitempty"`
	// Pending counts lifecycle entries whose basis has not arrived (pending sync).
	Pending int `json:"pending,omitempty"`

	C primaryCore `json:"-"`
}

// Brief is a primary.brief: the holder's objective and constraints (≤ 5 lines).
type Brief struct {
	Objective   string   `json:"objective"`
	Constraints []string `json:"constraints"`
	By          string   `json:"by"`
	HLC         string   `json:"hlc"`
	Take        string   `json:"take,omitempty"` // hash of the take it was written under
	hash        string
}

// Standby is a writer that recorded presence.standby: available to take over.
type Standby struct {
	Name string `json:"name"`
	HLC  string `json:"hlc"` // its newest standby entry
}

// Decision is one decision.record: a short line held in the entry itself (docs/design.md §2,
// "Decisions are short lines held in their decision.record entries").
type Decision struct {
	ID   string `json:"id"` // d- id, the entry's ref
	Line string `json:"line"`
	By   string `json:"by"`
	HLC  string `json:"hlc"`
	hash string
}

// PrimaryData is the data of primary.brief and decision.record beyond the members the
// shared entryData carries (docs/format.md §12).
type PrimaryData struct {
	Basis       string   `json:"basis,omitempty"`
	Args        string   `json:"args,omitempty"`
	Take        string   `json:"take,omitempty"`
	Objective   string   `json:"objective,omitempty"`
	Constraints []string `json:"constraints,omitempty"`
	Line        string   `json:"line,omitempty"`
}

// primaryDataKeys maps, once first used, each lower-cased json name of primaryData to the name itself.
var primaryDataKeys = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	t := reflect.TypeFor[PrimaryData]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[strings.ToLower(name)] = name
	}
	return m
})

// DecodePrimaryData decodes the primaryData members of an entry's data. Like
// decodeData it refuses a key that equals a member name only when case is ignored, so
// an entry's meaning never hangs on key order (rule 9).
func DecodePrimaryData(e *ledger.Entry) (PrimaryData, bool) {
	var d PrimaryData
	if len(e.Data) == 0 {
		return d, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(e.Data, &m) != nil {
		return d, false
	}
	for k := range m {
		if f, ok := primaryDataKeys()[strings.ToLower(k)]; ok && f != k {
			return d, false
		}
	}
	return d, json.Unmarshal(e.Data, &d) == nil
}

// primaryCore is the part of the primary role its state machine decides on.
type primaryCore struct {
	State    string
	Holder   string
	Take     string // hash of the holder's take
	Since    string // HLC of the holder's take
	Previous string
}

// Step applies one lifecycle entry of the primary chain to c, or refuses it (*errs.Error)
// saying why. The fold and the write path share it. A take is accepted from any
// state: whether the holder may be taken over is the taker's judgment on its own
// clock (docs/design.md §2 rule 7), made by Session.PrimaryTake before writing. A release
// needs the role held, by the writer.
func (c primaryCore) Step(typ, writer, hash, hlc string, lvl Level) (primaryCore, error) {
	n := c
	switch typ {
	case TypePrimaryTake:
		n.State, n.Holder, n.Take, n.Since = PrimaryHeld, writer, hash, hlc
		if c.State == PrimaryHeld && c.Holder != writer {
			n.Previous = c.Holder
		}
	case TypePrimaryRelease:
		if c.State != PrimaryHeld {
			return c, errs.Errorf(errs.Conflict, "see `ferry primary status`", "nobody holds the primary role")
		}
		if writer != c.Holder {
			return c, errs.Errorf(errs.Denied, "only the holder releases the primary role", "%s does not hold the primary role (holder: %s)", writer, c.Holder)
		}
		n.State, n.Holder, n.Take, n.Since, n.Previous = PrimaryReleased, "", "", "", c.Holder
	default:
		if knownType(typ) {
			return c, fmt.Errorf("%w: %s is not a lifecycle entry of the primary role", errNotAllowed, typ)
		}
		// An unknown type naming a basis keeps its place in the chain (docs/format.md §17).
	}
	if err := CheckLevel(writer, lvl, typ); err != nil {
		return c, err
	}
	return n, nil
}

type primaryNode = chainNode[primaryCore]

// primaryRules is the primary role's state machine for resolveChain.
var primaryRules = chainRules[primaryCore]{
	step: func(c primaryCore, n *primaryNode) (primaryCore, error) {
		return c.Step(n.e.Type, n.e.Writer, n.e.Hash(), n.e.HLC, n.lvl)
	},
	rank: func(c primaryCore) int { return primaryRank[c.State] },
}

// foldPrimary folds primary.take/release/brief and presence.standby entries into
// st.Primary (docs/format.md §14): the primary chain resolved by the branch rule of
// docs/design.md §2 from a virtual root, the current brief, and the standbys. A contest names
// the winner and, as involved, every writer of a competing branch plus the holder
// before the race.
func foldPrimary(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
	p := st.Primary
	p.State, p.Standbys, p.History = PrimaryNone, []Standby{}, []Step{}
	root := &primaryNode{state: primaryCore{State: PrimaryNone}}
	byHash := map[string]*primaryNode{"": root}
	var nodes []*primaryNode
	var briefs []*ledger.Entry
	standby := map[string]string{}
	for _, e := range entries {
		if e.Type == TypePresenceStandby {
			if e.Ref != e.Writer {
				ignore(e, "presence.standby names another agent")
				continue
			}
			if e.HLC > standby[e.Writer] {
				standby[e.Writer] = e.HLC
			}
			continue
		}
		if Family(e.Type) != "primary" {
			continue // other presence.* types: not folded by this binary
		}
		if e.Ref != PrimaryRef {
			ignore(e, `primary entries have ref "primary"`)
			continue
		}
		d := st.dataOf(e)
		switch {
		case e.Type == TypePrimaryBrief:
			briefs = append(briefs, e)
			continue
		case e.Type == TypePrimaryTake || e.Type == TypePrimaryRelease:
		case d.Basis != "" && !knownType(e.Type): // unknown type with a basis: holds its place
		default:
			continue
		}
		n := &primaryNode{e: e, d: d, lvl: st.LevelAt(e)}
		nodes = append(nodes, n)
		byHash[e.Hash()] = n
	}
	p.Pending = linkChain(nodes, byHash, ignore, func(b, _ string) { st.noteDangling(b, thingPrimary) })[PrimaryRef]
	path, contests := resolveChain(PrimaryRef, root, primaryRules, nil, ignore)
	takes := map[string]int{} // hash of a take on the winning path → its position
	for i, n := range path[1:] {
		p.C = n.state
		p.Head = n.hash()
		p.History = append(p.History, stepOf(n))
		if n.e.Type == TypePrimaryTake {
			takes[n.hash()] = i + 1
		}
	}
	p.State, p.Holder, p.Take, p.Since, p.Previous = p.C.State, p.C.Holder, p.C.Take, p.C.Since, p.C.Previous
	if p.State == "" {
		p.State = PrimaryNone
	}
	// The holder before the race is involved in it too.
	for i := range contests {
		ct := &contests[i]
		for _, n := range path {
			if n.hash() != ct.Basis {
				continue
			}
			prev := n.state.Holder
			if prev == "" {
				prev = n.state.Previous
			}
			if prev != "" && !slices.Contains(ct.Involved, prev) {
				ct.Involved = append(ct.Involved, prev)
				slices.Sort(ct.Involved)
			}
		}
	}
	p.Contests = contests
	st.Contested = append(st.Contested, contests...)

	// Briefs name the take they were written under: one counts when that take is by the
	// same writer on the winning path. The current brief names the latest such take;
	// several for one take: the highest (hlc, hash).
	bestPos := 0
	for _, e := range briefs {
		d, ok := DecodePrimaryData(e)
		pos := takes[d.Take]
		if !ok || pos == 0 || path[pos].e.Writer != e.Writer {
			ignore(e, "brief does not name a take of its writer on the primary chain")
			continue
		}
		b := &Brief{Objective: d.Objective, Constraints: d.Constraints, By: e.Writer, HLC: e.HLC, Take: d.Take, hash: e.Hash()}
		if b.Constraints == nil {
			b.Constraints = []string{}
		}
		if cur := p.Brief; cur == nil || pos > bestPos || (pos == bestPos && (b.HLC > cur.HLC || (b.HLC == cur.HLC && b.hash > cur.hash))) {
			p.Brief, bestPos = b, pos
		}
	}

	// Standbys: seated, not retired, not the holder.
	for _, name := range slices.Sorted(maps.Keys(standby)) {
		a := st.Agents[name]
		if name == p.Holder || (name != MasterWriter && (a == nil || !a.Seated || a.Retired)) {
			continue
		}
		p.Standbys = append(p.Standbys, Standby{Name: name, HLC: standby[name]})
	}
}

// foldDecisions folds decision.record entries into st.Decisions, newest first (by hlc,
// then entry hash). Each names a fresh d- id in its ref and carries its line in
// data.line; two records under one id (a forged or cloned record) resolve like a fork:
// the lower entry hash counts.
func foldDecisions(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
	byID := map[string]*Decision{}
	first := map[string]*ledger.Entry{}
	for _, e := range entries {
		if e.Type != TypeDecisionRecord {
			continue // other decision.* types: not folded by this binary
		}
		d, ok := DecodePrimaryData(e)
		switch {
		case !ValidID(e.Ref) || !strings.HasPrefix(e.Ref, PrefixDecision):
			ignore(e, "decision.record with a bad decision id")
			continue
		case !ok || strings.TrimSpace(d.Line) == "":
			ignore(e, "decision.record without a line")
			continue
		}
		dec := &Decision{ID: e.Ref, Line: d.Line, By: e.Writer, HLC: e.HLC, hash: e.Hash()}
		if prev := byID[e.Ref]; prev != nil {
			if prev.hash < dec.hash {
				ignore(e, "second decision.record for an existing decision id")
				continue
			}
			ignore(first[e.Ref], "second decision.record for an existing decision id")
		}
		byID[e.Ref], first[e.Ref] = dec, e
	}
	st.Decisions = make([]Decision, 0, len(byID))
	for _, d := range byID {
		st.Decisions = append(st.Decisions, *d)
	}
	slices.SortFunc(st.Decisions, func(a, b Decision) int {
		return cmp.Or(strings.Compare(b.HLC, a.HLC), strings.Compare(b.hash, a.hash))
	})
}
