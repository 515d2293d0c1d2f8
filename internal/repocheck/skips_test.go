package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// skipGate is the one function of a file allowed to skip: a test that needs what a
// machine may lack (root, an installed tool). It skips only where nobody asked for the
// test: with env=1 or CI=true it fails instead, and .ci/run exports env=1 (and CI).
type skipGate struct {
	file string // slash path from the module root
	fn   string // the function holding the skip call
	env  string // the variable that turns the test on
}

// skipGates are the only places the module skips a test. `go test -short` shrinks
// loops and fixtures and skips nothing.
var skipGates = []skipGate{
	{"fsbus/fulldisk_linux_test.go", "fullDisk", "FERRY_FULLDISK_TEST"},
	{"ferry/syncthing_test.go", "syncthingGate", "FERRY_SYNCTHING_TEST"},
}

// skipMethods are the methods of testing.T, B, F and TB that skip the test.
var skipMethods = []string{"Skip", "Skipf", "SkipNow"}

// skipCall is one use of a skip method, or one skip of a script.
type skipCall struct {
	file string // slash path from the module root
	line int
	fn   string // the enclosing function declaration ("" at package level or in a script)
	what string // the call as written, or the script line
}

func (c skipCall) String() string { return fmt.Sprintf("%s:%d: %s", c.file, c.line, c.what) }

// scriptSkip matches a testscript line running the skip command: skip, ! skip, or
// either after [conditions].
var scriptSkip = regexp.MustCompile(`^\s*(\[[^\]]*\]\s*)*(!\s*)?skip(\s|$)`)

// findSkips returns every skip in files (slash paths under root): each selector naming
// a skip method in a Go file — called or not, whatever its receiver — each `if` at the
// top of a Test, Benchmark or Fuzz function that returns when testing.Short(), and
// each skip command in the script part of a txtar file.
func findSkips(root string, files []string) ([]skipCall, error) {
	var out []skipCall
	for _, rel := range files {
		name := filepath.Join(root, filepath.FromSlash(rel))
		switch path.Ext(rel) {
		case ".go":
			calls, err := goSkips(name, rel)
			if err != nil {
				return nil, err
			}
			out = append(out, calls...)
		case ".txtar":
			b, err := os.ReadFile(name)
			if err != nil {
				return nil, err
			}
			for n, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "-- ") && strings.HasSuffix(strings.TrimSpace(l), " --") {
					break // the files the script works on
				}
				if scriptSkip.MatchString(l) {
					out = append(out, skipCall{file: rel, line: n + 1, what: strings.TrimSpace(l)})
				}
			}
		}
	}
	return out, nil
}

// goSkips returns the skips of the Go file name (slash path rel).
func goSkips(name, rel string) ([]skipCall, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []skipCall
	add := func(n ast.Node, fn, what string) {
		out = append(out, skipCall{file: rel, line: fset.Position(n.Pos()).Line, fn: fn, what: what})
	}
	for _, d := range f.Decls {
		fn := ""
		if fd, ok := d.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
			if isTestFunc(fd) && returnsWhenShort(fd.Body.List[0]) {
				add(fd.Body.List[0], fn, "return when testing.Short() at the top of "+fn)
			}
		}
		ast.Inspect(d, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && slices.Contains(skipMethods, sel.Sel.Name) {
				recv := "…"
				if id, ok := sel.X.(*ast.Ident); ok {
					recv = id.Name
				}
				add(sel.Sel, fn, recv+"."+sel.Sel.Name)
			}
			return true
		})
	}
	return out, nil
}

// isTestFunc reports whether fd is a Test, Benchmark or Fuzz function with a body.
func isTestFunc(fd *ast.FuncDecl) bool {
	if fd.Recv != nil || fd.Body == nil || len(fd.Body.List) == 0 {
		return false
	}
	for _, p := range []string{"Test", "Benchmark", "Fuzz"} {
		if strings.HasPrefix(fd.Name.Name, p) && fd.Name.Name != "TestMain" {
			return true
		}
	}
	return false
}

// returnsWhenShort reports whether s is `if …testing.Short()… { return }`.
func returnsWhenShort(s ast.Stmt) bool {
	is, ok := s.(*ast.IfStmt)
	if !ok || len(is.Body.List) != 1 {
		return false
	}
	if _, ok := is.Body.List[0].(*ast.ReturnStmt); !ok {
		return false
	}
	short := false
	ast.Inspect(is.Cond, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Short" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testing" {
				short = true
			}
		}
		return true
	})
	return short
}

