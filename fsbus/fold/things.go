package fold

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/ledger"
)

// The things terminal at a checkpoint's cut, in thing-range chunks (docs/format.md §20
// "The state", ADR 0019 §5): the accepted and cancelled orders and the answered asks,
// sorted by id and packed in order into chunks of at most thingsMax things and
// chunkMax bytes each (a thing whose encoding alone is bigger gets a chunk of its own).
// The head lists each chunk's first id and hash (Head.Things), so a reader finds the
// one chunk that may hold an id without reading any other, and reads it only when a
// command asks for that thing. Each chunk is the RFC 8785 encoding of
// {"asks": {id: TerminalAsk}, "orders": {id: TerminalOrder}, "v": BaseVersion}.

// thingsMax is the most things a chunk holds.
const thingsMax = 256

// thingChunkJSON is a thing chunk's encoded form.
type thingChunkJSON struct {
	V      int                       `json:"v"`
	Orders map[string]*TerminalOrder `json:"orders"`
	Asks   map[string]*TerminalAsk   `json:"asks"`
}

// chunkOverhead is the length of an empty chunk's encoding, {"asks":{},"orders":{},"v":N}.
var chunkOverhead = len(fmt.Sprintf(`{"asks":{},"orders":{},"v":%d}`, BaseVersion))

// EncodeThings packs b's terminal things into chunks and returns each chunk's bytes
// and ref, in id order.
func EncodeThings(b *Base) ([][]byte, []ChunkRef, error) {
	orders, asks, err := b.Terminals()
	if err != nil {
		return nil, nil, err
	}
	type item struct {
		id  string
		val []byte
	}
	items := make([]item, 0, len(orders)+len(asks))
	for id, o := range orders {
		v, err := ledger.Canonical(o)
		if err != nil {
			return nil, nil, fmt.Errorf("order %s: %w", id, err)
		}
		items = append(items, item{id, v})
	}
	for id, a := range asks {
		v, err := ledger.Canonical(a)
		if err != nil {
			return nil, nil, fmt.Errorf("ask %s: %w", id, err)
		}
		items = append(items, item{id, v})
	}
	slices.SortFunc(items, func(x, y item) int { return strings.Compare(x.id, y.id) })
	var out [][]byte
	var refs []ChunkRef
	for len(items) > 0 {
		n, size := 0, chunkOverhead
		for n < len(items) && n < thingsMax {
			// "id":value plus a comma: ids need no escaping (ValidID).
			add := len(items[n].id) + 3 + len(items[n].val) + 1
			if n > 0 && size+add > chunkMax {
				break
			}
			size += add
			n++
		}
		j := thingChunkJSON{V: BaseVersion, Orders: map[string]*TerminalOrder{}, Asks: map[string]*TerminalAsk{}}
		for _, it := range items[:n] {
			if o := orders[it.id]; o != nil {
				j.Orders[it.id] = o
			} else {
				j.Asks[it.id] = asks[it.id]
			}
		}
		c, err := ledger.Canonical(j)
		if err != nil {
			return nil, nil, err
		}
		ids := make([]string, n)
		for k, it := range items[:n] {
			ids[k] = it.id
		}
		out = append(out, c)
		refs = append(refs, ChunkRef{First: items[0].id, Hash: ledger.HashBytes(c), Filter: filterOf(ids)})
		items = items[n:]
	}
	return out, refs, nil
}

// checkThingRefs checks a head's thing refs: valid ids, strictly ascending.
func checkThingRefs(refs []ChunkRef) error {
	for i, r := range refs {
		if !ValidID(r.First) || (r.First[0] != 'o' && r.First[0] != 'a') {
			return fmt.Errorf("head names a thing chunk whose first id %q is not an order or ask id", r.First)
		}
		if i > 0 && refs[i-1].First >= r.First {
			return fmt.Errorf("head's thing chunks are not in ascending id order at %q", r.First)
		}
		if !strings.HasPrefix(r.Hash, "sha256:") || len(r.Hash) != len("sha256:")+64 {
			return fmt.Errorf("head names a thing chunk with a bad hash %q", r.Hash)
		}
		if f, err := base64.RawURLEncoding.DecodeString(r.Filter); err != nil || len(f) < filterMinBytes || len(f) > filterMaxBytes {
			return fmt.Errorf("head names a thing chunk with a bad filter %q", r.Filter)
		}
	}
	return nil
}

