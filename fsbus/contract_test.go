package fsbus

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
)

// Order contracts (ADR 0003) — pointers, claim/submit re-verification, verify, schema.

func TestCheckPointerPath(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		"src/main.go":       "src/main.go",
		"./src//main.go":    "src/main.go",
		"docs/keyboard.md":  "docs/keyboard.md", // "key" inside a name is fine; only *.key is refused
		"a/b/c.txt":         "a/b/c.txt",
		"CONTRIBUTING.md":   "CONTRIBUTING.md",
		"console/README.md": "console/README.md",
	}
	for in, want := range ok {
		got, err := contract.CheckPointerPath(in)
		if err != nil || got != want {
			t.Errorf("CheckPointerPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	refused := map[string]string{
		"":                    "empty",
		"../outside.txt":      "'..'",
		"src/../../x":         "'..'",
		"/etc/passwd":         "absolute",
		`C:\x\y`:              "",
		"c:x":                 "':'",
		`src\main.go`:         "not portable",
		"CON":                 "reserved",
		"src/nul.txt":         "reserved",
		"lpt1":                "reserved",
		"COM3.log":            "reserved",
		"trailing.":           "dot or space",
		".env":                "sensitive",
		".env.local":          "sensitive",
		"certs/server.PEM":    "sensitive",
		"tls.key":             "sensitive",
		"home/id_rsa.pub":     "sensitive",
		"aws_credentials.txt": "sensitive",
		"my-secrets/a.txt":    "sensitive",
		".npmrc":              "sensitive",
		".git/config":         "sensitive",
		".":                   "workspace itself",
		"bell\a.txt":          "control",
	}
	for in, why := range refused {
		_, err := contract.CheckPointerPath(in)
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckPointerPath(%q) = %v; want invalid mentioning %q", in, err, why)
		}
	}
}

