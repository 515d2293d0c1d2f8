package ledger

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// verifySeeds is the committed seed corpus of FuzzVerifyLine: one segment line per
// file, signed by testKey for testProject (regenerate with -update-seeds).
const verifySeeds = "../fixtures/fuzz/ledger/lines"

var updateSeeds = flag.Bool("update-seeds", false, "rewrite fixtures/fuzz/ledger/lines from lines this test appends")

// writeVerifySeeds writes lines a real ledger appends (signed, chained, with unusual
// data) and edited copies of them into verifySeeds.
func writeVerifySeeds(t testing.TB) {
	seeds := parseSeeds(t)
	if err := os.MkdirAll(verifySeeds, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range seeds {
		if err := os.WriteFile(filepath.Join(verifySeeds, fmt.Sprintf("%02d.jsonl", i+1)), s, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadVerifySeeds reads the committed seeds.
func loadVerifySeeds(t testing.TB) [][]byte {
	files, err := filepath.Glob(filepath.Join(verifySeeds, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no seeds in %s (%v): go test ./ledger -run TestVerifySeeds -update-seeds", verifySeeds, err)
	}
	var out [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestVerifySeeds: the committed seeds include lines that verify (so the fuzzer starts
// from signed entries), and every seed passes checkVerifyLine.
func TestVerifySeeds(t *testing.T) {
	t.Parallel()
	if *updateSeeds {
		writeVerifySeeds(t)
	}
	verified := 0
	for _, s := range loadVerifySeeds(t) {
		if e, err := ParseLine(s); err == nil && e.VerifySig(testKey.Public(), testProject) == nil {
			verified++
		}
		checkVerifyLine(t, s)
	}
	if verified < 3 {
		t.Fatalf("%d seeds verify against testKey; want the 3 appended lines at least", verified)
	}
}

// FuzzVerifyLine: for any bytes as a segment line, parsing, canonicalising and
// verifying never panic; the canonical form is idempotent (canonicalising it again, or
// parsing it and writing it back, gives the same bytes); and a line that verifies
// still verifies, with the same entry hash, after re-indentation, CRLF and a BOM
// (docs/design.md §2 rule 9), while it fails under another project id (a replay) and another
// key. Seeds: fixtures/fuzz/ledger/lines.
func FuzzVerifyLine(f *testing.F) {
	for _, s := range loadVerifySeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkVerifyLine)
}

func checkVerifyLine(t *testing.T, line []byte) {
	if c, err := CanonicalJSON(line); err == nil {
		again, err := CanonicalJSON(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("canonical form not idempotent: %q → %q → %q (%v)", line, c, again, err)
		}
	}
	e, err := ParseLine(line)
	if err != nil {
		return
	}
	c, err := e.Canonical()
	if err != nil {
		return // parsed but not I-JSON: never written by Append
	}
	back, err := ParseLine(c)
	if err != nil {
		t.Fatalf("canonical form of a parsed line does not parse: %q: %v", c, err)
	}
	c2, err := back.Canonical()
	if err != nil || !bytes.Equal(c, c2) || back.Hash() != e.Hash() {
		t.Fatalf("canonical form not stable through parse: %q → %q (%v)", c, c2, err)
	}
	if e.VerifySig(testKey.Public(), testProject) != nil {
		_ = e.VerifySig(otherKey.Public(), testProject) // must not panic either
		return
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, line, "", "  "); err != nil {
		t.Fatalf("a parsed line does not indent: %v", err)
	}
	for name, variant := range map[string][]byte{
		"re-indented": ind.Bytes(),
		"crlf":        append(bytes.Clone(bytes.TrimRight(line, "\r\n")), '\r', '\n'),
		"bom":         append([]byte("\xef\xbb\xbf"), line...),
		"canonical":   c,
	} {
		v, err := ParseLine(variant)
		if err != nil {
			t.Fatalf("%s copy of a verified line does not parse: %q: %v", name, variant, err)
		}
		if err := v.VerifySig(testKey.Public(), testProject); err != nil || v.Hash() != e.Hash() {
			t.Fatalf("%s copy of a verified line: verify %v, hash %s want %s", name, err, v.Hash(), e.Hash())
		}
	}
	if e.VerifySig(testKey.Public(), testProject+"-other") == nil {
		t.Fatal("a line verifies under another project id: replays across channels would count")
	}
	if e.VerifySig(otherKey.Public(), testProject) == nil {
		t.Fatal("a line verifies under another key")
	}
}
