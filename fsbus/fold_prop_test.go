package fsbus

// Property tests of the fold (the fold is a pure function, docs/design.md §2
// rule 7). One realistic history is written once by real Sessions on two machines —
// two Homes (two devices, two lock folders), two copies of the channel folder that meet
// only when the test "syncs" them by copying files, as a sync tool would — and then
// folded under arrival orders, duplicates, clock shifts, device swaps and arrival
// subsets. Every random test logs its seed; rerun one with
//
//	go test ./fsbus -run TestFold -fold.seed=N

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

var propSeedFlag = flag.Int64("fold.seed", 0, "seed of the fold property tests (0: a fresh one, logged)")

const propProject = "acme"

// propSeed returns the seed for one property test and logs it.
func propSeed(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *propSeedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -fold.seed=%d)", seed, seed)
	return rand.New(rand.NewSource(seed))
}

// propIters is how many random cases each property runs.
func propIters(full int) int {
	if testing.Short() {
		return full / 10
	}
	return full
}

// propWorld is one channel history: the full set of entries and objects after both
// machines' folders have met, plus what the tests need to re-sign entries.
type propWorld struct {
	master  ed25519.PublicKey
	entries []ledger.Entry           // the full set in merged order, as ledger.Read gives it
	objects map[string]propObject    // object id → its canonical form and hash
	signers map[string]ledger.Signer // writer → its key (a3's key is on both machines)
	devA    string                   // machine A: master, a1, a3
	devB    string                   // machine B: a2, a3
	orders  map[string]string        // scenario label → order id
	labels  map[string]string        // order id → scenario label
	byHash  map[string]*ledger.Entry // hash → entry of the full set
	full    *fold.State              // the full set folded
	segs    map[[2]string][]int      // (writer, device) → indexes into entries, by seq
	objIDs  []string                 // every object id, sorted
}

type propObject struct {
	canonical []byte
	hash      string
}

// propTies are the orders whose competing branches reach the same stage, so the lower
// hash of each branch's first entry decides (docs/design.md §2 "Races across
// machines"). Everything else in the scenario is decided by stage alone.
var propTies = map[string]bool{"tie-claim": true, "both-accepted": true}

var (
	propOnce  sync.Once
	propW     *propWorld
	propBuild error
)

// propWorldFor builds the scenario once per test binary.
func propWorldFor(t *testing.T) *propWorld {
	t.Helper()
	propOnce.Do(func() { propW, propBuild = buildPropWorld() })
	if propBuild != nil {
		t.Fatalf("building the two-machine history: %v", propBuild)
	}
	return propW
}