func TestHashContentNormalisesCRLF(t *testing.T) {
	t.Parallel()
	lf := strings.Repeat("line one\nline two\n", 5000) // crosses the 64 KiB chunk
	crlf := strings.ReplaceAll(lf, "\n", "\r\n")
	a, err := contract.HashContent(strings.NewReader(lf))
	if err != nil {
		t.Fatal(err)
	}
	b, err := contract.HashContent(strings.NewReader(crlf))
	if err != nil {
		t.Fatal(err)
	}
	if a.SHA != b.SHA || a.Size != b.Size || a.Size != int64(len(lf)) || a.Lines != 10000 || !a.Text {
		t.Fatalf("LF %+v, CRLF %+v", a, b)
	}
	// A lone CR is content, not a line ending; a trailing CR is kept.
	c, _ := contract.HashContent(strings.NewReader("a\rb\r"))
	d, _ := contract.HashContent(strings.NewReader("a\nb\n"))
	if c.SHA == d.SHA || c.Size != 4 || c.Lines != 1 {
		t.Fatalf("lone CR: %+v", c)
	}
	// Binary (a NUL in the first 8 KiB) is hashed as is.
	e, _ := contract.HashContent(strings.NewReader("\x00a\r\n"))
	f, _ := contract.HashContent(strings.NewReader("\x00a\n"))
	if e.Text || e.SHA == f.SHA || e.Size != 4 {
		t.Fatalf("binary: %+v", e)
	}
	empty, _ := contract.HashContent(strings.NewReader(""))
	if empty.Size != 0 || empty.Lines != 0 || !strings.HasPrefix(empty.SHA, "sha256:") {
		t.Fatalf("empty: %+v", empty)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFingerprintPointers(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "src/calc.go"), "package calc\n\nfunc Add(a, b int) int { return a + b }\n")
	writeFile(t, filepath.Join(ws, "bin.dat"), "\x00\x01\x02")
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"src/calc.go", "bin.dat"} {
		os.Chtimes(filepath.Join(ws, p), old, old)
	}
	ptrs, warn, err := contract.FingerprintPointers(ws, []string{"src/calc.go:3-3", "bin.dat"}, time.Now())
	if err != nil || len(warn) != 0 {
		t.Fatal(err, warn)
	}
	if p := ptrs[0]; p.Path != "src/calc.go" || p.FirstLine != 3 || p.LastLine != 3 || p.Size != 54 || len(p.SHA256) != 71 {
		t.Fatalf("pointer %+v", p)
	}
	if p := ptrs[1]; p.FirstLine != 0 || p.Size != 3 {
		t.Fatalf("binary pointer %+v", p)
	}
	whole, _, _ := contract.FingerprintPointers(ws, []string{"src/calc.go"}, time.Now())
	if whole[0].FirstLine != 1 || whole[0].LastLine != 3 {
		t.Fatalf("whole file %+v", whole[0])
	}
	// A file written just now warns about unsaved editor buffers.
	writeFile(t, filepath.Join(ws, "fresh.go"), "x\n")
	if _, warn, err := contract.FingerprintPointers(ws, []string{"fresh.go"}, time.Now()); err != nil || len(warn) != 1 || !strings.Contains(warn[0], "3 s") {
		t.Fatalf("fresh: %v %v", warn, err)
	}

	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "plain.txt"), "x\n")
	writeFile(t, filepath.Join(ws, ".env"), "TOKEN=1\n")
	symlinks := runtime.GOOS != "windows"
	if symlinks {
		os.Symlink(filepath.Join(outside, "plain.txt"), filepath.Join(ws, "escape.txt"))
		os.Symlink(".env", filepath.Join(ws, "innocent.txt"))
		os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
		writeFile(t, filepath.Join(ws, ".git/config"), "[remote]\n")
		os.Symlink(".git", filepath.Join(ws, "gitdir"))
	}
	bad := map[string]string{
		"src/calc.go:2-9":  "the file has 3",
		"src/calc.go:0-1":  "range",
		"bin.dat:1-1":      "binary",
		"nope.go":          "missing",
		"src":              "not a regular file",
		"../x":             "'..'",
		".env":             "sensitive",
		"src/calc.go,dup":  "", // replaced below
		"/abs/path":        "absolute",
		"src/../../x.go":   "'..'",
		"src/aux.c":        "reserved",
		"src/id_rsa":       "sensitive",
		"my.pem":           "sensitive",
		"src/calc.go:3-2":  "range",
		"src/calc.go:a-b":  "portable", // not a range: the whole spec is the path
		"certs/dev.key":    "sensitive",
		"credentials.json": "sensitive",
	}
	delete(bad, "src/calc.go,dup")
	if symlinks {
		bad["escape.txt"] = "outside the workspace"
		bad["innocent.txt"] = "sensitive"
		bad["gitdir/config"] = "sensitive"
	}
	for spec, why := range bad {
		_, _, err := contract.FingerprintPointers(ws, []string{spec}, time.Now())
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v; want invalid mentioning %q", spec, err, why)
		}
	}
	if _, _, err := contract.FingerprintPointers(ws, []string{"src/calc.go", "./src/calc.go"}, time.Now()); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: %v", err)
	}
	many := make([]string, contract.MaxPointers+1)
	for i := range many {
		many[i] = "src/calc.go"
	}
	if _, _, err := contract.FingerprintPointers(ws, many, time.Now()); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "limit") {
		t.Errorf("too many: %v", err)
	}
}

