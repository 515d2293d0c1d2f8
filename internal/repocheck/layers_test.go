package repocheck

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite .golangci.yml from the layering table")

// module is this module's path: every package below is named relative to it.
const module = "github.com/ferryhq/ferry"

// A layer says which packages of this module a package may import directly, and
// which standard-library packages it must not. The table is the architecture
// (docs/adr/0016-package-layout.md) in the style of Go's own go/build deps_test.go:
// it is read on direct imports of non-test files, since transitively even
// crypto/ed25519 reaches os.
//
// pkgs is one package or a tree ("fsbus/internal/..."); the first layer that
// matches a package is its layer. may lists packages or trees. Every package of the
// module must match a layer, and every layer naming one package must match it (a
// tree's layer is the rule for packages still to come).
type layer struct {
	pkgs  string
	may   []string
	never []string
}

var layers = []layer{
	// Module-root internal/: shared vocabulary and leaves, below everything else. The
	// leaves stand alone; the rest may use each other, never a package above.
	{pkgs: "internal/errs"},
	{pkgs: "internal/fsutil"},
	{pkgs: "internal/ijson"},
	{pkgs: "internal/procgroup"},
	{pkgs: "internal/textsafe"},
	{pkgs: "internal/lazyre"},
	{pkgs: "internal/selfupdate", may: []string{"internal/errs", "internal/fsutil", "internal/lazyre"}},
	{pkgs: "internal/repocheck"},
	{pkgs: "internal/...", may: []string{"internal/..."}},

	// ledger knows lines, chains and clocks; of this module only internal/.
	{pkgs: "ledger", may: []string{"internal/..."}},

	// fsbus/internal: the layers under the façade; never the façade itself.
	{pkgs: "fsbus/internal/...", may: []string{"internal/...", "ledger", "fsbus/internal/...", "fsbus/fold", "fsbus/arrivals"}},

	// fsbus/fold: the fold, a pure function from the ledger's entries to the State, and
	// the state's types and queries the surfaces print. It reads no clock and does no
	// I/O (docs/design.md §2): of this module it uses ledger's entry types and
	// internal/, and of the standard library nothing that reaches the disk, the
	// network, a process or the time. Public, because every surface names its types.
	{pkgs: "fsbus/fold", may: []string{"internal/errs", "internal/lazyre", "internal/secretguard", "ledger", "fsbus/internal/sigcache"}, never: foldNever},

	// fsbus/arrivals: this machine's arrival log, cursors and sightings; one
	// machine-local file, never the channel. Public: surfaces name its Log.
	{pkgs: "fsbus/arrivals", may: []string{"internal/...", "ledger", "fsbus/fold"}},

	// fsbus/verify: the checks ledger verify and doctor share, over a loaded View and
	// the channel's files; public, because the surfaces print its findings.
	{pkgs: "fsbus/verify", may: []string{"internal/...", "ledger", "fsbus/fold", "fsbus/arrivals"}},

	// fsbus/pause: the machine-local pause switch; public, because the surfaces print
	// its State.
	{pkgs: "fsbus/pause", may: []string{"internal/...", "fsbus/fold", "fsbus/contract"}},

	// fsbus/contract: an order's contract checked against this machine's workspace —
	// pointers and result schemas. It reads the workspace, never the channel.
	{pkgs: "fsbus/contract", may: []string{"internal/...", "fsbus/fold"}},

	// fsbus/tty: the terminal prompt, below everything that asks for a passphrase.
	{pkgs: "fsbus/tty"},

	// Adapters the façade calls and the surfaces name (their types are in the façade's
	// and the surfaces' signatures, so they cannot live in fsbus/internal): public, and
	// below the façade like fsbus/internal.
	{pkgs: "fsbus/synchealth", may: []string{"internal/...", "ledger", "fsbus/internal/..."}},
	{pkgs: "fsbus/gitsync", may: []string{"internal/...", "ledger", "fsbus/internal/..."}},

	// fsbus: the façade the CLI and the MCP server call.
	{pkgs: "fsbus", may: []string{"internal/...", "ledger", "fsbus/internal/...", "fsbus/fold", "fsbus/contract", "fsbus/arrivals", "fsbus/verify", "fsbus/pause", "fsbus/tty", "fsbus/synchealth", "fsbus/gitsync"}},

	// Public packages on top of the façade, called by the surfaces; nothing under
	// fsbus imports them.
	{pkgs: "fsbus/runner", may: []string{"internal/...", "ledger", "fsbus", "fsbus/fold", "fsbus/contract", "fsbus/arrivals", "fsbus/verify", "fsbus/pause", "fsbus/internal/..."}},
	{pkgs: "fsbus/doctor", may: []string{"internal/...", "ledger", "fsbus", "fsbus/fold", "fsbus/contract", "fsbus/arrivals", "fsbus/verify", "fsbus/pause", "fsbus/internal/...", "fsbus/synchealth", "fsbus/gitsync", "fsbus/recheck"}},
	// fsbus/recheck: the owner's checkpoint folded again in the background.
	{pkgs: "fsbus/recheck", may: []string{"internal/...", "fsbus", "fsbus/fold"}},

	// fsbus/watch: waking on what arrives (fsnotify, with polling as the fallback) and
	// following a channel's events; it calls the façade's Load and reads its View.
	{pkgs: "fsbus/watch", may: []string{"internal/...", "ledger", "fsbus", "fsbus/fold"}},

	// fsbus/search: one matcher over a loaded View for the CLI and the MCP tool.
	{pkgs: "fsbus/search", may: []string{"internal/...", "fsbus", "fsbus/fold"}},

	// Other public packages on top of the façade.
	{pkgs: "fsbus/...", may: []string{"internal/...", "ledger", "fsbus", "fsbus/fold", "fsbus/contract", "fsbus/arrivals", "fsbus/verify", "fsbus/pause", "fsbus/internal/...", "fsbus/tty", "fsbus/synchealth", "fsbus/gitsync"}},

	// The MCP wire knows nothing of channels: JSON-RPC, eras and the handshake.
	{pkgs: "mcpserver/internal/protocol", may: []string{"internal/ijson", "internal/textsafe"}},

	// The MCP server: the façade, never the CLI.
	{pkgs: "mcpserver", may: []string{"internal/...", "ledger", "fsbus", "fsbus/...", "mcpserver/..."}},
	{pkgs: "mcpserver/...", may: []string{"internal/...", "ledger", "fsbus", "fsbus/...", "mcpserver/..."}},

	// The CLI and the fixtures' commands sit on top.
	{pkgs: "ferry", may: []string{"..."}},
	{pkgs: "ferry/...", may: []string{"internal/...", "ledger", "fsbus", "fsbus/...", "mcpserver", "mcpserver/..."}},
	{pkgs: "fixtures/...", may: []string{"internal/...", "ledger", "fsbus", "fsbus/..."}},
}

