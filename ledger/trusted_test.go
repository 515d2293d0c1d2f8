package ledger

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// trustedFixtures are channels whose records TestTrustedEntryMatchesJSON decodes both
// ways. The big one (go run ./fixtures/gen -kind big -out fixtures/big, gitignored) is
// used when it has been generated.
var trustedFixtures = []struct {
	root     string
	optional bool
}{
	{"../fixtures/busy/channel", false},
	{"../fixtures/vectors/ferry/channel", false},
	{"../fixtures/big/channel", true},
}

// fixtureRecords returns the records a read of root finds, as the local index stores
// them (docs/format.md §18): canonical line and hash.
func fixtureRecords(t testing.TB, root string) []record {
	files, err := listSegments(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	for _, res := range readSegments(files) {
		if res.err != nil {
			t.Fatal(res.err)
		}
		out = append(out, res.records...)
	}
	return out
}

// TestTrustedEntryMatchesJSON: every record of the fixtures, rebuilt from
// its stored line by trustedEntry, equals the json.Unmarshal rebuild field by field
// (raw and hash included), with known as parseCanonical sets it; and every one of
// them takes the fast path (the fixtures are lines Append wrote).
func TestTrustedEntryMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, fx := range trustedFixtures {
		if _, err := os.Stat(fx.root); fx.optional && errors.Is(err, os.ErrNotExist) {
			t.Logf("%s not generated: not compared", fx.root)
			continue
		}
		recs := fixtureRecords(t, fx.root)
		if len(recs) < 10 {
			t.Fatalf("%s: %d records; the fixture is missing", fx.root, len(recs))
		}
		slow := 0
		for _, r := range recs {
			raw := r.e.raw
			if _, ok := parseTrusted(raw); !ok {
				slow++
				t.Errorf("%s line %d takes the json path: %s", r.path, r.line, raw)
			}
			got := checkTrusted(t, raw, r.e.Hash())
			if !got.known {
				t.Errorf("%s line %d not known: its signing message is rebuilt", r.path, r.line)
			}
			// The rebuild is also the entry the read found.
			want := r.e
			want.known, got.known = false, false
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s line %d:\ntrusted %+v\nread    %+v", r.path, r.line, got, want)
			}
		}
		t.Logf("%s: %d records compared, %d by json", fx.root, len(recs), slow)
	}
}