func TestParseUnifiedDiff(t *testing.T) {
	t.Parallel()
	good := "diff --git a/src/calc.go b/src/calc.go\n--- a/src/calc.go\n+++ b/src/calc.go\n@@ -1,3 +1,3 @@\n package calc\n-func Add() {}\n+func Add(a int) {}\n" +
		"--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
	files, err := contract.ParseUnifiedDiff([]byte(good))
	if err != nil || len(files) != 2 || files[0].Path != "src/calc.go" || files[1].Path != "gone.txt" {
		t.Fatalf("%+v %v", files, err)
	}
	if !contract.Covers(files, []fold.Pointer{{Path: "src/calc.go"}}) || contract.Covers(files, []fold.Pointer{{Path: "other.go"}}) {
		t.Fatal("coverage")
	}
	for name, d := range map[string]string{
		"empty":        "",
		"no hunk":      "--- a/x\n+++ b/x\n",
		"context only": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n same\n",
		"prose":        "this is not a diff\n",
	} {
		if _, err := contract.ParseUnifiedDiff([]byte(d)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestValidateOutput(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","required":["passed","issues"],"properties":{"passed":{"type":"boolean"},"issues":{"type":"array","items":{"type":"string"}}}}`)
	lines, err := contract.ValidateOutput(schema, json.RawMessage(`{"passed":true,"issues":[]}`))
	if err != nil || lines != nil {
		t.Fatalf("valid: %v %v", lines, err)
	}
	lines, err = contract.ValidateOutput(schema, json.RawMessage(`{"passed":"yes","issues":[1]}`))
	if err != nil || len(lines) != 2 {
		t.Fatalf("invalid: %q %v", lines, err)
	}
	joined := strings.Join(lines, "|")
	if !strings.Contains(joined, "/passed: ") || !strings.Contains(joined, "boolean") || !strings.Contains(joined, "/issues/0: ") {
		t.Fatalf("lines %q", lines)
	}
	for _, l := range lines {
		if strings.Contains(l, "\n") {
			t.Fatalf("multi-line error %q", l)
		}
	}
	// Messages quoting the result's own text carry no terminal escape.
	lines, _ = contract.ValidateOutput(json.RawMessage(`{"type":"string","pattern":"^a$"}`), json.RawMessage(`"\u001b[31mred"`))
	if len(lines) != 1 || strings.ContainsRune(lines[0], 0x1b) || contract.HasControl(lines[0], false) {
		t.Fatalf("escape in %q", lines)
	}
	lines, _ = contract.ValidateOutput(schema, json.RawMessage(`{}`))
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "/: ") || !strings.Contains(lines[0], "passed") {
		t.Fatalf("missing properties: %q", lines)
	}
	// A schema that does not compile, or reaches for another document, is invalid.
	for _, bad := range []string{`{"type":"nonsense"}`, `{"$ref":"https://example.com/s.json"}`, `{"$ref":"file:///etc/passwd"}`, `{"minimum":"x"}`} {
		c := fold.Contract{Schema: json.RawMessage(bad)}
		if err := contract.ValidateContract(&c); !errs.Is(err, errs.Invalid) {
			t.Errorf("schema %s: %v", bad, err)
		}
	}
	// The schema is an object (docs/format.md §11): true, false and arrays are refused.
	for bad, kind := range map[string]string{`true`: "a boolean", `false`: "a boolean", `[]`: "an array", `"x"`: "a string", `3`: "a number"} {
		c := fold.Contract{Schema: json.RawMessage(bad)}
		if err := contract.ValidateContract(&c); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "schema is "+kind+", not a JSON object") {
			t.Errorf("schema %s: %v", bad, err)
		}
	}
	c := fold.Contract{Schema: json.RawMessage(" {\n\"type\": \"object\"}\n")}
	if err := contract.ValidateContract(&c); err != nil || string(c.Schema) != `{"type":"object"}` {
		t.Fatalf("compacted %s %v", c.Schema, err)
	}
}

// contractWorld: alice dispatches from workspace wa, bob works in his own copy wb.
type contractWorld struct {
	*askWorld
	bob    *Session
	wa, wb string
}

func newContractWorld(t *testing.T) *contractWorld {
	t.Helper()
	w := &contractWorld{askWorld: newAskWorld(t), wa: t.TempDir(), wb: t.TempDir()}
	if _, err := Join(w.c, "bob", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.master.Grant(GrantOptions{Agent: "bob", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	var err error
	if w.bob, err = w.c.As("bob"); err != nil {
		t.Fatal(err)
	}
	w.alice.Workspace, w.bob.Workspace = w.wa, w.wb
	for _, ws := range []string{w.wa, w.wb} {
		writeFile(t, filepath.Join(ws, "src/calc.go"), "package calc\n\nfunc Eq(a, b any) bool { return a == b }\n")
		writeFile(t, filepath.Join(ws, "README.md"), "# calc\n")
	}
	return w
}

func (w *contractWorld) entries(t *testing.T) int {
	t.Helper()
	return len(w.load(t).Snapshot.Entries)
}

func TestClaimRefusesStalePointers(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Review calc", Pointers: []string{"src/calc.go:3-3", "README.md"}, Task: "code_review", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Pointers) != 2 || o.Pointers[0].FirstLine != 3 || o.Task != "code_review" || !o.ReadOnly {
		t.Fatalf("contract not folded: %+v", o.Contract)
	}
	// Bob's copy has a local edit: the claim is refused locally, nothing written.
	writeFile(t, filepath.Join(w.wb, "src/calc.go"), "package calc\n\nfunc Eq(a, b any) bool { return a != b }\n")
	n := w.entries(t)
	_, err = w.bob.Claim(o.ID, "")
	if !errs.Is(err, errs.Stale) || !strings.Contains(err.Error(), "src/calc.go (changed") || strings.Contains(err.Error(), "README.md") {
		t.Fatalf("claim on edited copy: %v", err)
	}
	if w.entries(t) != n {
		t.Fatal("a refused claim wrote an entry")
	}
	if st := w.load(t).State.Order(o.ID).State; st != fold.StateOpen {
		t.Fatalf("order is %s after a refused claim; want open", st)
	}
	// Missing file: stale too.
	os.Remove(filepath.Join(w.wb, "README.md"))
	if _, err := w.bob.Claim(o.ID, ""); !errs.Is(err, errs.Stale) || !strings.Contains(err.Error(), "README.md (missing") {
		t.Fatalf("claim with a missing file: %v", err)
	}
	// A CRLF copy of the same content verifies.
	writeFile(t, filepath.Join(w.wb, "src/calc.go"), "package calc\r\n\r\nfunc Eq(a, b any) bool { return a == b }\r\n")
	writeFile(t, filepath.Join(w.wb, "README.md"), "# calc\r\n")
	rep, err := w.bob.VerifyOrder(o.ID, w.bob.Workspace)
	if err != nil || !rep.OK {
		t.Fatalf("verify CRLF copy: %+v %v", rep, err)
	}
	if c, err := w.bob.Claim(o.ID, ""); err != nil || c.State != fold.StateClaimed {
		t.Fatalf("claim on a CRLF copy: %v", err)
	}
}

func TestSubmitReverifiesPointers(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Fix calc", Pointers: []string{"src/calc.go"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.bob.Claim(o.ID, ""); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.wb, "src/calc.go"), "edited mid-review\n")
	_, err = w.bob.Submit(o.ID, SubmitOptions{Reference: "abc123", Note: "done"})
	if !errs.Is(err, errs.RetryNeeded) || !strings.Contains(err.Error(), "src/calc.go") || !strings.Contains(err.Error(), "git") && !strings.Contains(err.Error(), "restore") {
		t.Fatalf("first stale submit: %v", err)
	}
	got := w.load(t).State.Order(o.ID)
	if got.State != fold.StateClaimed || got.Holder != "bob" || got.PointerFailures != 1 || len(got.Progress) != 1 {
		t.Fatalf("after first stale submit: %s holder %s failures %d progress %v", got.State, got.Holder, got.PointerFailures, got.Progress)
	}
	// Second mismatch: recorded as pointer_stale, the result kept.
	done, err := w.bob.Submit(o.ID, SubmitOptions{Reference: "abc123", Note: "done anyway", Output: json.RawMessage(`{"ok":true}`)})
	if err != nil || done.State != fold.StatePointerStale || done.Result == nil || done.Result.Reference != "abc123" || len(done.Warnings) != 1 {
		t.Fatalf("second stale submit: %+v %v", done, err)
	}
	raw, err := os.ReadFile(verify.ObjectPath(w.c.Root, "bob", done.Result.Result))
	if err != nil || !strings.Contains(string(raw), `"output":{"ok":true}`) {
		t.Fatalf("salvaged result object: %s %v", raw, err)
	}
	if _, err := w.bob.Claim(o.ID, ""); !errs.Is(err, errs.Conflict) {
		t.Fatalf("claim of a pointer_stale order: %v", err)
	}
}

func TestSubmitAfterRestoreSucceeds(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	o, _ := w.alice.NewOrder(NewOrderOptions{Title: "Fix calc", Pointers: []string{"src/calc.go"}})
	if _, err := w.bob.Claim(o.ID, ""); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(filepath.Join(w.wb, "src/calc.go"))
	writeFile(t, filepath.Join(w.wb, "src/calc.go"), "edited\n")
	if _, err := w.bob.Submit(o.ID, SubmitOptions{Reference: "abc"}); !errs.Is(err, errs.RetryNeeded) {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.wb, "src/calc.go"), string(orig))
	if got, err := w.bob.Submit(o.ID, SubmitOptions{Reference: "abc"}); err != nil || got.State != fold.StateSubmitted {
		t.Fatalf("submit after restoring: %v", err)
	}
}

func TestSchemaRetryLadder(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	schema := json.RawMessage(`{"type":"object","required":["passed"],"properties":{"passed":{"type":"boolean"}}}`)
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Check it", Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.bob.Claim(o.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.bob.Submit(o.ID, SubmitOptions{Reference: "abc"}); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "--result") {
		t.Fatalf("submit without a result: %v", err)
	}
	bad := SubmitOptions{Reference: "abc", Output: json.RawMessage(`{"passed":"yes"}`)}
	for i := 1; i <= 2; i++ {
		_, err := w.bob.Submit(o.ID, bad)
		if !errs.Is(err, errs.RetryNeeded) || !strings.Contains(err.Error(), "/passed: ") || !strings.Contains(err.Error(), "failure "+string(rune('0'+i))+" of 3") {
			t.Fatalf("failure %d: %v", i, err)
		}
		if i == 1 {
			// A release keeps the count (it is the contract's, not the claim's).
			if _, err := w.bob.Release(o.ID, NoteOptions{Note: "later"}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.bob.Claim(o.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := w.load(t).State.Order(o.ID); got.SchemaFailures != 2 || got.State != fold.StateClaimed {
		t.Fatalf("after two failures: %d %s", got.SchemaFailures, got.State)
	}
	done, err := w.bob.Submit(o.ID, bad)
	if err != nil || done.State != fold.StateValidationFailed || done.Result == nil {
		t.Fatalf("third failure: %+v %v", done, err)
	}
	// A valid result on a fresh order goes through.
	o2, _ := w.alice.NewOrder(NewOrderOptions{Title: "Check again", Schema: schema})
	w.bob.Claim(o2.ID, "")
	if got, err := w.bob.Submit(o2.ID, SubmitOptions{Reference: "abc", Output: json.RawMessage(`{"passed":true}`)}); err != nil || got.State != fold.StateSubmitted {
		t.Fatalf("valid result: %v", err)
	}
	if _, err := w.bob.Submit(o2.ID, SubmitOptions{Reference: "abc", Output: json.RawMessage(`{"passed":`)}); !errs.Is(err, errs.Invalid) {
		t.Fatalf("not JSON: %v", err)
	}
}

func TestDispatchRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	n := w.entries(t)
	for name, opt := range map[string]NewOrderOptions{
		"bad schema":   {Title: "x", Schema: json.RawMessage(`{"type":12}`)},
		"not json":     {Title: "x", Schema: json.RawMessage(`{`)},
		"schema true":  {Title: "x", Schema: json.RawMessage(`true`)},
		"schema false": {Title: "x", Schema: json.RawMessage(` false `)},
		"schema array": {Title: "x", Schema: json.RawMessage(`[{"type":"object"}]`)},
		"schema null":  {Title: "x", Schema: json.RawMessage(`null`)},
		"to master":    {Title: "x", To: fold.MasterWriter},
		"traversal":    {Title: "x", Pointers: []string{"../etc/passwd"}},
		"sensitive":    {Title: "x", Pointers: []string{".env"}},
		"missing":      {Title: "x", Pointers: []string{"nope.go"}},
		"bad window":   {Title: "x", Windows: &fold.Windows{ExecS: -1}},
		"lifetime":     {Title: "x", Windows: &fold.Windows{ExecS: 7200, LifetimeS: 3600}},
		"bad hints":    {Title: "x", Hints: &fold.Hints{Cores: -2}},
		"bad task":     {Title: "x", Task: "Code Review!"},
		"prose diff":   {Title: "x", Pointers: []string{"src/calc.go"}, Diff: "README.md"},
		"sens. diff":   {Title: "x", Diff: "secret.diff"},
		"big pointer":  {Title: "x", Pointers: make([]string, contract.MaxPointers+1)},
	} {
		if _, err := w.alice.NewOrder(opt); !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: %v; want invalid", name, err)
		}
	}
	if w.entries(t) != n {
		t.Fatal("a refused dispatch wrote an entry")
	}
	entries, _ := os.ReadDir(filepath.Join(w.c.Root, "orders"))
	if len(entries) != 0 {
		t.Fatalf("a refused dispatch wrote %d order objects", len(entries))
	}
}

func TestContractFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Train", Heavy: true, Hints: &fold.Hints{Cores: 8, RAMGB: 31.5, GPUMemGB: 24, ExpectedMinutes: 90},
		Windows: &fold.Windows{ExecS: 7200, LifetimeS: 86400, QueueS: 3600}, Task: "implementation"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(verify.ObjectPath(w.c.Root, "alice", o.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"heavy":true`, `"hints":{"cores":8,"expected_minutes":90,"gpu_mem_gb":24,"ram_gb":31.5}`, `"windows":{"exec_s":7200,"lifetime_s":86400,"queue_s":3600}`, `"task":"implementation"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("object lacks %s: %s", want, raw)
		}
	}
	got := w.load(t).State.Order(o.ID)
	if !got.Heavy || got.Hints.RAMGB != 31.5 || got.Windows.QueueS != 3600 {
		t.Fatalf("folded %+v", got.Contract)
	}
	// An order without a contract writes none of these members.
	plain, _ := w.alice.NewOrder(NewOrderOptions{Title: "Plain"})
	raw, _ = os.ReadFile(verify.ObjectPath(w.c.Root, "alice", plain.ID))
	for _, k := range []string{"pointers", "schema", "heavy", "hints", "windows", "task", "read_only", "diff"} {
		if strings.Contains(string(raw), `"`+k+`"`) {
			t.Errorf("plain order object has %s: %s", k, raw)
		}
	}
}

func TestMarkStale(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	o, _ := w.alice.NewOrder(NewOrderOptions{Title: "Review", Pointers: []string{"src/calc.go"}})
	if _, _, err := w.alice.MarkStale(o.ID, ""); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "still matches") {
		t.Fatalf("mark with nothing changed: %v", err)
	}
	writeFile(t, filepath.Join(w.wa, "src/calc.go"), "changed by the author\n")
	if _, _, err := w.bob.MarkStale(o.ID, ""); !errs.Is(err, errs.Denied) {
		t.Fatalf("mark by a non-author: %v", err)
	}
	// The author on another machine (another device) is refused.
	other := *w.alice
	ch, err := Open(w.alice.Home, w.alice.Root)
	if err != nil {
		t.Fatal(err)
	}
	ch.Device = "zzzzzzzz"
	other.Channel = ch
	if _, _, err := other.MarkStale(o.ID, ""); !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "device") {
		t.Fatalf("mark from another device: %v", err)
	}
	got, rep, err := w.alice.MarkStale(o.ID, "")
	if err != nil || got.State != fold.StatePointerStale || rep.OK || rep.Pointers[0].Status != contract.PointerChanged {
		t.Fatalf("mark: %+v %+v %v", got, rep, err)
	}
	if h := got.History[len(got.History)-1]; h.Type != fold.TypeOrderStale || !strings.Contains(h.Note, "src/calc.go changed") {
		t.Fatalf("history %+v", h)
	}
	// Again: nothing written.
	n := w.entries(t)
	if again, _, err := w.alice.MarkStale(o.ID, ""); err != nil || again.State != fold.StatePointerStale || w.entries(t) != n {
		t.Fatalf("second mark: %v", err)
	}
	if _, err := w.bob.Claim(o.ID, ""); !errs.Is(err, errs.Conflict) {
		t.Fatalf("claim of a stale order: %v", err)
	}
	if c, err := w.alice.Cancel(o.ID, NoteOptions{Note: "re-dispatched"}); err != nil || c.State != fold.StateCancelled {
		t.Fatalf("cancel a stale order: %v", err)
	}
	// A claimed order is not marked: the holder's submit re-verifies.
	writeFile(t, filepath.Join(w.wb, "src/calc.go"), "changed by the author\n")
	o2, _ := w.alice.NewOrder(NewOrderOptions{Title: "Review 2", Pointers: []string{"src/calc.go"}})
	if _, err := w.bob.Claim(o2.ID, ""); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.wa, "src/calc.go"), "changed again\n")
	if _, _, err := w.alice.MarkStale(o2.ID, ""); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "claimed by bob") {
		t.Fatalf("mark a claimed order: %v", err)
	}
}

