package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
