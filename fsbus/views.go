package fsbus

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/textsafe"
	"github.com/ferryhq/ferry/ledger"
)

// Liveness states of a writer as this machine saw it (docs/design.md §2 rule 7).
const (
	Alive   = "alive"
	Quiet   = "quiet"
	Silent  = "silent"
	Unknown = "unknown"
)

// Liveness says how long ago this machine saw writer change (seconds, -1 when never)
// and the state it implies under the channel's policy. It reads this machine's clocks
// and arrival log, never another machine's timestamps. The age is measured on the boot
// clock: a wall-clock step, or a reboot, since the sighting restarts it (ADR 0013).
func (c *Channel) Liveness(v *View, writer string) (state string, ageS int64) {
	seen, ok := v.Arrivals.Sighting[writer]
	if !ok {
		return Unknown, -1
	}
	age := c.stamp().Since(seen)
	ageS = int64(age / time.Second)
	pol := c.PolicyOf(v)
	switch {
	case ageS < pol.QuietAfterS:
		return Alive, ageS
	case ageS < pol.SilentAfterS:
		return Quiet, ageS
	}
	return Silent, ageS
}

// Access is what `ferry access show` reports about one agent on this machine.
type Access struct {
	Agent         string   `json:"agent"`
	Level         string   `json:"level"`
	Seated        bool     `json:"seated"`
	Joined        bool     `json:"joined"`
	Scopes        []string `json:"scopes"`
	Retired       bool     `json:"retired"`
	KeyHere       bool     `json:"key_here"`        // this machine holds a key for the name
	SeatedKeyHere bool     `json:"seated_key_here"` // and it is the key the owner seated
	// Next is the one command that moves the agent forward ("" when nothing is needed).
	Next string `json:"next,omitempty"`
}

// Access reports an agent's seat as this machine sees it, and what to run next.
func (c *Channel) Access(v *View, name string) *Access {
	r := &Access{Agent: name, Level: fold.LevelNone.String(), Scopes: []string{}, KeyHere: c.Home.HasKey(c.Project(), name)}
	var here string
	if r.KeyHere {
		if k, err := c.Home.PublicKey(c.Project(), name); err == nil {
			here = ledger.FormatKey(k)
		}
	}
	a := v.State.Agents[name]
	if a != nil {
		r.Level, r.Seated, r.Joined, r.Retired = a.Level, a.Seated, a.JoinKey != "", a.Retired
		if a.Scopes != nil {
			r.Scopes = a.Scopes
		}
		r.SeatedKeyHere = a.Seated && here != "" && a.Key == here
	}
	switch {
	case !r.Joined && !r.Seated:
		r.Next = fmt.Sprintf("ferry join --as %s --project %s   (on the agent's machine)", name, c.Project())
	case !r.Seated:
		r.Next = fmt.Sprintf("ferry grant %s --level member --project %s   (the owner)", name, c.Project())
	case r.KeyHere && !r.SeatedKeyHere:
		r.Next = fmt.Sprintf("this machine's key is not the seated one: use another name here (ferry join --as %s-2)", name)
	}
	return r
}

// AgentRow is an agent with this machine's view of its liveness.
type AgentRow struct {
	*fold.Agent
	Liveness string `json:"liveness"`
	AgeS     int64  `json:"age_s"`
}

// Agents lists every agent with liveness.
func (c *Channel) Agents(v *View) []AgentRow {
	var out []AgentRow
	for _, a := range v.State.AgentList() {
		l, age := c.Liveness(v, a.Name)
		out = append(out, AgentRow{Agent: a, Liveness: l, AgeS: age})
	}
	return out
}

// HolderRow is a claimed order whose holder this machine has not seen for a while.
type HolderRow struct {
	Order    string `json:"order"`
	Holder   string `json:"holder"`
	Liveness string `json:"liveness"`
	AgeS     int64  `json:"age_s"`
}