// TestTrustedEntryUnusual: lines outside the fast path's shape go to json.Unmarshal
// and come out the same, errors included; lines inside it take the fast path.
func TestTrustedEntryUnusual(t *testing.T) {
	t.Parallel()
	base := `{"data":{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"},"device":"d1","hlc":"2026-11-29T18:30:00.123Z/0003","idem":"k","prev":"sha256:00","ref":"o-1","seq":42,"sig":"ed25519:AA","type":"t.x","v":1,"writer":"w"}`
	edit := func(old, new string) string {
		out := strings.Replace(base, old, new, 1)
		if out == base {
			t.Fatalf("edit %s → %s changed nothing", old, new)
		}
		return out
	}
	// nested is base with n arrays nested in data.
	nested := func(n int) string {
		return edit(`[1,-2,true,false,null,{}]`, strings.Repeat("[", n)+strings.Repeat("]", n))
	}
	fast := []struct {
		line  string
		known bool // parseCanonical accepts it
	}{
		{base, true},
		{edit(`{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"}`, `{}`), true},
		{edit(`"data":{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"},`, ``), true}, // no data
		{edit(`"idem":"k","prev":"sha256:00","ref":"o-1",`, ``), true},                // no optional strings
		{edit(`"sig":"ed25519:AA",`, ``), true},
		{edit(`"seq":42`, `"seq":999999999999999`), true},
		{edit(`"v":1`, `"v":0`), false},                                             // v 0
		{edit(`"writer":"w"`, `"writer":""`), false},                                // empty writer
		{edit(`"ref":"o-1"`, `"ref":""`), false},                                    // empty optional: omitted in the canonical form
		{edit(`"hlc":"2026-11-29T18:30:00.123Z/0003"`, `"hlc":"yesterday"`), false}, // bad hlc
		{edit(`"b":"x\ny\u001fé"`, `"b":"\"\\\b\f\r\t\u0000`+"\x7f"+`"`), true},     // every short escape; DEL as is
		{nested(maxDataDepth - 1), true},
	}
	slow := []string{
		edit(`{"data"`, `{"a":1,"data"`),                       // unknown member
		edit(`,"writer":"w"`, `,"writer":"w","x":1`),           // unknown member last
		edit(`"v":1,`, ``),                                     // missing member
		edit(`"device":"d1",`, `"device":"d1","device":"d2",`), // duplicate
		edit(`"device":"d1","hlc"`, `"hlc":"2026-11-29T18:30:00.123Z/0003","device":"d1","hlc"`), // order
		edit(`"writer":"w"`, `"Writer":"w"`),                                                     // case-folded key
		edit(`"type":"t.x"`, `"type":"t\u002ex"`),                                                // escape in a member
		edit(`"type":"t.x"`, `"type":"tëx"`),                                                     // non-ASCII in a member
		edit(`"type":"t.x"`, "\"type\":\"t\x7fx\""),                                              // DEL in a member
		edit(`"type":"t.x"`, "\"type\":\"t\xffx\""),                                              // invalid UTF-8 in a member
		edit(`"seq":42`, `"seq":9007199254740993`),                                               // above 2^53
		edit(`"seq":42`, `"seq":99999999999999999999`),                                           // above 2^64
		edit(`"seq":42`, `"seq":42.0`),
		edit(`"seq":42`, `"seq":4e1`),
		edit(`"seq":42`, `"seq":-42`),
		edit(`"seq":42`, `"seq":042`),
		edit(`"seq":42`, `"seq":"42"`),
		edit(`"v":1`, `"v":-1`),
		edit(`"v":1`, `"v":1.5`),
		edit(`"device":"d1"`, `"device":null`),
		edit(`"device":"d1"`, `"device":7`),
		edit(`"data":{`, `"data":null,"x":{`),
		edit(`"data":{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"}`, `null`),
		edit(`"data":{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"}`, `[1]`),
		edit(`"data":{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"}`, `"s"`),
		edit(`"a":[1`, `"a":[1.0`),     // number not canonical
		edit(`"a":[1`, `"a":[1e2`),     // number not canonical
		edit(`"a":[1`, `"a":[-0`),      // number not canonical
		edit(`"a":[1`, `"a":[01`),      // not JSON
		edit(`"a":[1`, `"a":[1.5`),     // canonical, outside the subset
		edit(`"a":[1`, `"a":[ 1`),      // white space
		edit(`"a":[1`, `"a":[tru`),     // not JSON
		edit(`{"a":`, `{"b":0,"a":`),   // keys out of order
		edit(`{"a":`, `{"a":0,"a":`),   // duplicate key
		edit(`{"a":`, `{"é":0,"é":`),   // non-ASCII key
		edit(`"b":"x\ny`, `"b":"x\/y`), // escape RFC 8785 does not write
		edit(`"b":"x\ny`, `"b":"x\u000ay`),
		edit(`"b":"x\ny`, `"b":"x\u0041y`),
		edit(`"b":"x\ny`, `"b":"x\u001Fy`),
		edit(`"b":"x\ny`, `"b":"x\u007fy`),
		edit(`"b":"x\ny`, `"b":"x\ud83d\ude00y`),
		edit(`"b":"x\ny`, "\"b\":\"x\ty"),           // raw control character: not JSON
		edit(`"b":"x\ny`, "\"b\":\"x\xc3y"),         // invalid UTF-8
		edit(`"b":"x\ny`, "\"b\":\"x\xed\xa0\x80y"), // a surrogate in UTF-8
		edit(`"b":"x\ny`, `"b":"x\qy`),
		nested(maxDataDepth), // deeper than the fast path checks
		" " + base,
		base + " ",
		base + "\n",
		base[:len(base)-1],
		base + "}",
		`{}`, `{`, `}`, ``, `null`, `[]`, `{"data":}`, `{"data":{}}`,
	}
	for _, c := range fast {
		if _, ok := parseTrusted([]byte(c.line)); !ok {
			t.Errorf("json path for %s", c.line)
		}
		if e := checkTrusted(t, []byte(c.line), "sha256:x"); e.known != c.known {
			t.Errorf("known %v, want %v: %s", e.known, c.known, c.line)
		}
	}
	for _, s := range slow {
		if _, ok := parseTrusted([]byte(s)); ok {
			t.Errorf("fast path for %s", s)
		}
		checkTrusted(t, []byte(s), "sha256:x")
	}
}

// TestTrustedEntryNoAllocs: the fast path copies nothing — its strings and data are
// raw's bytes.
func TestTrustedEntryNoAllocs(t *testing.T) {
	recs := fixtureRecords(t, "../fixtures/busy/channel")
	raw := recs[len(recs)/2].e.raw
	var e Entry
	if n := testing.AllocsPerRun(100, func() { e, _ = trustedEntry(raw, "h") }); n != 0 {
		t.Fatalf("%v allocations per entry, want 0", n)
	}
	if e.Sig == "" || len(e.Data) == 0 {
		t.Fatalf("entry without sig or data: %s", raw)
	}
	if cap(e.Data) != len(e.Data) || cap(e.raw) != len(e.raw) {
		t.Fatalf("data or raw not clipped: an append would write into the line")
	}
}

