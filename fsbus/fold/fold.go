package fold

import (
	"cmp"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// EntryData is the union of the data fields of every entry type this binary folds.
// Unknown fields are ignored (forward compatibility, docs/design.md §2 rule 9).
type EntryData struct {
	Basis     string            `json:"basis,omitempty"`
	Object    string            `json:"object,omitempty"`
	Args      string            `json:"args,omitempty"`
	To        string            `json:"to,omitempty"`
	Claim     string            `json:"claim,omitempty"`
	Note      string            `json:"note,omitempty"`
	Verdict   string            `json:"verdict,omitempty"`
	Reference string            `json:"reference,omitempty"`
	Result    string            `json:"result,omitempty"`
	Window    string            `json:"window,omitempty"`
	Agent     string            `json:"agent,omitempty"`
	Key       string            `json:"key,omitempty"`
	Level     string            `json:"level,omitempty"`
	Scopes    []string          `json:"scopes,omitempty"`
	Bounds    map[string]uint64 `json:"bounds,omitempty"`
	// BoundHashes names, per segment Bounds names, the hash of the record at the bound
	// (attest.go).
	BoundHashes map[string]string `json:"bound_hashes,omitempty"`
	App         string            `json:"app,omitempty"`
	Machine     string            `json:"machine,omitempty"`
	IDs         []string          `json:"ids,omitempty"`
	// Outcome marks an order.submit the holder's machine recorded as pointer_stale or
	// validation_failed (empty: an ordinary submit).
	Outcome string `json:"outcome,omitempty"`
	// Failure marks an order.progress that records a refused submit: "pointers" or
	// "schema" (counted by the fold for the retry ladder).
	Failure string `json:"failure,omitempty"`
}

// dataOf returns e's data as decodeData gives it, decoded once per Fold: pass 1 and
// pass 2 keep what they decode, and the family folds read it back (decoding
// was a third of a fold's time when each pass decoded again).
func (st *State) dataOf(e *ledger.Entry) EntryData {
	if d, ok := st.decoded[e]; ok {
		return d
	}
	d, _ := DecodeData(e)
	return d
}

// DecodeData decodes an entry's data. It reports false for data that does not decode
// and for data with a key that equals a known field name only when case is ignored
// ("Basis"): encoding/json would fill the field from it, last key wins, so the entry's
// meaning would hang on key order, which its hash and signature ignore (rule 9).
func DecodeData(e *ledger.Entry) (EntryData, bool) {
	var d EntryData
	if len(e.Data) == 0 {
		return d, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(e.Data, &m) != nil {
		return d, false
	}
	for k := range m {
		if f, ok := dataKeysFolded()[strings.ToLower(k)]; ok && f != k {
			return d, false
		}
	}
	return d, json.Unmarshal(e.Data, &d) == nil
}

// dataKeysFolded maps, once first used, each lower-cased json name of entryData to the name itself.
var dataKeysFolded = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	t := reflect.TypeFor[EntryData]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[strings.ToLower(name)] = name
	}
	return m
})

// Agent is a writer as the fold sees it: what it announced and what the master granted.
type Agent struct {
	Name    string   `json:"name"`
	Level   string   `json:"level"` // worker|member|orchestrator, "none" when unseated or revoked
	Seated  bool     `json:"seated"`
	Key     string   `json:"key,omitempty"`      // key the current grant binds
	JoinKey string   `json:"join_key,omitempty"` // key announced by the newest agent.join
	App     string   `json:"app,omitempty"`
	Machine string   `json:"machine,omitempty"`
	Scopes  []string `json:"scopes,omitempty"`
	Joined  string   `json:"joined,omitempty"` // HLC of the first agent.join
	Retired bool     `json:"retired,omitempty"`
	Devices []string `json:"devices,omitempty"` // devices it has written from
	LastHLC string   `json:"last_hlc,omitempty"`

	Grants    []grant           `json:"-"`
	GrantHead string            `json:"-"` // hash of the newest grant entry on the winning chain: the next grant's basis
	LevelRank Level             `json:"-"`
	Segs      map[string]uint64 `json:"-"` // device → highest seq folded (for grant bounds)
	// retireCut bounds what the agent's retirement leaves counting: device → last seq
	// that counts; nil when no retirement names bounds.
	retireCut map[string]uint64
	retireAll bool                 // a retirement with bounds: segments retireCut does not name count for nothing
	attests   []grant              // the master's retirements' bounds with bound_hashes (attest.go)
	Joins     map[string][2]string `json:"-"` // announced key → (app, machine) of its newest join
}