// A thing chunk's filter (ChunkRef.Filter) is a Bloom filter: filterBits bits per id
// (at least filterMinBytes bytes), filterHashes bit positions per id, each a
// big-endian uint32 of the id's SHA-256 taken 4 bytes at a time, modulo the number of
// bits; unpadded base64url. About 1% of the ids a chunk does not hold pass it.
const (
	filterBits     = 10
	filterHashes   = 7
	filterMinBytes = 8
	filterMaxBytes = (thingsMax*filterBits+7)/8 + filterMinBytes // the filter of a full chunk fits
)

// filterOf returns the filter of ids.
func filterOf(ids []string) string {
	f := make([]byte, max(filterMinBytes, (len(ids)*filterBits+7)/8))
	for _, id := range ids {
		for _, bit := range filterPositions(id, len(f)*8) {
			f[bit/8] |= 1 << (bit % 8)
		}
	}
	return base64.RawURLEncoding.EncodeToString(f)
}

// filterPositions returns the bits of a filter of m bits that id sets.
func filterPositions(id string, m int) [filterHashes]int {
	h := sha256.Sum256([]byte(id))
	var out [filterHashes]int
	for i := range out {
		out[i] = int(binary.BigEndian.Uint32(h[4*i:]) % uint32(m))
	}
	return out
}

// filterHolds reports whether filter f (decoded) may hold id.
func filterHolds(f []byte, id string) bool {
	for _, bit := range filterPositions(id, len(f)*8) {
		if f[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// mayHold reports whether thing chunk i may hold id (its filter, under s.mu).
func (s *chunkStore) mayHold(i int, id string) bool {
	if i < 0 {
		return false
	}
	if s.filters == nil {
		s.filters = make([][]byte, len(s.refs))
	}
	if s.filters[i] == nil {
		f, err := base64.RawURLEncoding.DecodeString(s.refs[i].Filter)
		if err != nil || len(f) == 0 {
			return true // no filter (checkThingRefs refuses one): read the chunk
		}
		s.filters[i] = f
	}
	return filterHolds(s.filters[i], id)
}

// chunkStore reads a base's chunks of one kind (thing chunks, idempotency chunks) on
// first use. mu guards the base's maps that decode fills while chunks are still being
// read into them; once every chunk is read (all) they no longer change.
type chunkStore struct {
	mu      sync.Mutex
	refs    []ChunkRef
	read    func(hash string) ([]byte, error)
	loaded  []bool
	n       int // chunks read
	all     bool
	err     error         // the first chunk that did not read or check
	failed  map[int]error // each chunk that did not read or check
	filters [][]byte      // thing chunks' filters, decoded on first use
	// decode checks chunk i's bytes (hash-checked already) against its range
	// [refs[i].First, next) and adds what it holds to the base.
	decode func(raw []byte, i int, next string) error
}

// newChunkStore returns a store of the chunks refs names.
func newChunkStore(refs []ChunkRef, read func(string) ([]byte, error), decode func([]byte, int, string) error) *chunkStore {
	return &chunkStore{refs: refs, read: read, loaded: make([]bool, len(refs)), decode: decode}
}

// chunkFor returns the index of the chunk that may hold id, -1 for none.
func (s *chunkStore) chunkFor(id string) int {
	return sort.Search(len(s.refs), func(i int) bool { return s.refs[i].First > id }) - 1
}

// ensure reads chunk i, under s.mu.
func (s *chunkStore) ensure(i int) {
	if i < 0 || s.loaded[i] {
		return
	}
	s.loaded[i] = true
	s.n++
	if err := s.load(i); err != nil {
		if s.failed == nil {
			s.failed = map[int]error{}
		}
		s.failed[i] = err
		if s.err == nil {
			s.err = err
		}
	}
}

// ensureAll reads every chunk not read yet and returns the first error, under s.mu.
func (s *chunkStore) ensureAll() error {
	if !s.all {
		for i := range s.refs {
			s.ensure(i)
		}
		s.all = true
	}
	return s.err
}

// load reads chunk i, checks its hash against its ref and hands it to decode.
func (s *chunkStore) load(i int) error {
	ref := s.refs[i]
	raw, err := s.read(ref.Hash)
	if err != nil {
		return fmt.Errorf("chunk %s: %w", ChunkPath(ref.Hash), err)
	}
	if got := ledger.HashBytes(raw); got != ref.Hash {
		return fmt.Errorf("chunk %s hashes to %s (tampered or damaged)", ChunkPath(ref.Hash), got)
	}
	next := ""
	if i+1 < len(s.refs) {
		next = s.refs[i+1].First
	}
	if err := s.decode(raw, i, next); err != nil {
		return fmt.Errorf("chunk %s: %w", ChunkPath(ref.Hash), err)
	}
	return nil
}

// decodeChunk decodes a thing or idempotency chunk into v, whose version field is
// version, refusing unknown members and another version than BaseVersion.
func decodeChunk(raw []byte, v any, version *int) error {
	if err := strictDecode(raw, v); err != nil {
		return fmt.Errorf("does not decode: %w", err)
	}
	if *version != BaseVersion {
		return fmt.Errorf("of version %d, this build reads %d", *version, BaseVersion)
	}
	return nil
}

// decodeThings is a thing chunk's decode: it checks the chunk (its first id, the id
// range up to next, its canonical form) and adds its things
// to b.
func (b *Base) decodeThings(raw []byte, i int, next string) error {
	ref := b.things.refs[i]
	var j thingChunkJSON
	if err := decodeChunk(raw, &j, &j.V); err != nil {
		return err
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range j.Orders {
			if !yield(id) {
				return
			}
		}
		for id := range j.Asks {
			if !yield(id) {
				return
			}
		}
	})
	if len(ids) == 0 || ids[0] != ref.First || (next != "" && ids[len(ids)-1] >= next) {
		return fmt.Errorf("holds ids outside its range [%s, %s)", ref.First, next)
	}
	for _, id := range ids {
		if !ValidID(id) || !b.things.mayHold(i, id) {
			return fmt.Errorf("holds id %q that its ref's filter rules out", id)
		}
	}
	if err := checkTerminal(j.Orders, j.Asks); err != nil {
		return err
	}
	if c, err := ledger.Canonical(j); err != nil || string(c) != string(raw) {
		return fmt.Errorf("is not in its canonical encoding (RFC 8785)")
	}
	maps.Copy(b.Orders, j.Orders)
	maps.Copy(b.Asks, j.Asks)
	return nil
}

// checkTerminal checks decoded terminal things: each a terminal order or answered ask
// of its id, and fills in the fields their encoding keeps beside them.
func checkTerminal(orders map[string]*TerminalOrder, asks map[string]*TerminalAsk) error {
	for id, o := range orders {
		if o == nil || o.Order == nil || o.Order.ID != id || !Terminal(o.Order.State) || !strings.HasPrefix(id, PrefixOrder) {
			return fmt.Errorf("state holds order %q that is not a terminal order of that id", id)
		}
		o.Order.C, o.Order.Device = o.Core, o.Device
	}
	for id, a := range asks {
		if a == nil || a.Ask == nil || a.Ask.ID != id || a.Ask.State == AskPending || !strings.HasPrefix(id, PrefixAsk) {
			return fmt.Errorf("state holds ask %q that is not an answered ask of that id", id)
		}
		a.Ask.C = askCore{State: AskState(a.State), Author: a.Author}
	}
	return nil
}

// TerminalOrder returns the order of id terminal at the cut, nil when none (or when
// its chunk does not read: Err says why).
func (b *Base) TerminalOrder(id string) *TerminalOrder {
	if b == nil {
		return nil
	}
	if s := b.things; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := s.chunkFor(id); s.mayHold(i, id) {
			s.ensure(i)
		}
	}
	return b.Orders[id]
}

// TerminalAsk returns the ask of id answered at the cut, nil when none.
func (b *Base) TerminalAsk(id string) *TerminalAsk {
	if b == nil {
		return nil
	}
	if s := b.things; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := s.chunkFor(id); s.mayHold(i, id) {
			s.ensure(i)
		}
	}
	return b.Asks[id]
}