// Status is the owner's view (`ferry status`).
type Status struct {
	Project string        `json:"project"`
	Channel string        `json:"channel"`
	Entries int           `json:"entries"`
	ToSeat  []*fold.Agent `json:"to_seat"`
	// KeyChanges are seated agents whose newest join announces another key: another
	// machine, or someone else, under the same name. Re-seat only deliberately.
	KeyChanges []*fold.Agent   `json:"key_changes"`
	Reviews    []fold.OrderRow `json:"reviews_due"`
	Contests   []fold.Contest  `json:"contested"`
	Quiet      []HolderRow     `json:"holders_not_seen"`
	Counts     map[string]int  `json:"orders"`
	Ignored    int             `json:"ignored_entries"`
	Problems   int             `json:"ledger_problems"`
	// Asks waiting on the owner's answer, oldest first.
	Asks []AskRow `json:"asks_waiting"`
	// Messages to the owner ("master" or "all") not yet read by the owner.
	Messages CatchupMessages `json:"messages_waiting"`
	// Primary is the primary role in one line.
	Primary CatchupPrimary `json:"primary"`
	// Ahead lists writers with entries stamped more than max_skew ahead of this
	// machine's clock: their HLCs are not absorbed (docs/format.md §6), only reported.
	Ahead []string `json:"clock_ahead,omitempty"`
	// Disputes are the disputes standing against the owner's newest counting checkpoint.
	Disputes []fold.StandingDispute `json:"disputes"`
}

// Status builds the owner's view: agents waiting to be seated, reviews due, contested
// orders, holders not seen for a while (quiet or silent on this machine's clock).
func (c *Channel) Status(v *View) *Status {
	st := v.State
	s := &Status{Project: c.Project(), Channel: c.Root, Entries: st.Entries, Counts: map[string]int{},
		Contests: append([]fold.Contest{}, st.Contested...), ToSeat: []*fold.Agent{}, KeyChanges: []*fold.Agent{}, Quiet: []HolderRow{}, Ignored: len(st.Ignored), Problems: countProblems(v.Snapshot)}
	for _, a := range st.AgentList() {
		switch {
		case a.JoinKey == "" || a.Retired:
		case len(a.Grants) == 0:
			s.ToSeat = append(s.ToSeat, a)
		case a.Seated && a.Key != a.JoinKey:
			s.KeyChanges = append(s.KeyChanges, a)
		}
	}
	s.Reviews = append([]fold.OrderRow{}, st.ListOrders(fold.OrderFilter{State: string(fold.StateSubmitted)})...)
	for state, n := range st.OrderCounts() {
		s.Counts[string(state)] = n
	}
	for _, o := range st.Orders {
		if o.Holder != "" && (o.State == fold.StateClaimed || o.State == fold.StateChangesRequested) {
			if l, age := c.Liveness(v, o.Holder); l != Alive {
				s.Quiet = append(s.Quiet, HolderRow{Order: o.ID, Holder: o.Holder, Liveness: l, AgeS: age})
			}
		}
	}
	slices.SortFunc(s.Quiet, func(a, b HolderRow) int { return strings.Compare(a.Order, b.Order) })
	s.Ahead, s.Disputes = c.aheadWriters(v), []fold.StandingDispute{}
	if cf := c.ownerCheckpoint; cf != nil {
		s.Disputes = fold.StandingDisputes(v.Snapshot.Entries, st, cf.Chain)
	}
	s.Asks = []AskRow{}
	for _, a := range st.PendingAsks() {
		s.Asks = append(s.Asks, AskRow{ID: a.ID, Title: a.Title + " (" + a.Author + ")", State: string(a.State)})
	}
	unread := st.Unread(fold.MasterWriter)
	s.Messages = CatchupMessages{Waiting: len(unread), Oldest: []MessageLine{}}
	for _, m := range unread {
		if len(s.Messages.Oldest) == CatchupPreviews {
			break
		}
		s.Messages.Oldest = append(s.Messages.Oldest, MessageLine{ID: m.ID, From: m.From, Preview: previewRunes(m.Preview, CatchupPreview)})
	}
	ps := c.PrimaryStatus(v)
	s.Primary = CatchupPrimary{State: ps.State, Holder: ps.Holder, Liveness: ps.Liveness, AgeS: ps.AgeS, Rule: ps.Rule}
	return s
}