// propSync copies what src holds and dst lacks, as a sync tool delivers files: a
// segment is append-only, so a longer copy replaces a shorter one; objects are written
// once. Dot-files (temp names, .stignore) are not carried.
func propSync(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, err := os.Stat(to); err == nil && st.Size() >= info.Size() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// buildPropWorld writes the scenario with real Sessions. Machine A holds the master,
// a1 and a3; machine B holds a2 and a3 (the same agent, its key copied: one writer on
// two devices). "sync" copies files both ways; between syncs the machines are
// partitioned and each appends without seeing the other, so two entries can name one
// basis and the chain branches.
func buildPropWorld() (w *propWorld, err error) {
	type failure struct{ err error }
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			w, err = nil, f.err
		}
	}()
	ok := func(err error) {
		if err != nil {
			panic(failure{err})
		}
	}
	root, err := os.MkdirTemp("", "ferry-fold-prop-")
	ok(err)
	defer os.RemoveAll(root)
	home := func(m string) *Home {
		return &Home{ConfigDir: filepath.Join(root, m, "config"), CacheDir: filepath.Join(root, m, "cache")}
	}
	hA, hB := home("homeA"), home("homeB")
	dA, dB := filepath.Join(root, "syncA", "acme"), filepath.Join(root, "syncB", "acme")
	cA, err := Init(hA, InitOptions{Dir: dA, Project: propProject})
	ok(err)
	ok(propSync(dB, dA))
	cB, err := Open(hB, dB)
	ok(err)
	if cA.Device == cB.Device {
		ok(fmt.Errorf("two homes share device %s", cA.Device))
	}
	sync := func() {
		ok(propSync(dA, dB))
		ok(propSync(dB, dA))
	}
	for _, j := range []struct {
		c    *Channel
		name string
	}{{cA, "a1"}, {cA, "a3"}, {cB, "a2"}} {
		_, err := Join(j.c, j.name, "test")
		ok(err)
	}
	a3key, err := os.ReadFile(hA.keyPath(propProject, "a3"))
	ok(err)
	ok(fsutil.WriteFile(hB.keyPath(propProject, "a3"), a3key, 0o600))
	sync()

	as := func(c *Channel, name string) *Session {
		s, err := c.As(name)
		ok(err)
		return s
	}
	m := as(cA, fold.MasterWriter)
	for _, a := range []string{"a1", "a2", "a3"} {
		_, err := m.Grant(GrantOptions{Agent: a, Level: "member"})
		ok(err)
	}
	sync()
	a1A, a3A, a2B, a3B := as(cA, "a1"), as(cA, "a3"), as(cB, "a2"), as(cB, "a3")

	orders := map[string]string{}
	do := func(o *fold.Order, err error) *fold.Order {
		ok(err)
		return o
	}
	newOrder := func(label string, s *Session, to string) string {
		o := do(s.NewOrder(NewOrderOptions{Title: label, To: to}))
		orders[label] = o.ID
		return o.ID
	}

	// linear: claim, progress, submit, changes requested, submit again, accepted.
	id := newOrder("linear", a1A, "")
	sync()
	do(a1A.Claim(id, ""))
	do(a1A.Progress(id, NoteOptions{Note: "started"}))
	do(a1A.Submit(id, SubmitOptions{Reference: "c1", Note: "first"}))
	sync()
	do(a2B.Review(id, "changes", NoteOptions{Note: "more tests"}))
	sync()
	do(a1A.Submit(id, SubmitOptions{Reference: "c2", Note: "second"}))
	sync()
	do(a2B.Review(id, "accept", NoteOptions{}))
	sync()

	// tie-claim: two claims on one basis from two machines, each with progress.
	id = newOrder("tie-claim", a1A, "")
	sync()
	do(a1A.Claim(id, ""))
	do(a1A.Progress(id, NoteOptions{Note: "a1 working"}))
	do(a2B.Claim(id, ""))
	do(a2B.Progress(id, NoteOptions{Note: "a2 working"}))
	sync()

	// submit-beats-claim: one branch reaches submitted, the other stays claimed.
	id = newOrder("submit-beats-claim", a3A, "")
	sync()
	do(a1A.Claim(id, ""))
	do(a1A.Submit(id, SubmitOptions{Reference: "s1"}))
	do(a2B.Claim(id, ""))
	sync()

	// both-accepted: both branches reach acceptance (finality is honest, not absolute).
	id = newOrder("both-accepted", a3A, "")
	sync()
	do(a1A.Claim(id, ""))
	do(a1A.Submit(id, SubmitOptions{Reference: "ba1"}))
	do(a3A.Review(id, "accept", NoteOptions{}))
	do(a2B.Claim(id, ""))
	do(a2B.Submit(id, SubmitOptions{Reference: "ba2"}))
	do(a3B.Review(id, "accept", NoteOptions{}))
	sync()

	// accept-beats-cancel: the holder's accepted branch against the author's cancel.
	id = newOrder("accept-beats-cancel", a1A, "")
	sync()
	do(a2B.Claim(id, ""))
	sync()
	do(a2B.Submit(id, SubmitOptions{Reference: "abc"}))
	do(a3B.Review(id, "accept", NoteOptions{}))
	do(a1A.Cancel(id, NoteOptions{Note: "not needed"}))
	sync()

	// cancel-beats-submit: the author's cancel against a submit.
	id = newOrder("cancel-beats-submit", a1A, "")
	sync()
	do(a2B.Claim(id, ""))
	sync()
	do(a2B.Submit(id, SubmitOptions{Reference: "cbs"}))
	do(a1A.Cancel(id, NoteOptions{Note: "not needed"}))
	sync()

	// release-reclaim: released on B, claimed again on A, in one chain.
	id = newOrder("release-reclaim", a1A, "")
	sync()
	do(a2B.Claim(id, ""))
	sync()
	do(a2B.Release(id, NoteOptions{Note: "blocked"}))
	sync()
	do(a3A.Claim(id, ""))
	do(a3A.Progress(id, NoteOptions{Note: "picked up"}))
	sync()

	// A grant change with bounds while B's newest a3 entries are still unseen by A.
	newOrder("a3-on-b", a3B, "")
	_, err = m.Grant(GrantOptions{Agent: "a3", Level: "orchestrator"})
	ok(err)
	sync()

	// release-vs-submit: one agent on two devices: released (and reclaimed by a1) on A,
	// submitted on B.
	id = newOrder("release-vs-submit", a1A, "")
	sync()
	do(a3A.Claim(id, ""))
	sync()
	do(a3A.Release(id, NoteOptions{}))
	do(a1A.Claim(id, ""))
	do(a3B.Submit(id, SubmitOptions{Reference: "rvs"}))
	sync()

	// cancel: the author cancels an open order.
	id = newOrder("cancel", a3A, "")
	do(a3A.Cancel(id, NoteOptions{}))
	sync()

	// offered: offered at creation, claimed by the offeree.
	id = newOrder("offered", a1A, "a2")
	sync()
	do(a2B.Claim(id, ""))
	sync()

	// accept-beats-changes: two reviews of one submit.
	id = newOrder("accept-beats-changes", a1A, "")
	sync()
	do(a1A.Claim(id, ""))
	do(a1A.Submit(id, SubmitOptions{Reference: "abch"}))
	sync()
	do(a3A.Review(id, "accept", NoteOptions{}))
	do(a2B.Review(id, "changes", NoteOptions{}))
	sync()

	// open-on-b: written on B, untouched.
	newOrder("open-on-b", a2B, "")
	sync()

	snapA, err := cA.Ledger.Read()
	ok(err)
	snapB, err := cB.Ledger.Read()
	ok(err)
	if len(snapA.Problems)+len(snapA.Forks) > 0 {
		ok(fmt.Errorf("ledger problems after the scenario: %+v %+v", snapA.Problems, snapA.Forks))
	}
	hashes := func(es []ledger.Entry) []string {
		var out []string
		for i := range es {
			out = append(out, es[i].Hash())
		}
		return out
	}
	if !slices.Equal(hashes(snapA.Entries), hashes(snapB.Entries)) {
		ok(fmt.Errorf("after the last sync the machines hold different entries"))
	}
	w = &propWorld{master: cA.MasterKey, entries: snapA.Entries, objects: map[string]propObject{},
		signers: map[string]ledger.Signer{}, devA: cA.Device, devB: cB.Device, orders: map[string]string{},
		labels: map[string]string{}, byHash: map[string]*ledger.Entry{}, segs: map[[2]string][]int{}}
	for l, id := range orders {
		if id != "" {
			w.orders[l], w.labels[id] = id, l
		}
	}
	for _, name := range []string{fold.MasterWriter, "a1", "a3"} {
		k, err := hA.LoadKey(propProject, name)
		ok(err)
		w.signers[name] = k
	}
	k, err := hB.LoadKey(propProject, "a2")
	ok(err)
	w.signers["a2"] = k
	for _, dir := range []string{"orders", "results"} {
		ents, err := os.ReadDir(filepath.Join(dA, dir))
		ok(err)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			c, h, err := verify.ReadObject(filepath.Join(dA, dir, e.Name()))
			ok(err)
			id := strings.TrimSuffix(e.Name(), ".json")
			w.objects[id] = propObject{c, h}
			w.objIDs = append(w.objIDs, id)
		}
	}
	sort.Strings(w.objIDs)
	for i := range w.entries {
		e := &w.entries[i]
		w.byHash[e.Hash()] = e
		k := [2]string{e.Writer, e.Device}
		w.segs[k] = append(w.segs[k], i) // merged order keeps each segment in seq order
	}
	w.full = w.fold(w.entries, nil)
	v, err := cA.Load()
	ok(err)
	if propCanon(v.State) != propCanon(w.full) {
		ok(fmt.Errorf("the channel's own Load folds another state than Fold over its entries"))
	}
	return w, nil
}

