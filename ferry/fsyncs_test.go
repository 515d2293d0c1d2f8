package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// TestFsyncsPerCommand pins the fsyncs one `ferry order new` and one `ferry order
// claim` make on a copy of the busy fixture whose caches are warm (docs/benchmarks.md
// "Start-up": each is paid on every such command, and the CPU figure allows for
// them). It counts through fsutil.Fsyncs, which sees every fsync ferry makes (TestStyle
// refuses one outside fsutil). It runs the commands in this process, so it is not
// parallel: no other test writes while it counts.
func TestFsyncsPerCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "fixtures", "busy"))); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FERRY_HOME", filepath.Join(dir, "home"))
	t.Setenv("FERRY_CHANNEL", filepath.Join(dir, "channel"))
	t.Setenv("FERRY_AGENT", "")
	count := func(args ...string) (int64, string) {
		t.Helper()
		var out, errb bytes.Buffer
		before := fsutil.Fsyncs()
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("ferry %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
		}
		return fsutil.Fsyncs() - before, out.String()
	}
	// The first command on this machine's copy builds its caches (index, fold
	// checkpoint); it is not what one command costs.
	count("order", "list", "--as", "cursor-laptop")
	newFsyncs, out := count("order", "new", "Check the fsync count", "--as", "claude-code-laptop", "--json")
	var o struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil || o.ID == "" {
		t.Fatalf("order new printed %q: %v", out, err)
	}
	claimFsyncs, _ := count("order", "claim", o.ID, "--as", "cursor-laptop")
	readFsyncs, _ := count("order", "list", "--as", "cursor-laptop")
	t.Logf("fsyncs: order new %d, order claim %d, order list %d", newFsyncs, claimFsyncs, readFsyncs)
	for _, c := range []struct {
		cmd       string
		got, want int64
	}{
		// The order object and its folder, the pending mark and its folder, the entry.
		{"order new", newFsyncs, 5},
		// The local index's header (it folds order new's entry in), the pending mark
		// and its folder, the entry.
		{"order claim", claimFsyncs, 4},
		// The local index's header: order claim's entry folded in.
		{"order list", readFsyncs, 1},
	} {
		if c.got != c.want {
			t.Errorf("%s made %d fsyncs, want %d (docs/benchmarks.md \"Start-up\" lists them)", c.cmd, c.got, c.want)
		}
	}
}
