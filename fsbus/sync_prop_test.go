package fsbus

// Property tests with simulated sync. Two machines, each with its own
// FERRY_HOME and its own copy of the channel folder, run agents that create, claim,
// submit, review, release and cancel orders, post and read messages, raise and answer
// asks and take the primary role. Between their steps a simulated sync engine carries
// files from the machine that wrote them to the other one the way sync tools do: in
// random order, late, twice, half-written (a cut line, a run of NUL bytes) and finished
// later, as conflict copies named in every sync tool's pattern (Syncthing, Dropbox,
// OneDrive, Google Drive, and a copy whose name is another writer's segment), with
// Syncthing's temp files appearing and vanishing. Once everything is delivered, both
// machines must fold one state, and no entry, message or result may be lost, doubled or
// decided twice. Every run logs its seed; rerun one with
//
//	go test ./fsbus -run TestSyncProperties -sync.seed=N
//
// The seed fixes every choice of the engine and the agents; ids and clocks are real
// (crypto/rand, the wall clock), so a rerun can take another path where a choice
// depends on them (which order comes first by id, which branch has the lower hash).

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math/rand"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

var syncSeedFlag = flag.Int64("sync.seed", 0, "seed of the simulated-sync property test (0: fresh seeds, logged)")

const syncProject = "acme"

// syncMachine is one machine: its home, its folder and its sessions.
type syncMachine struct {
	name     string
	dir      string
	ch       *Channel
	sessions map[string]*Session
	readers  []string // agents that read their messages on this machine
}

// syncFile is one file the engine carries: where it was written and its copies.
type syncFile struct {
	origin int    // index of the machine that writes it
	kind   string // "segment", "object", "copy" (a conflict copy the engine made), "other"
}

// syncWorld is one run: the machines, what each file is, and the tallies the
// properties need.
type syncWorld struct {
	t        *testing.T
	r        *rand.Rand
	m        []*syncMachine
	files    map[string]*syncFile // slash path relative to the folder → file
	temps    []string             // absolute paths of sync tools' temp files present
	copies   []string             // absolute paths of conflict copies, oldest first
	copyRel  map[string]bool      // slash paths of every conflict copy made
	patterns map[string]int       // conflict-copy pattern → times made
	torn     int                  // half-written deliveries
	returned map[string]int       // reader + " " + message id → times a read returned it
	cut      map[string]bool      // hashes of entries a restored backup removed from their segment
	forked   bool
	ops      map[string]int // operation → successes
}

