package ijson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// badInputs is the table of texts that break RFC 7493, with where Check must say they
// do. The MCP server's and the CLI's tests use the same cases.
var badInputs = []struct {
	name string
	in   string
	want Error
}{
	{"duplicate top level", `{"a":1,"a":2}`, Error{Kind: DuplicateName, Offset: 7, Name: "a"}},
	{"duplicate nested", `{"x":{"a":1,"a":2}}`, Error{Kind: DuplicateName, Offset: 12, Path: "/x", Name: "a"}},
	{"duplicate in an array", `{"x":[{"a":1},{"b":{"c":1,"c":2}}]}`, Error{Kind: DuplicateName, Offset: 26, Path: "/x/1/b", Name: "c"}},
	{"duplicate spelled with an escape", `{"\u0061":1,"a":2}`, Error{Kind: DuplicateName, Offset: 12, Name: "a"}},
	{"duplicate id", `{"id":1,"id":2}`, Error{Kind: DuplicateName, Offset: 8, Name: "id"}},
	{"duplicate name with a slash", `{"x":{"a/b":1,"a/b":2}}`, Error{Kind: DuplicateName, Offset: 14, Path: "/x", Name: "a/b"}},
	{"invalid UTF-8 in a value", "{\"a\":\"ok\xff\"}", Error{Kind: InvalidUTF8, Offset: 8}},
	{"invalid UTF-8 in a name", "{\"a\xc3\":1}", Error{Kind: InvalidUTF8, Offset: 3}},
	{"invalid UTF-8 outside a string", "{\"a\":1}\xff", Error{Kind: InvalidUTF8, Offset: 7}},
	{"overlong UTF-8", "\"\xc0\xaf\"", Error{Kind: InvalidUTF8, Offset: 1}},
	{"UTF-8 of a surrogate", "\"\xed\xa0\x80\"", Error{Kind: InvalidUTF8, Offset: 1}},
	{"lone high surrogate", `{"a":"xx\ud800"}`, Error{Kind: LoneSurrogate, Offset: 8, Escape: `\ud800`}},
	{"high surrogate then a letter", `{"a":"\uD800\u0041"}`, Error{Kind: LoneSurrogate, Offset: 6, Escape: `\uD800`}},
	{"two high surrogates", `["\ud800\ud800"]`, Error{Kind: LoneSurrogate, Offset: 2, Escape: `\ud800`}},
	{"lone low surrogate", `{"a":"\udc00"}`, Error{Kind: LoneSurrogate, Offset: 6, Escape: `\udc00`}},
	{"lone surrogate in a name", `{"\udfff":1}`, Error{Kind: LoneSurrogate, Offset: 2, Escape: `\udfff`}},
	// Encoding wins over a duplicate that stands before it: the text cannot be read.
	{"duplicate then invalid UTF-8", "{\"a\":1,\"a\":\"\xff\"}", Error{Kind: InvalidUTF8, Offset: 12}},
	{"not JSON", `{"a":`, Error{Kind: Syntax, Offset: 5}},
	{"two values", `{} {}`, Error{Kind: Syntax, Offset: 3}},
	{"empty", ``, Error{Kind: Syntax}},
}

// goodInputs are I-JSON, some of them close to a bad case.
var goodInputs = []string{
	`{}`, ` {"a":1} `, `[1,"x",null,true]`, `{"a":{"a":{"a":1}}}`, `[{"a":1},{"a":2}]`,
	`{"a":"\ud83d\ude00"}`, `"\\ud800"`, `{"A":1,"a":2}`, "{\"é\":1,\"e\u0301\":2}",
	`{"a":1,"b":{"a":2}}`, "\"\xf0\x9f\x98\x80\"", `{"id":1,"params":{"id":2}}`,
}

func TestCheckBadInputs(t *testing.T) {
	for _, tc := range badInputs {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(%q) = %v, want an *Error", tc.in, err)
			}
			got := *e
			got.Err = nil
			if got != tc.want {
				t.Fatalf("Check(%q) = %+v (%v), want %+v", tc.in, got, e, tc.want)
			}
			if e.Encoding() == (tc.want.Kind == DuplicateName) {
				t.Fatalf("Encoding() = %v for %v", e.Encoding(), tc.want.Kind)
			}
		})
	}
}

func TestCheckGoodInputs(t *testing.T) {
	for _, in := range goodInputs {
		if err := Check([]byte(in)); err != nil {
			t.Errorf("Check(%q) = %v", in, err)
		}
	}
}

// TestErrorText: each reason says what it is and where, as the CLI prints it.
func TestErrorText(t *testing.T) {
	for in, want := range map[string]string{
		`{"x":{"a":1,"a":2}}`: `duplicate member name "a" in the object at "/x" (byte offset 12)`,
		`{"id":1,"id":2}`:     `duplicate member name "id" at the top level (byte offset 8)`,
		"{\"a\":\"ok\xff\"}":  `invalid UTF-8 at byte offset 8`,
		`["\ud800"]`:          `lone surrogate \ud800 at byte offset 2 (a high surrogate with no low surrogate after it)`,
		`["\udc00"]`:          `lone surrogate \udc00 at byte offset 2 (a low surrogate with no high surrogate before it)`,
		`{"\u001b[31m` + strings.Repeat("x", 50) + `":1,"\u001b[31m` + strings.Repeat("x", 50) + `":2}`: `duplicate member name "\x1b[31m` + strings.Repeat("x", 35) + `…" at the top level (byte offset 66)`,
	} {
		if got := Check([]byte(in)).Error(); got != want {
			t.Errorf("Check(%q):\n got %s\nwant %s", in, got, want)
		}
	}
}

