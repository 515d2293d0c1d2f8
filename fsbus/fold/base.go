package fold

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// The state at a checkpoint's cut (docs/format.md §20 "The state", ADR 0019 §5).
//
// A Base is what a fold starting from a checkpoint needs of everything at or below its
// cut. Every thing the fold keeps is a function of the roster and of the thing's own
// entries (fold_incr.go), so the base keeps:
//
//   - verbatim, in Lines, every entry that is not an entry of a thing (agent.*,
//     grant.*, policy.*, master.rotate, secret.put, checkpoint, types this build does
//     not fold per thing) and every entry of each thing live at the cut — an order
//     that is not accepted or cancelled, an ask not answered, every message, hand-in,
//     the primary chain and the decisions — so that an entry above the cut that names
//     one of them by basis resolves by the ordinary branch rule;
//   - as folded records, the things terminal at the cut (accepted and cancelled
//     orders, answered asks): nothing above the cut changes them (from.go);
//   - every idempotency key with the entry that took it first, and per agent the
//     segments, devices and newest HLC its entries at or below the cut showed, which
//     the lines kept no longer show.
//
// Its encoding is RFC 8785 JSON: the core (EncodeBase), cut into byte chunks, and the
// terminal things in thing-range chunks (EncodeThings); the head names every chunk by hash.

// BaseVersion is the "v" of an encoded base.
const BaseVersion = 2

// Base is the state at a cut.
type Base struct {
	Epoch int
	Cut   Cut
	// Lines are the entries kept verbatim, in merged order.
	Lines []ledger.Entry
	// Orders and Asks are the things terminal at the cut, by id: all of them in a base
	// folded here; in one loaded from a checkpoint, those its thing chunks read so far
	// (things.go: read them through TerminalOrder, TerminalAsk and Terminals).
	Orders map[string]*TerminalOrder
	Asks   map[string]*TerminalAsk
	// Counts are the numbers of terminal things by state ("accepted", "cancelled",
	// "answered", …), which a status shows without reading their chunks.
	Counts map[string]int
	// Idem holds every idempotency key (writer + "\x00" + key) at the cut.
	Idem map[string]IdemRec
	// Agents holds what entries at or below the cut showed of each writer.
	Agents map[string]AgentTrace
	// Contested are the contests of terminal things.
	Contested []Contest
	// Entries counts the distinct entries at or below the cut; MaxHLC is the highest
	// HLC among them.
	Entries int
	MaxHLC  string
	// RaisedBounds holds, by entry hash, the bounds a grant.set, grant.revoke, master
	// agent.retire or master.rotate among Lines was applied with when an earlier cut
	// raised them (State.clampBounds, MasterChain.clampToCut): a fold from this base
	// applies it with those again, so the state's lines fold as they did.
	RaisedBounds map[string]map[string]uint64

	lineSet map[string]bool // hashes of Lines
	// liveSet holds the thing keys (ThingKeys) of Lines: a thing live at the cut is
	// never terminal there, so its entries need no thing chunk read.
	liveSet map[string]bool
	things  *chunkStore // nil: Orders and Asks are whole
	idem    *chunkStore // nil: Idem is whole
}

// TerminalOrder is an order accepted or cancelled at the cut, as folded there.
type TerminalOrder struct {
	Order  *Order    `json:"order"`
	Core   OrderCore `json:"core"`
	Device string    `json:"device"`
}

// TerminalAsk is an ask answered at the cut, as folded there.
type TerminalAsk struct {
	Ask    *Ask   `json:"ask"`
	State  string `json:"core_state"`
	Author string `json:"core_author"`
}

// AgentTrace is what a writer's entries at or below the cut showed.
type AgentTrace struct {
	Segs    map[string]uint64 `json:"segs"` // device → highest seq
	Devices []string          `json:"devices"`
	LastHLC string            `json:"last_hlc,omitempty"`
}