// aheadWriters lists writers whose newest entry is more than max_skew ahead of this
// machine's clock.
func (c *Channel) aheadWriters(v *View) []string {
	limit := c.now().Add(time.Duration(c.PolicyOf(v).MaxSkewS) * time.Second).UnixMilli()
	seen := map[string]bool{}
	var out []string
	for i := len(v.Snapshot.Entries) - 1; i >= 0; i-- {
		e := &v.Snapshot.Entries[i]
		h, err := ledger.ParseHLC(e.HLC)
		if err != nil || h.Ms <= limit {
			break // entries are in HLC order: nothing earlier is further ahead
		}
		if !seen[e.Writer] {
			seen[e.Writer] = true
			out = append(out, e.Writer)
		}
	}
	slices.Sort(out)
	return out
}

// Catchup limits (docs/design.md §4 token budget: a digest, never history).
const (
	catchupOpen      = 7 // open orders (7 and 7 keep the busy fixture's digest ≤ 600 tokens)
	CatchupMine      = 7 // the agent's own orders
	CatchupReviews   = 5 // results the agent may review
	CatchupDecisions = 8 // newest decisions
	CatchupAsks      = 5 // the agent's newest asks
	CatchupPreviews  = 3 // previews of messages waiting
	CatchupContests  = 5 // contests involving the agent
	CatchupPreview   = 120
)

// Catchup is an agent's bounded digest (served by `ferry catchup` and the
// ferry_catchup MCP tool): who leads and what they asked for, what was decided, what
// is open, what is mine, my asks, messages waiting, contests I am part of.
type Catchup struct {
	Agent string `json:"agent"`
	Level string `json:"level"`
	// Seat says how an agent that holds no seat gets one (the owner's `ferry grant`);
	// "" for a seated or retired agent.
	Seat      string          `json:"seat,omitempty"`
	Primary   CatchupPrimary  `json:"primary"`
	Brief     *fold.Brief     `json:"brief,omitempty"`
	Decisions []DecisionRow   `json:"decisions"`
	Open      []DigestRow     `json:"open"`
	Mine      []DigestRow     `json:"mine"`
	Reviews   []DigestRow     `json:"reviews"`
	Asks      []AskRow        `json:"asks"`
	Messages  CatchupMessages `json:"messages"`
	Contested []ContestRow    `json:"contested"`
	Truncated bool            `json:"truncated,omitempty"`
	// Since is true when the lists hold only what changed after the given cursor.
	Since bool `json:"since"`
	// Compacted is true when the cursor given is from before the owner's checkpoint of
	// Epoch and what changed after it is at or below that cut: the lists are the whole
	// bounded digest (docs/format.md §21 "Compacted cursors").
	Compacted bool   `json:"compacted,omitempty"`
	Epoch     int    `json:"epoch,omitempty"`
	Next      string `json:"next"`
}

// CatchupPrimary is the primary role in one line.
type CatchupPrimary struct {
	State    string `json:"state"` // none|held|released
	Holder   string `json:"holder,omitempty"`
	Liveness string `json:"liveness"`
	AgeS     int64  `json:"age_s"`
	Rule     string `json:"rule"`
}

// DigestRow is an order in a digest: what a model needs to pick it, nothing more (the
// token budget of docs/design.md §4); `ferry order show` has the rest.
type DigestRow struct {
	ID     string          `json:"id"`
	Title  string          `json:"title"`
	State  fold.OrderState `json:"state"`
	Holder string          `json:"holder,omitempty"`
}

// DecisionRow is a decision in a digest.
type DecisionRow struct {
	ID   string `json:"id"`
	Line string `json:"line"`
	By   string `json:"by"`
}

// AskRow is an ask in a digest.
type AskRow struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	State string `json:"state"`
	Note  string `json:"note,omitempty"`
}

// CatchupMessages counts the messages waiting on the agent and previews the oldest.
type CatchupMessages struct {
	Waiting int           `json:"waiting"`
	Oldest  []MessageLine `json:"oldest"`
}