// fold folds entries with the world's objects (all of them when have is nil, else
// those have names).
func (w *propWorld) fold(entries []ledger.Entry, have map[string]bool) *fold.State {
	return fold.Fold(fold.FoldInput{Project: propProject, Master: w.master, Entries: entries,
		Objects: func(writer, id string) ([]byte, string, error) {
			o, ok := w.objects[id]
			if !ok || (have != nil && !have[id]) {
				return nil, "", fold.ErrObjectMissing
			}
			return o.canonical, o.hash, nil
		}})
}

// propCanon is the comparable form of a State: its orders, agents, contests and
// ignored entries as JSON (maps marshal with sorted keys; ignored entries are sorted).
func propCanon(st *fold.State) string {
	ign := slices.Clone(st.Ignored)
	sort.Slice(ign, func(i, j int) bool {
		if ign[i].Hash != ign[j].Hash {
			return ign[i].Hash < ign[j].Hash
		}
		return ign[i].Reason < ign[j].Reason
	})
	b, err := json.Marshal(struct {
		Orders    map[string]*fold.Order
		Agents    map[string]*fold.Agent
		Contested []fold.Contest
		Ignored   []fold.Ignored
		Entries   int
	}{st.Orders, st.Agents, st.Contested, ign, st.Entries})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// propDiff shows where got and want first differ, with some context.
func propDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-300)
	return fmt.Sprintf("first difference at byte %d:\n got …%s…\nwant …%s…", i, got[from:min(len(got), i+300)], want[from:min(len(want), i+300)])
}

// propClockFields are the fields that carry an HLC: the only thing a clock shift may
// change besides hashes.
var propClockFields = map[string]bool{"hlc": true, "created": true, "updated": true, "joined": true, "last_hlc": true, "max_hlc": true}

// propRenamed returns v as JSON with every string rename maps replaced (entry hashes by
// the index of the original entry, device ids by their machine), clock fields blanked,
// and "devices" lists sorted after renaming.
func propRenamed(v any, rename map[string]string) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		panic(err)
	}
	var walk func(x any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if propClockFields[k] {
					x[k] = ""
					continue
				}
				x[k] = walk(v)
				if l, ok := x[k].([]any); ok && k == "devices" {
					sort.Slice(l, func(i, j int) bool { return fmt.Sprint(l[i]) < fmt.Sprint(l[j]) })
				}
			}
			return x
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
			return x
		case string:
			if r, ok := rename[x]; ok {
				return r
			}
			return x
		}
		return x
	}
	out, err := json.Marshal(walk(x))
	if err != nil {
		panic(err)
	}
	return string(out)
}

// propNames maps the full set's hashes to stable names and its devices to machines.
func (w *propWorld) propNames() map[string]string {
	r := map[string]string{w.devA: "machine-a", w.devB: "machine-b"}
	for i := range w.entries {
		r[w.entries[i].Hash()] = fmt.Sprintf("e%03d", i)
	}
	return r
}