// FuzzCheck compares Check with a reference built from encoding/json and a scan of the
// raw escapes: both must agree whether a text is I-JSON, whether its fault is of the
// encoding or a duplicate name, and which name in which object is the first duplicate.
func FuzzCheck(f *testing.F) {
	for _, tc := range badInputs {
		f.Add([]byte(tc.in))
	}
	for _, in := range goodInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b)
		kind, path, name := reference(b)
		var e *Error
		switch {
		case err == nil:
			if kind != 0 {
				t.Fatalf("Check(%q) = nil; the reference finds %v", b, kind)
			}
		case !errors.As(err, &e):
			t.Fatalf("Check(%q) = %T %v", b, err, err)
		case e.Encoding():
			if kind != Syntax {
				t.Fatalf("Check(%q) = %v; the reference finds %v", b, e, kind)
			}
		default:
			if kind != DuplicateName || e.Path != path || e.Name != name {
				t.Fatalf("Check(%q) = %v (path %q, name %q); the reference finds %v (path %q, name %q)", b, e, e.Path, e.Name, kind, path, name)
			}
		}
	})
}

// reference says whether b breaks I-JSON without the parser Check uses: Syntax for a
// text that is not JSON, not UTF-8 or has a lone surrogate escape; DuplicateName with
// the JSON Pointer of the object and the name for the first repeated name; 0 for none.
func reference(b []byte) (Kind, string, string) {
	if !json.Valid(b) || !utf8.Valid(b) || refLoneSurrogate(b) {
		return Syntax, "", ""
	}
	type frame struct {
		names  map[string]bool // nil in an array
		index  int             // next element's index, in an array
		ptr    string          // this object's or array's pointer
		expect bool            // in an object: the next token is a name
	}
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	var stack []*frame
	child := func() string { // pointer of the value about to start
		if len(stack) == 0 {
			return ""
		}
		return stack[len(stack)-1].ptr + "/" + strconv.Itoa(stack[len(stack)-1].index)
	}
	var key string
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return 0, "", ""
		}
		if err != nil {
			return Syntax, "", ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.names != nil && top.expect {
			if s, ok := tok.(string); ok {
				if top.names[s] {
					return DuplicateName, top.ptr, s
				}
				top.names[s], top.expect, key = true, false, s
				continue
			}
		}
		// A value starts or a container ends.
		ptr := child()
		if top != nil && top.names != nil {
			ptr = top.ptr + "/" + esc.Replace(key)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{names: map[string]bool{}, ptr: ptr, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{ptr: ptr})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 { // a value of the enclosing container ended
			up := stack[len(stack)-1]
			up.index++
			up.expect = true
		}
	}
}

// refLoneSurrogate reports whether the valid JSON text b has a \u escape of a
// surrogate half that is not in a pair (outside strings a valid text has no '\').
func refLoneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++
			continue
		}
		r, _ := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		if utf16.IsSurrogate(rune(r)) {
			if r >= 0xdc00 || i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return true
			}
			r2, _ := strconv.ParseUint(string(b[i+8:i+12]), 16, 32)
			if r2 < 0xdc00 || r2 > 0xdfff {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}

// BenchmarkCheck measures the check on a tools/call line of about 1 KiB, which every
// MCP message pays once before it is decoded.
func BenchmarkCheck(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"ferry_talk","arguments":{"action":"post","to":"master","text":"` +
		strings.Repeat("a line of text é ", 56) + `"}}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := Check(line); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCheckFolded(t *testing.T) {
	for _, tc := range []struct {
		in          string
		bad         bool
		name, other string
		path        string
	}{
		{`{"method":"ping","METHOD":"tools/call"}`, true, "METHOD", "method", ""},
		{`{"params":{"arguments":{"action":"list","Action":"post"}}}`, true, "Action", "action", "/params/arguments"},
		{`{"a":{"x":1},"b":{"X":2}}`, false, "", "", ""}, // other objects
		{`[{"k":1},{"K":2}]`, false, "", "", ""},
		{`{"ſ":1,"S":2}`, true, "S", "ſ", ""}, // U+017F folds to s: encoding/json's fold too
		{`{"id":1,"name":"Name"}`, false, "", "", ""},
		{`{"K":1, "k" :2}`, true, "k", "K", ""},
	} {
		err := CheckFolded([]byte(tc.in))
		var e *Error
		if !tc.bad {
			if err != nil {
				t.Errorf("CheckFolded(%s) = %v, want nil", tc.in, err)
			}
			continue
		}
		if !errors.As(err, &e) || e.Kind != FoldedName || e.Name != tc.name || e.Other != tc.other || e.Path != tc.path || e.Encoding() {
			t.Errorf("CheckFolded(%s) = %#v, want FoldedName %q after %q at %q", tc.in, err, tc.name, tc.other, tc.path)
			continue
		}
		if got := tc.in[e.Offset:]; !strings.HasPrefix(got, `"`+tc.name+`"`) {
			t.Errorf("CheckFolded(%s): offset %d points at %q, want the second name", tc.in, e.Offset, got)
		}
	}
	// What CheckFolded refuses is what encoding/json reads as one field.
	var v struct{ Method string }
	if json.Unmarshal([]byte(`{"method":"ping","METHOD":"tools/call"}`), &v); v.Method != "tools/call" {
		t.Fatalf("encoding/json read %q: the hole this closes is gone, revisit", v.Method)
	}
}