// grant is one grant.set or grant.revoke of an agent, in master entry order.
type grant struct {
	LevelRank Level             `json:"-"`
	Key       ed25519.PublicKey `json:"-"`
	keyTxt    string
	scopes    []string
	bounds    map[string]uint64
	// boundHashes: device → hash of the record at bounds[device] (attest.go).
	boundHashes map[string]string
	Revoke      bool `json:"-"`
}

// Cover returns the grant an entry at (device, seq) falls under (docs/design.md §2 "Identity,
// trust and levels"): the newest grant whose bound for that device is below seq or that
// names no bound for it; entries within every later grant's bounds fall under the first.
// ok is false when the agent was never granted.
func (a *Agent) Cover(device string, seq uint64) (grant, bool) {
	if a == nil || len(a.Grants) == 0 {
		return grant{}, false
	}
	for k := len(a.Grants) - 1; k > 0; k-- {
		g := a.Grants[k]
		if b, named := g.bounds[device]; !named || seq > b {
			return g, true
		}
	}
	return a.Grants[0], true
}

// retireBound adds a retirement's bounds (device → last seq that still counts; all:
// segments b does not name count for nothing, as the master's retire says). Several
// retirements keep the strictest bound of each segment.
func (a *Agent) retireBound(b map[string]uint64, all bool) {
	if a.retireCut == nil {
		a.retireCut = map[string]uint64{}
	}
	prevAll := a.retireAll
	if all && !prevAll {
		for dev := range a.retireCut {
			if _, ok := b[dev]; !ok {
				delete(a.retireCut, dev)
			}
		}
	}
	for dev, seq := range b {
		if cur, ok := a.retireCut[dev]; ok {
			a.retireCut[dev] = min(cur, seq)
		} else if !prevAll {
			a.retireCut[dev] = seq
		}
	}
	a.retireAll = prevAll || all
}

// afterRetirement reports whether the entry at (device, seq) comes after the agent's
// retirement: it counts for nothing (docs/design.md §2: entries a grant does not allow
// count for nothing), except the retirement releases of what it held.
func (a *Agent) afterRetirement(device string, seq uint64) bool {
	if a == nil || a.retireCut == nil {
		return false
	}
	b, ok := a.retireCut[device]
	if !ok {
		return a.retireAll
	}
	return seq > b
}

// Ignored is an entry that counts for nothing, with the reason (docs/design.md §2: listed by
// `ferry ledger verify` and `ferry doctor`).
type Ignored struct {
	Writer string `json:"writer"`
	Device string `json:"device"`
	Seq    uint64 `json:"seq"`
	Type   string `json:"type"`
	Ref    string `json:"ref,omitempty"`
	Hash   string `json:"hash"`
	Reason string `json:"reason"`
}

