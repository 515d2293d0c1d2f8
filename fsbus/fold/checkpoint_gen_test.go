package fold_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// A random history for the checkpoint property test (checkpoint_prop_test.go): two
// machines, M (the owner's device m1 and alice's a1) and N (bob's b1 and alice's a2),
// that sync now and then and are partitioned in between; devices restored from a
// backup fork their segment; a clock behind writes late lower-HLC entries; the
// records of a fork's other branch sit in a conflict copy.

const genProject = "acme"

// genDevice is one segment as its device writes it.
type genDevice struct {
	writer, device string
	machine        int // 0: M, 1: N
	key            ed25519.PrivateKey
	tip            *ledger.Entry   // the branch it writes on
	chain          []*ledger.Entry // the current branch, seq 1..tip
	restored       bool            // forked by a restore at least once
}

// genOrder is what the generator knows of an order: its nodes, newest last.
type genOrder struct {
	id    string
	nodes []genNode
}

type genNode struct {
	hash, state, holder, submitter string
}

// genWorld is a history being generated.
type genWorld struct {
	r       *rand.Rand
	master  ed25519.PrivateKey
	devs    []*genDevice // m1, a1, a2, b1
	records []*ledger.Entry
	seen    [2]map[string]bool // per machine: hashes it holds
	orders  []*genOrder
	asks    []*genOrder
	grants  map[string]string // agent → newest grant hash the owner wrote
	idem    map[string]*ledger.Entry
	puts    map[string]*ledger.Entry
	ms      int64 // the wall clock, Unix ms
	nextID  int
	desc    []string
	pinned  bool // the checkpoint is written: m1 is not restored
}

// genKey is a real ed25519 key drawn from r.
func genKey(r *rand.Rand) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(r.UintN(256))
	}
	return ed25519.NewKeyFromSeed(seed)
}

// newGenWorld starts a history: the owner seats alice and bob as members, and both
// machines hold that.
func newGenWorld(seed uint64) *genWorld {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &genWorld{r: r, master: genKey(r), grants: map[string]string{}, idem: map[string]*ledger.Entry{},
		puts: map[string]*ledger.Entry{}, ms: 1_780_000_000_000}
	w.seen[0], w.seen[1] = map[string]bool{}, map[string]bool{}
	alice, bob := genKey(r), genKey(r)
	w.devs = []*genDevice{
		{writer: fold.MasterWriter, device: "m1", machine: 0, key: w.master},
		{writer: "alice", device: "a1", machine: 0, key: alice},
		{writer: "alice", device: "a2", machine: 1, key: alice},
		{writer: "bob", device: "b1", machine: 1, key: bob},
		{writer: fold.MasterWriter, device: "m2", machine: 1, key: w.master},
	}
	for _, n := range []string{"alice", "bob"} {
		w.grant(n, fold.TypeGrantSet, false, false)
	}
	w.sync()
	return w
}

func (w *genWorld) dev(device string) *genDevice {
	for _, d := range w.devs {
		if d.device == device {
			return d
		}
	}
	panic(device)
}

func (w *genWorld) agentKey(name string) ed25519.PrivateKey {
	for _, d := range w.devs {
		if d.writer == name {
			return d.key
		}
	}
	panic(name)
}

// hlc formats a Unix ms as an HLC.
func genHLC(ms int64) string { return ledger.HLC{Ms: ms}.String() }

// write appends a signed entry to d's segment at hlc ms (the wall clock when 0).
func (w *genWorld) write(d *genDevice, typ, ref, idem string, data any, ms int64) *ledger.Entry {
	w.ms += 1 + int64(w.r.IntN(50))
	if ms == 0 {
		ms = w.ms
	}
	e := ledger.Entry{V: ledger.Version, Writer: d.writer, Device: d.device, Seq: 1, HLC: genHLC(ms), Type: typ, Ref: ref, Idem: idem}
	if d.tip != nil {
		e.Seq, e.Prev = d.tip.Seq+1, d.tip.Hash()
	}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		e.Data = b
	}
	if err := e.Sign(ledger.KeySigner(d.key), genProject); err != nil {
		panic(err)
	}
	p := &e
	d.tip, d.chain = p, append(d.chain, p)
	w.records = append(w.records, p)
	w.seen[d.machine][p.Hash()] = true
	return p
}