// resign rebuilds the full set with edit applied to every entry (a shifted clock, a
// renamed device), each re-signed by its writer's key, with prev, basis, claim and the
// devices and hashes named by grant bounds following the rename. Entries are rebuilt in merged
// order, which is causal (a writer's HLC absorbs what it read), so every hash an entry
// names is already renamed. It returns the new set in merged order and the rename map
// from new hashes and devices to the names propNames gives the originals.
func (w *propWorld) resign(t *testing.T, devs map[string]string, edit func(e *ledger.Entry)) ([]ledger.Entry, map[string]string) {
	t.Helper()
	newHash := map[string]string{}
	rename := map[string]string{}
	out := make([]ledger.Entry, 0, len(w.entries))
	for i := range w.entries {
		old := &w.entries[i]
		e := ledger.Entry{V: old.V, Writer: old.Writer, Device: old.Device, Seq: old.Seq, HLC: old.HLC,
			Type: old.Type, Ref: old.Ref, Idem: old.Idem}
		if old.Prev != "" {
			e.Prev = newHash[old.Prev]
			if e.Prev == "" {
				t.Fatalf("entry %d names prev %s, which was not rebuilt before it", i, old.Prev)
			}
		}
		if len(old.Data) > 0 {
			dec := json.NewDecoder(bytes.NewReader(old.Data))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("decoding data of entry %d: %v", i, err)
			}
			for _, k := range []string{"basis", "claim"} {
				if s, ok := m[k].(string); ok {
					if nh, ok := newHash[s]; ok {
						m[k] = nh
					} else {
						t.Fatalf("entry %d names %s %s, which was not rebuilt before it", i, k, s)
					}
				}
			}
			if b, ok := m["bounds"].(map[string]any); ok {
				nb := map[string]any{}
				for dev, seq := range b {
					if nd, ok := devs[dev]; ok {
						dev = nd
					}
					nb[dev] = seq
				}
				m["bounds"] = nb
			}
			if b, ok := m["bound_hashes"].(map[string]any); ok { // attested bounds (attest.go)
				nb := map[string]any{}
				for dev, h := range b {
					if nd, ok := devs[dev]; ok {
						dev = nd
					}
					nh, ok := newHash[h.(string)]
					if !ok {
						t.Fatalf("entry %d attests %s, which was not rebuilt before it", i, h)
					}
					nb[dev] = nh
				}
				m["bound_hashes"] = nb
			}
			data, err := ledger.Canonical(m)
			if err != nil {
				t.Fatal(err)
			}
			e.Data = data
		}
		if nd, ok := devs[e.Device]; ok {
			e.Device = nd
		}
		edit(&e)
		if err := e.Sign(w.signers[e.Writer], propProject); err != nil {
			t.Fatal(err)
		}
		c, err := e.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := ledger.ParseLine(c) // as a reader sees it (hash cached)
		if err != nil {
			t.Fatal(err)
		}
		newHash[old.Hash()] = parsed.Hash()
		rename[parsed.Hash()] = fmt.Sprintf("e%03d", i)
		out = append(out, parsed)
	}
	names := w.propNames()
	for from, to := range devs {
		rename[to] = names[from]
	}
	if devs == nil {
		rename[w.devA], rename[w.devB] = "machine-a", "machine-b"
	}
	sort.SliceStable(out, func(i, j int) bool { return fold.EntryLess(&out[i], &out[j]) })
	return out, rename
}

