package mcpserver_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/ferryhq/ferry/mcpserver"
)

// buildFixture builds testdata/gwfixture, the gateway tests' misbehaving MCP server,
// into a temp dir of t.
func buildFixture(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gwfixture")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		goBin = "go"
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, "./testdata/gwfixture").CombinedOutput(); err != nil {
		t.Fatalf("building the fixture: %v\n%s", err, out)
	}
	return bin
}

// TestFerryToolNames: the names a gateway never serves a forwarded tool under are
// every group's, sorted.
func TestFerryToolNames(t *testing.T) {
	t.Parallel()
	names := mcpserver.FerryToolNames()
	for _, n := range []string{"ferry_join", "ferry_orders", "ferry_search", "ferry_update", "list_tasks", "read_memory"} {
		if !slices.Contains(names, n) {
			t.Errorf("FerryToolNames misses %s (a group is missing): %q", n, names)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("FerryToolNames is not sorted: %q", names)
	}
}