// Terminals reads every thing chunk not read yet and returns the terminal things by
// id, or the first chunk that did not read or check.
func (b *Base) Terminals() (map[string]*TerminalOrder, map[string]*TerminalAsk, error) {
	if s := b.things; s != nil {
		s.mu.Lock()
		err := s.ensureAll()
		s.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
	}
	return b.Orders, b.Asks, nil
}

// terminalIDs returns the ids of the terminal things starting with prefix, reading
// only the chunks whose range may hold one.
func (b *Base) terminalIDs(prefix string) []string {
	if b == nil {
		return nil
	}
	pick := func(id string) bool { return strings.HasPrefix(id, prefix) }
	if s := b.things; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := max(s.chunkFor(prefix), 0); i < len(s.refs); i++ {
			if f := s.refs[i].First; f > prefix && !pick(f) {
				break
			}
			s.ensure(i)
		}
	}
	var out []string
	for id := range b.Orders {
		if pick(id) {
			out = append(out, id)
		}
	}
	for id := range b.Asks {
		if pick(id) {
			out = append(out, id)
		}
	}
	return out
}

// ChunksRead reports how many thing chunks this base has read so far, of how many.
func (b *Base) ChunksRead() (read, of int) {
	if b == nil || b.things == nil {
		return 0, 0
	}
	b.things.mu.Lock()
	defer b.things.mu.Unlock()
	return b.things.n, len(b.things.refs)
}