// newSyncWorld makes two machines sharing one channel: A holds the master key, a1 and
// a3; B holds the master key too (the owner carries it), a2 and a3 (one agent on two
// devices). a1 and a2 are orchestrators, a3 a member.
func newSyncWorld(t *testing.T, r *rand.Rand) *syncWorld {
	t.Helper()
	root := t.TempDir()
	w := &syncWorld{t: t, r: r, files: map[string]*syncFile{}, patterns: map[string]int{}, returned: map[string]int{}, copyRel: map[string]bool{},
		cut: map[string]bool{}, ops: map[string]int{}}
	var homes []*Home
	for _, n := range []string{"a", "b"} {
		homes = append(homes, &Home{ConfigDir: filepath.Join(root, "home-"+n, "config"), CacheDir: filepath.Join(root, "home-"+n, "cache")})
	}
	dirA, dirB := filepath.Join(root, "sync-a", syncProject), filepath.Join(root, "sync-b", syncProject)
	cA, err := Init(homes[0], InitOptions{Dir: dirA, Project: syncProject})
	if err != nil {
		t.Fatal(err)
	}
	if err := propSync(dirB, dirA); err != nil {
		t.Fatal(err)
	}
	cB, err := Open(homes[1], dirB)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct {
		c    *Channel
		name string
	}{{cA, "a1"}, {cA, "a3"}, {cB, "a2"}} {
		if _, err := Join(j.c, j.name, "test"); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a3", fold.MasterWriter} {
		b, err := os.ReadFile(homes[0].keyPath(syncProject, k))
		if err != nil {
			t.Fatal(err)
		}
		if err := fsutil.WriteFile(homes[1].keyPath(syncProject, k), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w.m = []*syncMachine{
		{name: "A", dir: dirA, ch: cA, sessions: map[string]*Session{}, readers: []string{"a1", "a3"}},
		{name: "B", dir: dirB, ch: cB, sessions: map[string]*Session{}, readers: []string{"a2"}},
	}
	for _, pair := range [][2]string{{"A", fold.MasterWriter}, {"A", "a1"}, {"A", "a3"}, {"B", fold.MasterWriter}, {"B", "a2"}, {"B", "a3"}} {
		m := w.m[0]
		if pair[0] == "B" {
			m = w.m[1]
		}
		s, err := m.ch.As(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		m.sessions[pair[1]] = s
	}
	w.deliverAll()
	for a, lvl := range map[string]string{"a1": "orchestrator", "a2": "orchestrator", "a3": "member"} {
		if _, err := w.m[0].sessions[fold.MasterWriter].Grant(GrantOptions{Agent: a, Level: lvl}); err != nil {
			t.Fatal(err)
		}
	}
	w.deliverAll()
	return w
}

// scan registers the files each machine holds that the engine did not put there: the
// machine that first holds a file is the one that writes it.
func (w *syncWorld) scan() {
	for i, m := range w.m {
		err := filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || syncTemp(d.Name()) {
				return nil
			}
			rel := filepath.ToSlash(strings.TrimPrefix(p, m.dir+string(filepath.Separator)))
			if w.files[rel] != nil {
				return nil
			}
			kind := "other"
			switch {
			case w.copyRel[rel]:
				kind = "copy"
			case strings.HasPrefix(rel, "ledger/"):
				kind = "segment"
			case strings.HasPrefix(rel, "orders/"), strings.HasPrefix(rel, "messages/"), strings.HasPrefix(rel, "asks/"),
				strings.HasPrefix(rel, "results/"), strings.HasPrefix(rel, "handins/"):
				kind = "object"
			}
			w.files[rel] = &syncFile{origin: i, kind: kind}
			return nil
		})
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

// syncTemp reports whether name is a temp name no machine carries: ours (dot-names,
// *.tmp) and the sync tools'.
func syncTemp(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "~syncthing~") || strings.HasSuffix(name, ".tmp")
}

// pending lists (file, machine) pairs where the machine's copy differs from the
// writer's, sorted (the engine then picks at random, reproducibly).
func (w *syncWorld) pending() [][2]string {
	w.scan()
	var out [][2]string
	for rel, f := range w.files {
		src := w.read(f.origin, rel)
		for i := range w.m {
			if i != f.origin && !bytes.Equal(w.read(i, rel), src) {
				out = append(out, [2]string{rel, fmt.Sprint(i)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+out[i][1] < out[j][0]+out[j][1] })
	return out
}

func (w *syncWorld) path(i int, rel string) string {
	return filepath.Join(w.m[i].dir, filepath.FromSlash(rel))
}

// read returns a machine's bytes of a file, nil when absent.
func (w *syncWorld) read(i int, rel string) []byte {
	b, err := os.ReadFile(w.path(i, rel))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.t.Fatal(err)
	}
	return b
}

func (w *syncWorld) write(p string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// copyNames are the conflict-copy patterns of the sync tools, applied to a file name.
var copyNames = []struct {
	pattern string
	name    func(stem, ext string, n int) string
}{
	{ledger.ToolSyncthing, func(s, e string, n int) string {
		return fmt.Sprintf("%s.sync-conflict-20261129-%06d-ABCDEFG%s", s, 100000+n%50000, e)
	}},
	{ledger.ToolDropbox, func(s, e string, n int) string {
		return fmt.Sprintf("%s (conflicted copy 2026-11-%02d)%s", s, 1+n%28, e)
	}},
	{ledger.ToolDropbox + "-owner", func(s, e string, n int) string {
		return fmt.Sprintf("%s (Ann's conflicted copy 2026-11-29 (%d))%s", s, 1+n%99, e)
	}},
	{ledger.ToolOneDrive, func(s, e string, n int) string { return fmt.Sprintf("%s-LAPTOP%d%s", s, n%100, e) }},
	{ledger.ToolGoogleDrive, func(s, e string, n int) string { return fmt.Sprintf("%s (%d)%s", s, 1+n%999, e) }},
}

// conflictCopy writes b as a conflict copy of rel on machine i, in a pattern chosen at
// random, or — for a segment, one time in six — under the name of another writer's
// segment (a writer directory and a device that never wrote there). A name already
// taken on any machine is skipped: a sync tool never overwrites a copy.
func (w *syncWorld) conflictCopy(i int, rel string, b []byte) {
	name := filepath.Base(rel)
	stem, ext := strings.TrimSuffix(name, filepath.Ext(name)), filepath.Ext(name)
	foreign := w.files[rel].kind == "segment" && w.r.Intn(6) == 0
	c := copyNames[w.r.Intn(len(copyNames))]
	for n := len(w.copies); ; n++ {
		var cr string
		if foreign {
			other := []string{"a1", "a2", "a3", fold.MasterWriter}[w.r.Intn(4)]
			cr = fmt.Sprintf("ledger/%s/zz%06d.jsonl", other, n)
		} else {
			cn := c.name(stem, ext, n)
			if base, tool, ok := ledger.ParseCopyName(cn); w.files[rel].kind != "copy" && (!ok || base != name || !strings.HasPrefix(c.pattern, tool)) {
				w.t.Fatalf("ParseCopyName(%q) = %q, %q, %v; want %q, %s", cn, base, tool, ok, name, c.pattern)
			}
			cr = path.Join(path.Dir(rel), cn)
		}
		if w.copyRel[cr] || w.files[cr] != nil {
			continue
		}
		p := w.path(i, cr)
		w.write(p, b)
		w.addCopy(i, p)
		if foreign {
			w.patterns["another writer's segment"]++
		} else {
			w.patterns[c.pattern]++
		}
		return
	}
}

// addCopy records the conflict copy at absolute path p on machine i.
func (w *syncWorld) addCopy(i int, p string) {
	w.copies = append(w.copies, p)
	w.copyRel[filepath.ToSlash(strings.TrimPrefix(p, w.m[i].dir+string(filepath.Separator)))] = true
}

// tornOf returns a half-written b: cut short, or its tail turned to NUL bytes. When
// have (what the receiver holds) is a prefix of b — an append-only file grown — the cut
// falls after it: a sync tool moves an append's new bytes, not the old ones again.
func (w *syncWorld) tornOf(b, have []byte) []byte {
	from := 1
	if len(have) > 0 && bytes.HasPrefix(b, have) {
		from = len(have)
	}
	if len(b)-from < 1 {
		return bytes.Clone(have)
	}
	cut := from + w.r.Intn(len(b)-from)
	if w.r.Intn(2) == 0 {
		return bytes.Clone(b[:cut])
	}
	return append(bytes.Clone(b[:cut]), make([]byte, len(b)-cut)...)
}

// step runs the sync engine a few times: each time one pending file is delivered to one
// machine — whole, half-written, as a conflict copy (the whole file, or the receiver's
// old version kept beside the new one), or not yet — and a sync tool's temp file may
// appear or vanish.
func (w *syncWorld) step() {
	for range w.r.Intn(4) {
		if len(w.temps) > 0 && w.r.Intn(3) == 0 {
			k := w.r.Intn(len(w.temps))
			os.Remove(w.temps[k])
			w.temps = slices.Delete(w.temps, k, k+1)
		}
		pend := w.pending()
		if len(pend) == 0 {
			return
		}
		p := pend[w.r.Intn(len(pend))]
		rel := p[0]
		var dst int
		fmt.Sscan(p[1], &dst)
		f := w.files[rel]
		src := w.read(f.origin, rel)
		cur := w.read(dst, rel)
		w.keepDiverged(dst, rel, src, cur)
		switch x := w.r.Intn(20); {
		case x < 10:
			w.write(w.path(dst, rel), src)
		case x < 13 && f.kind != "other":
			w.write(w.path(dst, rel), w.tornOf(src, cur))
			w.torn++
		case x < 15 && f.kind != "other":
			w.conflictCopy(dst, rel, src)
		case x < 16 && cur != nil && f.kind == "segment":
			w.conflictCopy(dst, rel, cur) // both changed: the old one kept beside
			w.write(w.path(dst, rel), src)
		case x < 18:
			dir, name := filepath.Split(w.path(dst, rel))
			tmp := filepath.Join(dir, ".syncthing."+name+".tmp")
			if w.r.Intn(2) == 0 {
				tmp = filepath.Join(dir, "~syncthing~"+name+".tmp")
			}
			w.write(tmp, w.tornOf(src, nil))
			w.temps = append(w.temps, tmp)
		default: // delayed
		}
	}
}

// keepDiverged keeps the receiver's version cur of a segment as a conflict copy when
// the writer's version src is no longer an extension of it (the writer's disk was
// restored from a backup, or cloned): both versions changed since they met, and
// Syncthing then keeps the receiver's beside the new one. A half-written cur (a cut
// line, NUL bytes) diverges too and is kept the same way: a copy loses nothing.
func (w *syncWorld) keepDiverged(dst int, rel string, src, cur []byte) {
	if cur != nil && w.files[rel].kind == "segment" && !bytes.HasPrefix(src, cur) {
		w.conflictCopy(dst, rel, cur)
	}
}

// deliverAll delivers every file whole everywhere, until nothing differs, and removes
// the temp files.
func (w *syncWorld) deliverAll() {
	for {
		pend := w.pending()
		if len(pend) == 0 {
			break
		}
		for _, p := range pend {
			var dst int
			fmt.Sscan(p[1], &dst)
			src := w.read(w.files[p[0]].origin, p[0])
			w.keepDiverged(dst, p[0], src, w.read(dst, p[0]))
			w.write(w.path(dst, p[0]), src)
		}
	}
	for _, p := range w.temps {
		os.Remove(p)
	}
	w.temps = nil
}

// acceptable reports whether err is a refusal a machine may give while it has not seen
// everything (or for a move that is not allowed): anything else fails the test.
func acceptable(err error) bool {
	for _, c := range []errs.Category{errs.Conflict, errs.Invalid, errs.RetryNeeded, errs.NotFound, errs.Denied, errs.Superseded, errs.Stale} {
		if errs.Is(err, c) {
			return true
		}
	}
	return false
}

// act makes one random agent on one random machine do one random thing.
func (w *syncWorld) act() {
	mi := w.r.Intn(len(w.m))
	m := w.m[mi]
	names := make([]string, 0, len(m.sessions))
	for n := range m.sessions {
		names = append(names, n)
	}
	sort.Strings(names)
	s := m.sessions[names[w.r.Intn(len(names))]]
	v, err := m.ch.Load()
	if err != nil {
		w.t.Fatalf("machine %s: load: %v", m.name, err)
	}
	st := v.State
	pick := func(f func(o *fold.Order) bool) string {
		var ids []string
		for _, id := range slices.Sorted(maps.Keys(st.Orders)) {
			if f(st.Order(id)) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return ""
		}
		return ids[w.r.Intn(len(ids))]
	}
	var op string
	err = nil
	switch x := w.r.Intn(15); {
	case s.Name == fold.MasterWriter && x < 5:
		op = "ask.answer"
		var pend []string
		for _, a := range st.PendingAsks() {
			pend = append(pend, a.ID)
		}
		if len(pend) == 0 {
			return
		}
		_, err = s.AskAnswer(pend[w.r.Intn(len(pend))], []string{"approve", "reject"}[w.r.Intn(2)], NoteOptions{})
	case s.Name == fold.MasterWriter:
		op = "msg.post"
		_, err = s.TalkSend(TalkSendOptions{To: []string{"a1", "a2", "a3", fold.ToAll}[w.r.Intn(4)], Body: "from the owner"})
	case x < 2:
		op = "order.create"
		_, err = s.NewOrder(NewOrderOptions{Title: fmt.Sprintf("order by %s on %s", s.Name, m.name)})
	case x < 4:
		op = "order.claim"
		if id := pick(func(o *fold.Order) bool { return o.State == fold.StateOpen }); id != "" {
			_, err = s.Claim(id, "")
		}
	case x < 5:
		op = "order.submit"
		if id := pick(func(o *fold.Order) bool { return o.Holder == s.Name && o.State == fold.StateClaimed }); id != "" {
			_, err = s.Submit(id, SubmitOptions{Reference: "commit-" + s.Name, Note: "done"})
		}
	case x < 6:
		op = "order.review"
		if id := pick(func(o *fold.Order) bool { return o.State == fold.StateSubmitted && o.Holder != s.Name }); id != "" {
			_, err = s.Review(id, []string{"accept", "accept", "changes"}[w.r.Intn(3)], NoteOptions{})
		}
	case x < 7:
		op = "order.release/cancel"
		if id := pick(func(o *fold.Order) bool { return o.Holder == s.Name && o.State == fold.StateClaimed }); id != "" {
			_, err = s.Release(id, NoteOptions{})
		} else if id := pick(func(o *fold.Order) bool { return o.Author == s.Name && !fold.Terminal(o.State) }); id != "" {
			_, err = s.Cancel(id, NoteOptions{})
		}
	case x < 10:
		op = "msg.post"
		_, err = s.TalkSend(TalkSendOptions{To: []string{"a1", "a2", "a3", fold.MasterWriter, fold.ToAll}[w.r.Intn(5)], Body: "hello from " + s.Name})
	case x < 12:
		op = "talk.read"
		w.readAll(m, s)
		return
	case x < 13:
		op = "ask.raise"
		_, err = s.AskRaise(AskRaiseOptions{Title: "may I?", Recommendation: "yes"})
	default:
		op = "primary"
		if st.Primary.Holder == s.Name {
			_, err = s.PrimaryRelease("")
		} else {
			_, err = s.PrimaryTake("")
		}
	}
	if err != nil && !acceptable(err) {
		w.t.Fatalf("machine %s: %s by %s: %v", m.name, op, s.Name, err)
	}
	if err == nil && op != "" {
		w.ops[op]++
	}
}

// readAll has s read its messages on m (when m is where s reads), counting what each
// read returned.
func (w *syncWorld) readAll(m *syncMachine, s *Session) {
	if !slices.Contains(m.readers, s.Name) {
		return
	}
	for {
		r, err := s.TalkRead(TalkReadOptions{})
		if err != nil {
			if acceptable(err) {
				return
			}
			w.t.Fatalf("machine %s: %s reads: %v", m.name, s.Name, err)
		}
		for _, msg := range r.Messages {
			w.returned[s.Name+" "+msg.ID]++
		}
		w.ops["talk.read"]++
		if !r.Truncated {
			return
		}
	}
}

// restoreBackup cuts one of machine i's own segments back by some lines, as restoring
// an old backup of the machine's disk does; the writer's next entries then fork the chain. It
// reports false when the segment is too short to cut.
func (w *syncWorld) restoreBackup(i int, writer string) bool {
	seg := ledger.SegmentPath(w.m[i].dir, writer, w.m[i].ch.Device)
	b, err := os.ReadFile(seg)
	if err != nil {
		return false
	}
	lines := bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) < 3 {
		return false
	}
	keep := 1 + w.r.Intn(len(lines)-2)
	// Lines no other machine has received are gone with the restore: nothing can
	// bring them back. The others must survive.
	var elsewhere []byte
	for j := range w.m {
		if j == i {
			continue
		}
		filepath.WalkDir(filepath.Join(w.m[j].dir, "ledger"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !syncTemp(d.Name()) {
				b, _ := os.ReadFile(p)
				elsewhere = append(append(elsewhere, '\n'), b...)
			}
			return nil
		})
	}
	for _, l := range lines[keep:] {
		l = bytes.TrimSuffix(l, []byte("\n"))
		if e, err := ledger.ParseLine(l); err == nil && bytes.Contains(elsewhere, append([]byte("\n"), append(l, '\n')...)) {
			w.cut[e.Hash()] = true
		}
	}
	w.write(seg, bytes.Join(lines[:keep], nil))
	// The whole disk was restored, the config dir with its record of what this
	// machine appended too — else ferry refuses to write and asks for the lost lines back.
	c := w.m[i].ch
	if err := c.Home.writeHighWater(c.Project(), writer, c.Device, highWater{Seq: uint64(keep)}); err != nil {
		panic(err)
	}
	w.forked = true
	return true
}

// syncCanon is the comparable form of a State: everything it folds, as JSON.
func syncCanon(st *fold.State) string {
	ign := slices.Clone(st.Ignored)
	sort.Slice(ign, func(i, j int) bool { return ign[i].Hash+ign[i].Reason < ign[j].Hash+ign[j].Reason })
	b, err := json.Marshal(struct {
		Orders    map[string]*fold.Order
		Agents    map[string]*fold.Agent
		Messages  map[string]*fold.Message
		Asks      map[string]*fold.Ask
		Primary   *fold.Primary
		Decisions []fold.Decision
		Contested []fold.Contest
		Ignored   []fold.Ignored
		Entries   int
		MaxHLC    string
	}{st.Orders, st.Agents, st.Messages, st.Asks, st.Primary, st.Decisions, st.Contested, ign, st.Entries, st.MaxHLC})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// written returns every entry the writers appended: each writer's own segment on the
// machine that writes it, plus what a restored backup cut away.
func (w *syncWorld) written() map[string]bool {
	out := maps.Clone(w.cut)
	for rel, f := range w.files {
		if f.kind != "segment" || !strings.HasSuffix(rel, "/"+w.m[f.origin].ch.Device+".jsonl") {
			continue
		}
		for _, l := range bytes.Split(w.read(f.origin, rel), []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			e, err := ledger.ParseLine(l)
			if err != nil {
				w.t.Fatalf("%s on machine %s: %v", rel, w.m[f.origin].name, err)
			}
			out[e.Hash()] = true
		}
	}
	return out
}

// check loads every machine and checks the properties of a converged folder; it
// returns the state all machines fold.
func (w *syncWorld) check(what string) string {
	t := w.t
	t.Helper()
	written := w.written()
	var want string
	var wantForks string
	for i, m := range w.m {
		v, err := m.ch.Load()
		if err != nil {
			t.Fatalf("%s: machine %s: %v", what, m.name, err)
		}
		st, snap := v.State, v.Snapshot
		got := syncCanon(st)
		fk, _ := json.Marshal(snap.Forks)
		if i == 0 {
			want, wantForks = got, string(fk)
		} else if got != want {
			t.Fatalf("%s: machine %s folds another state than machine A; %s", what, m.name, propDiff(got, want))
		} else if string(fk) != wantForks {
			t.Fatalf("%s: machine %s resolves forks otherwise than machine A:\n%s\n%s", what, m.name, fk, wantForks)
		}
		for _, p := range snap.Problems {
			if p.Kind != ledger.KindFork && p.Kind != ledger.KindTorn {
				t.Fatalf("%s: machine %s: ledger problem %+v", what, m.name, p)
			}
			if p.Kind == ledger.KindTorn && !w.copyRel[p.Path] {
				t.Fatalf("%s: machine %s: a segment is still torn after full delivery: %+v", what, m.name, p)
			}
		}
		// No losses, no duplicates: the entries and the forks' losers are exactly what
		// the writers appended, each once.
		seen := map[string]bool{}
		keys := map[string]bool{}
		for j := range snap.Entries {
			e := &snap.Entries[j]
			k := fmt.Sprintf("%s/%s/%d", e.Writer, e.Device, e.Seq)
			if seen[e.Hash()] || keys[k] {
				t.Fatalf("%s: machine %s holds %s twice", what, m.name, k)
			}
			seen[e.Hash()], keys[k] = true, true
		}
		for _, f := range snap.Forks {
			if !w.forked {
				t.Fatalf("%s: machine %s reports a fork nobody made: %+v", what, m.name, f)
			}
			for j := range f.Losers {
				l := &f.Losers[j]
				seen[l.Hash()] = true
				if l.Seq == f.Seq && l.Hash() < f.Winner.Hash() {
					t.Fatalf("%s: machine %s: fork at %s/%s seq %d kept %s over the lower hash %s", what, m.name, f.Writer, f.Device, f.Seq, f.Winner.Hash(), l.Hash())
				}
			}
		}
		for h := range written {
			if !seen[h] {
				t.Fatalf("%s: machine %s lost entry %s", what, m.name, h)
			}
		}
		for h := range seen {
			if !written[h] {
				t.Fatalf("%s: machine %s holds entry %s no writer appended", what, m.name, h)
			}
		}
		if !w.forked {
			rep, err := m.ch.Verify(v)
			if err != nil || !rep.OK() {
				b, _ := json.Marshal(rep)
				t.Fatalf("%s: machine %s: verify is not clean: %s, %v", what, m.name, b, err)
			}
		}
		// Messages: all arrived; no order accepted twice.
		for id, msg := range st.Messages {
			if msg.Pending {
				t.Fatalf("%s: machine %s: message %s still pending", what, m.name, id)
			}
		}
		for id, o := range st.Orders {
			accepts := 0
			for _, h := range o.History {
				if h.Type == fold.TypeOrderReview && h.Verdict == "accept" {
					accepts++
				}
			}
			if o.Missing || accepts > 1 || (o.State == fold.StateAccepted) != (accepts == 1) || o.State == fold.StateAccepted && o.Result == nil {
				t.Fatalf("%s: machine %s: order %s is %s with %d accepting reviews on its chain (missing %v)", what, m.name, id, o.State, accepts, o.Missing)
			}
		}
	}
	return want
}

// TestSyncProperties runs random histories through the simulated sync engine and checks,
// after full delivery: every machine folds the same state (orders, messages, asks,
// primary, contests); no entry is lost or held twice; every message arrived and was
// returned by the reads of each addressee exactly once; no order has two accepted
// results; forks (from a restored backup) are resolved by the lower hash on every
// machine; without a fork, `ferry ledger verify` is clean on every machine, conflict
// copies and all. Then the sync tool prunes conflict copies (Syncthing keeps 10, then none):
// the state does not change, since ferry never needs a copy once its records have
// reached the segments (a restored backup's lost branch is the exception: it lives only
// in a copy, so those runs skip pruning).
func TestSyncProperties(t *testing.T) {
	t.Parallel()
	iters, steps := 6, 50
	if testing.Short() {
		iters, steps = 2, 40
	}
	total := map[string]int{}
	var torn, contests, forks int
	for it := range iters {
		seed := *syncSeedFlag
		if seed == 0 {
			seed = time.Now().UnixNano()
		} else if it > 0 {
			break
		}
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			w := newSyncWorld(t, r)
			// One race each for an order and the primary role, on both machines before
			// either hears of the other: both chains branch.
			o, err := w.m[0].sessions["a1"].NewOrder(NewOrderOptions{Title: "raced"})
			if err != nil {
				t.Fatal(err)
			}
			w.deliverAll()
			for _, c := range []struct {
				m int
				a string
			}{{0, "a1"}, {1, "a2"}} {
				if _, err := w.m[c.m].sessions[c.a].Claim(o.ID, ""); err != nil {
					t.Fatal(err)
				}
				if _, err := w.m[c.m].sessions[c.a].PrimaryTake(""); err != nil {
					t.Fatal(err)
				}
			}
			restoreAt := -1
			if it%2 == 1 {
				restoreAt = steps/3 + r.Intn(steps/3)
			}
			for i := range steps {
				w.act()
				w.step()
				if i == restoreAt {
					// The owner restores machine B's disk from an old backup: its own
					// segment loses lines the other machine already holds, and its next
					// entry forks the chain. (a3 and the master do not read messages on B,
					// so exactly-once stays checkable.)
					writer := "a3" // the longer of the two segments
					if len(w.read(1, "ledger/master/"+w.m[1].ch.Device+".jsonl")) > len(w.read(1, "ledger/a3/"+w.m[1].ch.Device+".jsonl")) {
						writer = fold.MasterWriter
					}
					rel := filepath.ToSlash(filepath.Join("ledger", writer, w.m[1].ch.Device+".jsonl"))
					if b := w.read(1, rel); b != nil {
						w.write(w.path(0, rel), b) // machine A had seen all of it
					}
					if w.restoreBackup(1, writer) {
						if _, err := w.m[1].sessions[writer].TalkSend(TalkSendOptions{To: fold.ToAll, Body: "after the restore"}); err != nil && !acceptable(err) {
							t.Fatal(err)
						}
					}
				}
			}
			w.deliverAll()
			// Every reader reads what is left; the acks travel too.
			for _, m := range w.m {
				for _, n := range m.readers {
					w.readAll(m, m.sessions[n])
				}
			}
			w.deliverAll()
			state := w.check("after full delivery")

			// Each message returned exactly once to each addressee that reads.
			v, err := w.m[0].ch.Load()
			if err != nil {
				t.Fatal(err)
			}
			for id, msg := range v.State.Messages {
				for _, m := range w.m {
					for _, n := range m.readers {
						want := 0
						if msg.AddressedTo(n) {
							want = 1
						}
						if got := w.returned[n+" "+id]; got != want {
							t.Fatalf("message %s (%s → %s) was returned to %s %d times, want %d", id, msg.From, msg.To, n, got, want)
						}
					}
				}
			}
			for k, n := range w.returned {
				if n != 1 {
					t.Fatalf("%s returned %d times", k, n)
				}
			}
			if !w.forked {
				// Syncthing keeps the 10 newest copies; then every copy goes.
				per := map[string]int{}
				for j := len(w.copies) - 1; j >= 0; j-- {
					p := w.copies[j]
					if per[filepath.Dir(p)]++; per[filepath.Dir(p)] > 10 {
						os.Remove(p)
					}
				}
				w.deliverAll()
				if got := w.check("after pruning to 10 copies"); got != state {
					t.Fatalf("pruning conflict copies changed the state; %s", propDiff(got, state))
				}
				w.pruneAll()
				if got := w.check("after pruning every copy"); got != state {
					t.Fatalf("pruning conflict copies changed the state; %s", propDiff(got, state))
				}
			}
			for k, n := range w.patterns {
				total[k] += n
			}
			for k, n := range w.ops {
				total["op "+k] += n
			}
			torn += w.torn
			contests += len(v.State.Contested)
			forks += len(v.Snapshot.Forks)
			t.Logf("ops %v, copies %v, %d half-written deliveries, %d contests, %d forks", w.ops, w.patterns, w.torn, len(v.State.Contested), len(v.Snapshot.Forks))
		})
		if !ok {
			t.Fatalf("seed %d failed (rerun with -sync.seed=%d)", seed, seed)
		}
	}
	if *syncSeedFlag != 0 || testing.Short() {
		return
	}
	// The runs must have exercised what they claim to.
	for _, c := range copyNames {
		if total[c.pattern] == 0 {
			t.Errorf("no %s conflict copy was made", c.pattern)
		}
	}
	for _, k := range []string{"another writer's segment", "op order.create", "op order.claim", "op order.submit", "op order.review", "op msg.post", "op talk.read", "op ask.raise", "op primary"} {
		if total[k] == 0 {
			t.Errorf("%s never happened", k)
		}
	}
	// Forks are not required: whether a restored backup forks a chain depends on what
	// the machine's folder still holds (a conflict copy may carry the cut lines, and the
	// writer then continues after them). When they happen they are checked above;
	// ledger's TestReadFork and doctor.txtar make forks deterministically.
	if torn == 0 || contests == 0 {
		t.Errorf("%d half-written deliveries, %d contests: the runs did not exercise sync", torn, contests)
	}
	t.Logf("totals %v; %d half-written deliveries, %d contests, %d forks", total, torn, contests, forks)
}

// pruneAll removes every conflict copy on every machine and forgets them.
func (w *syncWorld) pruneAll() {
	for _, p := range w.copies {
		os.Remove(p)
	}
	for rel, f := range w.files {
		if f.kind == "copy" {
			for i := range w.m {
				os.Remove(w.path(i, rel))
			}
			delete(w.files, rel)
		}
	}
	w.copies = nil
	w.deliverAll()
}