// State is the channel's state folded from verified entries: a pure function of the
// entries and the object files they name (docs/design.md §2 rule 7: it never reads a clock).
type State struct {
	Project string            `json:"project"`
	Agents  map[string]*Agent `json:"agents"`
	Orders  map[string]*Order `json:"orders"`
	// Messages by id (talk_fold.go), asks by id (ask_fold.go), the primary role
	// (primary_fold.go), decisions newest first and hand-ins by id (handin_fold.go).
	Messages  map[string]*Message `json:"messages"`
	Asks      map[string]*Ask     `json:"asks"`
	Primary   *Primary            `json:"primary"`
	Decisions []Decision          `json:"decisions"`
	Handins   map[string]*Handin  `json:"handins"`
	// Policy is the head of the policy.set chain (policy.go); nil when none counts.
	Policy    *PolicySet `json:"policy,omitempty"`
	Contested []Contest  `json:"contested,omitempty"`
	Ignored   []Ignored  `json:"ignored,omitempty"`
	MaxHLC    string     `json:"max_hlc,omitempty"`
	Entries   int        `json:"entries"`
	// Superseded are the entries above a counting checkpoint's cut on things terminal
	// at it (from.go); Finality notes each place where the checkpoint decided otherwise
	// than a fold of every entry without it would.
	Superseded []Superseded `json:"superseded,omitempty"`
	Finality   []string     `json:"-"`

	Idem    Layered[IdemRec] `json:"-"` // writer + "\x00" + idem key
	Counted Layered[bool]    `json:"-"` // hashes of entries that count
	// decoded holds each entry's data while Fold runs (dataOf); nil after.
	decoded map[*ledger.Entry]EntryData
	// Masters is the master key rotation chain (rotation.go).
	Masters *MasterChain `json:"-"`
	// dangling maps the basis of each pending lifecycle entry to the things waiting
	// for it (thing keys of fold_incr.go).
	dangling map[string][]string
	// unattested: entry hash → why it falls outside an attested bound (attest.go).
	unattested map[string]string
	// base is the counting checkpoint's state the fold starts from (from.go), or nil.
	base *Base
	// raised: entry hash → the bounds a grant or retirement is applied with, raised
	// to the cut (State.clampBounds), for the next base (Base.RaisedBounds).
	raised map[string]map[string]uint64
}

// Base returns the checkpoint base the state was folded from, or nil.
func (st *State) Base() *Base { return st.base }

// noteDangling records that thing waits for basis (linkChain).
func (st *State) noteDangling(basis, thing string) {
	if st.dangling == nil {
		st.dangling = map[string][]string{}
	}
	if !slices.Contains(st.dangling[basis], thing) {
		st.dangling[basis] = append(st.dangling[basis], thing)
	}
}

type IdemRec struct {
	Writer string `json:"-"`
	Key    string `json:"-"` // the idem key itself
	Args   string `json:"-"`
	Hash   string `json:"-"`
	Ref    string `json:"-"`
	HLC    string `json:"-"` // of the entry that took the key
}

// ObjectReader returns an object file's canonical bytes and hash, or ErrObjectMissing.
type ObjectReader func(writer, id string) (canonical []byte, hash string, err error)

// FoldInput is everything Fold reads.
type FoldInput struct {
	Project string
	Master  ed25519.PublicKey
	// Entries as ledger.Snapshot gives them. Any order and repeated records fold the
	// same: Fold puts them in merged (hlc, writer, device, seq) order and drops repeats.
	Entries []ledger.Entry
	// Objects reads object files; the fold never touches the disk itself.
	Objects ObjectReader
	// Forks are the snapshot's forks: the losing branches hold the records grants
	// attest when a fork displaced them (attest.go). Optional.
	Forks []ledger.Fork
	// Base is the state at a counting checkpoint's cut (from.go); Entries then holds
	// its lines and the entries above the cut (Split).
	Base *Base

	unattested map[string]string // the last full fold's, for a partial fold (fold_incr.go)
}

// RulesVersion numbers the fold's rules: what state a history folds to. Two machines
// whose builds fold alike have the same RulesVersion, and a change that folds any
// history otherwise must raise it (fsbus TestFoldRulesVersion pins the busy fixture's
// state to it), and so must one that folds from an owner's checkpoint otherwise. An
// owner's checkpoint names the rules it was folded under. 2: the fold from a checkpoint
// reads above the cut from the cut's entry and bounds a grant naming no bound for a
// segment of the cut by the cut (docs/format.md §20). 3: a master.rotate above the cut
// is applied with the cut as its bound, and a line whose bounds an earlier cut raised
// keeps them (the state's raised_bounds).
const RulesVersion = 3