func TestReadOnlyDiffFallback(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	diff := "--- a/src/calc.go\n+++ b/src/calc.go\n@@ -3 +3 @@\n-func Eq(a, b any) bool { return a == b }\n+func Eq(a, b any) bool { return a != b }\n"
	for _, ws := range []string{w.wa, w.wb} {
		writeFile(t, filepath.Join(ws, "review.diff"), diff)
	}
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Review the diff", Pointers: []string{"src/calc.go"}, Diff: "review.diff", ReadOnly: true, Task: "code_review"})
	if err != nil || o.Diff == nil || o.Diff.Path != "review.diff" || len(o.Pointers) != 1 {
		t.Fatalf("dispatch: %+v %v", o, err)
	}
	writeFile(t, filepath.Join(w.wb, "src/calc.go"), "package calc // applied the diff locally\n")
	got, err := w.bob.Claim(o.ID, "")
	if err != nil || got.State != fold.StateClaimed || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "review the diff review.diff") {
		t.Fatalf("claim on the diff: %+v %v", got, err)
	}
	// The diff itself changed: no fallback.
	o2, _ := w.alice.NewOrder(NewOrderOptions{Title: "Review again", Pointers: []string{"src/calc.go"}, Diff: "review.diff", ReadOnly: true})
	writeFile(t, filepath.Join(w.wb, "review.diff"), diff+"+extra\n")
	if _, err := w.bob.Claim(o2.ID, ""); !errs.Is(err, errs.Stale) || !strings.Contains(err.Error(), "review.diff") {
		t.Fatalf("claim with a changed diff: %v", err)
	}
	// Not read-only: no fallback either.
	writeFile(t, filepath.Join(w.wb, "review.diff"), diff)
	o3, _ := w.alice.NewOrder(NewOrderOptions{Title: "Implement", Pointers: []string{"src/calc.go"}, Diff: "review.diff"})
	if _, err := w.bob.Claim(o3.ID, ""); !errs.Is(err, errs.Stale) {
		t.Fatalf("claim of a writable order on the diff: %v", err)
	}
	// A read-only diff that does not cover every pointer warns the author.
	p, err := w.alice.NewOrder(NewOrderOptions{Title: "Partial", Pointers: []string{"src/calc.go", "README.md"}, Diff: "review.diff", ReadOnly: true})
	if err != nil || !strings.Contains(strings.Join(p.Warnings, "|"), "the diff does not cover README.md") {
		t.Fatalf("partial diff: %v %v", p.Warnings, err)
	}
}