// HasLine reports whether the entry with this hash is one of the base's lines.
func (b *Base) HasLine(hash string) bool {
	if b == nil {
		return false
	}
	if b.lineSet == nil {
		b.lineSet = make(map[string]bool, len(b.Lines))
		for i := range b.Lines {
			b.lineSet[b.Lines[i].Hash()] = true
		}
	}
	return b.lineSet[hash]
}

// cutAt is b.Cut.At, false without a base.
func (b *Base) cutAt(writer, device string) (CutPoint, bool) {
	if b == nil {
		return CutPoint{}, false
	}
	return b.Cut.At(writer, device)
}

// live reports whether key (a thing key, ThingKeys) names a thing the base keeps lines of.
func (b *Base) live(key string) bool {
	if b.liveSet == nil {
		b.liveSet = map[string]bool{}
		for i := range b.Lines {
			keys, _ := ThingKeys(&b.Lines[i])
			for _, k := range keys {
				b.liveSet[k] = true
			}
		}
	}
	return b.liveSet[key]
}

// terminalThing reports whether ref names a thing of e's family terminal in the base.
// A thing the base keeps lines of is live there, so only other refs read a chunk.
func (b *Base) terminalThing(e *ledger.Entry) bool {
	if b == nil {
		return false
	}
	switch Family(e.Type) {
	case "order":
		return !b.live("o"+e.Ref) && b.TerminalOrder(e.Ref) != nil
	case "ask":
		return !b.live("a"+e.Ref) && b.TerminalAsk(e.Ref) != nil
	}
	return false
}

// DeriveBase builds the base at cut from st, the state folded from lines (the entries
// at or below cut, or a previous base's lines and the entries between the two cuts,
// with that base as st's). It keeps the previous base's terminal things, and adds the
// things terminal in st.
func DeriveBase(st *State, lines []ledger.Entry, epoch int, cut Cut, entries int) (*Base, error) {
	b := &Base{Epoch: epoch, Cut: slices.Clone(cut), Orders: map[string]*TerminalOrder{}, Asks: map[string]*TerminalAsk{},
		Idem: map[string]IdemRec{}, Agents: map[string]AgentTrace{}, Entries: entries, MaxHLC: st.MaxHLC}
	if st.base != nil {
		orders, asks, err := st.base.Terminals()
		if err != nil {
			return nil, err
		}
		idem, err := st.base.AllIdem()
		if err != nil {
			return nil, err
		}
		maps.Copy(b.Orders, orders)
		maps.Copy(b.Asks, asks)
		maps.Copy(b.Idem, idem)
	}
	for id, o := range st.Orders {
		if Terminal(o.State) {
			c := *o
			b.Orders[id] = &TerminalOrder{Order: &c, Core: o.C, Device: o.Device}
		}
	}
	for id, a := range st.Asks {
		if a.State != AskPending {
			c := *a
			b.Asks[id] = &TerminalAsk{Ask: &c, State: string(a.C.State), Author: a.C.Author}
		}
	}
	for _, c := range st.Contested {
		if b.Orders[c.Ref] != nil || b.Asks[c.Ref] != nil {
			b.Contested = append(b.Contested, c)
		}
	}
	st.Idem.All(func(k string, v IdemRec) { b.Idem[k] = v })
	for name, a := range st.Agents {
		segs := maps.Clone(a.Segs)
		for _, p := range cut {
			if p.Writer == name && p.Seq > segs[p.Device] {
				if segs == nil {
					segs = map[string]uint64{}
				}
				segs[p.Device] = p.Seq
			}
		}
		b.Agents[name] = AgentTrace{Segs: segs, Devices: slices.Clone(a.Devices), LastHLC: a.LastHLC}
	}
	for _, e := range MergedSet(lines) {
		if keepLine(&e, b) {
			b.Lines = append(b.Lines, e)
		}
	}
	for _, e := range b.Lines {
		bounds, ok := st.raised[e.Hash()]
		if !ok {
			bounds, ok = st.Masters.raisedOf(e.Hash())
		}
		if ok {
			if b.RaisedBounds == nil {
				b.RaisedBounds = map[string]map[string]uint64{}
			}
			b.RaisedBounds[e.Hash()] = bounds
		}
	}
	b.Counts = map[string]int{}
	for _, o := range b.Orders {
		b.Counts[string(o.Order.State)]++
	}
	for _, a := range b.Asks {
		b.Counts[string(a.Ask.State)]++
	}
	return b, nil
}

