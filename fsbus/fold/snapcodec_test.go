package fold

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ferryhq/ferry/ledger"
)

// TestStateCodecEntries: an entry read from a line comes back from its kept line
// (tag 1), one built in memory from its fields (tag 0), both equal to what was
// encoded; a kept line that no longer parses, a tag of neither kind and input cut
// short are errors, never a panic.
func TestStateCodecEntries(t *testing.T) {
	read, err := ledger.ParseCanonicalLine([]byte(`{"data":{"a":1},"device":"d1","hlc":"2026-11-29T09:00:00.000Z/0000","seq":1,"type":"msg.post","v":1,"writer":"w"}`))
	if err != nil {
		t.Fatal(err)
	}
	built := ledger.AttestedEntry("w", "d1", 7, "sha256:0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8")
	type box struct{ Es []ledger.Entry }
	in := box{[]ledger.Entry{read, built}}
	b, err := EncodeState(nil, &in)
	if err != nil {
		t.Fatal(err)
	}
	var out box
	if rest, err := DecodeState(b, &out); err != nil || len(rest) != 0 {
		t.Fatalf("decode: %v, %d bytes left", err, len(rest))
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded\n%+v\nencoded\n%+v", out, in)
	}
	if out.Es[0].Hash() != read.Hash() {
		t.Fatalf("hash %s, want %s", out.Es[0].Hash(), read.Hash())
	}
	// The slice's length, the tag and the line's length take a byte each: the line's
	// opening brace is b[3].
	if b[1] != 1 {
		t.Fatalf("the read entry is encoded with tag %d, not as its line", b[1])
	}
	broken := append([]byte(nil), b...)
	broken[3] = 'x'
	badTag := append([]byte(nil), b...)
	badTag[1] = 9
	for name, bad := range map[string][]byte{"broken line": broken, "bad tag": badTag, "cut short": b[:len(b)/2]} {
		var got box
		if _, err := DecodeState(bad, &got); !errors.Is(err, ErrStateCodec) {
			t.Errorf("%s: decode error %v, want ErrStateCodec", name, err)
		}
	}
}

// TestForCacheKeepsTheCore: ForCache's copy of a lazily loaded base keeps every
// exported field of the core as it is, and none of what the chunks gave this process
// (Orders, Asks, Idem): a field added to Base is kept unless named here.
func TestForCacheKeepsTheCore(t *testing.T) {
	fromChunks := map[string]bool{"Orders": true, "Asks": true, "Idem": true}
	b := &Base{things: &chunkStore{}, idem: &chunkStore{}}
	v := reflect.ValueOf(b).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Int:
			fv.SetInt(7)
		case reflect.String:
			fv.SetString("x")
		case reflect.Slice:
			fv.Set(reflect.MakeSlice(f.Type, 1, 1))
		case reflect.Map:
			m := reflect.MakeMap(f.Type)
			m.SetMapIndex(reflect.New(f.Type.Key()).Elem(), reflect.New(f.Type.Elem()).Elem())
			fv.Set(m)
		default:
			t.Fatalf("Base.%s is a %s: teach this test to fill it", f.Name, fv.Kind())
		}
	}
	st := &State{base: b}
	out, ok := st.ForCache()
	if !ok {
		t.Fatal("a lazily loaded base is not kept")
	}
	got := reflect.ValueOf(out.base).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		switch kept := !got.Field(i).IsZero(); {
		case fromChunks[f.Name] && kept:
			t.Errorf("Base.%s, which chunks fill, is kept", f.Name)
		case !fromChunks[f.Name] && !reflect.DeepEqual(got.Field(i).Interface(), v.Field(i).Interface()):
			t.Errorf("Base.%s is not kept: %v", f.Name, got.Field(i).Interface())
		}
	}
}
