package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// maxInitBytes caps what the package inits of a release build allocate before main
// runs (docs/benchmarks.md "Start-up": ≤ 256 KB), every command's fixed cost. Bytes, not
// time: the same on every run.
const maxInitBytes = 256 << 10

// TestInitAllocations: the package inits of the release build allocate at most
// maxInitBytes in all (GODEBUG=inittrace=1), and none of them more than a quarter of
// it: nothing compiles a schema, a regular expression or a table at start-up.
func TestInitAllocations(t *testing.T) {
	rel := releaseBuild() // built while the tests before the parallel ones run
	t.Parallel()
	cmd := exec.Command(rel.wait(t), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "FERRY_HOME="+t.TempDir())
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ferry version: %v\n%s", err, errb.String())
	}
	total, lines := 0, 0
	for l := range strings.Lines(errb.String()) {
		// init PKG @T ms, C ms clock, N bytes, A allocs
		f := strings.Fields(l)
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q", l)
		}
		lines++
		total += n
		if n > maxInitBytes/4 {
			t.Errorf("package %s allocates %d bytes at init", f[1], n)
		}
	}
	if lines < 50 {
		t.Fatalf("GODEBUG=inittrace=1 printed %d init lines:\n%s", lines, errb.String())
	}
	t.Logf("%d package inits allocate %d bytes", lines, total)
	if total > maxInitBytes {
		t.Errorf("the package inits allocate %d bytes, more than %d", total, maxInitBytes)
	}
}