// FuzzTrustedEntry: for any bytes as a stored line, trustedEntry gives what
// the json.Unmarshal rebuild gives — the same error, or the same entry field by field
// — with known only when parseCanonical accepts the line. Seeds: lines of
// fixtures/busy and fixtures/vectors, and parseSeeds' edge cases.
func FuzzTrustedEntry(f *testing.F) {
	for _, root := range []string{"../fixtures/busy/channel", "../fixtures/vectors/ferry/channel"} {
		recs := fixtureRecords(f, root)
		for _, i := range []int{0, 1, len(recs) / 2, len(recs) - 1} {
			f.Add(recs[i].e.raw)
		}
	}
	for _, s := range parseSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte(`{"data":{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"},"device":"d1","hlc":"2026-11-29T18:30:00.123Z/0003","seq":1,"type":"t","v":1,"writer":"w"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkTrusted(t, raw, "sha256:x")
	})
}

// FuzzTrustedData is FuzzTrustedEntry with the bytes placed where the fast
// path checks most: as data, and inside the type string, of an otherwise usual line.
func FuzzTrustedData(f *testing.F) {
	for _, d := range []string{
		`{}`, `{"a":1}`, `{"a":[1,-2,true,false,null,{}],"b":"x\ny\u001fé"}`, `{"a":{"b":{"c":[]}}}`,
		`{"a":1.5}`, `{"a":-0}`, `{"a":"\u00e9"}`, `{"b":1,"a":2}`, `{"a":1,"a":1}`, `{"\u0061":1}`,
		`{"a":"\ud83d\ude00"}`, "{\"a\":\"\xed\xa0\x80\"}", `null`, `[1]`, `{"a":9007199254740993}`,
	} {
		f.Add([]byte(d), []byte("t.x"))
	}
	f.Add([]byte(`{}`), []byte(`t\u002ex`))
	f.Add([]byte(`{}`), []byte("t\x7f"))
	f.Fuzz(func(t *testing.T, data, typ []byte) {
		line := `{"data":` + string(data) + `,"device":"d1","hlc":"2026-11-29T18:30:00.123Z/0003","seq":7,"type":"` + string(typ) + `","v":1,"writer":"w"}`
		checkTrusted(t, []byte(line), "sha256:x")
	})
}

// checkTrusted fails unless trustedEntry(raw, hash) agrees with unmarshalEntry: both
// fail with the same error, or give equal entries (raw and hash included) but for
// known, which is parseCanonical's verdict on the fast path and false otherwise; an
// entry marked known signs the same message as one that is not. It returns the entry.
func checkTrusted(t *testing.T, raw []byte, hash string) Entry {
	t.Helper()
	raw = bytes.Clone(raw) // the entries keep raw; the fuzzer reuses its buffer
	want, werr := unmarshalEntry(raw, hash)
	got, gerr := trustedEntry(raw, hash)
	_, fast := parseTrusted(raw)
	if werr != nil || gerr != nil {
		if werr == nil || gerr == nil || gerr.Error() != werr.Error() || fast {
			t.Fatalf("%q: trustedEntry error %v, json error %v (fast path %v)", raw, gerr, werr, fast)
		}
		return got
	}
	_, canonical := parseCanonical(raw)
	if got.known && !canonical || fast && got.known != canonical {
		t.Fatalf("%q: known %v, parseCanonical %v (fast path %v)", raw, got.known, canonical, fast)
	}
	if got.known {
		gm, gerr := got.SigningMessage("p")
		plain := got
		plain.known = false
		wm, werr := plain.SigningMessage("p")
		if gerr != nil || werr != nil || !bytes.Equal(gm, wm) {
			t.Fatalf("%q: signing message %q (%v), want %q (%v)", raw, gm, gerr, wm, werr)
		}
	}
	known := got.known
	got.known = false
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\ntrusted %+v\njson    %+v", raw, got, want)
	}
	got.known = known
	return got
}

// BenchmarkTrustedEntry rebuilds the records of fixtures/busy from their
// stored lines: fast is trustedEntry, json the json.Unmarshal rebuild it replaces.
// Per op: one record.
func BenchmarkTrustedEntry(b *testing.B) {
	recs := fixtureRecords(b, "../fixtures/busy/channel")
	var size int64
	for _, r := range recs {
		size += int64(len(r.e.raw))
	}
	for _, bc := range []struct {
		name string
		fn   func([]byte, string) (Entry, error)
	}{{"fast", trustedEntry}, {"json", unmarshalEntry}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size / int64(len(recs)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := &recs[i%len(recs)]
				if _, err := bc.fn(r.e.raw, r.e.hash); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestParseCanonicalLineMatchesParseLine: the fast parse of a state's lines gives
// ParseLine's entry, hash and error for canonical lines, lines in another key order or
// spacing, and malformed ones.
func TestParseCanonicalLineMatchesParseLine(t *testing.T) {
	lines := []string{
		`{"data":{"a":1},"device":"d1","hlc":"2026-11-29T09:00:00.000Z/0000","seq":1,"type":"msg.post","v":1,"writer":"w"}`,
		`{"writer":"w","v":1,"type":"msg.post","seq":1,"hlc":"2026-11-29T09:00:00.000Z/0000","device":"d1","data":{"a":1}}`,
		`{"device":"d1", "hlc":"2026-11-29T09:00:00.000Z/0000","seq":2,"type":"t","v":1,"writer":"w"}`,
		`{"device":"d1","hlc":"bad","seq":2,"type":"t","v":1,"writer":"w"}`,
		`{"device":"d1","hlc":"2026-11-29T09:00:00.000Z/0000","seq":0,"type":"t","v":1,"writer":"w"}`,
		`{"Device":"d1","device":"d1","hlc":"2026-11-29T09:00:00.000Z/0000","seq":2,"type":"t","v":1,"writer":"w"}`,
		`not json`,
	}
	for _, l := range lines {
		want, werr := ParseLine([]byte(l))
		got, gerr := ParseCanonicalLine([]byte(l))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: ParseLine error %v, ParseCanonicalLine error %v", l, werr, gerr)
		}
		if werr != nil {
			continue
		}
		if got.Hash() != want.Hash() || string(got.raw) != string(want.raw) || got.Writer != want.Writer || got.Seq != want.Seq || string(got.Data) != string(want.Data) {
			t.Fatalf("%s: got %+v (%s), want %+v (%s)", l, got, got.Hash(), want, want.Hash())
		}
	}
}

// TestKeptLineRoundTrip: every fixture record, and ParseLine's entry of lines in the
// usual shape, comes back from its kept line equal field by field, hash included; an
// entry built in memory, one changed since it was read, and one whose line has
// another shape are not kept as a line; a line that is not of that shape does not
// rebuild.
func TestKeptLineRoundTrip(t *testing.T) {
	t.Parallel()
	for _, r := range fixtureRecords(t, "../fixtures/busy/channel") {
		e := r.e
		line, hash, ok := e.KeptLine()
		if !ok {
			t.Fatalf("%s line %d is not kept as its line: %s", r.path, r.line, e.raw)
		}
		got, ok := FromKeptLine(line, hash)
		if !ok || !reflect.DeepEqual(got, e) {
			t.Fatalf("%s line %d:\nkept %+v\nread %+v", r.path, r.line, got, e)
		}
	}
	usual, err := ParseLine([]byte(`{"data":{"a":1},"device":"d1","hlc":"2026-11-29T09:00:00.000Z/0000","seq":1,"type":"msg.post","v":1,"writer":"w"}`))
	if err != nil {
		t.Fatal(err)
	}
	line, hash, ok := usual.KeptLine()
	if !ok {
		t.Fatal("a parsed line of the usual shape is not kept as its line")
	}
	if got, ok := FromKeptLine(line, hash); !ok || got.Hash() != usual.Hash() || string(got.Data) != string(usual.Data) || got.Writer != usual.Writer || got.Seq != usual.Seq || got.HLC != usual.HLC {
		t.Fatalf("kept %+v, parsed %+v", got, usual)
	}
	changed := usual
	changed.Data = []byte(`{"a":2}`)
	escaped, err := ParseLine([]byte(`{"device":"d1","hlc":"2026-11-29T09:00:00.000Z/0000","ref":"a\"b","seq":1,"type":"msg.post","v":1,"writer":"w"}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]Entry{
		"built in memory": {V: 1, Writer: "w", Device: "d1", Seq: 1, HLC: "2026-11-29T09:00:00.000Z/0000", Type: "msg.post"},
		"changed":         changed,
		"escaped string":  escaped,
	} {
		if line, _, ok := e.KeptLine(); ok {
			t.Errorf("%s: kept as the line %s", name, line)
		}
	}
	for _, l := range []string{``, `{}`, `not json`, `{"device":"d1","hlc":"2026-11-29T09:00:00.000Z/0000","seq":1,"type":"t","v":1,"writer":"w","zz":1}`} {
		if e, ok := FromKeptLine([]byte(l), "sha256:x"); ok {
			t.Errorf("FromKeptLine(%q) rebuilt %+v", l, e)
		}
	}
}