// sync makes both machines hold every record.
func (w *genWorld) sync() {
	for _, e := range w.records {
		w.seen[0][e.Hash()], w.seen[1][e.Hash()] = true, true
	}
}

// restore rolls d back to an earlier seq, as a restore from a backup does: the next
// record forks the segment there.
func (w *genWorld) restore(d *genDevice) {
	if len(d.chain) < 2 || w.pinned && d.device == "m1" {
		return
	}
	low := 1
	if d.device == "m1" {
		low = 2 // the owner's backup holds the two seats it granted first
		if len(d.chain) < 3 {
			return
		}
	}
	k := low + w.r.IntN(len(d.chain)-low) // keep seq 1..k
	d.chain = slices.Clone(d.chain[:k])
	d.tip = d.chain[k-1]
	d.restored = true
	w.desc = append(w.desc, fmt.Sprintf("restore %s/%s to seq %d", d.writer, d.device, k))
}

// grant writes the owner's grant.set (or revoke) of agent on m1, bounding each of the
// agent's segments by what M holds; stale lowers a bound, attest names bound_hashes.
func (w *genWorld) grant(agent, typ string, stale, attest bool) {
	m := w.dev("m1")
	bounds, hashes := map[string]uint64{}, map[string]string{}
	for _, d := range w.devs {
		if d.writer != agent {
			continue
		}
		var top *ledger.Entry
		for _, e := range w.records {
			if e.Writer == agent && e.Device == d.device && w.seen[0][e.Hash()] && (top == nil || e.Seq > top.Seq) {
				top = e
			}
		}
		if top == nil {
			continue
		}
		b := top.Seq
		if stale && b > 1 {
			b = 1 + w.r.Uint64N(b-1)
			for _, e := range w.records {
				if e.Writer == agent && e.Device == d.device && e.Seq == b && w.seen[0][e.Hash()] {
					top = e
				}
			}
		}
		bounds[d.device] = b
		hashes[d.device] = top.Hash()
	}
	data := map[string]any{"basis": w.grants[agent]}
	if typ == fold.TypeGrantSet {
		data["level"], data["key"] = "member", ledger.FormatKey(w.agentKey(agent).Public().(ed25519.PublicKey))
	}
	if typ == fold.TypeAgentRetire {
		data = map[string]any{}
	}
	if len(bounds) > 0 {
		data["bounds"] = bounds
		if attest {
			data["bound_hashes"] = hashes
		}
	}
	if data["basis"] == "" {
		delete(data, "basis")
	}
	e := w.write(m, typ, agent, "", data, 0)
	if typ != fold.TypeAgentRetire {
		w.grants[agent] = e.Hash()
	}
	w.desc = append(w.desc, fmt.Sprintf("%s %s bounds %v attested %v (%s)", typ, agent, bounds, attest, e.Hash()[7:15]))
}

// view is the newest node of o that machine holds.
func (w *genWorld) view(o *genOrder, machine int) (genNode, bool) {
	for i := len(o.nodes) - 1; i >= 0; i-- {
		if w.seen[machine][o.nodes[i].hash] {
			return o.nodes[i], true
		}
	}
	return genNode{}, false
}

// step writes one random action.
func (w *genWorld) step() {
	switch x := w.r.IntN(100); {
	case x < 12:
		w.sync()
		w.desc = append(w.desc, "sync")
	case x < 22:
		d := w.devs[w.r.IntN(len(w.devs))]
		w.restore(d)
	case x < 30:
		agent := []string{"alice", "bob"}[w.r.IntN(2)]
		typ := fold.TypeGrantSet
		switch y := w.r.IntN(20); {
		case y == 0 && agent == "bob":
			typ = fold.TypeGrantRevoke
		case y == 1 && agent == "bob":
			typ = fold.TypeAgentRetire
		}
		w.grant(agent, typ, w.r.IntN(2) == 0, w.r.IntN(2) == 0)
	case x < 36:
		w.latePut()
	case x < 48:
		w.create()
	case x < 58:
		w.ask()
	default:
		w.act()
	}
}