// Fold computes the State of a channel from its entries. It is deterministic: any
// machine holding the same entries and objects folds the same state, whatever order
// they arrived in. Entries that fail verification or exceed their writer's grant are
// listed in State.Ignored and change nothing.
func Fold(in FoldInput) *State {
	in.Entries = MergedSet(in.Entries)
	st := &State{
		Project:  in.Project,
		Agents:   map[string]*Agent{},
		Orders:   map[string]*Order{},
		Messages: map[string]*Message{},
		Asks:     map[string]*Ask{},
		Primary:  &Primary{},
		Handins:  map[string]*Handin{},
		Idem:     Layered[IdemRec]{top: map[string]IdemRec{}},
		Counted:  Layered[bool]{top: make(map[string]bool, len(in.Entries))},
		decoded:  make(map[*ledger.Entry]EntryData, len(in.Entries)),
		Entries:  len(in.Entries),
	}
	ignore := func(e *ledger.Entry, why string) {
		st.Ignored = append(st.Ignored, Ignored{Writer: e.Writer, Device: e.Device, Seq: e.Seq, Type: e.Type, Ref: e.Ref, Hash: e.Hash(), Reason: why})
	}
	agent := func(name string) *Agent {
		a := st.Agents[name]
		if a == nil {
			a = &Agent{Name: name, Level: LevelNone.String(), Segs: map[string]uint64{}}
			st.Agents[name] = a
		}
		return a
	}
	if n := len(in.Entries); n > 0 {
		st.MaxHLC = in.Entries[n-1].HLC
	}
	if in.Base != nil {
		st.beginBase(in.Base)
		st.Entries = in.Base.Entries
		for i := range in.Entries {
			if st.above(&in.Entries[i]) {
				st.Entries++
			}
		}
	}

	// Segments seen per writer, counted or not: grant bounds name them.
	for i := range in.Entries {
		e := &in.Entries[i]
		if e.Writer != MasterWriter && ValidName(e.Writer) {
			a := agent(e.Writer)
			if e.Seq > a.Segs[e.Device] {
				a.Segs[e.Device] = e.Seq
			}
		}
	}

	// Pass 1: the master's entries build the roster. Grants chain by basis and apply
	// by per-segment sequence bounds, so no entry's position in time matters.
	grantNodes := map[string][]*grantNode{}
	var policySets []*ledger.Entry
	st.Masters = ResolveMasters(st, in, ignore) // the key of each master entry
	if in.Base != nil {
		st.Masters.clampToCut(st, in.Base)
	}
	for i := range in.Entries {
		e := &in.Entries[i]
		if e.Writer != MasterWriter || st.Masters.skip(e) {
			continue
		}
		if !sigcache.Verify(e, st.Masters.KeyAt(e.Device, e.Seq), in.Project) {
			ignore(e, st.Masters.badSig(e, in.Project))
			continue
		}
		st.Counted.set(e.Hash(), true)
		d, ok := DecodeData(e)
		if !ok {
			ignore(e, "data does not decode")
			continue
		}
		st.decoded[e] = d
		switch e.Type {
		case TypeGrantSet:
			lvl, err := ParseLevel(d.Level)
			key, kerr := ledger.ParseKey(d.Key)
			if err != nil || kerr != nil || !ValidName(e.Ref) || e.Ref == MasterWriter {
				ignore(e, "grant.set with a bad level, key or agent name")
				continue
			}
			bounds, hashes := st.clampBounds(e.Ref, e, d.Bounds, d.BoundHashes)
			grantNodes[e.Ref] = append(grantNodes[e.Ref], &grantNode{e: e, basis: d.Basis,
				g: grant{LevelRank: lvl, Key: key, keyTxt: d.Key, scopes: d.Scopes, bounds: bounds, boundHashes: hashes}})
		case TypeGrantRevoke:
			if !ValidName(e.Ref) || e.Ref == MasterWriter {
				ignore(e, "grant.revoke of a bad agent name")
				continue
			}
			bounds, hashes := st.clampBounds(e.Ref, e, d.Bounds, d.BoundHashes)
			grantNodes[e.Ref] = append(grantNodes[e.Ref], &grantNode{e: e, basis: d.Basis, g: grant{Revoke: true, bounds: bounds, boundHashes: hashes}})
		case TypePolicySet:
			policySets = append(policySets, e)
		case TypeAgentRetire:
			if e.Ref != "" && e.Ref != MasterWriter {
				a := agent(e.Ref)
				a.Retired = true
				bounds, hashes := st.clampBounds(e.Ref, e, d.Bounds, d.BoundHashes)
				if bounds != nil {
					// The master's retire names the last seq of each segment it had
					// seen; later entries, and unnamed segments, count for nothing.
					a.retireBound(bounds, true)
				}
				if hashes != nil {
					a.attests = append(a.attests, grant{bounds: bounds, boundHashes: hashes})
				}
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(grantNodes)) {
		a := agent(name)
		a.Grants, a.GrantHead = resolveGrants(st, name, grantNodes[name], ignore)
	}
	st.Policy = resolvePolicy(st, policySets, ignore) // policy.go: the policy.set chain

	// An agent's retire of itself bounds its own segment at the retire's seq: found
	// before pass 2, so no entry's place in merged (HLC) order decides what counts.
	for i := range in.Entries {
		e := &in.Entries[i]
		if e.Type != TypeAgentRetire || e.Writer != e.Ref || e.Writer == MasterWriter || !ValidName(e.Writer) {
			continue
		}
		a := st.Agents[e.Writer]
		g, granted := a.Cover(e.Device, e.Seq)
		if !granted || g.Revoke || !sigcache.Verify(e, g.Key, in.Project) || CheckLevel(e.Writer, g.LevelRank, e.Type) != nil {
			continue // pass 2 lists it as ignored
		}
		a.retireBound(map[string]uint64{e.Device: e.Seq}, false)
	}

	st.unattested = unattested(st, in) // attested bounds (attest.go)

	// Pass 2: every entry is verified against the key its covering grant binds and
	// checked against that grant's level.
	var orderEntries, talkEntries, askEntries, primaryEntries, decisionEntries, handinEntries []*ledger.Entry
	for i := range in.Entries {
		e := &in.Entries[i]
		d, ok := st.decoded[e]
		if !ok {
			if d, ok = DecodeData(e); ok {
				st.decoded[e] = d
			}
		}
		var lvl Level
		if e.Writer == MasterWriter {
			if c, _ := st.Counted.Get(e.Hash()); !c {
				continue // already listed in pass 1
			}
			if !ok {
				continue
			}
			lvl = LevelMaster
		} else {
			if !ValidName(e.Writer) {
				ignore(e, "writer is not a portable name")
				continue
			}
			a := agent(e.Writer)
			if e.Type == TypeAgentJoin {
				// Counts before a seat, for display only: self-signed by the key it carries.
				key, err := ledger.ParseKey(d.Key)
				if !ok || err != nil || !sigcache.Verify(e, key, in.Project) {
					ignore(e, "agent.join not signed by the key it announces")
					continue
				}
				st.Counted.set(e.Hash(), true)
				if a.Joined == "" {
					a.Joined = e.HLC
				}
				a.JoinKey = d.Key
				if a.Joins == nil {
					a.Joins = map[string][2]string{}
				}
				a.Joins[d.Key] = [2]string{d.App, d.Machine}
				a.noteSegment(e)
				continue
			}
			g, granted := a.Cover(e.Device, e.Seq)
			switch {
			case !granted:
				if e.Type != TypeAgentSupport { // support.go: no more than the join beside it
					ignore(e, "writer is not seated")
				}
				continue
			case g.Revoke:
				ignore(e, "writer's grant was revoked")
				continue
			case !sigcache.Verify(e, g.Key, in.Project):
				ignore(e, "signature does not verify against the seated key")
				continue
			case !ok:
				ignore(e, "data does not decode")
				continue
			case st.unattested[e.Hash()] != "":
				ignore(e, st.unattested[e.Hash()])
				continue
			}
			lvl = g.LevelRank
			if err := CheckLevel(e.Writer, lvl, e.Type); err != nil {
				var fe *errs.Error
				errors.As(err, &fe)
				ignore(e, fe.Message)
				continue
			}
			if a.afterRetirement(e.Device, e.Seq) && !(e.Type == TypeOrderRelease && d.Agent == e.Writer) {
				ignore(e, "writer was retired: its entries after the retirement count for nothing")
				continue
			}
			if e.Type == TypeAgentRetire {
				// docs/design.md §2 level table: an agent retires itself; only the master
				// retires others.
				if e.Ref != e.Writer {
					ignore(e, "agent.retire of another agent: only the master retires others")
					continue
				}
				a.Retired = true
			}
			st.Counted.set(e.Hash(), true)
			a.noteSegment(e)
		}
		if st.supersede(e, ignore) {
			st.Counted.set(e.Hash(), false)
			continue
		}
		if e.Idem != "" && !st.baseLine(e) { // a line's key is the state's already
			k := e.Writer + "\x00" + e.Idem
			if _, seen := st.IdemGet(k); !seen {
				st.Idem.set(k, IdemRec{Writer: e.Writer, Key: e.Idem, Args: d.Args, Hash: e.Hash(), Ref: e.Ref, HLC: e.HLC})
			} else {
				st.takeIdem(e, k)
			}
		}
		switch Family(e.Type) {
		case "order":
			orderEntries = append(orderEntries, e)
		case "msg":
			talkEntries = append(talkEntries, e)
		case "ask":
			askEntries = append(askEntries, e)
		case "primary", "presence":
			primaryEntries = append(primaryEntries, e)
		case "decision":
			decisionEntries = append(decisionEntries, e)
		case "handin":
			handinEntries = append(handinEntries, e)
		}
	}

	// Seat state of every agent: its newest grant.
	for _, a := range st.Agents {
		if n := len(a.Grants); n > 0 {
			g := a.Grants[n-1]
			if !g.Revoke {
				a.Seated, a.LevelRank, a.Level, a.Key, a.Scopes = true, g.LevelRank, g.LevelRank.String(), g.keyTxt, g.scopes
			}
		}
		// App and machine are shown from the join of the seated key: a join under the
		// same name with another key (another machine, or an impostor) must not relabel
		// a seated agent (it is listed as a key change for the owner instead).
		show := a.JoinKey
		if a.Seated {
			show = a.Key
		}
		if j, ok := a.Joins[show]; ok {
			a.App, a.Machine = j[0], j[1]
		}
		slices.Sort(a.Devices)
	}

	foldOrders(st, in, orderEntries, ignore)
	foldTalk(st, in, talkEntries, ignore)
	foldAsks(st, in, askEntries, ignore)
	foldPrimary(st, in, primaryEntries, ignore)
	foldDecisions(st, in, decisionEntries, ignore)
	foldHandins(st, in, handinEntries, ignore)
	if st.base != nil {
		st.endBase(agent)
		sortSuperseded(st.Superseded)
	}
	sortContested(st.Contested)
	sortIgnored(st.Ignored)
	st.decoded = nil
	return st
}

// MergedSet returns entries in merged (hlc, writer, device, seq) order with repeated
// records dropped, so the fold is a function of the set of entries it is given, not of
// their order or of how often a record was delivered. Entries already in strict merged
// order, as ledger.Read gives them, are returned as they are.
func MergedSet(entries []ledger.Entry) []ledger.Entry {
	sorted := true
	for i := 1; i < len(entries) && sorted; i++ {
		sorted = EntryLess(&entries[i-1], &entries[i])
	}
	if sorted {
		return entries
	}
	ps := make([]*ledger.Entry, len(entries))
	for i := range entries {
		ps[i] = &entries[i]
	}
	slices.SortFunc(ps, func(a, b *ledger.Entry) int {
		switch {
		case EntryLess(a, b):
			return -1
		case EntryLess(b, a):
			return 1
		}
		return strings.Compare(a.Hash(), b.Hash()) // one record twice, or a fork: same place
	})
	out := make([]ledger.Entry, 0, len(ps))
	for i, e := range ps {
		if i > 0 && ps[i-1].Hash() == e.Hash() {
			continue // the hash covers writer, device and seq: the same record
		}
		out = append(out, *e)
	}
	return out
}

func (a *Agent) noteSegment(e *ledger.Entry) {
	if !slices.Contains(a.Devices, e.Device) {
		a.Devices = append(a.Devices, e.Device)
	}
	if e.HLC > a.LastHLC {
		a.LastHLC = e.HLC
	}
}

// LevelOf is the level the agent's next entry on device falls under (its newest grant).
func (st *State) LevelOf(name string) Level {
	if name == MasterWriter {
		return LevelMaster
	}
	if a := st.Agents[name]; a != nil {
		return a.LevelRank
	}
	return LevelNone
}

// Counts reports whether the entry with this hash counts for state (verified, granted).
func (st *State) Counts(hash string) bool { c, _ := st.Counted.Get(hash); return c }

// LevelAt is the level an entry fell under (for the order state machine).
func (st *State) LevelAt(e *ledger.Entry) Level {
	if e.Writer == MasterWriter {
		return LevelMaster
	}
	g, ok := st.Agents[e.Writer].Cover(e.Device, e.Seq)
	if !ok || g.Revoke {
		return LevelNone
	}
	return g.LevelRank
}

// grantNode is a grant.set or grant.revoke in an agent's grant chain.
type grantNode struct {
	e        *ledger.Entry
	basis    string
	g        grant
	children []*grantNode
	rank     int
}

// resolveGrants orders an agent's grants by their chain, never by clock: each grant
// names the previous one in data.basis. Where the chain branches (the master on two
// machines), the branch that reached a revocation wins, then the lower hash of the
// branch's first entry (docs/format.md §14); grants on losing branches count
// for nothing and the branch is reported as contested. A grant whose basis has not
// arrived waits (pending sync).
func resolveGrants(st *State, agent string, nodes []*grantNode, ignore func(*ledger.Entry, string)) ([]grant, string) {
	byHash := map[string]*grantNode{}
	for _, n := range nodes {
		byHash[n.e.Hash()] = n
	}
	var roots []*grantNode
	for _, n := range nodes {
		switch p := byHash[n.basis]; {
		case n.basis == "":
			roots = append(roots, n)
		case p == nil:
			ignore(n.e, "grant names a previous grant that has not arrived (pending sync)")
		default:
			p.children = append(p.children, n)
		}
	}
	var rank func(n *grantNode) int
	rank = func(n *grantNode) int {
		n.rank = 0
		if n.g.Revoke {
			n.rank = 1
		}
		for _, ch := range n.children {
			if r := rank(ch); r > n.rank {
				n.rank = r
			}
		}
		return n.rank
	}
	for _, r := range roots {
		rank(r)
	}
	var path []grant
	head, level := "", roots
	for len(level) > 0 {
		slices.SortFunc(level, func(a, b *grantNode) int {
			return cmp.Or(cmp.Compare(b.rank, a.rank), strings.Compare(a.e.Hash(), b.e.Hash()))
		})
		win := level[0]
		if len(level) > 1 {
			c := Contest{Ref: agent, Basis: head, Winner: Step{Type: win.e.Type, By: win.e.Writer, HLC: win.e.HLC, Hash: win.e.Hash()},
				Involved: []string{MasterWriter, agent}}
			for _, l := range level[1:] {
				c.Losers = append(c.Losers, Step{Type: l.e.Type, By: l.e.Writer, HLC: l.e.HLC, Hash: l.e.Hash()})
				ignoreGrantBranch(l, ignore)
			}
			st.Contested = append(st.Contested, c)
		}
		path = append(path, win.g)
		head, level = win.e.Hash(), win.children
	}
	return path, head
}

func ignoreGrantBranch(n *grantNode, ignore func(*ledger.Entry, string)) {
	ignore(n.e, "grant on a superseded branch of the grant chain")
	for _, ch := range n.children {
		ignoreGrantBranch(ch, ignore)
	}
}

// Family is the noun of an entry type ("order" of "order.claim").
func Family(typ string) string {
	noun, _, _ := strings.Cut(typ, ".")
	return noun
}
