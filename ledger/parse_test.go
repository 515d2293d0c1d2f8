package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// parseSeeds are lines the fast path must take or leave exactly as ParseLine would.
func parseSeeds(t testing.TB) [][]byte {
	l := newTestLedger(t)
	es := appendN(t, l, testWriter, testDevice, "a", 2)
	e, err := l.Append(testWriter, testDevice, Draft{Type: "x.y", Ref: "o-1", Idem: "k", Data: json.RawMessage(`{"é":"ü","b":[1.5e3,true,null]}`)}, testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	es = append(es, e)
	var seeds [][]byte
	for i := range es {
		c, _ := es[i].Canonical()
		seeds = append(seeds, c)
	}
	c := seeds[1]
	edit := func(old, new string) []byte {
		out := bytes.Replace(c, []byte(old), []byte(new), 1)
		if bytes.Equal(out, c) {
			t.Fatalf("seed edit %s → %s changed nothing in %s", old, new, c)
		}
		return out
	}
	seeds = append(seeds,
		edit(`{"data"`, `{"a":1,"data"`),                // unknown field
		edit(`{"n":1}`, `{"n":1.0}`),                    // data not canonical
		edit(`{"n":1}`, `null`),                         // null data
		edit(`"type":"test.a"`, `"type":"test\u002ea"`), // escape
		edit(`"type":"test.a"`, `"type":"tést"`),        // non-ASCII
		edit(`"seq":2`, `"seq":9007199254740993`),       // above 2^53
		edit(`"seq":2`, `"seq":2.0`),
		edit(`"v":1`, `"v":1,"V":2`),              // case-folded duplicate
		edit(`"writer"`, `"Writer"`),              // case-folded key
		edit(`,"seq"`, `,"ref":"","seq"`),         // empty optional
		edit(`"device"`, `"device":"x","device"`), // duplicate key
		append([]byte(" "), c...),
		append(c, ' '),
		[]byte(`{}`), []byte(``), []byte(`{`), []byte(`null`),
	)
	return seeds
}

func TestParseLineFastPath(t *testing.T) {
	t.Parallel()
	fast := 0
	for _, s := range parseSeeds(t) {
		checkParse(t, s)
		if _, ok := parseCanonical(s); ok {
			fast++
		}
	}
	if fast != 3 { // the three lines Append wrote
		t.Fatalf("fast path took %d lines, want 3", fast)
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range parseSeeds(f) {
		f.Add(s)
	}
	for _, s := range loadVerifySeeds(f) { // the committed corpus
		f.Add(s)
	}
	f.Fuzz(checkParse)
}

// checkParse fails unless parseLine and ParseLine agree on line.
func checkParse(t *testing.T, line []byte) {
	want, werr := ParseLine(line)
	got, gerr := parseLine(line)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: parseLine error %v, ParseLine error %v", line, gerr, werr)
	}
	if werr != nil {
		return
	}
	// The fast path's signing message (sig cut out of raw) is the canonical one.
	gm, gerr := got.SigningMessage("p")
	wm, werr := want.SigningMessage("p")
	if (gerr == nil) != (werr == nil) || !bytes.Equal(gm, wm) {
		t.Fatalf("%q: signing message %q (%v), want %q (%v)", line, gm, gerr, wm, werr)
	}
	got.known = false
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nparseLine %+v\nParseLine %+v", line, got, want)
	}
}

// FuzzRepair appends arbitrary bytes to a good segment and checks that Repair loses
// nothing (segment after + moved tail = segment before), keeps every good line, and
// leaves a segment that reads without a torn tail.
func FuzzRepair(f *testing.F) {
	for _, c := range tornCases {
		f.Add([]byte(c.tail))
	}
	f.Add([]byte("\n\n"))
	f.Add([]byte("x\n{}\n"))
	f.Fuzz(func(t *testing.T, junk []byte) {
		l := newTestLedger(t)
		writeChain(t, l, testWriter, testDevice, 2)
		seg := SegmentPath(l.Root(), testWriter, testDevice)
		good := readFile(t, seg)
		appendBytes(t, seg, junk)
		before := readFile(t, seg)

		moved, err := l.Repair(testWriter, testDevice)
		if err != nil {
			t.Fatal(err)
		}
		after := readFile(t, seg)
		var tail []byte
		if moved != "" {
			tail = readFile(t, moved)
		}
		if !bytes.Equal(append(bytes.Clone(after), tail...), before) {
			t.Fatalf("bytes lost: before %q, after %q + moved %q", before, after, tail)
		}
		if !bytes.HasPrefix(after, good) {
			t.Fatalf("good lines cut: %q", after)
		}
		s := mustRead(t, l)
		for _, p := range s.Problems {
			if p.Kind == KindTorn {
				t.Fatalf("torn after repair: %+v", p)
			}
		}
		if len(s.Entries) < 2 {
			t.Fatalf("%d entries after repair", len(s.Entries))
		}
	})
}

// A key that differs from a field name only in case would let encoding/json fill the
// field from it, so the meaning would depend on key order, which the signature ignores.
func TestParseLineRejectsCaseVariantKeys(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	e := appendN(t, l, "evil", "dev", "a", 1)[0]
	c, _ := e.Canonical()
	for _, line := range []string{
		strings.Replace(string(c), `{"data"`, `{"Writer":"victim","data"`, 1),
		strings.Replace(string(c), `"writer":"evil"}`, `"writer":"evil","Writer":"victim"}`, 1),
		strings.Replace(string(c), `"seq":1`, `"seq":1,"SEQ":2`, 1),
		strings.Replace(string(c), `"seq":1`, `"seq":1,"ſeq":2`, 1), // long s folds to s
	} {
		if line == string(c) {
			t.Fatal("edit changed nothing")
		}
		if p, err := ParseLine([]byte(line)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseLine(%s) = writer %q seq %d, %v; want ErrMalformed", line, p.Writer, p.Seq, err)
		}
	}
	// Other unknown keys stay allowed (forward compatibility).
	if _, err := ParseLine([]byte(strings.Replace(string(c), `{"data"`, `{"future":1,"data"`, 1))); err != nil {
		t.Fatal(err)
	}
}