// propExpect checks the scenario's outcome in st, folded from entries (the full set,
// possibly re-signed): every order where the branch rule of docs/design.md §2 puts it. Where
// branches tie on stage the expected winner is computed from entries' own hashes —
// the lower hash of the two claims — never from a clock.
func (w *propWorld) propExpect(t *testing.T, entries []ledger.Entry, st *fold.State) {
	t.Helper()
	get := func(label string) *fold.Order {
		o := st.Order(w.orders[label])
		if o == nil {
			t.Fatalf("%s: order %s missing from the fold", label, w.orders[label])
		}
		return o
	}
	// claims returns the order's claim entries, lower hash first.
	claims := func(label string) []*ledger.Entry {
		var out []*ledger.Entry
		for i := range entries {
			if e := &entries[i]; e.Ref == w.orders[label] && e.Type == fold.TypeOrderClaim {
				out = append(out, e)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Hash() < out[j].Hash() })
		return out
	}
	want := func(label string, o *fold.Order, state, holder string, contests int) {
		t.Helper()
		if string(o.State) != state || o.Holder != holder || len(o.Contests) != contests || o.Pending != 0 || o.Missing {
			t.Errorf("%s: state %s holder %q contests %d pending %d missing %v; want %s holder %q contests %d",
				label, o.State, o.Holder, len(o.Contests), o.Pending, o.Missing, state, holder, contests)
		}
	}
	loser := func(label string, o *fold.Order, typ, by string) {
		t.Helper()
		if len(o.Contests) == 0 {
			return
		}
		for _, l := range o.Contests[0].Losers {
			if l.Type == typ && l.By == by {
				return
			}
		}
		t.Errorf("%s: contest %+v does not list %s by %s as superseded", label, o.Contests[0], typ, by)
	}

	o := get("linear")
	want("linear", o, string(fold.StateAccepted), "a1", 0)
	if o.Result == nil || o.Result.Reference != "c2" || len(o.Reviews) != 2 || len(o.Progress) != 1 {
		t.Errorf("linear: result %+v, %d reviews, %d progress; want c2, 2, 1", o.Result, len(o.Reviews), len(o.Progress))
	}

	o, cl := get("tie-claim"), claims("tie-claim")
	want("tie-claim", o, string(fold.StateClaimed), cl[0].Writer, 1)
	if o.Claim != cl[0].Hash() || len(o.Contests) == 1 && (o.Contests[0].Winner.Hash != cl[0].Hash() || o.Contests[0].Losers[0].Hash != cl[1].Hash()) {
		t.Errorf("tie-claim: the claim with the lower hash (%s by %s) must win; got claim %s, contests %+v", cl[0].Hash(), cl[0].Writer, o.Claim, o.Contests)
	}
	if len(o.Progress) != 1 || o.Progress[0].By != cl[0].Writer {
		t.Errorf("tie-claim: progress %+v; want only the winner's", o.Progress)
	}

	o = get("submit-beats-claim")
	want("submit-beats-claim", o, string(fold.StateSubmitted), "a1", 1)
	loser("submit-beats-claim", o, fold.TypeOrderClaim, "a2")

	o, cl = get("both-accepted"), claims("both-accepted")
	want("both-accepted", o, string(fold.StateAccepted), cl[0].Writer, 1)
	if o.Result == nil || o.Result.By != cl[0].Writer || len(o.Contests) == 1 && o.Contests[0].Winner.Hash != cl[0].Hash() {
		t.Errorf("both-accepted: the branch whose claim has the lower hash (%s) must win; got %+v", cl[0].Writer, o.Contests)
	}

	o = get("accept-beats-cancel")
	want("accept-beats-cancel", o, string(fold.StateAccepted), "a2", 1)
	loser("accept-beats-cancel", o, fold.TypeOrderCancel, "a1")

	o = get("cancel-beats-submit")
	want("cancel-beats-submit", o, string(fold.StateCancelled), "", 1)
	loser("cancel-beats-submit", o, fold.TypeOrderSubmit, "a2")

	o = get("release-reclaim")
	want("release-reclaim", o, string(fold.StateClaimed), "a3", 0)
	var types []string
	for _, h := range o.History {
		types = append(types, strings.TrimPrefix(h.Type, "order."))
	}
	if strings.Join(types, " ") != "create claim release claim" || len(o.Progress) != 1 {
		t.Errorf("release-reclaim: history %v progress %+v", types, o.Progress)
	}

	o = get("release-vs-submit")
	want("release-vs-submit", o, string(fold.StateSubmitted), "a3", 1)
	loser("release-vs-submit", o, fold.TypeOrderRelease, "a3")
	if len(o.Contests) == 1 && !slices.Contains(o.Contests[0].Involved, "a1") {
		t.Errorf("release-vs-submit: a1's superseded reclaim must make a1 involved: %v", o.Contests[0].Involved)
	}

	want("cancel", get("cancel"), string(fold.StateCancelled), "", 0)
	want("offered", get("offered"), string(fold.StateClaimed), "a2", 0)
	o = get("accept-beats-changes")
	want("accept-beats-changes", o, string(fold.StateAccepted), "a1", 1)
	loser("accept-beats-changes", o, fold.TypeOrderReview, "a2")
	want("open-on-b", get("open-on-b"), string(fold.StateOpen), "", 0)
	want("a3-on-b", get("a3-on-b"), string(fold.StateOpen), "", 0)

	if len(st.Contested) != 7 {
		t.Errorf("%d contested orders; want 7", len(st.Contested))
	}
	for _, name := range []string{"a1", "a2"} {
		if a := st.Agents[name]; a == nil || !a.Seated || a.Level != "member" {
			t.Errorf("agent %s: %+v; want seated member", name, a)
		}
	}
	if a := st.Agents["a3"]; a == nil || !a.Seated || a.Level != "orchestrator" || len(a.Devices) != 2 {
		t.Errorf("agent a3: %+v; want a seated orchestrator on two devices", a)
	}
	for _, ig := range st.Ignored {
		if ig.Type != fold.TypeOrderProgress {
			t.Errorf("unexpected ignored entry %+v", ig)
		}
	}
}

// TestFoldScenario checks the two-machine history folds as docs/design.md §2 says, and that
// both machines' folders, once met, hold and fold the same.
func TestFoldScenario(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	w.propExpect(t, w.entries, w.full)
	if t.Failed() {
		b, _ := json.MarshalIndent(w.full.Orders, "", "  ")
		t.Logf("full fold:\n%s", b)
	}
	t.Logf("%d entries, %d orders, %d objects", len(w.entries), len(w.full.Orders), len(w.objects))
}