// alices is alice's device on machine m.
func (w *genWorld) alices(m int) *genDevice {
	if m == 0 {
		return w.dev("a1")
	}
	return w.dev("a2")
}

// create writes an order.create by alice with an idempotency key; now and then one from
// a device whose clock is behind reuses a key alice took earlier (a late lower-HLC
// idempotent write).
func (w *genWorld) create() {
	m := w.r.IntN(2)
	d := w.alices(m)
	w.nextID++
	id := fmt.Sprintf("o-%013d", w.nextID)
	key, ms := fmt.Sprintf("k%d", w.nextID), int64(0)
	if len(w.idem) > 0 && w.r.IntN(3) == 0 {
		keys := sortedKeys(w.idem)
		key = keys[w.r.IntN(len(keys))]
		ms = genMs(w.idem[key].HLC) - 1 - int64(w.r.IntN(20))
		w.desc = append(w.desc, fmt.Sprintf("late idempotent create %s key %s", id, key))
	}
	// Now and then a rival create: the id of an order the other machine created and
	// this one has not seen.
	for _, o := range w.orders {
		if !w.seen[m][o.nodes[0].hash] && w.r.IntN(6) == 0 {
			id = o.id
			w.desc = append(w.desc, "rival create "+id)
			break
		}
	}
	e := w.write(d, fold.TypeOrderCreate, id, key, map[string]any{"object": "sha256:" + strings.Repeat("0", 64), "args": "a" + key}, ms)
	if w.idem[key] == nil || e.HLC < w.idem[key].HLC {
		w.idem[key] = e
	}
	w.orders = append(w.orders, &genOrder{id: id, nodes: []genNode{{hash: e.Hash(), state: "open"}}})
}

// ask raises an ask (alice or bob) or answers one the machine holds as pending (the
// owner on m1 or m2): two machines answering at once branch its chain.
func (w *genWorld) ask() {
	m := w.r.IntN(2)
	if len(w.asks) == 0 || w.r.IntN(5) < 2 {
		d := w.alices(m)
		if m == 1 && w.r.IntN(2) == 0 {
			d = w.dev("b1")
		}
		w.nextID++
		id := fmt.Sprintf("a-%013d", w.nextID)
		e := w.write(d, fold.TypeAskRaise, id, "", map[string]any{"object": "sha256:" + strings.Repeat("0", 64)}, 0)
		w.asks = append(w.asks, &genOrder{id: id, nodes: []genNode{{hash: e.Hash(), state: "pending"}}})
		return
	}
	a := w.asks[w.r.IntN(len(w.asks))]
	n, ok := w.view(a, m)
	if !ok || n.state != "pending" {
		return
	}
	d := w.dev("m1")
	if m == 1 {
		d = w.dev("m2")
	}
	e := w.write(d, fold.TypeAskAnswer, a.id, "", map[string]any{"basis": n.hash, "verdict": []string{"approve", "reject", "send_back"}[w.r.IntN(3)]}, 0)
	a.nodes = append(a.nodes, genNode{hash: e.Hash(), state: "answered"})
}