// checkSkips returns one line per skip of calls that is not in a gate of gates, and
// per gate that is not as skipGate says: its file has no skip in its function, the
// function does not read its variable and CI or never fails, or ciRun (the text of
// .ci/run) does not export the variable as 1.
func checkSkips(root string, calls []skipCall, gates []skipGate, ciRun string) []string {
	var bad []string
	used := map[skipGate]bool{}
	for _, c := range calls {
		i := slices.IndexFunc(gates, func(g skipGate) bool { return g.file == c.file && g.fn == c.fn })
		if i < 0 || strings.HasPrefix(c.what, "return when") {
			bad = append(bad, c.String()+": skips a test (only the gates of skipGates may; -short shrinks, never skips)")
			continue
		}
		used[gates[i]] = true
	}
	for _, g := range gates {
		if !used[g] {
			bad = append(bad, fmt.Sprintf("%s: gate %s holds no skip: remove it from skipGates", g.file, g.fn))
			continue
		}
		body, err := funcSource(filepath.Join(root, filepath.FromSlash(g.file)), g.fn)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: gate %s: %v", g.file, g.fn, err))
			continue
		}
		for _, want := range []string{strconv.Quote(g.env), strconv.Quote("CI"), "Fatal"} {
			if !strings.Contains(body, want) {
				bad = append(bad, fmt.Sprintf("%s: gate %s does not mention %s: it must fail, not skip, when %s=1 or CI=true", g.file, g.fn, want, g.env))
			}
		}
		if !regexp.MustCompile(`(?m)^export ` + regexp.QuoteMeta(g.env) + `=1$`).MatchString(ciRun) {
			bad = append(bad, fmt.Sprintf("%s: gate %s: .ci/run does not export %s=1", g.file, g.fn, g.env))
		}
	}
	if !regexp.MustCompile(`(?m)^export CI=`).MatchString(ciRun) {
		bad = append(bad, ".ci/run does not export CI")
	}
	return bad
}

// funcSource returns the source text of the function declaration fn of the Go file name.
func funcSource(name, fn string) (string, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
			return string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset]), nil
		}
	}
	return "", fmt.Errorf("no function %s", fn)
}

// TestSkips: no test of the module skips but in the gates of skipGates, each of which
// fails rather than skips when .ci/run asks for its test. A t.Skip, b.SkipNow or the
// like anywhere else, a test returning at once under -short, or a skip command in a
// script fails it, naming file:line.
func TestSkips(t *testing.T) {
	root := moduleRoot(t)
	files, err := textFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := findSkips(root, files)
	if err != nil {
		t.Fatal(err)
	}
	ciRun, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if bad := checkSkips(root, calls, skipGates, string(ciRun)); len(bad) > 0 {
		t.Errorf("%d skips outside the gates:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// TestSkipsCatches: findSkips and checkSkips report what they are for — a skip method
// however it is reached, a return under testing.Short() at the top of a test, a
// script's skip — and pass a gate and the words skip and Short used otherwise.
func TestSkipsCatches(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/gate_test.go", `package a

import ("os"; "testing")

func gate(t *testing.T) {
	if os.Getenv("A_TEST") == "1" || os.Getenv("CI") == "true" {
		t.Fatal("missing")
	}
	t.Skip("missing")
}
`)
	write("a/bad_test.go", `package a

import "testing"

func TestA(t *testing.T) {
	t.Skipf("no %d", 1)
}

func TestB(t *testing.T) {
	if testing.Short() {
		return
	}
}

func TestC(t *testing.T) {
	n := 10
	if testing.Short() {
		n = 1
	}
	_ = n
	skip := t.SkipNow
	skip()
}

func helper(tb testing.TB) { tb.Skip() }

var later = func(b *testing.B) { b.Skip() }

func TestGateElsewhere(t *testing.T) { gate(t) }
`)
	write("a/testdata/s.txtar", "exec x\n[!exec:git] skip 'no git'\n! skip\n# skip in a comment\nexec skip\n-- f.txt --\nskip\n")
	files := []string{"a/bad_test.go", "a/gate_test.go", "a/testdata/s.txtar"}
	calls, err := findSkips(root, files)
	if err != nil {
		t.Fatal(err)
	}
	bad := checkSkips(root, calls, []skipGate{{"a/gate_test.go", "gate", "A_TEST"}}, "export CI=true\nexport A_TEST=1\n")
	want := []string{
		"a/bad_test.go:6: t.Skipf",
		"a/bad_test.go:10: return when testing.Short() at the top of TestB",
		"a/bad_test.go:21: t.SkipNow",
		"a/bad_test.go:25: tb.Skip",
		"a/bad_test.go:27: b.Skip",
		"a/testdata/s.txtar:2: [!exec:git] skip 'no git'",
		"a/testdata/s.txtar:3: ! skip",
	}
	var got []string
	for _, b := range bad {
		got = append(got, b[:strings.Index(b, ": skips a test")])
	}
	if !slices.Equal(got, want) {
		t.Errorf("reported:\n%s\nwant:\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
	}

	// A gate that no longer fails under CI, whose variable .ci/run does not set, or
	// that holds no skip, is reported.
	write("a/gate_test.go", "package a\n\nimport \"testing\"\n\nfunc gate(t *testing.T) { t.Skip() }\n")
	calls, err = findSkips(root, []string{"a/gate_test.go"})
	if err != nil {
		t.Fatal(err)
	}
	bad = checkSkips(root, calls, []skipGate{{"a/gate_test.go", "gate", "A_TEST"}, {"a/gate_test.go", "gone", "B_TEST"}}, "")
	for _, w := range []string{"does not mention \"A_TEST\"", "does not mention \"CI\"", "does not mention Fatal", "does not export A_TEST=1", "gate gone holds no skip", ".ci/run does not export CI"} {
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, w) }) {
			t.Errorf("no report saying %q in:\n%s", w, strings.Join(bad, "\n"))
		}
	}
}