// propShuffle returns entries in a random order with k random records repeated.
func propShuffle(r *rand.Rand, entries []ledger.Entry, k int) []ledger.Entry {
	out := slices.Clone(entries)
	for range k {
		if len(entries) > 0 {
			out = append(out, entries[r.Intn(len(entries))])
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestFoldArrivalOrderAndDuplicates: machines holding the same entries fold the same
// state whatever order the records arrived in and however often a record was
// delivered (a conflict copy, a re-sync).
func TestFoldArrivalOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	r := propSeed(t)
	want := propCanon(w.full)
	for i := range propIters(300) {
		in := propShuffle(r, w.entries, r.Intn(len(w.entries)))
		if got := propCanon(w.fold(in, nil)); got != want {
			t.Fatalf("iteration %d: the same entries in another order (with duplicates) fold another state; %s", i, propDiff(got, want))
		}
	}
}

// TestFoldThroughReader writes the full set as segment files the way sync tools deliver
// them — any file order, a segment's conflict copy holding a prefix of it, lines
// re-formatted by an editor — and folds what ledger.Read merges: the same state.
func TestFoldThroughReader(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	r := propSeed(t)
	want := propCanon(w.full)
	keys := make([][2]string, 0, len(w.segs))
	for k := range w.segs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for i := range propIters(20) {
		dir := t.TempDir()
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for n, k := range keys {
			var seg, cp bytes.Buffer
			cut := r.Intn(len(w.segs[k]) + 1)
			for j, idx := range w.segs[k] {
				line, err := w.entries[idx].Canonical()
				if err != nil {
					t.Fatal(err)
				}
				seg.Write(line)
				seg.WriteByte('\n')
				if j < cut {
					if r.Intn(2) == 0 { // an editor's re-indentation changes no meaning
						var v any
						_ = json.Unmarshal(line, &v)
						line, _ = json.MarshalIndent(v, "", "")
						line = bytes.ReplaceAll(line, []byte("\n"), []byte(" "))
					}
					cp.Write(line)
					cp.WriteString("\r\n")
				}
			}
			d := filepath.Join(dir, "ledger", k[0])
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, k[1]+".jsonl"), seg.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if n%2 == 0 && cut > 0 {
				name := fmt.Sprintf("%s.sync-conflict-20260101-12000%d-ABCDEFG.jsonl", k[1], n%10)
				if err := os.WriteFile(filepath.Join(d, name), cp.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		lg, err := ledger.Open(ledger.Options{Root: dir})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := lg.Read()
		if err != nil {
			t.Fatal(err)
		}
		if got := propCanon(w.fold(snap.Entries, nil)); got != want {
			t.Fatalf("iteration %d: the set read back from segment files folds another state (problems %+v); %s", i, snap.Problems, propDiff(got, want))
		}
	}
}

// propShapes records, per order, the renamed form of the order for each winning chain
// seen. A transform that only renames (re-stamps clocks, swaps devices) must give an
// order the same form whenever it gives it the same winning chain, and may give it
// another winning chain only where branches tie on stage (the hashes changed, so the
// tie-break may fall the other way; propExpect checks it falls to the lower hash).
type propShapes struct {
	w      *propWorld
	orders map[string]map[string]string // order id → renamed history → renamed order
	agents string
	flips  int // transforms that moved a tied order's winner from the original's
}

func newPropShapes(w *propWorld) *propShapes {
	s := &propShapes{w: w, orders: map[string]map[string]string{}}
	names := w.propNames()
	s.agents = propRenamed(w.full.Agents, names)
	for id, o := range w.full.Orders {
		s.orders[id] = map[string]string{propHistKey(o, names): propRenamed(o, names)}
	}
	return s
}

func propHistKey(o *fold.Order, rename map[string]string) string {
	var parts []string
	for _, h := range o.History {
		parts = append(parts, rename[h.Hash])
	}
	return strings.Join(parts, ",")
}

func (s *propShapes) check(t *testing.T, what string, st *fold.State, rename map[string]string) {
	t.Helper()
	if got := propRenamed(st.Agents, rename); got != s.agents {
		t.Fatalf("%s: agents differ beyond names and clocks; %s", what, propDiff(got, s.agents))
	}
	if len(st.Orders) != len(s.orders) {
		t.Fatalf("%s: %d orders; want %d", what, len(st.Orders), len(s.orders))
	}
	flipped := false
	for id, o := range st.Orders {
		forms, ok := s.orders[id]
		if !ok {
			t.Fatalf("%s: unknown order %s", what, id)
		}
		key, form := propHistKey(o, rename), propRenamed(o, rename)
		prev, seen := forms[key]
		switch {
		case seen && prev != form:
			t.Fatalf("%s: order %s (%s) has the same winning chain but differs beyond names and clocks; %s", what, id, s.w.labels[id], propDiff(form, prev))
		case !seen && !propTies[s.w.labels[id]]:
			t.Fatalf("%s: order %s (%s) changed its winning chain, though its branches differ in stage:\n got %s\nwant one of %v", what, id, s.w.labels[id], form, forms)
		case !seen:
			forms[key] = form
		}
		if propTies[s.w.labels[id]] && key != propHistKey(s.w.full.Orders[id], s.w.propNames()) {
			flipped = true
		}
	}
	if flipped {
		s.flips++
	}
}

// TestFoldClockShifts re-stamps each machine's entries later or earlier by up to
// max_skew (and re-signs them): the branch rule never reads a clock, so every order
// keeps its winning chain (ties still go to the lower hash, whatever the clocks say)
// and the state is equal except for timestamps and hashes.
func TestFoldClockShifts(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	r := propSeed(t)
	shapes := newPropShapes(w)
	maxSkew := fold.DefaultPolicy().MaxSkewS * 1000
	clockDisagrees := 0 // cases where the earlier tied claim is not the lower-hash one
	for i := range propIters(150) {
		off := map[string]int64{w.devA: r.Int63n(2*maxSkew+1) - maxSkew, w.devB: r.Int63n(2*maxSkew+1) - maxSkew}
		if i < 2 { // the extremes: one machine an hour ahead, the other an hour behind
			off[w.devA], off[w.devB] = maxSkew*int64(1-2*i), -maxSkew*int64(1-2*i)
		}
		entries, rename := w.resign(t, nil, func(e *ledger.Entry) {
			h, err := ledger.ParseHLC(e.HLC)
			if err != nil {
				t.Fatal(err)
			}
			h.Ms += off[e.Device]
			e.HLC = h.String()
		})
		st := w.fold(entries, nil)
		what := fmt.Sprintf("iteration %d (machine A %+dms, B %+dms)", i, off[w.devA], off[w.devB])
		w.propExpect(t, entries, st)
		if t.Failed() {
			t.Fatalf("%s: the branch rule's outcome changed", what)
		}
		shapes.check(t, what, st, rename)
		for _, label := range []string{"tie-claim", "both-accepted"} {
			var cl []*ledger.Entry
			for j := range entries {
				if e := &entries[j]; e.Ref == w.orders[label] && e.Type == fold.TypeOrderClaim {
					cl = append(cl, e)
				}
			}
			if (cl[0].HLC < cl[1].HLC) != (cl[0].Hash() < cl[1].Hash()) {
				clockDisagrees++
			}
		}
	}
	t.Logf("tied winners moved in %d cases; the earlier claim was the higher hash in %d", shapes.flips, clockDisagrees)
	if !testing.Short() && clockDisagrees == 0 {
		t.Fatalf("no case put the earlier tied claim on the higher hash: the test proved nothing about clocks")
	}
}

// TestFoldPermutedBranches gives each machine's entries to another device id — swaps
// A and B, or fresh ids — so the branch one device wrote is now another's: nothing
// changes but the names (ties still go to the lower hash of the re-signed entries).
func TestFoldPermutedBranches(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	r := propSeed(t)
	shapes := newPropShapes(w)
	for i := range propIters(100) {
		devs := map[string]string{w.devA: w.devB, w.devB: w.devA}
		if i%2 == 1 {
			devs = map[string]string{w.devA: fold.NewDeviceID(), w.devB: fold.NewDeviceID()}
			if r.Intn(2) == 0 {
				devs[w.devA], devs[w.devB] = devs[w.devB], devs[w.devA]
			}
		}
		entries, rename := w.resign(t, devs, func(*ledger.Entry) {})
		st := w.fold(entries, nil)
		what := fmt.Sprintf("iteration %d (devices %v)", i, devs)
		w.propExpect(t, entries, st)
		if t.Failed() {
			t.Fatalf("%s: the branch rule's outcome changed", what)
		}
		shapes.check(t, what, st, rename)
	}
	t.Logf("tied winners moved in %d cases", shapes.flips)
}

// propReachable checks that every order st shows sits where the state machine can put
// it: its history is a chain (each entry names the previous one as basis) from its
// order.create, every step is a move `step` allows, and the end of that walk is the
// state, holder, claim and offer shown. Progress is only ever the holder's.
func propReachable(st *fold.State, byHash map[string]*ledger.Entry) error {
	for id, o := range st.Orders {
		if !slices.Contains(fold.OrderStates(), string(o.State)) {
			return fmt.Errorf("order %s has unknown state %q", id, o.State)
		}
		if len(o.History) == 0 || o.History[0].Type != fold.TypeOrderCreate || byHash[o.History[0].Hash] == nil {
			return fmt.Errorf("order %s: history does not start at its order.create: %+v", id, o.History)
		}
		root := byHash[o.History[0].Hash]
		d0, _ := fold.DecodeData(root)
		c := fold.OrderCore{State: fold.StateOpen, Author: root.Writer}
		if fold.ValidName(d0.To) {
			c.State, c.OfferedTo = fold.StateOffered, d0.To
		}
		for i, s := range o.History[1:] {
			e := byHash[s.Hash]
			if e == nil {
				return fmt.Errorf("order %s: history names unknown entry %s", id, s.Hash)
			}
			d, _ := fold.DecodeData(e)
			if d.Basis != o.History[i].Hash {
				return fmt.Errorf("order %s: history step %d (%s) names basis %s, not the previous step %s", id, i+1, e.Type, d.Basis, o.History[i].Hash)
			}
			next, err := c.Step(e.Type, e.Writer, e.Hash(), st.LevelAt(e), d)
			if err != nil {
				return fmt.Errorf("order %s: history step %d (%s by %s) from %s is not a move the state machine allows: %v", id, i+1, e.Type, e.Writer, c.State, err)
			}
			c = next
		}
		if c.State != o.State || c.Holder != o.Holder || c.Claim != o.Claim || c.OfferedTo != o.OfferedTo {
			return fmt.Errorf("order %s shows %s/%s/%s/%s but its history leads to %s/%s/%s/%s", id,
				o.State, o.Holder, o.Claim, o.OfferedTo, c.State, c.Holder, c.Claim, c.OfferedTo)
		}
		if o.Head != o.History[len(o.History)-1].Hash {
			return fmt.Errorf("order %s: head %s is not the last history step", id, o.Head)
		}
		for _, p := range o.Progress {
			if p.By != o.Holder {
				return fmt.Errorf("order %s shows progress by %s, who does not hold it", id, p.By)
			}
		}
	}
	return nil
}

// propHonest checks the rule for a machine holding fewer entries than the full set:
// it never shows an order accepted on a chain the full set supersedes without saying
// so. Finality under a partition is honest, not absolute (docs/design.md §2): a machine that
// has not yet received the winning branch cannot know of it. So when the subset's
// accepted chain is not the full set's winning chain, with d the first step where the
// two chains differ, the subset must list a contest for the order, or count entries
// pending (an entry whose basis has not arrived), or hold no entry of the full
// winner's chain from step d on that its fold takes as valid — each such entry is
// absent, or listed as ignored (say its writer's grant has not arrived; `ferry ledger
// verify` and `ferry doctor` list it). A subset that holds the winning branch's first
// entry after the divergence, counted and valid, and still shows its own acceptance
// uncontested would be lying.
func propHonest(full, sub *fold.State, present map[string]bool) error {
	ignored := map[string]bool{}
	for _, ig := range sub.Ignored {
		ignored[ig.Hash] = true
	}
	for id, o := range sub.Orders {
		if o.State != fold.StateAccepted {
			continue
		}
		f := full.Orders[id]
		if f == nil {
			return fmt.Errorf("order %s is in a subset but not in the full set", id)
		}
		d := 0
		for d < len(o.History) && d < len(f.History) && o.History[d].Hash == f.History[d].Hash {
			d++
		}
		if d == len(o.History) && d == len(f.History) {
			continue // the same chain: nothing superseded
		}
		if len(o.Contests) > 0 || o.Pending > 0 {
			continue
		}
		for _, s := range f.History[d:] {
			if present[s.Hash] && !ignored[s.Hash] {
				return fmt.Errorf("order %s shows accepted via %s by %s, superseded in the full set by %s by %s, which this subset holds and counts — yet it lists no contest and nothing pending",
					id, o.History[min(d, len(o.History)-1)].Type, o.History[min(d, len(o.History)-1)].By, f.History[d].Type, f.History[d].By)
			}
		}
	}
	return nil
}

// propSubset picks a subset of the full set. Half the cases are what sync really
// delivers — each segment a prefix of itself — and half are arbitrary subsets (any
// record missing: the fold must stay sane even so). Objects arrive independently.
func (w *propWorld) propSubset(r *rand.Rand) (entries []ledger.Entry, objs map[string]bool, mode string) {
	objs = map[string]bool{}
	p := r.Float64()
	for _, id := range w.objIDs {
		if r.Float64() < 0.3+0.7*p {
			objs[id] = true
		}
	}
	if r.Intn(2) == 0 {
		for _, idxs := range w.segs {
			for _, idx := range idxs[:r.Intn(len(idxs)+1)] {
				entries = append(entries, w.entries[idx])
			}
		}
		return entries, objs, "segment prefixes"
	}
	for i := range w.entries {
		if r.Float64() < p {
			entries = append(entries, w.entries[i])
		}
	}
	return entries, objs, fmt.Sprintf("arbitrary subset (p=%.2f)", p)
}

// TestFoldArrivalSubsets folds random subsets of the full set, as machines hold them
// before everything has met: the fold never panics, every order sits where the state
// machine can put it, the same subset in any order folds the same, and no order shows
// accepted on a superseded chain without saying it is contested (see propHonest).
func TestFoldArrivalSubsets(t *testing.T) {
	t.Parallel()
	w := propWorldFor(t)
	r := propSeed(t)
	var acceptedSuperseded, saidSo int
	for i := range propIters(400) {
		sub, objs, mode := w.propSubset(r)
		present := map[string]bool{}
		for j := range sub {
			present[sub[j].Hash()] = true
		}
		what := fmt.Sprintf("iteration %d, %s, %d of %d entries, %d of %d objects", i, mode, len(sub), len(w.entries), len(objs), len(w.objects))
		var st *fold.State
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s: the fold panicked: %v", what, p)
				}
			}()
			st = w.fold(propShuffle(r, sub, r.Intn(3)), objs)
		}()
		if err := propReachable(st, w.byHash); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := propHonest(w.full, st, present); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if again := propCanon(w.fold(propShuffle(r, sub, 0), objs)); again != propCanon(st) {
			t.Fatalf("%s: the same subset in another order folds another state; %s", what, propDiff(again, propCanon(st)))
		}
		for id, o := range st.Orders {
			if o.State == fold.StateAccepted && o.Head != w.full.Orders[id].Head {
				acceptedSuperseded++
				if len(o.Contests) > 0 || o.Pending > 0 {
					saidSo++
				}
			}
		}
	}
	t.Logf("subsets showed an acceptance the full set supersedes %d times, %d of them with a contest or pending entries listed", acceptedSuperseded, saidSo)
	if !testing.Short() && acceptedSuperseded == 0 {
		t.Fatalf("no subset ever showed a superseded acceptance: the honesty property was never exercised")
	}
}
