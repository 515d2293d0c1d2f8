package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
)

func TestVerifyEditedEntry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(line []byte) []byte
		// problems of Verify and of Read, as kinds(…) renders them
		verify []string
		read   []string
	}{
		{"type changed", replace(`"type":"test.a"`, `"type":"test.b"`),
			[]string{"bad_signature@3", "broken_chain@4"}, []string{"broken_chain@4"}},
		{"data changed", replace(`{"n":2}`, `{"n":20}`),
			[]string{"bad_signature@3", "broken_chain@4"}, []string{"broken_chain@4"}},
		{"field added", replace(`{"data"`, `{"extra":true,"data"`),
			[]string{"bad_signature@3", "broken_chain@4"}, []string{"broken_chain@4"}},
		{"hlc changed", replace(`"hlc":"2026-11-29T18:30:00`, `"hlc":"2026-11-29T18:31:00`),
			[]string{"bad_signature@3", "broken_chain@4"}, []string{"broken_chain@4"}},
		{"signature removed", func(b []byte) []byte {
			var m map[string]any
			json.Unmarshal(b, &m)
			delete(m, "sig")
			out, _ := json.Marshal(m)
			return out
		}, []string{"bad_signature@3", "broken_chain@4"}, []string{"broken_chain@4"}},
		{"signature garbled", replace(`"sig":"ed25519:`, `"sig":"ed25519:AA`),
			[]string{"bad_signature@3", "broken_chain@4"}, []string{"broken_chain@4"}},
		{"seq changed", replace(`"seq":3`, `"seq":30`),
			// Verify sets seq 30 aside: seq 4 follows seq 2. Read keeps it: seq 4's prev
			// misses its tip, and seq 30 comes after a gap.
			[]string{"bad_signature@30", "broken_chain@4"}, []string{"broken_chain@4", "broken_chain@30"}},
		{"line cut short", func(b []byte) []byte { return b[:len(b)/2] },
			[]string{"malformed:3", "broken_chain@4"}, []string{"malformed:3", "broken_chain@4"}},
		// Verify content, not bytes (docs/design.md §2 rule 9): none of these is a change.
		{"reindented", func(b []byte) []byte {
			var v any
			json.Unmarshal(b, &v)
			out, _ := json.MarshalIndent(v, "", "")
			return bytes.ReplaceAll(out, []byte("\n"), []byte(" "))
		}, nil, nil},
		{"crlf and bom", func(b []byte) []byte { return append(append([]byte("\ufeff"), b...), '\r') }, nil, nil},
		{"escaped differently", replace(`"type":"test.a"`, `"type":"test\u002ea"`), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLedger(t)
			appendN(t, l, testWriter, testDevice, "a", 5)
			seg := SegmentPath(l.Root(), testWriter, testDevice)
			lines := segmentLines(t, readFile(t, seg))
			edited := tt.edit(bytes.Clone(lines[2]))
			if bytes.Equal(edited, lines[2]) {
				t.Fatalf("edit changed nothing in %s", lines[2])
			}
			lines[2] = edited
			writeFile(t, seg, append(bytes.Join(lines, []byte("\n")), '\n'))

			rep, err := l.Verify(keysFor(testKey))
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(rep.Problems); !equal(got, tt.verify) {
				t.Fatalf("Verify problems %v (%+v)\nwant %v", got, rep.Problems, tt.verify)
			}
			if rep.OK() != (len(tt.verify) == 0) {
				t.Fatalf("OK = %v with problems %v", rep.OK(), tt.verify)
			}
			s := mustRead(t, l)
			if got := kinds(s.Problems); !equal(got, tt.read) {
				t.Fatalf("Read problems %v (%+v)\nwant %v", got, s.Problems, tt.read)
			}
		})
	}
}

func replace(old, new string) func([]byte) []byte {
	return func(b []byte) []byte { return bytes.Replace(b, []byte(old), []byte(new), 1) }
}

func TestVerifyKeys(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	appendN(t, l, "writer-a", "dev", "a", 2)
	appendN(t, l, "writer-b", "dev", "b", 2)
	keys := func(e *Entry) (ed25519.PublicKey, bool) {
		switch e.Writer {
		case "writer-a":
			return testKey.Public(), true
		case "writer-b":
			return nil, false
		}
		t.Fatalf("asked for the key of %s", e.Writer)
		return nil, false
	}
	rep, err := l.Verify(keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(rep.Problems); !equal(got, []string{"unknown_key@1", "unknown_key@2"}) {
		t.Fatalf("problems %v", got)
	}
	if rep.Problems[0].Writer != "writer-b" || rep.Entries != 4 || rep.Segments != 2 || rep.OK() {
		t.Fatalf("report %+v", rep)
	}
	// Unknown keys are kept; a wrong key sets the records aside.
	s, err := l.ReadVerified(func(e *Entry) (ed25519.PublicKey, bool) {
		if e.Writer == "writer-b" {
			return otherKey.Public(), true
		}
		return testKey.Public(), true
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(s.Problems); !equal(got, []string{"bad_signature@1", "bad_signature@2"}) {
		t.Fatalf("problems %v", got)
	}
	for _, e := range s.Entries {
		if e.Writer == "writer-b" {
			t.Fatalf("entry %s of writer-b kept with a bad signature", e.Hash())
		}
	}
	if _, err := l.Verify(nil); err == nil {
		t.Fatal("Verify(nil) succeeded")
	}
}

// A forged record at an existing (writer, device, seq) with a lower hash wins the fork
// in Read, which checks no signatures, but never in ReadVerified.
func TestReadVerifiedForgedFork(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	es := appendN(t, l, testWriter, testDevice, "a", 4)
	var forged []byte
	for i := 0; forged == nil; i++ {
		if i > 256 {
			t.Fatal("no forged record with a lower hash")
		}
		f := es[1]
		f.raw, f.hash = nil, ""
		f.Data = json.RawMessage(`{"n":` + strings.Repeat("9", i+1) + `}`)
		if err := f.Sign(otherKey, testProject); err != nil {
			t.Fatal(err)
		}
		if f.Hash() < es[1].Hash() {
			forged, _ = f.Canonical()
		}
	}
	writeFile(t, SegmentPath(l.Root(), testWriter, "forged"), append(forged, '\n'))

	s := mustRead(t, l)
	if len(s.Forks) != 1 || len(s.Entries) != 2 {
		t.Fatalf("Read: %d forks, %d entries; want the forged record to win (1 fork, 2 entries)", len(s.Forks), len(s.Entries))
	}
	vs, err := l.ReadVerified(keysFor(testKey))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs.Forks) != 0 || !equal(hashes(vs.Entries), hashes(es)) {
		t.Fatalf("ReadVerified: forks %+v entries %v, want the signed chain", vs.Forks, hashes(vs.Entries))
	}
	if got := kinds(vs.Problems); !equal(got, []string{"bad_signature@2"}) || vs.Problems[0].Path != "ledger/"+testWriter+"/forged.jsonl" {
		t.Fatalf("problems %+v", vs.Problems)
	}
}
