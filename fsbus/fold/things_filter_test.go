package fold

import (
	"encoding/base64"
	"strings"
	"testing"
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
