package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// format1Build is ferry linked to read format 1 only (fsbus.maxFormat), as every build
// before format 2 was.
func format1Build() *build {
	return startBuild("ferry-format1", ".", "-ldflags=-X github.com/ferryhq/ferry/fsbus.maxFormat=1")
}

// treeBytes maps every file under dir to its bytes.
func treeBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A real format-1 ferry process refuses a channel the first compact moved to format 2:
// every command exits non-zero naming both formats, and nothing in the channel or in
// the machine's ferry home is read into or written. The same channel before the
// compact (format 1, with agent.support entries) it reads and writes.
func TestFormat1BuildRefusesFormat2Channel(t *testing.T) {
	old := format1Build()
	t.Parallel()
	work := t.TempDir()
	ch, home := filepath.Join(work, "ch"), filepath.Join(work, "home")
	ferry := func(exe string, args ...string) (string, string, error) {
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), "FERRY_HOME="+home, "FERRY_CHANNEL="+ch, "FERRY_AGENT=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	cur := ferryExe(t)
	for _, args := range [][]string{
		{"init", ch, "--project", "acme"},
		{"join", "--as", "alice"},
		{"grant", "alice"},
		{"--as", "alice", "order", "new", "Before the compact"},
	} {
		if _, stderr, err := ferry(cur, args...); err != nil {
			t.Fatalf("ferry %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
	}
	exe := old.wait(t)
	if out, stderr, err := ferry(exe, "version"); err != nil || !strings.Contains(out, "format 1") {
		t.Fatalf("the format-1 build's version: %q %v %s", out, err, stderr)
	}
	if _, stderr, err := ferry(exe, "--as", "alice", "order", "new", "Written by a format-1 build"); err != nil {
		t.Fatalf("the format-1 build on a format-1 channel: %v\n%s", err, stderr)
	}
	if out, stderr, err := ferry(cur, "compact", "--settle", "0s", "--force"); err != nil || !strings.Contains(out, "channel format 2") {
		t.Fatalf("ferry compact: %q %v\n%s", out, err, stderr)
	}
	before, homeBefore := treeBytes(t, ch), treeBytes(t, home)
	for _, args := range [][]string{
		{"order", "list"},
		{"status"},
		{"ledger", "verify"},
		{"--as", "alice", "order", "new", "After the compact"},
		{"--as", "alice", "catchup"},
		{"join", "--as", "bob"},
		{"compact", "--settle", "0s", "--force"},
	} {
		out, stderr, err := ferry(exe, args...)
		if err == nil {
			t.Errorf("ferry %s on format 2 succeeded: %s", strings.Join(args, " "), out)
			continue
		}
		if !strings.Contains(stderr, "channel format 2 is newer than this binary reads (format 1); nothing was read or written") {
			t.Errorf("ferry %s: stderr %q, want the formats named", strings.Join(args, " "), stderr)
		}
		if out != "" {
			t.Errorf("ferry %s printed %q", strings.Join(args, " "), out)
		}
	}
	for name, tree := range map[string][2]map[string]string{"channel": {before, treeBytes(t, ch)}, "home": {homeBefore, treeBytes(t, home)}} {
		if len(tree[0]) != len(tree[1]) {
			t.Errorf("the %s holds %d files, held %d", name, len(tree[1]), len(tree[0]))
		}
		for p, b := range tree[0] {
			if tree[1][p] != b {
				t.Errorf("the format-1 build changed %s", p)
			}
		}
	}
	// The current build reads it.
	if _, stderr, err := ferry(cur, "order", "list"); err != nil {
		t.Fatalf("the current build on format 2: %v\n%s", err, stderr)
	}
}