// MessageLine is a message preview in a digest.
type MessageLine struct {
	ID      string `json:"id"`
	From    string `json:"from"`
	Preview string `json:"preview"`
}

// ContestRow is a contest in a digest: the thing, who won with what, who lost.
type ContestRow struct {
	Ref    string   `json:"ref"`
	Winner string   `json:"winner"` // "bob: order.claim"
	Lost   []string `json:"lost"`
	// Checkpoint is the epoch of the owner's checkpoint that decided it (0: the branch rule).
	Checkpoint int `json:"checkpoint,omitempty"`
}

// ContestRowOf summarises a contest as a digest row.
func ContestRowOf(c fold.Contest) ContestRow { return contestRow(c) }

func contestRow(c fold.Contest) ContestRow {
	r := ContestRow{Ref: c.Ref, Winner: c.Winner.By + ": " + c.Winner.Type, Lost: []string{}, Checkpoint: c.Checkpoint}
	for _, l := range c.Losers {
		r.Lost = append(r.Lost, l.By+": "+l.Type)
	}
	return r
}

// compactedEpoch returns the epoch of the newest counting owner's checkpoint when the
// cursor at arrival number n is below what v can serve (arrivals.Log.Below: entries
// after it are at or below the cut, not in v), else 0.
func (v *View) compactedEpoch(n uint64) int {
	if v.epoch == 0 || !v.Arrivals.Compacts(n, v.Snapshot) {
		return 0
	}
	return v.epoch
}