func TestClaimRefusesForgedPointerPaths(t *testing.T) {
	t.Parallel()
	// A contract written by another binary may name any path: a claim reads nothing
	// outside the workspace.
	ws := t.TempDir()
	r := contract.CheckPointers(ws, "o-x", &fold.Contract{Pointers: []fold.Pointer{{Path: "../../etc/passwd", Size: 1, SHA256: "sha256:00"}, {Path: ".env", Size: 1}}})
	if r.OK || r.Pointers[0].Status != contract.PointerRefused || r.Pointers[1].Status != contract.PointerRefused {
		t.Fatalf("%+v", r)
	}
	if err := refusedPointers(r); !errs.Is(err, errs.Invalid) {
		t.Fatal(err)
	}
}

// gitForTest returns whether git can run. The stale messages name commits only in a
// git checkout, so this test needs git: it fails (never skips) when git is missing and
// CI=true (set by .ci/run) or FERRY_TEST_GIT=1.
func gitForTest(t *testing.T) bool {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("FERRY_TEST_GIT") == "1" {
			t.Fatalf("git is needed for this test: %v", err)
		}
		t.Log("git is not installed; the commit-naming checks did not run (CI runs them)")
		return false
	}
	return true
}

func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func TestStaleNamesCommitOrLocalEdits(t *testing.T) {
	if !gitForTest(t) {
		return
	}
	w := newContractWorld(t)
	runGit(t, w.wa, "init", "-q")
	runGit(t, w.wa, "add", ".")
	runGit(t, w.wa, "commit", "-qm", "one")
	head := contract.GitOutput(w.wa, "rev-parse", "HEAD")
	w.bob.Workspace = filepath.Join(w.wb, "clone")
	runGit(t, w.wb, "clone", "-q", w.wa, "clone")
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Review", Pointers: []string{"src/calc.go"}})
	if err != nil || o.Pointers[0].Commit != head {
		t.Fatalf("pointer commit %q, HEAD %q, %v", o.Pointers[0].Commit, head, err)
	}
	// Bob's checkout moved on: the refusal names both commits and `git checkout`.
	writeFile(t, filepath.Join(w.bob.Workspace, "src/calc.go"), "package calc // v2\n")
	runGit(t, w.bob.Workspace, "commit", "-qam", "two")
	_, err = w.bob.Claim(o.ID, "")
	if !errs.Is(err, errs.Stale) || !strings.Contains(err.Error(), "this checkout is at commit") || !strings.Contains(err.Error(), "git checkout "+head) {
		t.Fatalf("claim at another commit: %v", err)
	}
	// Back at the dispatched commit with a local edit: the refusal says so and names git stash.
	runGit(t, w.bob.Workspace, "checkout", "-q", head)
	writeFile(t, filepath.Join(w.bob.Workspace, "src/calc.go"), "local edit\n")
	_, err = w.bob.Claim(o.ID, "")
	if !errs.Is(err, errs.Stale) || !strings.Contains(err.Error(), "has local edits") || !strings.Contains(err.Error(), "git stash") {
		t.Fatalf("claim with local edits: %v", err)
	}
	runGit(t, w.bob.Workspace, "checkout", "-q", "--", "src/calc.go")
	if _, err := w.bob.Claim(o.ID, ""); err != nil {
		t.Fatalf("claim after restoring: %v", err)
	}
	// ResolveWorkspace("") finds the git top-level from a subdirectory.
	t.Chdir(filepath.Join(w.wa, "src"))
	if ws, err := contract.ResolveWorkspace(""); err != nil || !sameDir(ws, w.wa) {
		t.Fatalf("workspace from a subdirectory: %q %v", ws, err)
	}
}

func sameDir(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

func TestClaimChecksAgainAfterAPause(t *testing.T) {
	w := newContractWorld(t)
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Review", Pointers: []string{"src/calc.go"}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(w.wb, "src/calc.go")
	orig, _ := os.ReadFile(file)
	writeFile(t, file, "half-saved by an editor")
	waits := 0
	old := contract.SettleWait
	t.Cleanup(func() { contract.SettleWait = old })
	// The editor finishes its write during the pause: the second check passes.
	contract.SettleWait = func() { waits++; writeFile(t, file, string(orig)) }
	if _, err := w.bob.Claim(o.ID, ""); err != nil || waits != 1 {
		t.Fatalf("claim after a late save: %v (waits %d)", err, waits)
	}
	// A file still different after the pause: refused, after exactly one pause.
	o2, _ := w.alice.NewOrder(NewOrderOptions{Title: "Review 2", Pointers: []string{"src/calc.go"}})
	waits = 0
	contract.SettleWait = func() { waits++ }
	writeFile(t, file, "edited for good")
	if _, err := w.bob.Claim(o2.ID, ""); !errs.Is(err, errs.Stale) || waits != 1 {
		t.Fatalf("claim of a changed file: %v (waits %d)", err, waits)
	}
}