// foldNever is what the fold must not import: the disk, processes, the network and
// the clock (docs/design.md §2: the fold reads no clock and does no I/O).
var foldNever = []string{"os", "os/exec", "io/fs", "path/filepath", "net", "net/http", "time", "syscall"}

// matches reports whether the module-relative package p is pattern pat: the package
// itself, or with "/..." the tree below it, or "..." everything.
func matches(pat, p string) bool {
	if pat == "..." {
		return true
	}
	if tree, ok := strings.CutSuffix(pat, "/..."); ok {
		return strings.HasPrefix(p, tree+"/")
	}
	return p == pat
}

func layerOf(p string) (layer, bool) {
	for _, l := range layers {
		if matches(l.pkgs, p) {
			return l, true
		}
	}
	return layer{}, false
}

type listed struct {
	ImportPath string
	Imports    []string
}

// listPackages lists the module's packages with their direct imports (non-test
// files), as `go list -json` reports them.
func listPackages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(importPath string) (string, bool) {
	if importPath == module {
		return "", true
	}
	return strings.CutPrefix(importPath, module+"/")
}

func TestLayers(t *testing.T) {
	pkgs := listPackages(t)
	used := map[string]bool{}
	for _, p := range pkgs {
		name, _ := rel(p.ImportPath)
		l, ok := layerOf(name)
		if !ok {
			t.Errorf("package %s is in no layer: add it to the table in layers_test.go", name)
			continue
		}
		used[l.pkgs] = true
		for _, imp := range p.Imports {
			if dep, ours := rel(imp); ours {
				if !slices.ContainsFunc(l.may, func(pat string) bool { return matches(pat, dep) }) {
					t.Errorf("%s imports %s, which its layer (%s) may not", name, dep, l.pkgs)
				}
				continue
			}
			if slices.Contains(l.never, imp) {
				t.Errorf("%s imports %s, which its layer (%s) must not", name, imp, l.pkgs)
			}
		}
	}
	for _, l := range layers {
		if !used[l.pkgs] && !strings.HasSuffix(l.pkgs, "...") {
			t.Errorf("layer %s matches no package: remove it or fix its name", l.pkgs)
		}
	}
}