// Catchup builds the digest for agent. With a cursor from this machine, orders,
// decisions, asks and contests are limited to what changed after it; messages waiting
// are always listed (unread is new by definition). A foreign or lost cursor falls back
// to the full bounded digest, never an error.
func (c *Channel) Catchup(v *View, agent, since string) *Catchup {
	st := v.State
	out := &Catchup{Agent: agent, Level: st.LevelOf(agent).String(), Next: v.Arrivals.Cursor(),
		Decisions: []DecisionRow{}, Open: []DigestRow{}, Mine: []DigestRow{}, Reviews: []DigestRow{},
		Asks: []AskRow{}, Messages: CatchupMessages{Oldest: []MessageLine{}}, Contested: []ContestRow{}}
	var changed map[string]bool // refs with an entry that arrived after the cursor
	if n, ok := v.Arrivals.ParseCursor(since); ok && since != "" {
		// A cursor from before the owner's checkpoint gets the whole bounded digest.
		out.Epoch = v.compactedEpoch(n)
		if out.Compacted, out.Since = out.Epoch > 0, out.Epoch == 0; out.Since {
			changed = map[string]bool{}
		}
		for i := range v.Snapshot.Entries {
			if e := &v.Snapshot.Entries[i]; out.Since && v.Arrivals.Number(e.Hash()) > n {
				changed[e.Ref] = true
				changed[e.Hash()] = true
			}
		}
	}
	fresh := func(ref string) bool { return changed == nil || changed[ref] }
	lvl := st.LevelOf(agent)
	if a := st.Agents[agent]; lvl == fold.LevelNone && (a == nil || !a.Retired) {
		grant := fmt.Sprintf("the owner runs `ferry grant %s --level member`", agent)
		if a == nil || a.JoinKey == "" {
			out.Seat = fmt.Sprintf("not joined: run `ferry join --as %s`, then %s", agent, grant)
		} else {
			out.Seat = "not seated yet: " + grant + "; until then you can read but not write"
		}
	}
	// Only results the agent may review are listed (docs/format.md §13 level table).
	mayReview := fold.CheckLevel(agent, lvl, fold.TypeOrderReview) == nil

	ps := c.PrimaryStatus(v)
	out.Primary = CatchupPrimary{State: ps.State, Holder: ps.Holder, Liveness: ps.Liveness, AgeS: ps.AgeS, Rule: ps.Rule}
	if ps.Brief != nil {
		b := *ps.Brief
		b.Take = ""
		out.Brief = &b
	}
	for _, d := range st.ListDecisions(0) {
		if len(out.Decisions) == CatchupDecisions {
			out.Truncated = true
			break
		}
		if fresh(d.ID) {
			out.Decisions = append(out.Decisions, DecisionRow{ID: d.ID, Line: d.Line, By: d.By})
		}
	}

	add := func(list *[]DigestRow, o *fold.Order, limit int) {
		if len(*list) >= limit {
			out.Truncated = true
			return
		}
		*list = append(*list, DigestRow{ID: o.ID, Title: o.Title, State: o.State, Holder: o.Holder})
	}
	for _, row := range st.ListOrders(fold.OrderFilter{State: "active"}) {
		o := st.Order(row.ID)
		if !fresh(o.ID) {
			continue
		}
		switch {
		case o.State == fold.StateSubmitted && o.Result != nil && o.Result.By != agent && mayReview:
			// Before "mine": the author is the usual reviewer of its own order.
			add(&out.Reviews, o, CatchupReviews)
		case o.Holder == agent || (o.Author == agent && o.State != fold.StateOpen):
			add(&out.Mine, o, CatchupMine)
		case o.Author == agent && o.State == fold.StateOpen:
			add(&out.Mine, o, CatchupMine) // my own order waiting for someone: mine, not "open to me"
		case !fold.InScope(st.ScopesNow(agent), o.Labels):
			// Scoped grant: an order the agent may not claim is not offered to it.
		case o.State == fold.StateOpen || o.State == fold.StateTimedOut || o.State == fold.StateFailed || (o.State == fold.StateOffered && o.OfferedTo == agent):
			add(&out.Open, o, catchupOpen)
		}
	}

	for _, a := range st.AsksBy(agent, false) {
		if !fresh(a.ID) {
			continue
		}
		if len(out.Asks) == CatchupAsks {
			out.Truncated = true
			break
		}
		out.Asks = append(out.Asks, AskRow{ID: a.ID, Title: a.Title, State: string(a.State), Note: a.Note})
	}

	unread := st.Unread(agent)
	out.Messages.Waiting = len(unread)
	for _, m := range unread {
		if len(out.Messages.Oldest) == CatchupPreviews {
			break
		}
		out.Messages.Oldest = append(out.Messages.Oldest, MessageLine{ID: m.ID, From: m.From, Preview: previewRunes(m.Preview, CatchupPreview)})
	}

	recent := c.now().Add(-contestShownFor)
	for i := len(st.Contested) - 1; i >= 0; i-- {
		ct := st.Contested[i]
		if !slices.Contains(ct.Involved, agent) {
			continue
		}
		if changed != nil && !changed[ct.Winner.Hash] && !contestChanged(ct, changed) {
			continue
		}
		if changed == nil && !contestSeenSince(v.Arrivals, ct, recent) {
			continue // a digest, never history: old contests stay in `ferry status --json`
		}
		if len(out.Contested) == CatchupContests {
			out.Truncated = true
			break
		}
		out.Contested = append(out.Contested, contestRow(ct))
	}
	return out
}

// contestShownFor is how long after this machine first saw a contest's entries the
// digest keeps listing it (display only, on this machine's clock).
const contestShownFor = 24 * time.Hour

// contestSeenSince reports whether this machine first saw any entry of the contest
// after t.
func contestSeenSince(a *arrivals.Log, ct fold.Contest, t time.Time) bool {
	if a.Seen(ct.Winner.Hash).After(t) {
		return true
	}
	for _, l := range ct.Losers {
		if a.Seen(l.Hash).After(t) {
			return true
		}
	}
	return false
}

func contestChanged(ct fold.Contest, changed map[string]bool) bool {
	for _, l := range ct.Losers {
		if changed[l.Hash] {
			return true
		}
	}
	return false
}

// previewRunes cuts s to at most n runes, marking a cut with "…".
func previewRunes(s string, n int) string {
	s, _ = textsafe.Cut(s, n)
	return s
}

