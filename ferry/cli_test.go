package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
)

// runCLI runs the CLI in-process with its own FERRY_HOME.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("FERRY_HOME", filepath.Join(t.TempDir(), "home"))
	var o, e bytes.Buffer
	code = runIO(args, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

// TestArgsMustBeUTF8: bytes that are not UTF-8 are refused before parsing, never turned
// into U+FFFD silently (issue 3, fresh-user run).
func TestArgsMustBeUTF8(t *testing.T) {
	code, out, errs := runCLI(t, "talk", "send", "--to", "bob", "bad \xff\xfe bytes", "--as", "alice")
	if code != exitCodes["invalid"] || out != "" || !strings.Contains(errs, "ferry: error: invalid: argument") || !strings.Contains(errs, "ferry: hint:") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestReadArgBounded: @FILE reads at most 1 MiB; a larger file (or /dev/zero) is
// refused with invalid instead of exhausting memory.
func TestReadArgBounded(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.md")
	big := filepath.Join(dir, "big.md")
	if err := os.WriteFile(small, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), maxArgFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := readArg("@" + small); err != nil || s != "hello" {
		t.Fatalf("small file: %q, %v", s, err)
	}
	if _, err := readArg("@" + big); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Fatalf("big file: %v", err)
	}
	if _, err := readArg("@" + filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file accepted")
	}
	if s, err := readArg("plain text"); err != nil || s != "plain text" {
		t.Fatalf("plain: %q, %v", s, err)
	}
}

// TestParseErrorHintNamesRunnableCommand: a flag error on an aliased command points to
// `ferry decision list --help`, never to "decision list (ls)".
func TestParseErrorHintNamesRunnableCommand(t *testing.T) {
	code, _, errs := runCLI(t, "decision", "ls", "--no-such-flag")
	if code != exitCodes["invalid"] || !strings.Contains(errs, "ferry: hint: the form is `ferry decision list [flags]`; see `ferry decision list --help`") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// TestVersionFlag: `ferry --version` prints what `ferry version` prints and exits 0,
// even before a command (issue 9 finding s1); `ferry version` stays.
func TestVersionFlag(t *testing.T) {
	var want, werr bytes.Buffer
	if code := run([]string{"version"}, &want, &werr); code != 0 || !strings.HasPrefix(want.String(), "ferry ") {
		t.Fatalf("ferry version: %d %q %q", code, want.String(), werr.String())
	}
	for _, args := range [][]string{{"--version"}, {"--version", "order", "list"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || out.String() != want.String() || errb.Len() != 0 {
			t.Errorf("ferry %v: %d %q %q, want %q", args, code, out.String(), errb.String(), want.String())
		}
	}
}

// TestJSONErrors: with --json, every failure — one from a command, the parser's usage
// errors, the UTF-8 refusal, a refused secret-looking argument, an internal error — is
// one line of JSON on stderr, {"error":{"category","message","hint"}}, with the exit
// code of its category and nothing on stdout; without --json the same failure is the
// "ferry: error:" and "ferry: hint:" lines (docs/exit-codes.md).
func TestJSONErrors(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok := "ghp_" + strings.Repeat("aB3x9Q", 6)
	for _, tc := range []struct {
		name     string
		category errs.Category
		args     []string
	}{
		{"command", "not_found", []string{"--channel", filepath.Join(t.TempDir(), "missing"), "order", "list"}},
		{"unmapped project", "not_found", []string{"--project", "acme", "order", "list"}},
		{"unknown flag", "invalid", []string{"order", "list", "--no-such-flag"}},
		{"unknown command", "invalid", []string{"ordr", "list"}},
		{"not UTF-8", "invalid", []string{"talk", "send", "--to", "bob", "bad \xff bytes", "--as", "alice"}},
		{"secret-looking argument", "invalid", []string{"talk", "send", "--to", "-" + tok, "hi", "--as", "alice"}},
		{"internal", "internal", []string{"--channel", notDir, "order", "list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append([]string{"--json"}, tc.args...)...)
			if code != exitCodes[tc.category] || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, no stdout", code, out, errs, exitCodes[tc.category])
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasSuffix(errs, "\n") {
				t.Fatalf("stderr is not one line: %q", errs)
			}
			var got map[string]map[string]string
			if err := json.Unmarshal([]byte(errs), &got); err != nil {
				t.Fatalf("stderr is not JSON: %v: %q", err, errs)
			}
			e := got["error"]
			if len(got) != 1 || len(e) != 3 || e["category"] != string(tc.category) || e["message"] == "" || e["hint"] == "" {
				t.Fatalf("stderr %q; want {\"error\":{\"category\":%q,\"message\":…,\"hint\":…}}", errs, tc.category)
			}
			if strings.Contains(errs, tok[4:]) {
				t.Fatalf("stderr echoes the secret: %q", errs)
			}
			// Without --json: the text lines, the same code, the same message.
			code2, _, text := runCLI(t, tc.args...)
			if code2 != code || !strings.HasPrefix(text, "ferry: error: "+string(tc.category)+": ") || !strings.Contains(text, "\nferry: hint: ") {
				t.Fatalf("without --json: exit %d, stderr %q", code2, text)
			}
			if !strings.Contains(text, e["message"]) {
				t.Fatalf("JSON message %q is not the text one: %q", e["message"], text)
			}
		})
	}
}

// TestJSONFlag: the --json the parser will read, seen before it runs.
func TestJSONFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"order", "list"}, false},
		{[]string{"--json", "order", "list"}, true},
		{[]string{"order", "list", "--json"}, true},
		{[]string{"order", "list", "--json=true"}, true},
		{[]string{"order", "list", "--json=false"}, false},
		{[]string{"--json", "order", "list", "--json=0"}, false},
		{[]string{"talk", "send", "--to", "bob", "--", "--json"}, false},
	} {
		if got := jsonFlag(tc.args); got != tc.want {
			t.Errorf("jsonFlag(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