// latePut writes a secret.put of one of three names; now and then with an HLC below the
// name's first put so far.
func (w *genWorld) latePut() {
	name := []string{"db", "api", "tls"}[w.r.IntN(3)]
	d := w.devs[1+w.r.IntN(3)]
	ms := int64(0)
	if first := w.puts[name]; first != nil && w.r.IntN(2) == 0 {
		ms = genMs(first.HLC) - 1 - int64(w.r.IntN(20))
		w.desc = append(w.desc, fmt.Sprintf("late put %s by %s", name, d.writer))
	}
	w.nextID++
	sid := fmt.Sprintf("s-%013d", w.nextID)
	e := w.write(d, fold.TypeSecretPut, name, "", map[string]any{"object": "vault/" + sid + ".age", "id": sid, "recipients": []string{d.writer}}, ms)
	if first := w.puts[name]; first == nil || e.HLC < first.HLC {
		w.puts[name] = e
	}
}

func genMs(hlc string) int64 {
	h, err := ledger.ParseHLC(hlc)
	if err != nil {
		panic(err)
	}
	return h.Ms
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// act moves a random order on from what a random machine holds of it: bob claims and
// submits, alice reviews or cancels. Two machines acting on one node branch its chain.
func (w *genWorld) act() {
	if len(w.orders) == 0 {
		return
	}
	o := w.orders[w.r.IntN(len(w.orders))]
	w.actOn(o, w.r.IntN(2))
}

// actBehind acts, from the view of the machine that is behind, on an order the other
// machine has taken further, so a branch starts from a record the other machine
// already followed (acting at random when there is none).
func (w *genWorld) actBehind() {
	type lag struct {
		o *genOrder
		m int
	}
	var behind []lag
	for _, o := range w.orders {
		for m := range 2 {
			if n, ok := w.view(o, m); ok && n.hash != o.nodes[len(o.nodes)-1].hash {
				behind = append(behind, lag{o, m})
			}
		}
	}
	if len(behind) == 0 {
		w.act()
		return
	}
	b := behind[w.r.IntN(len(behind))]
	w.actOn(b.o, b.m)
}

// actOn writes the next lifecycle entry of o from machine m's view of it.
func (w *genWorld) actOn(o *genOrder, m int) {
	n, ok := w.view(o, m)
	if !ok {
		return
	}
	alice, bob := w.alices(m), w.dev("b1")
	basis := map[string]any{"basis": n.hash}
	next := n
	var e *ledger.Entry
	switch n.state {
	case "open":
		if m == 1 && w.r.IntN(4) > 0 {
			e = w.write(bob, fold.TypeOrderClaim, o.id, "", basis, 0)
			next = genNode{state: "claimed", holder: "bob"}
		} else {
			e = w.write(alice, fold.TypeOrderCancel, o.id, "", basis, 0)
			next = genNode{state: "cancelled"}
		}
	case "claimed", "changes_requested":
		if m == 1 && w.r.IntN(4) > 0 {
			basis["reference"] = "commit:" + o.id
			e = w.write(bob, fold.TypeOrderSubmit, o.id, "", basis, 0)
			next = genNode{state: "submitted", holder: "bob", submitter: "bob"}
		} else {
			e = w.write(alice, fold.TypeOrderCancel, o.id, "", basis, 0)
			next = genNode{state: "cancelled"}
		}
	case "submitted":
		switch w.r.IntN(5) {
		case 0:
			e = w.write(alice, fold.TypeOrderCancel, o.id, "", basis, 0)
			next = genNode{state: "cancelled"}
		case 1:
			basis["verdict"] = "changes"
			e = w.write(alice, fold.TypeOrderReview, o.id, "", basis, 0)
			next.state = "changes_requested"
		default:
			basis["verdict"] = "accept"
			e = w.write(alice, fold.TypeOrderReview, o.id, "", basis, 0)
			next.state = "accepted"
		}
	default:
		return // terminal where this machine looks
	}
	next.hash = e.Hash()
	o.nodes = append(o.nodes, next)
}

// genHistory is a generated history with its checkpoint, laid out as two machines'
// channel folders: one holding every record, one holding only those above the cut.
type genHistory struct {
	master ed25519.PublicKey
	full   *ledger.Snapshot
	fresh  *ledger.Snapshot
	cut    fold.Cut
	base   *fold.Base
	cps    genCheckpoints
	desc   []string
	w      *genWorld // the world, to write on
	dir    string    // the folder holding every record
}

// genCheckpoints holds heads and chunks in memory (fold.Checkpoints).
type genCheckpoints map[string][]byte

func (c genCheckpoints) Head(epoch int, hash string) ([]byte, error) {
	if b, ok := c["head "+hash]; ok {
		return b, nil
	}
	return nil, fold.ErrObjectMissing
}

func (c genCheckpoints) Chunk(hash string) ([]byte, error) {
	if b, ok := c["chunk "+hash]; ok {
		return b, nil
	}
	return nil, fold.ErrObjectMissing
}

// genRun generates the history of seed, makes the owner's checkpoint at a random cut
// the way ferry compact does (fold.CutOf, CloseCut, Split, NextBase, Chunks, NewHead,
// SignHead, a checkpoint entry on m1 above the cut) and reads both folders with the
// ledger.
func genRun(seed uint64, dir string) (*genHistory, error) {
	w := newGenWorld(seed)
	steps := 30 + w.r.IntN(50)
	for range steps {
		w.step()
	}
	if w.r.IntN(4) == 0 { // mostly partitioned at the cut, so branches cross it
		w.sync()
	}
	return w.checkpoint(dir, func(top map[[2]string]uint64) map[[2]string]uint64 {
		limits := map[[2]string]uint64{}
		for _, k := range slices.SortedFunc(maps.Keys(top), func(a, b [2]string) int {
			return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1])
		}) {
			// m1's cut holds the seats it granted first (seq 1 and 2), so the writers'
			// records can be at or below the cut (CloseCut closes it over seats).
			low := uint64(0)
			switch {
			case k == [2]string{fold.MasterWriter, "m1"}:
				low = min(2, top[k])
			case k[1] == "b1" && w.r.IntN(2) == 0:
				low = top[k] / 2 // bob's claims and hand-ins more often at or below the cut
			}
			limits[k] = low + w.r.Uint64N(top[k]-low+1)
		}
		return limits
	}, func() {
		// A few entries after the checkpoint, with the machines partitioned.
		for range 6 + w.r.IntN(12) {
			if w.r.IntN(4) > 0 {
				w.actBehind() // a branch above the cut from a record the cut may hold a child of
			} else {
				w.step()
			}
		}
	})
}