// rosterKeys returns the key the roster of st binds to an entry's writer: the master
// key, the key of the agent's grant covering the entry, or for an agent.join the key
// it announces (for an unseated writer's agent.support, its join's).
func (c *Channel) rosterKeys(st *fold.State) ledger.KeyFunc {
	return func(e *ledger.Entry) (ed25519.PublicKey, bool) {
		if e.Writer == fold.MasterWriter {
			k := st.MasterKeyAt(e) // rotation.go
			if !sigcache.Verify(e, k, c.Project()) && st.Masters != nil {
				// Signed by an earlier key of the chain (a machine that had not seen the
				// rotation yet, or a rotation that lost): authentic, so not a forgery and
				// no hole in the chain; the fold ignores it, saying why (badSig).
				for _, old := range st.Masters.Keys {
					if sigcache.Verify(e, old, c.Project()) {
						return old, true
					}
				}
			}
			return k, true
		}
		a := st.Agents[e.Writer]
		if g, ok := a.Cover(e.Device, e.Seq); ok && !g.Revoke {
			return g.Key, true
		}
		key := ""
		if d, ok := fold.DecodeData(e); ok && e.Type == fold.TypeAgentJoin {
			key = d.Key
		} else if e.Type == fold.TypeAgentSupport && a != nil { // written with the join
			key = a.JoinKey
		}
		if k, err := ledger.ParseKey(key); err == nil {
			return k, true
		}
		return nil, false
	}
}