// TestLayersCatchViolations feeds the check a package that breaks a rule, so the
// table cannot pass by matching nothing.
func TestLayersCatchViolations(t *testing.T) {
	for _, tc := range []struct{ pkg, dep string }{
		{"ledger", "fsbus"},
		{"internal/bootclock", "fsbus"},
		{"fsbus/synchealth", "fsbus"},
		{"fsbus/gitsync", "fsbus"},
		{"mcpserver", "ferry"},
		{"internal/fsutil", "ledger"},
		{"fsbus", "fsbus/runner"},
		{"fsbus/internal/bootclock", "fsbus/runner"},
		{"fsbus/tty", "fsbus/runner"},
		{"fsbus", "fsbus/doctor"},
		{"fsbus/runner", "fsbus/doctor"},
		{"fsbus", "fsbus/watch"},
		{"fsbus/arrivals", "fsbus"},
		{"fsbus/verify", "fsbus"},
		{"fsbus/pause", "fsbus"},
		{"fsbus/fold", "fsbus/arrivals"},
		{"fsbus", "fsbus/search"},
		{"fsbus/fold", "fsbus/watch"},
		{"fsbus/fold", "fsbus"},
		{"fsbus/fold", "fsbus/contract"},
		{"fsbus/contract", "fsbus"},
		{"fsbus/fold", "internal/fsutil"},
		{"fsbus/fold", "fsbus/internal/bootclock"},
	} {
		l, ok := layerOf(tc.pkg)
		if !ok {
			t.Fatalf("%s is in no layer", tc.pkg)
		}
		if slices.ContainsFunc(l.may, func(pat string) bool { return matches(pat, tc.dep) }) {
			t.Errorf("the table lets %s import %s", tc.pkg, tc.dep)
		}
	}
	l, _ := layerOf("fsbus/fold")
	for _, std := range []string{"os", "time", "net", "os/exec", "io/fs"} {
		if !slices.Contains(l.never, std) {
			t.Errorf("the table lets the fold import %s", std)
		}
	}
}

// TestLintConfig checks that .golangci.yml's depguard rules are the ones the layering
// table gives; go test ./internal/repocheck -run TestLintConfig -update rewrites it.
func TestLintConfig(t *testing.T) {
	pkgs := listPackages(t)
	var names []string
	for _, p := range pkgs {
		name, _ := rel(p.ImportPath)
		names = append(names, name)
	}
	want := lintConfig(names)
	file := filepath.Join(moduleRoot(t), ".golangci.yml")
	if *update {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading .golangci.yml: %v (go test ./internal/repocheck -run TestLintConfig -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf(".golangci.yml differs from the layering table: go test ./internal/repocheck -run TestLintConfig -update rewrites it")
	}
}

// lintConfig renders .golangci.yml: staticcheck, unused, forbidigo, and one depguard
// rule per package, denying every module package its layer does not allow and the
// standard-library packages it must not import.
func lintConfig(pkgs []string) []byte {
	slices.Sort(pkgs)
	var b strings.Builder
	b.WriteString(lintHeader)
	for _, p := range pkgs {
		l, _ := layerOf(p)
		var deny []string
		for _, q := range pkgs {
			if q == p || slices.ContainsFunc(l.may, func(pat string) bool { return matches(pat, q) }) {
				continue
			}
			deny = append(deny, q)
		}
		if len(deny) == 0 && len(l.never) == 0 {
			continue
		}
		name := strings.ReplaceAll(p, "/", "-")
		if name == "" {
			name = "root"
		}
		fmt.Fprintf(&b, "        %s:\n", name)
		b.WriteString("          list-mode: lax\n")
		b.WriteString("          files:\n")
		fmt.Fprintf(&b, "            - \"**/%s/*.go\"\n", p)
		b.WriteString("            - \"!$test\"\n")
		b.WriteString("          deny:\n")
		for _, q := range deny {
			fmt.Fprintf(&b, "            - pkg: \"%s$\"\n", path.Join(module, q))
			fmt.Fprintf(&b, "              desc: \"%s may not import %s (internal/repocheck/layers_test.go)\"\n", p, q)
		}
		for _, q := range l.never {
			fmt.Fprintf(&b, "            - pkg: \"%s$\"\n", q)
			fmt.Fprintf(&b, "              desc: \"%s must not import %s (internal/repocheck/layers_test.go)\"\n", p, q)
		}
	}
	return []byte(b.String())
}

const lintHeader = `# Generated from internal/repocheck/layers_test.go: do not edit by hand.
# go test ./internal/repocheck -run TestLintConfig -update rewrites it.
version: "2"
linters:
  default: none
  enable:
    - depguard
    - forbidigo
    - staticcheck
    - unused
  exclusions:
    rules:
      # forbidigo guards the fold only: it reads no clock and does no I/O.
      - linters: [forbidigo]
        path-except: '(^|/)fsbus/fold/[^/]*\.go$'
      - linters: [forbidigo]
        path: '_test\.go$'
  settings:
    staticcheck:
      # golangci-lint's default set, less QF1001 (De Morgan's law): a condition is
      # written the way its rule reads, e.g. !(a && b) for "unless both".
      checks: ["all", "-ST1000", "-ST1003", "-ST1016", "-ST1020", "-ST1021", "-ST1022", "-QF1001"]
    forbidigo:
      forbid:
        - pattern: ^time\.(Now|Since|Until)$
          msg: the fold reads no clock (docs/design.md §2)
        - pattern: ^ledger\.Open$
          msg: the fold does no I/O (docs/design.md §2)
    depguard:
      rules:
`