// checkpoint makes the owner's checkpoint of w's records at the cut limits gives (the
// highest seq per segment that may stay, from the highest there), closed, writes
// what after writes, and reads both folders.
func (w *genWorld) checkpoint(dir string, limit func(top map[[2]string]uint64) map[[2]string]uint64, after func()) (*genHistory, error) {
	full := filepath.Join(dir, "full")
	if err := writeFolder(full, w.records, nil); err != nil {
		return nil, err
	}
	snap, err := readFolder(full)
	if err != nil {
		return nil, err
	}
	top := map[[2]string]uint64{}
	for _, e := range snap.Entries {
		k := [2]string{e.Writer, e.Device}
		top[k] = max(top[k], e.Seq)
	}
	limits := limit(top)
	cut := fold.CutOf(snap.Entries, func(wr, dev string) (uint64, bool) {
		l, ok := limits[[2]string{wr, dev}]
		return l, ok
	})
	cut = fold.CloseCut(snap.Entries, snap.Forks, cut, nil)
	in := fold.FoldInput{Project: genProject, Master: w.master.Public().(ed25519.PublicKey), Entries: snap.Entries, Forks: snap.Forks}
	at, _, probs := fold.Split(snap.Entries, snap.Forks, cut, nil)
	if len(probs) > 0 {
		return nil, fmt.Errorf("split at the cut: %+v", probs)
	}
	base, err := fold.NextBase(in, nil, at, 1, cut)
	if err != nil {
		return nil, err
	}
	chunks, refs, err := fold.StateChunks(base)
	if err != nil {
		return nil, err
	}
	cps := genCheckpoints{}
	for _, c := range chunks {
		cps["chunk "+ledger.HashBytes(c)] = c
	}
	head, err := fold.NewHead(genProject, base, refs, "m1", snap.Entries, nil)
	if err != nil {
		return nil, err
	}
	hb, hh, err := fold.SignHead(head, ledger.KeySigner(w.master))
	if err != nil {
		return nil, err
	}
	cps["head "+hh] = hb
	// The checkpoint entry follows the newest m1 record the owner's snapshot keeps,
	// above the cut; m1 is not restored after it.
	m := w.dev("m1")
	m.chain = nil
	for i := range snap.Entries {
		if e := &snap.Entries[i]; e.Writer == fold.MasterWriter && e.Device == "m1" {
			for _, r := range w.records {
				if r.Hash() == e.Hash() {
					m.chain = append(m.chain, r)
				}
			}
		}
	}
	slices.SortFunc(m.chain, func(a, b *ledger.Entry) int { return int(a.Seq) - int(b.Seq) })
	m.tip = m.chain[len(m.chain)-1]
	w.pinned = true
	w.write(m, fold.TypeCheckpoint, "checkpoint", "", fold.CheckpointData{Epoch: 1, Head: hh, Rules: fold.RulesVersion}, 0)
	after()
	if err := writeFolder(full, w.records, nil); err != nil {
		return nil, err
	}
	if snap, err = readFolder(full); err != nil {
		return nil, err
	}
	freshDir := filepath.Join(dir, "fresh")
	if err := writeFolder(freshDir, w.records, cut); err != nil {
		return nil, err
	}
	fresh, err := readFolder(freshDir)
	if err != nil {
		return nil, err
	}
	return &genHistory{master: w.master.Public().(ed25519.PublicKey), full: snap, fresh: fresh, cut: cut, base: base, cps: cps, desc: w.desc, w: w, dir: full}, nil
}

