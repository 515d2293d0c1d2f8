package fold

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/ledger"
)

// TestThingChunkFilter: every id a thing chunk holds passes its ref's filter, few ids
// it does not hold do, a lookup of an id the filters rule out reads no chunk, and a
// chunk whose filter rules out an id it holds is refused.
func TestThingChunkFilter(t *testing.T) {
	b := &Base{Orders: map[string]*TerminalOrder{}, Asks: map[string]*TerminalAsk{}, Idem: map[string]IdemRec{}}
	for i := range 2000 {
		id := NewID(PrefixOrder)
		b.Orders[id] = &TerminalOrder{Order: &Order{ID: id, State: StateCancelled, Title: strings.Repeat("x", i%300)}}
	}
	chunks, refs, err := EncodeThings(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) < 2 {
		t.Fatalf("%d chunks for 2,000 orders", len(refs))
	}
	byHash := map[string][]byte{}
	for i, c := range chunks {
		byHash[refs[i].Hash] = c
	}
	read := func(h string) ([]byte, error) { return byHash[h], nil }
	lazy := &Base{}
	lazy.withThings(refs, nil, read)
	for id := range b.Orders {
		s := lazy.things
		if i := s.chunkFor(id); !s.mayHold(i, id) {
			t.Fatalf("%s: its chunk's filter rules it out", id)
		}
	}
	passed := 0
	for range 10000 {
		id := NewID(PrefixOrder)
		if lazy.TerminalOrder(id) != nil {
			t.Fatalf("%s found", id)
		}
		if i := lazy.things.chunkFor(id); lazy.things.mayHold(i, id) {
			passed++
		}
	}
	if read, of := lazy.ChunksRead(); passed > 300 || read > passed {
		t.Fatalf("ids not held that pass the filters: %d of 10,000; chunks read %d of %d", passed, read, of)
	}
	// A filter that rules out an id its chunk holds.
	bad := append([]ChunkRef(nil), refs...)
	bad[0].Filter = base64.RawURLEncoding.EncodeToString(make([]byte, filterMinBytes))
	broken := &Base{}
	broken.withThings(bad, nil, read)
	if _, _, err := broken.Terminals(); err == nil || !strings.Contains(err.Error(), "filter") {
		t.Fatalf("a chunk its filter does not hold: %v", err)
	}
	if err := checkThingRefs([]ChunkRef{{First: "o-0000000000000", Hash: refs[0].Hash, Filter: "!"}}); err == nil {
		t.Fatal("a bad filter accepted")
	}
}

// TestIdempotencyChunks: keys packed into chunks read back whole and one by one; a
// chunk whose records are out of order, or a head naming a label that is no writer and
// key, is refused.
func TestIdempotencyChunks(t *testing.T) {
	b := &Base{Orders: map[string]*TerminalOrder{}, Asks: map[string]*TerminalAsk{}, Idem: map[string]IdemRec{}}
	for i := range 1500 {
		w := []string{"alice", "bob", "bob-2"}[i%3]
		k := NewID("k-")
		b.Idem[w+"\x00"+k] = IdemRec{Writer: w, Key: k, Args: "sha256:" + strings.Repeat("a", 64), Hash: "sha256:" + strings.Repeat("b", 64), Ref: NewID(PrefixOrder), HLC: "2026-11-29T09:00:00.000Z/0000"}
	}
	chunks, refs, err := EncodeIdem(b)
	if err != nil || len(refs) < 2 {
		t.Fatalf("%d chunks, %v", len(refs), err)
	}
	byHash := map[string][]byte{}
	for i, c := range chunks {
		byHash[refs[i].Hash] = c
	}
	read := func(h string) ([]byte, error) { return byHash[h], nil }
	lazy := &Base{}
	lazy.withThings(nil, refs, read)
	for k, want := range b.Idem {
		if got, ok, err := lazy.idemRec(k); err != nil || !ok || got != want {
			t.Fatalf("%q: %+v, %v", k, got, ok)
		}
	}
	if err := checkIdemRefs(refs); err != nil {
		t.Fatal(err)
	}
	if err := checkIdemRefs([]ChunkRef{{First: "nokey", Hash: refs[0].Hash}}); err == nil {
		t.Fatal("a label without a key accepted")
	}
	// Records out of order in a chunk (its hash made to match, as a signed head would).
	var j idemChunkJSON
	if err := json.Unmarshal(chunks[0], &j); err != nil {
		t.Fatal(err)
	}
	j.Idem[1], j.Idem[2] = j.Idem[2], j.Idem[1]
	bad, err := ledger.Canonical(j)
	if err != nil {
		t.Fatal(err)
	}
	badRefs := append([]ChunkRef(nil), refs...)
	badRefs[0].Hash = ledger.HashBytes(bad)
	byHash[badRefs[0].Hash] = bad
	broken := &Base{}
	broken.withThings(nil, badRefs, read)
	if _, err := broken.AllIdem(); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("records out of order: %v", err)
	}
}
