package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
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
	newClaim := func() (newFsyncs, claimFsyncs int64) {
		t.Helper()
		n, out := count("order", "new", "Check the fsync count", "--as", "claude-code-laptop", "--json")
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(out), &o); err != nil || o.ID == "" {
			t.Fatalf("order new printed %q: %v", out, err)
		}
		c, _ := count("order", "claim", o.ID, "--as", "cursor-laptop")
		count("order", "submit", o.ID, "--ref", "fix@1", "--as", "cursor-laptop")
		return n, c
	}
	// Each agent's first write on this machine creates its pending mark (a new file:
	// the file and its folder); later writes overwrite it in place.
	firstNew, firstClaim := newClaim()
	newFsyncs, claimFsyncs := newClaim()
	readFsyncs, _ := count("order", "list", "--as", "cursor-laptop")
	t.Logf("fsyncs: first order new %d, first order claim %d; order new %d, order claim %d, order list %d", firstNew, firstClaim, newFsyncs, claimFsyncs, readFsyncs)
	for _, c := range []struct {
		cmd       string
		got, want int64
	}{
		// The order object and its folder, the pending mark made (the file and its
		// folder), the entry.
		{"an agent's first order new", firstNew, 5},
		// The local index's frame (order new's entry folded in), the pending mark
		// made, the entry; and, as the fixture's segments are format 1's, the fold
		// checkpoint (the file and its folder): order new wrote its segment's
		// agent.support, a roster entry, so this Load folded whole.
		{"an agent's first order claim", firstClaim, 6},
		// The local index's frame (order submit's entry folded in), the order object
		// and its folder, the pending mark, the entry.
		{"order new", newFsyncs, 5},
		// The local index's frame, the pending mark, the entry.
		{"order claim", claimFsyncs, 3},
		// The local index's frame: order submit's entry folded in.
		{"order list", readFsyncs, 1},
	} {
		if c.got != c.want {
			t.Errorf("%s made %d fsyncs, want %d (docs/benchmarks.md \"Start-up\" lists them)", c.cmd, c.got, c.want)
		}
	}
}

// TestReadWithNothingNewWritesNothing: once a machine's caches hold a channel, a read
// command in a new process that finds nothing new writes nothing — no index frame, no
// fold checkpoint, no arrival — so it makes no fsync (the roster entries a fold
// checkpoint restores are checked again but not saved again).
func TestReadWithNothingNewWritesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "fixtures", "busy"))); err != nil {
		t.Fatal(err)
	}
	bin := ferryExe(t)
	ferry := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "FERRY_HOME="+filepath.Join(dir, "home"), "FERRY_CHANNEL="+filepath.Join(dir, "channel"), "FERRY_AGENT=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ferry %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cache := filepath.Join(dir, "home", "cache")
	files := func() map[string]string {
		t.Helper()
		m := map[string]string{}
		err := filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			m[p] = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ferry("agents", "--json") // builds this machine's caches
	ferry("agents", "--json") // starts from them
	before := files()
	if len(before) < 3 {
		t.Fatalf("the caches are %v: want the index, the fold checkpoint and the arrival log", before)
	}
	for _, args := range [][]string{{"agents", "--json"}, {"order", "list"}, {"status"}} {
		ferry(append(args, "--as", "cursor-laptop")...)
	}
	if after := files(); !maps.Equal(before, after) {
		t.Errorf("reads with nothing new changed this machine's caches:\nbefore %v\nafter  %v", before, after)
	}
}
