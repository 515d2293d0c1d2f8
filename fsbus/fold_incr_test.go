package fsbus

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/cache"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/ledger"
)

// reopened opens c's channel again with the same home and clock, as the next ferry
// command would: its first Load folds everything (no state carried over in memory).
func reopened(t *testing.T, c *Channel) *Channel {
	t.Helper()
	n, err := Open(c.Home, c.Root)
	if err != nil {
		t.Fatal(err)
	}
	n.Now, n.Boot = c.Now, c.Boot
	return n
}

// incrCanon is the comparable form of everything a fold keeps: every exported field of
// the State plus the idempotency records and the set of entries that count.
func incrCanon(st *fold.State) string {
	idem := map[string]fold.IdemRec{}
	st.Idem.All(func(k string, r fold.IdemRec) { idem[k] = r })
	idemOut := map[string]string{}
	for k, r := range idem {
		idemOut[k] = r.Args + " " + r.Hash + " " + r.Ref
	}
	var counts []string
	st.Counted.All(func(h string, c bool) {
		if c {
			counts = append(counts, h)
		}
	})
	sort.Strings(counts)
	type agentOut struct {
		*fold.Agent
		Segs map[string]uint64
	}
	agents := map[string]agentOut{}
	for n, a := range st.Agents {
		agents[n] = agentOut{a, a.Segs}
	}
	b, err := json.Marshal(struct {
		St     *fold.State
		Agents map[string]agentOut
		Idem   map[string]string
		Counts []string
	}{st, agents, idemOut, counts})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// incrWorld is a history to fold in pieces: its entries and a reader of its objects
// limited to those that have "arrived".
type incrWorld struct {
	project string
	master  []byte
	entries []ledger.Entry
	objects func(writer, id string) ([]byte, string, error)
	objIDs  []string
}

// checkIncremental folds random pieces of w.entries one after another with foldDelta
// (falling back to foldFull where foldDelta declines, as Load does) and checks after
// every piece that the state equals Fold over everything so far, with the objects
// arrived so far. It returns how many pieces were folded incrementally.
func checkIncremental(t *testing.T, r *rand.Rand, w incrWorld, iters int) (incremental, fallbacks int) {
	t.Helper()
	for it := range iters {
		have := map[string]bool{}
		for _, id := range w.objIDs {
			if r.Intn(3) > 0 {
				have[id] = true
			}
		}
		objs := func(writer, id string) ([]byte, string, error) {
			if !have[id] {
				return nil, "", fold.ErrObjectMissing
			}
			return w.objects(writer, id)
		}
		in := fold.FoldInput{Project: w.project, Master: w.master, Objects: objs}
		// The base holds every roster entry (seats change rarely) and a random part of
		// the rest; the rest arrives in random pieces, in random order.
		var base, rest []ledger.Entry
		p := r.Float64()
		for _, e := range w.entries {
			if _, roster := fold.ThingKeys(&e); roster || r.Float64() < p {
				base = append(base, e)
			} else {
				rest = append(rest, e)
			}
		}
		r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		in.Entries = base
		f := fold.FoldFull(in)
		so := slices.Clone(base)
		for len(rest) > 0 || r.Intn(4) == 0 {
			n := min(len(rest), 1+r.Intn(8))
			piece := rest[:n]
			rest = rest[n:]
			if r.Intn(3) == 0 { // some objects arrive
				for _, id := range w.objIDs {
					if !have[id] && r.Intn(2) == 0 {
						have[id] = true
					}
				}
			}
			so = append(so, piece...)
			merged := fold.MergedSet(slices.Clone(so))
			nf, ok := f.FoldDelta(in, piece, len(merged), merged[len(merged)-1].HLC,
				func(o fold.ObjRef) bool { return have[o.ID] })
			if ok {
				incremental++
			} else {
				fallbacks++
				in.Entries = so
				nf = fold.FoldFull(in)
			}
			in.Entries = so
			want := fold.Fold(in)
			if g, wnt := incrCanon(nf.State), incrCanon(want); g != wnt {
				t.Fatalf("iteration %d, piece of %d (incremental %v): the state differs from a full fold: %s", it, n, ok, propDiff(g, wnt))
			}
			full := fold.FoldFull(fold.FoldInput{Project: w.project, Master: w.master, Objects: objs, Entries: so})
			if len(full.Tips) != len(nf.Tips) {
				t.Fatalf("iteration %d: %d chain tips, want %d", it, len(nf.Tips), len(full.Tips))
			}
			for k, e := range full.Tips {
				if g := nf.Tips[k]; g == nil || g.Hash() != e.Hash() {
					t.Fatalf("iteration %d: tip of %v is %v, want seq %d", it, k, g, e.Seq)
				}
			}
			f = nf
			if r.Intn(3) == 0 {
				// A new process starting from the checkpoint of this fold goes on from
				// what it decodes (ADR 0011).
				f = roundTripFold(t, nf, merged)
			}
			if len(rest) == 0 {
				break
			}
		}
	}
	return incremental, fallbacks
}

// TestIncrementalFoldMatchesFold holds the incremental fold (fold_incr.go)
// equal to the full fold on two histories: the two-machine scenario of the property
// tests (branches, contests, forks, grants under bounds) and the busy fixture (talk,
// asks, the primary role, decisions, hand-ins). Pieces of new entries arrive in random
// order, with objects arriving between them.
func TestIncrementalFoldMatchesFold(t *testing.T) {
	t.Parallel()
	r := propSeed(t)
	pw := propWorldFor(t)
	prop := incrWorld{project: propProject, master: pw.master, entries: pw.entries, objIDs: pw.objIDs,
		objects: func(writer, id string) ([]byte, string, error) {
			o, ok := pw.objects[id]
			if !ok {
				return nil, "", fold.ErrObjectMissing
			}
			return o.canonical, o.hash, nil
		}}
	inc, fb := checkIncremental(t, r, prop, propIters(30))
	t.Logf("two-machine scenario: %d pieces folded incrementally, %d fell back", inc, fb)
	if inc == 0 {
		t.Fatal("no piece of the two-machine scenario was folded incrementally")
	}

	mixed := mixedWorld(t)
	kinds := map[string]bool{}
	for _, e := range mixed.entries {
		kinds[fold.Family(e.Type)] = true
	}
	for _, k := range []string{"order", "msg", "ask", "primary", "presence", "decision", "handin"} {
		if !kinds[k] {
			t.Fatalf("the mixed history has no %s entries: the test would not cover them", k)
		}
	}
	inc, fb = checkIncremental(t, r, mixed, propIters(30))
	t.Logf("mixed history: %d pieces folded incrementally, %d fell back", inc, fb)
	if inc == 0 {
		t.Fatal("no piece of the mixed history was folded incrementally")
	}

	c := openBusyCopy(t)
	snap, err := c.Ledger.Read()
	if err != nil {
		t.Fatal(err)
	}
	busy := incrWorld{project: c.Project(), master: c.MasterKey, entries: snap.Entries, objects: c.objects(), objIDs: objectIDs(t, c)}
	inc, fb = checkIncremental(t, r, busy, propIters(30))
	t.Logf("busy fixture: %d pieces folded incrementally, %d fell back", inc, fb)
	if inc == 0 {
		t.Fatal("no piece of the busy fixture was folded incrementally")
	}
}

// mixedWorld writes, through the real write path, a history with every family the
// fold keeps per thing: messages and acks naming several messages, asks and answers,
// the primary role (take, brief, standby, release), decisions, hand-ins and orders
// through review, some with idempotency keys.
func mixedWorld(t *testing.T) incrWorld {
	t.Helper()
	w := newTalkWorld(t)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	m1 := w.send(t, w.alice, "bob", "first")
	m2 := w.send(t, w.alice, "bob", "second")
	m3 := w.send(t, w.carol, "all", "to everyone")
	m4 := w.send(t, w.alice, "wendy", "for the worker")
	must(w.bob.TalkAck([]string{m1.ID, m2.ID, m3.ID}))
	must(w.wendy.TalkAck([]string{m4.ID, m3.ID}))
	must(w.alice.TalkSend(TalkSendOptions{To: "carol", Body: "with a key", Key: "k-talk"}))
	a1, err := w.alice.AskRaise(AskRaiseOptions{Title: "Upgrade?", Recommendation: "yes", Key: "k-ask"})
	must(a1, err)
	must(w.bob.AskRaise(AskRaiseOptions{Title: "Drop it?", Recommendation: "no"}))
	must(w.master.AskAnswer(a1.ID, fold.VerdictApprove, NoteOptions{Note: "go"}))
	must(w.master.PrimaryTake(""))
	must(w.master.PrimaryBrief("ship it", []string{"no force push"}, ""))
	must(w.alice.PrimaryStandby(""))
	must(w.master.PrimaryRelease(""))
	must(w.master.DecisionRecord("use sqlite", ""))
	must(w.master.DecisionRecord("no vendoring", "k-dec"))
	must(w.wendy.HandinAdd("commit:abc123", NoteOptions{Note: "the fix"}))
	must(w.wendy.HandinAdd("branch:feature", NoteOptions{Key: "k-hand"}))
	o1, err := w.alice.NewOrder(NewOrderOptions{Title: "fix the login"})
	must(o1, err)
	must(w.alice.NewOrder(NewOrderOptions{Title: "write docs", Deps: []string{o1.ID}}))
	must(w.bob.Claim(o1.ID, ""))
	must(w.bob.Progress(o1.ID, NoteOptions{Note: "halfway"}))
	must(w.bob.Submit(o1.ID, SubmitOptions{Reference: "commit:def456", Note: "done"}))
	must(w.carol.Review(o1.ID, "accept", NoteOptions{Note: "fine"}))
	o3, err := w.alice.NewOrder(NewOrderOptions{Title: "third"})
	must(o3, err)
	// Hand-written lifecycle entries a careful writer never makes: a claim of o3 whose
	// basis is o1's create (another chain: ignored), and one whose basis never
	// arrives (pending). Arriving in any order, they must fold as the full fold does.
	v := w.load(t)
	raw := func(s *Session, typ, ref, basis string) {
		t.Helper()
		d := ledger.Draft{Type: typ, Ref: ref, Data: mustJSON(fold.EntryData{Basis: basis})}
		if _, err := w.c.Ledger.Append(s.Name, s.Device, d, s.Signer, ledger.HLC{}); err != nil {
			t.Fatal(err)
		}
	}
	raw(w.bob, fold.TypeOrderClaim, o3.ID, v.State.Order(o1.ID).History[0].Hash)
	raw(w.carol, fold.TypeOrderClaim, o3.ID, "sha256:"+strings.Repeat("ab", 32))
	snap, err := w.c.Ledger.Read()
	if err != nil {
		t.Fatal(err)
	}
	return incrWorld{project: w.c.Project(), master: w.c.MasterKey, entries: snap.Entries, objects: w.c.objects(), objIDs: objectIDs(t, w.c)}
}

// objectIDs lists the ids of a channel's order, message, ask and hand-in objects.
func objectIDs(t *testing.T, c *Channel) []string {
	t.Helper()
	var ids []string
	for _, dir := range []string{"orders", "messages", "asks", "handins"} {
		paths, err := globAll(c.Root, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			ids = append(ids, strings.TrimSuffix(filepath.Base(p), ".json"))
		}
	}
	if len(ids) == 0 {
		t.Fatal("the channel has no objects")
	}
	return ids
}

// globAll lists the .json files under root/dir, one level of writer directories deep
// for hand-ins.
func globAll(root, dir string) ([]string, error) {
	var out []string
	for _, pat := range []string{"*.json", "*/*.json"} {
		m, err := filepath.Glob(filepath.Join(root, dir, pat))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// TestLoadFoldsOnlyWhatIsNew: a second Load of the same Channel after new entries
// folds them into the last state (the same state a new process folds), and an object
// edited behind a running process's back is never shown by it — it keeps the content
// it verified — while a new process lists the edit as a forgery.
func TestLoadFoldsOnlyWhatIsNew(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	m1 := w.send(t, w.alice, "bob", "first")
	v1, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	m2 := w.send(t, w.alice, "bob", "second")
	v2, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	// The send loaded under the channel lock before appending, so the new message is
	// the one entry added since the last reading.
	if len(v2.Snapshot.Added) != 1 || v2.Snapshot.Base == nil || v2.Snapshot.Added[0].Ref != m2.ID {
		t.Fatalf("the second Load merged from scratch (Added %d, base %v)", len(v2.Snapshot.Added), v2.Snapshot.Base != nil)
	}
	if v1.State.Messages[m2.ID] != nil || v2.State.Messages[m2.ID] == nil {
		t.Fatal("the first view changed under its holder, or the second misses the new message")
	}
	fresh, err := reopened(t, w.c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if g, want := incrCanon(v2.State), incrCanon(fresh.State); g != want {
		t.Fatalf("incremental Load differs from a new process's: %s", propDiff(g, want))
	}
	if v2.Arrivals.Number(v2.Snapshot.Added[0].Hash()) == 0 || v2.Arrivals.Last != fresh.Arrivals.Last {
		t.Fatalf("arrivals: the new entry has no number or the logs differ (%d vs %d)", v2.Arrivals.Last, fresh.Arrivals.Last)
	}

	// A process folding everything leaves a fold checkpoint holding m1 (ADR 0011).
	th := reopened(t, w.c)
	th.Thorough = true
	if _, err := th.Load(); err != nil {
		t.Fatal(err)
	}
	p := verify.ObjectPath(w.c.Root, "alice", m1.ID)
	raw := readTestFile(t, p)
	writeTestFile(t, p, bytes.Replace(raw, []byte("first"), []byte("forged"), 1))
	w.send(t, w.bob, "alice", "a reply")
	v3, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if m := v3.State.Messages[m1.ID]; m == nil || m.Preview != "first" {
		t.Fatalf("the running process shows %+v; want the content it verified", m)
	}
	// A new process starting from the checkpoint shows what the checkpoint's full fold
	// verified, never the edit; a thorough one (doctor, ledger verify) reads the object
	// again and shows nothing of it.
	n := reopened(t, w.c)
	v4, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	if m := v4.State.Messages[m1.ID]; n.folds.fromCheckpoint != 1 || m == nil || m.Preview != "first" {
		t.Fatalf("a new process from the checkpoint (%+v) shows %+v; want the content verified", n.folds, m)
	}
	n = reopened(t, w.c)
	n.Thorough = true
	v5, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	if n.folds.full != 1 || v5.State.Messages[m1.ID] != nil {
		t.Fatalf("a thorough process (%+v) shows an edited message", n.folds)
	}
}

// TestArrivalLogRewrittenUnderARunningProcess: the arrival log cut short (a restored
// copy) and renumbered by another process under the same log id. The running process,
// which read further, must not go on reading at its old offset — its numbers would name
// other entries — but start a new log, so cursors into the old one fall back to a
// digest.
func TestArrivalLogRewrittenUnderARunningProcess(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	w.send(t, w.alice, "bob", "one")
	v1, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	cur := v1.Arrivals.Cursor()
	w.send(t, w.alice, "bob", "two")
	if _, err := w.c.Load(); err != nil {
		t.Fatal(err)
	}
	p := w.c.arrivalsPath()
	raw := readTestFile(t, p)
	writeTestFile(t, p, raw[:len(raw)/2])
	if _, err := reopened(t, w.c).Load(); err != nil { // another command renumbers
		t.Fatal(err)
	}
	w.send(t, w.carol, "bob", "three")
	v3, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v3.Arrivals.LogID == v1.Arrivals.LogID {
		t.Fatalf("the running process kept log id %s after the log was rewritten under it", v3.Arrivals.LogID)
	}
	if _, ok := v3.Arrivals.ParseCursor(cur); ok {
		t.Fatal("a cursor into the rewritten log is still taken")
	}
	if n := v3.Arrivals.Number(v3.Snapshot.Entries[len(v3.Snapshot.Entries)-1].Hash()); n == 0 {
		t.Fatal("the newest entry has no arrival number in the new log")
	}
}

// roundTripFold encodes f as a fold checkpoint over a snapshot of entries, decodes it
// and fails unless the result equals f in everything — the State with its unexported
// fields (reflect.DeepEqual, the layered maps flattened), the roster, each thing's
// entries, the chain tips, the missing objects, the pending bases and the crossed
// things. It returns the decoded fold.
func roundTripFold(t *testing.T, f *fold.Folded, entries []ledger.Entry) *fold.Folded {
	t.Helper()
	snap := &ledger.Snapshot{Entries: entries}
	b, err := cache.EncodeCheckpoint(f, snap, []byte("ledger"), time.UnixMilli(1), nil, nil, nil)
	if err != nil {
		t.Fatalf("encoding the checkpoint: %v", err)
	}
	d := &fold.StateDec{B: b}
	if ms := d.Uvarint(); ms != 1 || string(d.Take(d.Length())) != "ledger" || d.Err != nil {
		t.Fatalf("checkpoint head: %d, %v", ms, d.Err)
	}
	g, _, err := cache.DecodeCheckpoint(d.B, snap)
	if err != nil {
		t.Fatalf("decoding the checkpoint: %v", err)
	}
	flat := func(st *fold.State) fold.State {
		c := *st
		all := map[string]bool{}
		st.Counted.All(func(k string, v bool) { all[k] = v })
		c.Counted = fold.Layered[bool]{Base: all}
		idem := map[string]fold.IdemRec{}
		st.Idem.All(func(k string, v fold.IdemRec) { idem[k] = v })
		c.Idem = fold.Layered[fold.IdemRec]{Base: idem}
		return c
	}
	if a, b := flat(f.State), flat(g.State); !reflect.DeepEqual(a, b) {
		t.Fatalf("the State differs after a checkpoint round trip: %s", propDiff(incrCanon(g.State), incrCanon(f.State)))
	}
	hashes := func(es []*ledger.Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Hash())
		}
		return out
	}
	var ra, rb []*ledger.Entry
	for i := range f.Roster {
		ra = append(ra, &f.Roster[i])
	}
	for i := range g.Roster {
		rb = append(rb, &g.Roster[i])
	}
	if !slices.Equal(hashes(ra), hashes(rb)) {
		t.Fatal("the roster differs after a checkpoint round trip")
	}
	if len(f.Things) != len(g.Things) {
		t.Fatalf("%d things after a round trip, want %d", len(g.Things), len(f.Things))
	}
	for k, es := range f.Things {
		if !slices.Equal(hashes(es), hashes(g.Things[k])) {
			t.Fatalf("thing %s differs after a checkpoint round trip", k)
		}
	}
	if len(f.Tips) != len(g.Tips) {
		t.Fatalf("%d tips after a round trip, want %d", len(g.Tips), len(f.Tips))
	}
	for k, e := range f.Tips {
		if g.Tips[k] == nil || g.Tips[k].Hash() != e.Hash() {
			t.Fatalf("tip %v differs after a checkpoint round trip", k)
		}
	}
	if !reflect.DeepEqual(f.Missing, g.Missing) || !reflect.DeepEqual(f.Dangling, g.Dangling) || !reflect.DeepEqual(f.Crossed, g.Crossed) {
		t.Fatal("missing objects, pending bases or crossed things differ after a checkpoint round trip")
	}
	return g
}