// writeFolder writes records as segment files under root/ledger: each device's current
// branch in its segment file, every other record in a Syncthing conflict copy. With a
// cut, only the records above it: what a machine that reads each segment after the
// cut's offset holds.
// Written again over itself, a folder keeps the files it had: a conflict copy that
// loses its records to the segment file keeps them as duplicates, as a synced one does.
func writeFolder(root string, records []*ledger.Entry, cut fold.Cut) error {
	type seg = [2]string
	files := map[string][]byte{}
	bySeg := map[seg][]*ledger.Entry{}
	for _, e := range records {
		if cut != nil && cut.Below(e.Writer, e.Device, e.Seq) {
			continue
		}
		bySeg[seg{e.Writer, e.Device}] = append(bySeg[seg{e.Writer, e.Device}], e)
	}
	for k, rs := range bySeg {
		// The main file holds the chain ending at the newest record written.
		main := map[string]bool{}
		byHash := map[string]*ledger.Entry{}
		for _, e := range rs {
			byHash[e.Hash()] = e
		}
		for e := rs[len(rs)-1]; e != nil; e = byHash[e.Prev] {
			main[e.Hash()] = true
		}
		slices.SortStableFunc(rs, func(a, b *ledger.Entry) int { return int(a.Seq) - int(b.Seq) })
		dir := filepath.Join("ledger", k[0])
		for _, e := range rs {
			name := filepath.Join(dir, k[1]+".jsonl")
			if !main[e.Hash()] {
				name = filepath.Join(dir, k[1]+".sync-conflict-20260101-120000-ABCDEFG.jsonl")
			}
			line, err := e.Canonical()
			if err != nil {
				return err
			}
			files[name] = append(append(files[name], line...), '\n')
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "ledger"), 0o755); err != nil {
		return err
	}
	made := map[string]bool{}
	for name, b := range files {
		p := filepath.Join(root, name)
		if d := filepath.Dir(p); !made[d] {
			if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			made[d] = true
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func readFolder(root string) (*ledger.Snapshot, error) {
	l, err := ledger.Open(ledger.Options{Root: root})
	if err != nil {
		return nil, err
	}
	return l.Read()
}