// Verify checks every segment line (chain, signature against the key the roster binds,
// forks), lists entries the fold ignored, and checks every object file's signature.
func (c *Channel) Verify(v *View) (*verify.Report, error) {
	st := v.State
	keys := c.rosterKeys(st)
	// Every chain with archived files is read with them (docs/format.md §21): what the
	// folder and --archive hold below the cuts is checked too. With --archive every
	// chain must run from its first entry; without, a gap a counting cut covers is
	// the archive's.
	defer c.Ledger.SetArchived(c.Ledger.Archived())
	archived := c.Ledger.ArchivedChains()
	c.Ledger.SetArchived(archived)
	rep, err := c.Ledger.Verify(keys)
	if err != nil {
		return nil, err
	}
	whole := len(c.archiveDirs) > 0
	if !whole {
		rep.Problems = c.ownerCheckpoint.AnchorCut(&ledger.Snapshot{Problems: rep.Problems, Entries: v.Snapshot.Entries})
	}
	out := &verify.Report{Ledger: rep, Ignored: st.Ignored, Objects: []string{}, Lost: []string{}}
	cc := &verify.Channel{Root: c.Root, Device: c.Device, ProjectName: c.Project(), HasKey: func(name string) bool { return c.Home.HasKey(c.Project(), name) },
		Archives: append([]string{filepath.Join(c.Root, "archive")}, c.archiveDirs...)}
	names := slices.Compact(slices.Sorted(slices.Values(append(c.Home.Keys(c.Project()), fold.MasterWriter))))
	out.Lost = cc.LostSegments(names, func(name string) uint64 { return c.Home.highWater(c.Project(), name, c.Device) },
		func(name string) uint64 { return tipSeq(v.chainTip(name, c.Device)) })
	if out.Ignored == nil {
		out.Ignored = []fold.Ignored{}
	}
	if c.ownerCheckpoint != nil {
		in := fold.FoldInput{Project: c.Project(), Master: c.MasterKey, Objects: c.objects(), Entries: v.Snapshot.Entries, Forks: v.Snapshot.Forks}
		reread := v.Snapshot.Floors != nil || len(archived) > 0
		if out.Checkpoints, out.Dispute, err = ckfile.Recheck(c.Root, c.ownerCheckpoint, in, c.Ledger, reread, whole); err != nil {
			return nil, err
		}
	}
	// Records this machine read that are gone (vanished.go).
	cv := &verify.View{Snapshot: v.Snapshot, State: v.State, Arrivals: v.Arrivals, Tip: v.chainTip}
	if out.Vanished, err = cc.VanishedRecords(cv, verify.LostWriters(out.Lost), c.ownerCheckpoint.NewestCut()); err != nil {
		return nil, err
	}
	// Every object file: it must parse, and its signature must verify against the key
	// the roster bound when the entry naming it was written (the grant covering that
	// entry, so objects written before a re-key keep verifying).
	// An object no entry names yet is checked against any key its author was granted;
	// one only partly arrived is pending, not a problem.
	named := verify.ObjectEntries(c.Root, v.Snapshot)
	for _, p := range verify.AllObjectFiles(c.Root) {
		if verify.IsLink(p) {
			continue // listed as a link (out.Links), never read
		}
		canon, _, err := verify.ReadObject(p)
		if errors.Is(err, fold.ErrObjectTorn) {
			out.Arriving = append(out.Arriving, verify.Rel(c.Root, p))
			continue
		}
		if err != nil {
			out.Objects = append(out.Objects, verify.Rel(c.Root, p)+": "+err.Error())
			continue
		}
		var env fold.Envelope
		if err := fold.JSONUnmarshal(canon, &env); err != nil || !fold.ValidName(env.Author) && env.Author != fold.MasterWriter {
			out.Objects = append(out.Objects, verify.Rel(c.Root, p)+": no valid author")
			continue
		}
		var cands []ed25519.PublicKey
		if e := named[p]; e != nil {
			pub, ok := keys(e)
			if !ok {
				continue // its entry is listed as ignored
			}
			cands = append(cands, pub)
		} else if env.Author == fold.MasterWriter {
			cands = append(cands, st.Masters.Keys...) // any key of the rotation chain
		} else if a := st.Agents[env.Author]; a != nil {
			for k := len(a.Grants) - 1; k >= 0; k-- {
				if !a.Grants[k].Revoke && a.Grants[k].Key != nil {
					cands = append(cands, a.Grants[k].Key)
				}
			}
		}
		if len(cands) == 0 {
			continue // an author not seated (yet): its entries are listed as ignored
		}
		good := false
		for _, pub := range cands {
			if verifyObjectSig(canon, pub, c.Project()) == nil {
				good = true
				break
			}
		}
		if !good {
			what := "the key its entry's grant bound"
			if named[p] == nil {
				what = "any key its author was granted"
			}
			out.Objects = append(out.Objects, verify.Rel(c.Root, p)+": signature does not verify against "+what)
		}
	}
	vaultBad, vaultArriving := c.vaultFiles(v.Snapshot, st) // vault files, by their bytes' hash (ADR 0009)
	out.Objects, out.Arriving = append(out.Objects, vaultBad...), append(out.Arriving, vaultArriving...)
	cc.ForgeryReport(out, cv) // key changes and a fix for each kind (forgery.go)
	if err := cc.Findings(cv, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Tail returns the last n entries (all when n <= 0), oldest first.
func (v *View) Tail(n int) []ledger.Entry {
	es := v.Snapshot.Entries
	if n > 0 && len(es) > n {
		es = es[len(es)-n:]
	}
	return es
}

// countProblems counts what `ferry ledger verify` would flag in a snapshot: problems
// other than torn tails (others' torn tails are "not yet arrived"), and forks.
func countProblems(snap *ledger.Snapshot) int {
	n := len(snap.Forks)
	for _, p := range snap.Problems {
		if p.Kind != ledger.KindTorn && p.Kind != ledger.KindFork {
			n++
		}
	}
	return n
}

// ObjectFiles lists every object file of the channel (absolute paths): orders,
// results, asks, messages and handins/<writer>/, sync tools' copies among them.
func (c *Channel) ObjectFiles() []string { return verify.AllObjectFiles(c.Root) }

// ObjectEntries maps each object file (absolute path) an entry of v names
// (data.object) to that entry: the first, in fold order.
func (c *Channel) ObjectEntries(v *View) map[string]*ledger.Entry {
	return verify.ObjectEntries(c.Root, v.Snapshot)
}

// ReadObject reads one object file of the channel (an absolute path) and returns its
// canonical form and hash; a BOM, CRLF or re-indentation changes neither (docs/design.md
// §2 rule 9). Errors: ErrObjectMissing when the file does not exist, ErrObjectTorn
// (wrapped, naming the file) when it has not fully arrived, another error for JSON that
// does not parse. It follows a symbolic link: check for one first.
func (c *Channel) ReadObject(path string) (canonical []byte, hash string, err error) {
	return verify.ReadObject(path)
}
