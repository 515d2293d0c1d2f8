package fsbus

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/fakesyncthing"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// primaryClock is a settable wall clock shared by the channels of a test (Channel.Now).
type primaryClock struct{ t time.Time }

func (c *primaryClock) now() time.Time          { return c.t }
func (c *primaryClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// primaryWorld is a channel on a test clock with agents seated at the given levels
// (name → level), and a session for each of them and the master.
func primaryWorld(t *testing.T, levels map[string]string) (*Channel, *primaryClock, map[string]*Session) {
	t.Helper()
	clk := &primaryClock{t: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)}
	c, err := Init(testHome(t), InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	c.Now = clk.now // the ledger's HLCs read it too
	m, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	ss := map[string]*Session{fold.MasterWriter: m}
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		if _, err := Join(c, name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Grant(GrantOptions{Agent: name, Level: levels[name]}); err != nil {
			t.Fatal(err)
		}
		if ss[name], err = c.As(name); err != nil {
			t.Fatal(err)
		}
	}
	return c, clk, ss
}

// primaryAppend appends a signed entry the write path would refuse: what a modified or
// older binary could write. The fold must judge it on its own.
func primaryAppend(t *testing.T, s *Session, typ, ref string, data any) ledger.Entry {
	t.Helper()
	e, err := s.Ledger.Append(s.Name, s.Device, ledger.Draft{Type: typ, Ref: ref, Data: mustJSON(data)}, s.Signer, ledger.HLC{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func primaryLoad(t *testing.T, c *Channel) *View {
	t.Helper()
	v, err := reopened(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// primaryIgnored returns the reason the fold ignored the entry with hash h ("" if it counts).
func primaryIgnored(st *fold.State, h string) string {
	for _, ig := range st.Ignored {
		if ig.Hash == h {
			return ig.Reason
		}
	}
	return ""
}

// primaryEntries is the number of ledger lines: a refusal must not change it.
func primaryEntries(t *testing.T, c *Channel) int {
	t.Helper()
	snap, err := c.Ledger.Read()
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Entries)
}

// TestPrimaryFoldRules: the fold's own rules for the primary chain, briefs and
// standbys, judged on entries the write path would refuse as well as on honest ones.
func TestPrimaryFoldRules(t *testing.T) {
	t.Parallel()
	c, _, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator", "olga": "orchestrator", "mike": "member", "wendy": "worker"})
	alice, bob, olga, mike, wendy := ss["alice"], ss["bob"], ss["olga"], ss["mike"], ss["wendy"]

	v := primaryLoad(t, c)
	if p := v.State.Primary; p.State != fold.PrimaryNone || p.Holder != "" || p.Standbys == nil || p.History == nil {
		t.Fatalf("fresh channel: primary %+v", p)
	}
	// A worker's and a member's take count for nothing: the level table (docs/design.md §2).
	wTake := primaryAppend(t, wendy, fold.TypePrimaryTake, fold.PrimaryRef, fold.PrimaryData{})
	mTake := primaryAppend(t, mike, fold.TypePrimaryTake, fold.PrimaryRef, fold.PrimaryData{})
	v = primaryLoad(t, c)
	if r := primaryIgnored(v.State, wTake.Hash()); !strings.Contains(r, "primary.take needs level orchestrator; wendy has level worker") {
		t.Errorf("worker take: ignored for %q", r)
	}
	if r := primaryIgnored(v.State, mTake.Hash()); !strings.Contains(r, "needs level orchestrator") {
		t.Errorf("member take: ignored for %q", r)
	}
	if v.State.Primary.State != fold.PrimaryNone {
		t.Fatalf("primary after ignored takes: %+v", v.State.Primary)
	}

	// alice takes (the first take names no basis).
	st, err := alice.PrimaryTake("")
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder != "alice" || st.State != fold.PrimaryHeld || st.Liveness != Alive {
		t.Fatalf("after alice's take: %+v", st)
	}
	v = primaryLoad(t, c)
	p := v.State.Primary
	aliceTake := p.Take
	if p.Head != aliceTake || len(p.History) != 1 || p.History[0].By != "alice" {
		t.Fatalf("primary after take: %+v", p)
	}

	// A brief by a non-holder, even naming the holder's take, is ignored; so is a brief
	// naming no take. A take in another ref is ignored.
	bobBrief := primaryAppend(t, bob, fold.TypePrimaryBrief, fold.PrimaryRef, fold.PrimaryData{Take: aliceTake, Objective: "bob's plan"})
	noTake := primaryAppend(t, alice, fold.TypePrimaryBrief, fold.PrimaryRef, fold.PrimaryData{Objective: "no take named"})
	badRef := primaryAppend(t, bob, fold.TypePrimaryTake, "leader", fold.PrimaryData{Basis: aliceTake})
	// A release by a non-holder is not allowed by the state machine.
	bobRelease := primaryAppend(t, bob, fold.TypePrimaryRelease, fold.PrimaryRef, fold.PrimaryData{Basis: aliceTake})
	// A take whose basis has not arrived is pending.
	pending := primaryAppend(t, bob, fold.TypePrimaryTake, fold.PrimaryRef, fold.PrimaryData{Basis: "sha256:" + strings.Repeat("0", 64)})
	// Standbys: an orchestrator's counts; a worker's is refused (a worker
	// writes hand-ins, joins and acks only); one naming another agent does not count.
	if _, err := olga.PrimaryStandby(""); err != nil {
		t.Fatal(err)
	}
	if _, err := wendy.PrimaryStandby(""); !errs.Is(err, errs.Denied) {
		t.Fatalf("worker standby: %v", err)
	}
	otherStandby := primaryAppend(t, olga, fold.TypePresenceStandby, "bob", fold.PrimaryData{})
	workerStandby := primaryAppend(t, wendy, fold.TypePresenceStandby, "wendy", fold.PrimaryData{})
	v = primaryLoad(t, c)
	p = v.State.Primary
	for name, tc := range map[string]struct {
		e    ledger.Entry
		want string
	}{
		"brief by a non-holder": {bobBrief, "brief does not name a take of its writer"},
		"brief naming no take":  {noTake, "brief does not name a take of its writer"},
		"take in another ref":   {badRef, `primary entries have ref "primary"`},
		"release by non-holder": {bobRelease, "not allowed: bob does not hold the primary role (holder: alice)"},
		"standby for another":   {otherStandby, "presence.standby names another agent"},
		"standby by a worker":   {workerStandby, "presence.standby needs level member; wendy has level worker"},
	} {
		if r := primaryIgnored(v.State, tc.e.Hash()); !strings.Contains(r, tc.want) {
			t.Errorf("%s: ignored for %q; want %q", name, r, tc.want)
		}
	}
	if primaryIgnored(v.State, pending.Hash()) != "" || p.Pending != 1 {
		t.Errorf("take with an unknown basis: pending %d, ignored %q", p.Pending, primaryIgnored(v.State, pending.Hash()))
	}
	if p.Holder != "alice" || p.Brief != nil || len(p.Contests) != 0 {
		t.Fatalf("primary after refused entries: %+v", p)
	}
	if len(p.Standbys) != 1 || p.Standbys[0].Name != "olga" {
		t.Fatalf("standbys %+v; want olga", p.Standbys)
	}

	// The holder briefs twice: the newer counts.
	if _, err := alice.PrimaryBrief("Ship v1", []string{"no new deps", " ", "tests first"}, ""); !errs.Is(err, errs.Invalid) {
		t.Fatalf("a brief with an empty constraint: %v, want invalid", err)
	}
	if _, err := alice.PrimaryBrief("Ship v1", []string{"no new deps", "tests first"}, ""); err != nil {
		t.Fatal(err)
	}
	st, err = alice.PrimaryBrief("Ship v1.0", []string{"tests first"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if b := st.Brief; b == nil || b.Objective != "Ship v1.0" || !slices.Equal(b.Constraints, []string{"tests first"}) || b.By != "alice" {
		t.Fatalf("brief %+v", st.Brief)
	}
	// alice releases: the brief survives, shown as alice's.
	if st, err = alice.PrimaryRelease(""); err != nil {
		t.Fatal(err)
	}
	if st.State != fold.PrimaryReleased || st.Holder != "" || st.Previous != "alice" || st.Brief == nil || st.Brief.By != "alice" ||
		!strings.HasPrefix(st.Rule, "released by alice") {
		t.Fatalf("after release: %+v", st)
	}
	// wendy is a worker: she may not take.
	if _, err := wendy.PrimaryTake(""); !errs.Is(err, errs.Denied) {
		t.Fatalf("worker take: %v", err)
	}
	// bob takes over; alice's brief still shows until bob briefs.
	if st, err = bob.PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	if st.Holder != "bob" || st.Previous != "alice" || st.Brief == nil || st.Brief.By != "alice" {
		t.Fatalf("after bob's take: %+v", st)
	}
	// bob's brief replaces alice's.
	if st, err = bob.PrimaryBrief("Hold the line", nil, ""); err != nil {
		t.Fatal(err)
	}
	if st.Brief.By != "bob" || st.Brief.Objective != "Hold the line" || st.Brief.Constraints == nil {
		t.Fatalf("bob's brief: %+v", st.Brief)
	}
	// A brief alice writes later, naming her old take, counts but names an older take
	// than bob's: bob's stays current.
	late := primaryAppend(t, alice, fold.TypePrimaryBrief, fold.PrimaryRef, fold.PrimaryData{Take: aliceTake, Objective: "late brief on an old take"})
	v = primaryLoad(t, c)
	if r := primaryIgnored(v.State, late.Hash()); r != "" || v.State.Primary.Brief.By != "bob" {
		t.Fatalf("a late brief on alice's old take: ignored %q, current brief %+v", r, v.State.Primary.Brief)
	}
	if n := len(v.State.Primary.History); n != 3 {
		t.Fatalf("history %d steps; want take, release, take", n)
	}
	// The standby list drops the holder and keeps olga.
	if _, err := bob.PrimaryStandby(""); !errs.Is(err, errs.Conflict) {
		t.Fatalf("holder standby: %v", err)
	}
	if got := v.State.Primary.Standbys; len(got) != 1 || got[0].Name != "olga" {
		t.Fatalf("standbys %+v", got)
	}
}

// TestPrimaryWriteRules: the write side's refusals write nothing; the holder taking
// again, a repeated brief and a repeated standby write nothing; an idempotency key
// replays.
func TestPrimaryWriteRules(t *testing.T) {
	t.Parallel()
	c, _, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator", "olga": "orchestrator", "wendy": "worker"})
	alice, bob, olga, wendy := ss["alice"], ss["bob"], ss["olga"], ss["wendy"]
	for name, call := range map[string]func() error{
		"release with no holder": func() error { _, err := alice.PrimaryRelease(""); return err },
		"brief with no holder":   func() error { _, err := alice.PrimaryBrief("x", nil, ""); return err },
		"worker take":            func() error { _, err := wendy.PrimaryTake(""); return err },
	} {
		n := primaryEntries(t, c)
		if err := call(); err == nil {
			t.Errorf("%s: allowed", name)
		}
		if primaryEntries(t, c) != n {
			t.Errorf("%s: wrote an entry", name)
		}
	}
	if _, err := alice.PrimaryTake("k1"); err != nil {
		t.Fatal(err)
	}
	n := primaryEntries(t, c)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"take again", func() error { _, err := alice.PrimaryTake(""); return err }},
		{"replay take", func() error { _, err := alice.PrimaryTake("k1"); return err }},
		{"standby", func() error { _, err := olga.PrimaryStandby(""); return err }},
		{"standby again", func() error { _, err := olga.PrimaryStandby(""); return err }},
		{"brief", func() error { _, err := alice.PrimaryBrief("Ship", []string{"a"}, ""); return err }},
		{"same brief", func() error { _, err := alice.PrimaryBrief(" Ship ", []string{" a "}, ""); return err }},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	if got := primaryEntries(t, c) - n; got != 2 {
		t.Fatalf("%d entries written; want 2 (one standby, one brief)", got)
	}
	n = primaryEntries(t, c)
	for name, tc := range map[string]struct {
		call func() error
		cat  errs.Category
		msg  string
	}{
		"key reused":          {func() error { _, err := alice.PrimaryRelease("k1"); return err }, errs.Conflict, "already used"},
		"take while alive":    {func() error { _, err := bob.PrimaryTake(""); return err }, errs.Conflict, "primary is held by alice (alive, heard from 0 s ago); take is allowed once silent after 30 min, or when it releases"},
		"brief by non-holder": {func() error { _, err := bob.PrimaryBrief("mine", nil, ""); return err }, errs.Denied, "bob is not the primary (holder: alice)"},
		"release by other":    {func() error { _, err := bob.PrimaryRelease(""); return err }, errs.Denied, "bob does not hold the primary role (holder: alice)"},
		"six constraints": {func() error {
			_, err := alice.PrimaryBrief("x", []string{"1", "2", "3", "4", "5", "6"}, "")
			return err
		}, errs.Invalid, "at most 5"},
		"two-line objective": {func() error { _, err := alice.PrimaryBrief("a\nb", nil, ""); return err }, errs.Invalid, "one line"},
		"long constraint":    {func() error { _, err := alice.PrimaryBrief("a", []string{strings.Repeat("x", 201)}, ""); return err }, errs.Invalid, "limit is 200"},
		"empty objective":    {func() error { _, err := alice.PrimaryBrief(" ", nil, ""); return err }, errs.Invalid, "empty objective"},
	} {
		err := tc.call()
		if !errs.Is(err, tc.cat) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v; want %s containing %q", name, err, tc.cat, tc.msg)
		}
	}
	if primaryEntries(t, c) != n {
		t.Fatal("a refusal wrote an entry")
	}
	// Releasing twice: the second writes nothing.
	if _, err := alice.PrimaryRelease(""); err != nil {
		t.Fatal(err)
	}
	n = primaryEntries(t, c)
	if st, err := alice.PrimaryRelease(""); err != nil || st.State != fold.PrimaryReleased || primaryEntries(t, c) != n {
		t.Fatalf("second release: %+v %v", st, err)
	}
}

// TestPrimaryTakeRuleOnThisMachinesClock: a take over a holder is refused while this
// machine has seen the holder write within silent_after_s, and allowed once it has not
// (docs/design.md §2 rule 7: judged on the taker's own clock, from sightings of the holder).
func TestPrimaryTakeRuleOnThisMachinesClock(t *testing.T) {
	t.Parallel()
	c, clk, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator"})
	alice, bob := ss["alice"], ss["bob"]
	if _, err := alice.PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	primaryLoad(t, c) // this machine sees alice's take now

	clk.advance(10 * time.Minute)
	v := primaryLoad(t, c)
	if st := c.PrimaryStatus(v); st.Liveness != Quiet || st.AgeS != 600 || st.Rule != "holder quiet (heard from 10 min ago): take refused until silent (30 min) or released" {
		t.Fatalf("quiet holder: %+v", st)
	}
	n := primaryEntries(t, c)
	_, err := bob.PrimaryTake("")
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "primary is held by alice (quiet, heard from 10 min ago)") ||
		!strings.Contains(err.Error(), "`ferry primary standby`") {
		t.Fatalf("take over a quiet holder: %v", err)
	}
	if primaryEntries(t, c) != n {
		t.Fatal("a refused take wrote an entry")
	}

	clk.advance(21 * time.Minute)
	v = primaryLoad(t, c)
	if st := c.PrimaryStatus(v); st.Liveness != Silent || st.Rule != "holder silent (heard from 31 min ago): an orchestrator may take over" {
		t.Fatalf("silent holder: %+v", st)
	}
	st, err := bob.PrimaryTake("")
	if err != nil {
		t.Fatalf("take over a silent holder: %v", err)
	}
	if st.Holder != "bob" || st.Previous != "alice" || st.Liveness != Alive || len(st.Contests) != 0 {
		t.Fatalf("after the takeover: %+v", st)
	}
	// alice comes back: her take is judged by the same rule, and bob is alive.
	if _, err := alice.PrimaryTake(""); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "held by bob") {
		t.Fatalf("the old holder's take while bob is alive: %v", err)
	}
}

// TestPrimaryRaceTwoHomes: the holder goes silent and two machines (two FERRY_HOMEs:
// two devices, two lock folders, two arrival logs) take over at once, both naming the
// holder's take as basis. Each succeeds locally; once the folders meet, both fold one
// holder — the take with the lower hash — and one contest naming the winner, involving
// both takers and the previous holder.
func TestPrimaryRaceTwoHomes(t *testing.T) {
	t.Parallel()
	clk := &primaryClock{t: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)}
	hA, hB := testHome(t), testHome(t)
	dirA := filepath.Join(t.TempDir(), "acme")
	cA, err := Init(hA, InitOptions{Dir: dirA, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	cA.Now = clk.now
	mA, _ := cA.As(fold.MasterWriter)
	for _, name := range []string{"carol", "alice"} {
		if _, err := Join(cA, name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := mA.Grant(GrantOptions{Agent: name, Level: "orchestrator"}); err != nil {
			t.Fatal(err)
		}
	}
	carol, _ := cA.As("carol")
	if _, err := carol.PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	// Machine B gets the folder; bob joins there and the owner seats him from A.
	dirB := filepath.Join(t.TempDir(), "acme")
	copyTree(t, dirA, dirB)
	cB, err := Open(hB, dirB)
	if err != nil {
		t.Fatal(err)
	}
	cB.Now = clk.now
	if _, err := Join(cB, "bob", "test"); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(dirB, "ledger"), filepath.Join(dirA, "ledger"))
	if _, err := mA.Grant(GrantOptions{Agent: "bob", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(dirA, "ledger"), filepath.Join(dirB, "ledger"))
	primaryLoad(t, cA)
	primaryLoad(t, cB)

	// carol falls silent on both machines' clocks; the machines are partitioned.
	clk.advance(31 * time.Minute)
	alice, _ := cA.As("alice")
	bob, err := cB.As("bob")
	if err != nil {
		t.Fatal(err)
	}
	stA, err := alice.PrimaryTake("")
	if err != nil {
		t.Fatalf("alice's takeover on A: %v", err)
	}
	stB, err := bob.PrimaryTake("")
	if err != nil {
		t.Fatalf("bob's takeover on B: %v", err)
	}
	if stA.Holder != "alice" || stB.Holder != "bob" {
		t.Fatalf("local results: A %s, B %s", stA.Holder, stB.Holder)
	}
	// The folders meet both ways.
	copyTree(t, filepath.Join(dirB, "ledger"), filepath.Join(dirA, "ledger"))
	copyTree(t, filepath.Join(dirA, "ledger"), filepath.Join(dirB, "ledger"))

	var takes []ledger.Entry
	for _, e := range primaryLoad(t, cA).Snapshot.Entries {
		if e.Type == fold.TypePrimaryTake && e.Writer != "carol" {
			takes = append(takes, e)
		}
	}
	if len(takes) != 2 || takes[0].Device == takes[1].Device {
		t.Fatalf("takes %+v; want one per machine", takes)
	}
	winner, loser := takes[0], takes[1]
	if loser.Hash() < winner.Hash() {
		winner, loser = loser, winner
	}
	for _, c := range []*Channel{cA, cB} {
		v := primaryLoad(t, c)
		st := c.PrimaryStatus(v)
		if st.Holder != winner.Writer || st.Previous != "carol" {
			t.Errorf("device %s: holder %s previous %s; want %s after carol", c.Device, st.Holder, st.Previous, winner.Writer)
		}
		if len(st.Contests) != 1 {
			t.Fatalf("device %s: contests %+v", c.Device, st.Contests)
		}
		ct := st.Contests[0]
		if ct.Ref != fold.PrimaryRef || ct.Winner.By != winner.Writer || ct.Winner.Hash != winner.Hash() || len(ct.Losers) != 1 ||
			ct.Losers[0].By != loser.Writer || !slices.Equal(ct.Involved, []string{"alice", "bob", "carol"}) {
			t.Errorf("device %s: contest %+v", c.Device, ct)
		}
		if !slices.ContainsFunc(v.State.Contested, func(x fold.Contest) bool { return x.Ref == fold.PrimaryRef }) {
			t.Errorf("device %s: the primary contest is not in State.Contested", c.Device)
		}
	}
	// Only the winner briefs now; the loser is told it is not the primary.
	byName := map[string]*Session{"alice": alice, "bob": bob}
	if _, err := byName[loser.Writer].PrimaryBrief("mine", nil, ""); !errs.Is(err, errs.Denied) {
		t.Errorf("the loser's brief: %v", err)
	}
	if _, err := byName[winner.Writer].PrimaryBrief("Carry on", nil, ""); err != nil {
		t.Errorf("the winner's brief: %v", err)
	}
}

// TestDecodePrimaryDataRejectsCaseVariantKeys: like decodeData, a key equal to a
// member name only when case is ignored makes the data undecodable (rule 9).
func TestDecodePrimaryDataRejectsCaseVariantKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		data string
		ok   bool
	}{
		{`{"take":"sha256:aa","objective":"x"}`, true},
		{`{"line":"x","other":1}`, true},
		{`{"Take":"sha256:aa"}`, false},
		{`{"line":"a","LINE":"b"}`, false},
		{`"x"`, false},
	} {
		e := ledger.Entry{Data: []byte(tc.data)}
		if _, ok := fold.DecodePrimaryData(&e); ok != tc.ok {
			t.Errorf("decodePrimaryData(%s) ok = %v, want %v", tc.data, ok, tc.ok)
		}
	}
}

func TestSpan(t *testing.T) {
	t.Parallel()
	for s, want := range map[int64]string{-1: "never", 0: "0 s", 119: "119 s", 120: "2 min", 1800: "30 min", 3600: "1 h", 3659: "1 h", 5400: "1 h 30 min", 7200: "2 h", 9000: "2 h 30 min", 10779: "2 h 59 min", 90000: "25 h"} {
		if got := Span(s); got != want {
			t.Errorf("Span(%d) = %q, want %q", s, got, want)
		}
	}
}

// TestPrimaryTakeFromRevokedHolder: a holder whose grant was revoked (or lowered below
// orchestrator) can no longer release the role, so it never blocks a take; the owner
// may always take the role.
func TestPrimaryTakeFromRevokedHolder(t *testing.T) {
	t.Parallel()
	c, _, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator", "carol": "orchestrator"})
	if _, err := ss["alice"].PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	if _, err := ss["bob"].PrimaryTake(""); !errs.Is(err, errs.Conflict) {
		t.Fatalf("take while alice is alive and seated: %v, want conflict", err)
	}
	if _, err := ss[fold.MasterWriter].Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	st, err := ss["bob"].PrimaryTake("")
	if err != nil || st.Holder != "bob" {
		t.Fatalf("take from a revoked holder: %+v, %v", st, err)
	}
	// The owner takes it even while bob is alive.
	if st, err = ss[fold.MasterWriter].PrimaryTake(""); err != nil || st.Holder != fold.MasterWriter {
		t.Fatalf("owner's take: %+v, %v", st, err)
	}
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if p := v.State.Primary; p.Holder != fold.MasterWriter || len(p.History) != 3 {
		t.Fatalf("primary after the owner's take: %+v", p)
	}
}

// A take on grounds of silence is refused while Syncthing reports no connected peer,
// and allowed again once a peer connects; status says which rule applies.
func TestPrimaryTakeRefusedWithoutPeers(t *testing.T) {
	c, clk, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator"})
	f, _ := fakesyncthing.Serve(t, c.Root)
	f.Connected = false
	if _, err := ss["alice"].PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	primaryLoad(t, c) // this machine sees alice's take now
	clk.advance(31 * time.Minute)
	v := primaryLoad(t, c)
	ps := c.PrimaryStatus(v).WithSync(synchealth.Probe(context.Background(), c.Root))
	if ps.Liveness != Silent || ps.Rule != "holder not heard from for 31 min, but Syncthing reports no connected peer: take refused until a peer connects" ||
		ps.Sync == nil || ps.Sync.Delivery != synchealth.Stored {
		t.Fatalf("status %+v", ps)
	}
	n := primaryEntries(t, c)
	_, err := ss["bob"].PrimaryTake("")
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "primary is held by alice, not heard from for 31 min, but Syncthing reports no connected peer") {
		t.Fatalf("take while no peer is connected: %v", err)
	}
	if primaryEntries(t, c) != n {
		t.Fatal("a refused take wrote an entry")
	}
	// The owner's explicit act is never blocked.
	if ps, err := ss[fold.MasterWriter].PrimaryTake(""); err != nil || ps.Holder != fold.MasterWriter {
		t.Fatalf("the owner's take: %v", err)
	}
	if _, err := ss[fold.MasterWriter].PrimaryRelease(""); err != nil {
		t.Fatal(err)
	}
	if _, err := ss["alice"].PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	primaryLoad(t, c)
	clk.advance(31 * time.Minute)
	f.Lock()
	f.Connected = true
	f.Unlock()
	v = primaryLoad(t, c)
	if ps := c.PrimaryStatus(v).WithSync(synchealth.Probe(context.Background(), c.Root)); ps.Rule != "holder silent (heard from 31 min ago): an orchestrator may take over" || ps.Sync.Delivery != synchealth.Delivered {
		t.Fatalf("status with a peer connected: %+v", ps)
	}
	if ps, err := ss["bob"].PrimaryTake(""); err != nil || ps.Holder != "bob" {
		t.Fatalf("take once a peer is connected: %v %+v", err, ps)
	}
}

// Without Syncthing the take rule is unchanged: silence alone allows it.
func TestPrimaryTakeWithoutSyncthingUnchanged(t *testing.T) {
	c, clk, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator"})
	fakesyncthing.Isolate(t)
	if _, err := ss["alice"].PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	primaryLoad(t, c)
	clk.advance(31 * time.Minute)
	if ps, err := ss["bob"].PrimaryTake(""); err != nil || ps.Holder != "bob" {
		t.Fatalf("take of a silent holder without Syncthing: %v %+v", err, ps)
	}
}