// keepLine reports whether the base keeps e verbatim: an entry of no thing, or of a
// thing not terminal in b.
func keepLine(e *ledger.Entry, b *Base) bool {
	keys, roster := ThingKeys(e)
	if roster {
		return true
	}
	for _, k := range keys {
		switch k[0] {
		case 'x':
			continue // an ack naming no message: it changes nothing
		case 'o':
			if b.Orders[k[1:]] != nil {
				continue
			}
		case 'a':
			if b.Asks[k[1:]] != nil {
				continue
			}
		}
		return true
	}
	return false
}

// baseJSON is the encoded form of a base's core: everything but its terminal things,
// which are in thing chunks (things.go).
type baseJSON struct {
	V         int                   `json:"v"`
	Epoch     int                   `json:"epoch"`
	Cut       Cut                   `json:"cut"`
	Lines     []json.RawMessage     `json:"lines"`
	Counts    map[string]int        `json:"terminal"`
	Agents    map[string]AgentTrace `json:"agents"`
	Contested []Contest             `json:"contested"`
	Entries   int                   `json:"entries"`
	MaxHLC    string                `json:"max_hlc"`
	// RaisedBounds: see Base.RaisedBounds.
	RaisedBounds map[string]map[string]uint64 `json:"raised_bounds,omitempty"`
}

type idemJSON struct {
	Writer string `json:"writer"`
	Key    string `json:"key"`
	Args   string `json:"args,omitempty"`
	Hash   string `json:"hash"`
	Ref    string `json:"ref,omitempty"`
	HLC    string `json:"hlc"`
}

// EncodeBase returns the RFC 8785 encoding of b's core (EncodeThings encodes the rest).
func EncodeBase(b *Base) ([]byte, error) {
	j := baseJSON{V: BaseVersion, Epoch: b.Epoch, Cut: b.Cut, Lines: make([]json.RawMessage, 0, len(b.Lines)), Counts: b.Counts,
		Agents: b.Agents, Contested: b.Contested, Entries: b.Entries, MaxHLC: b.MaxHLC, RaisedBounds: b.RaisedBounds}
	if j.Cut == nil {
		j.Cut = Cut{}
	}
	if j.Contested == nil {
		j.Contested = []Contest{}
	}
	if j.Counts == nil {
		j.Counts = map[string]int{}
	}
	for i := range b.Lines {
		c, err := b.Lines[i].Canonical()
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i, err)
		}
		j.Lines = append(j.Lines, c)
	}
	return ledger.Canonical(j)
}

// EncodeWhole returns b's core encoding followed by each of its thing chunks: two bases
// are the same state exactly when these bytes are.
func EncodeWhole(b *Base) ([]byte, error) {
	core, err := EncodeBase(b)
	if err != nil {
		return nil, err
	}
	chunks, _, err := EncodeThings(b)
	if err != nil {
		return nil, err
	}
	idem, _, err := EncodeIdem(b)
	if err != nil {
		return nil, err
	}
	for _, c := range append(chunks, idem...) {
		core = append(append(core, '\n'), c...)
	}
	return core, nil
}

// DecodeBase decodes the encoded core of a base, refusing one that is not in its
// canonical form, names another version, or holds a line that is not an entry. Its
// terminal things are then read from their chunks (things.go).
func DecodeBase(raw []byte) (*Base, error) { return decodeBase(raw, true) }

