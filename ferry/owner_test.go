package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// An empty --as is refused (invalid, nothing written): it would override FERRY_AGENT
// and act as the owner without naming master.
func TestEmptyAsRefused(t *testing.T) {
	t.Setenv("FERRY_HOME", filepath.Join(t.TempDir(), "home"))
	ch := filepath.Join(t.TempDir(), "ch")
	run := func(args ...string) (int, string) {
		var o, e bytes.Buffer
		code := runIO(args, strings.NewReader(""), &o, &e)
		return code, e.String()
	}
	for _, args := range [][]string{{"init", ch, "--project", "p"}, {"join", "--as", "alice"}} {
		if code, stderr := run(args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	t.Setenv("FERRY_AGENT", "alice")
	before := channelDigest(ch)
	code, stderr := run("grant", "alice", "--level", "member", "--as", "")
	if code != exitCodes["invalid"] || !strings.Contains(stderr, "--as needs a name") {
		t.Fatalf("grant under FERRY_AGENT=alice with --as '': exit %d\n%s", code, stderr)
	}
	if channelDigest(ch) != before {
		t.Fatal("the refused grant changed the channel")
	}
}