// Err returns the first chunk that did not read or check, nil when none has failed so
// far.
func (b *Base) Err() error {
	if b == nil {
		return nil
	}
	for _, s := range []*chunkStore{b.things, b.idem} {
		if s == nil {
			continue
		}
		s.mu.Lock()
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// Order returns the order of id: one folded here, or one terminal at the cut of the
// checkpoint the state was folded from (its chunk read on first use); nil when none.
// State.Orders holds only the first kind.
func (st *State) Order(id string) *Order {
	if o := st.Orders[id]; o != nil {
		return o
	}
	if t := st.base.TerminalOrder(id); t != nil {
		return t.Order
	}
	return nil
}

// Ask returns the ask of id, as Order does orders.
func (st *State) Ask(id string) *Ask {
	if a := st.Asks[id]; a != nil {
		return a
	}
	if t := st.base.TerminalAsk(id); t != nil {
		return t.Ask
	}
	return nil
}

// AllOrders returns every order by id, those terminal at the checkpoint's cut
// included (every thing chunk read): for listings of terminal state. Without a
// checkpoint it is State.Orders.
func (st *State) AllOrders() map[string]*Order {
	if st.base == nil {
		return st.Orders
	}
	orders, _, _ := st.base.Terminals() // a chunk that does not read: Base.Err, doctor
	out := make(map[string]*Order, len(st.Orders)+len(orders))
	for id, t := range orders {
		out[id] = t.Order
	}
	maps.Copy(out, st.Orders)
	return out
}

// AllAsks returns every ask by id, as AllOrders does orders.
func (st *State) AllAsks() map[string]*Ask {
	if st.base == nil {
		return st.Asks
	}
	_, asks, _ := st.base.Terminals()
	out := make(map[string]*Ask, len(st.Asks)+len(asks))
	for id, t := range asks {
		out[id] = t.Ask
	}
	maps.Copy(out, st.Asks)
	return out
}

// OrderCounts returns the number of orders in each state, those terminal at the
// checkpoint's cut counted from its core without reading their chunks.
func (st *State) OrderCounts() map[OrderState]int {
	out := map[OrderState]int{}
	for _, o := range st.Orders {
		out[o.State]++
	}
	if st.base != nil {
		for _, s := range []OrderState{StateAccepted, StateCancelled} {
			out[s] += st.base.Counts[string(s)]
		}
	}
	return out
}

// knownIDs returns the ids of live, the ids of one kind folded here, and of the terminal
// things of the checkpoint that q (an id or a prefix, with or without kind's prefix)
// may resolve to: the chunks that may hold such ids are read, no others.
func (st *State) knownIDs(live []string, kindPrefix, q string) []string {
	if st.base == nil {
		return live
	}
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" {
		return live
	}
	for _, id := range []string{q, kindPrefix + q} {
		if !ValidID(id) || !strings.HasPrefix(id, kindPrefix) {
			continue
		}
		// A whole id: ids have one length, so it is no other id's prefix, and one chunk
		// at most is read for it (none when it is folded here or its filter rules it out).
		if slices.Contains(live, id) || (st.base.TerminalOrder(id) == nil && st.base.TerminalAsk(id) == nil) {
			return live
		}
		out := append(slices.Clone(live), id)
		slices.Sort(out)
		return out
	}
	out := slices.Clone(live)
	for _, p := range []string{q, kindPrefix + q} {
		for _, id := range st.base.terminalIDs(p) {
			if strings.HasPrefix(id, kindPrefix) && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// StateRefs are the refs a head names a state's chunks by: Head.State, Head.Things
// and Head.Idem.
type StateRefs struct {
	Core, Things, Idem []ChunkRef
}

// StateChunks returns every chunk of b's encoding — its core's, cut by bytes, then its
// thing chunks and its idempotency chunks — with their refs.
func StateChunks(b *Base) ([][]byte, StateRefs, error) {
	var refs StateRefs
	enc, err := EncodeBase(b)
	if err != nil {
		return nil, refs, err
	}
	chunks, core := Chunks(enc)
	tc, things, err := EncodeThings(b)
	if err != nil {
		return nil, refs, err
	}
	ic, idem, err := EncodeIdem(b)
	if err != nil {
		return nil, refs, err
	}
	return slices.Concat(chunks, tc, ic), StateRefs{Core: core, Things: things, Idem: idem}, nil
}