// decodeBase is DecodeBase; with canonical false it skips the check that raw is the
// base's canonical encoding (its re-encoding), for bytes that passed it before.
func decodeBase(raw []byte, canonical bool) (*Base, error) {
	var j baseJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("state does not decode: %w", err)
	}
	if j.V != BaseVersion {
		return nil, fmt.Errorf("state version %d, this build reads %d", j.V, BaseVersion)
	}
	if err := j.Cut.Check(); err != nil {
		return nil, err
	}
	b := &Base{Epoch: j.Epoch, Cut: j.Cut, Orders: map[string]*TerminalOrder{}, Asks: map[string]*TerminalAsk{}, Counts: j.Counts,
		Idem: map[string]IdemRec{}, Agents: j.Agents, Contested: j.Contested, Entries: j.Entries, MaxHLC: j.MaxHLC, RaisedBounds: j.RaisedBounds}
	if b.Agents == nil {
		b.Agents = map[string]AgentTrace{}
	}
	if b.Counts == nil {
		b.Counts = map[string]int{}
	}
	for i, l := range j.Lines {
		e, err := ledger.ParseCanonicalLine(l)
		if err != nil {
			return nil, fmt.Errorf("state line %d: %w", i, err)
		}
		b.Lines = append(b.Lines, e)
	}
	if !canonical {
		return b, nil
	}
	canon, err := EncodeBase(b)
	if err != nil {
		return nil, err
	}
	if string(canon) != string(raw) {
		return nil, fmt.Errorf("state is not in its canonical encoding (RFC 8785)")
	}
	return b, nil
}

// withThings makes b read its terminal things from the chunks things names and its
// idempotency keys from those idem names, through read, each on first use.
func (b *Base) withThings(things, idem []ChunkRef, read func(hash string) ([]byte, error)) {
	b.Orders, b.Asks, b.Idem = map[string]*TerminalOrder{}, map[string]*TerminalAsk{}, map[string]IdemRec{}
	// A thing or idempotency chunk is checked for its canonical form whenever it is
	// read: a process reads few of them, and a machine that loaded the state before
	// may not have read this one.
	b.things = newChunkStore(things, read, func(raw []byte, i int, next string) error {
		return b.decodeThings(raw, i, next)
	})
	b.idem = newChunkStore(idem, read, func(raw []byte, i int, next string) error {
		return b.decodeIdem(raw, i, next)
	})
}

// ForCache returns a copy of st for the fold checkpoint (ADR 0011) to keep, and
// whether it can: a state with no base, or one whose base reads its thing and
// idempotency chunks on first use (LoadBaseLazy). The copy's base keeps the core (the
// lines, counts, traces and contests) and none of what its chunks gave this process:
// the process that restores it reads them again, on first use, after
// AttachChunks. A base folded here holds every terminal thing itself and is not kept.
func (st *State) ForCache() (State, bool) {
	out := *st
	b := st.base
	if b == nil {
		return out, true
	}
	if b.things == nil || b.idem == nil {
		return out, false
	}
	out.base = &Base{Epoch: b.Epoch, Cut: b.Cut, Lines: b.Lines, Counts: b.Counts, Agents: b.Agents,
		Contested: b.Contested, Entries: b.Entries, MaxHLC: b.MaxHLC, RaisedBounds: b.RaisedBounds}
	return out, true
}

// AttachChunks gives a state restored from the fold checkpoint (ForCache's copy) the
// chunk stores of its base again: the thing and idempotency chunks that head (the
// counting checkpoint the state was folded from) names, read through read on first
// use. It returns an error, and attaches nothing, when head is not that base's.
func (st *State) AttachChunks(head *Head, read func(hash string) ([]byte, error)) error {
	b := st.base
	if b == nil {
		return nil
	}
	if head.Epoch != b.Epoch || !slices.Equal(head.Cut, b.Cut) {
		return fmt.Errorf("head of epoch %d is not the base's (epoch %d)", head.Epoch, b.Epoch)
	}
	if err := checkThingRefs(head.Things); err != nil {
		return err
	}
	if err := checkIdemRefs(head.Idem); err != nil {
		return err
	}
	b.withThings(head.Things, head.Idem, read)
	return nil
}
