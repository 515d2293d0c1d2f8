package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A styleRule is a habit the code keeps (ADR 0016), checked by a pattern on every Go
// file of the module (tests included) outside the paths it exempts.
type styleRule struct {
	what    string
	re      *regexp.Regexp
	exempt  []string // path prefixes where the pattern is the rule's own definition
	nonTest bool     // check only non-test files
}

var styleRules = []styleRule{
	{
		what: "a key joined with NUL and cut apart again: key the map by a struct (or an array) of its parts",
		re:   regexp.MustCompile(`strings\.(?:Cut|Split|SplitN|HasSuffix|HasPrefix|TrimSuffix|TrimPrefix|Index|LastIndex)\([^()\n]*"\\x00"`),
		// NUL-separated text that is a wire format, not a key: git's -z output, and the
		// search cursor a caller hands back.
		exempt:  []string{"fsbus/gitsync/", "fsbus/search/search.go"},
		nonTest: true,
	},
	{
		what: "an error read with a type assertion: use errors.As (or errs.From)",
		re:   regexp.MustCompile(`\berr[A-Za-z0-9_]*\.\(\*`),
	},
	{
		what:   "a Session built field by field outside fsbus: use Channel.As, or a Channel method for a read",
		re:     regexp.MustCompile(`(?:^|[^*])fsbus\.Session\{`),
		exempt: []string{"fsbus/"},
	},
	{
		what:    "an exported type alias: name the type where it is defined (an alias makes a package carry another's types)",
		re:      regexp.MustCompile(`(?m)^type [A-Z][A-Za-z0-9_]* = `),
		nonTest: true,
	},
	{
		what:    "a sort by the sort package: use slices.Sort, slices.SortFunc or slices.SortStableFunc (cmp.Compare, strings.Compare, cmp.Or for several keys), slices.Sorted(maps.Keys(m))",
		re:      regexp.MustCompile(`\bsort\.(?:Slice|SliceStable|Strings|Ints|Sort|Stable)\(`),
		nonTest: true,
	},
	{
		what: "an fsync outside fsutil: call fsutil.Sync(f) (or fsutil.SyncDir), so fsutil.Fsyncs counts every fsync a command makes",
		// A call of a Sync method, a method expression, the system calls and the open
		// flags. A method value (s := f.Sync) is not told from a field read (h :=
		// r.Sync, the sync health) by a pattern; none is taken.
		re: regexp.MustCompile(`\.Sync\(\)|\)\.Sync\(|\b(?:Fsync|Fdatasync)\(|\bO_D?SYNC\b`),
		// The bench's raw fsync'd append is the physical floor ferry's append is measured against.
		exempt:  []string{"internal/fsutil/", "fixtures/bench/"},
		nonTest: true,
	},
}

// goFiles is every .go file of the module, as slash paths relative to root, skipping
// testdata, hidden and underscore directories and other modules (a directory with a
// go.mod of its own: third_party/).
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != root && err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// lines returns the line of each match of r's pattern in src.
func (r styleRule) lines(src []byte) []int {
	var out []int
	for _, loc := range r.re.FindAllIndex(src, -1) {
		out = append(out, 1+strings.Count(string(src[:loc[0]]), "\n"))
	}
	return out
}

// styleHits returns one "path:line: what" per line of src that breaks a rule.
func styleHits(path string, src []byte) []string {
	var hits []string
	for _, r := range styleRules {
		if r.nonTest && strings.HasSuffix(path, "_test.go") {
			continue
		}
		exempt := false
		for _, e := range r.exempt {
			exempt = exempt || strings.HasPrefix(path, e)
		}
		if exempt || strings.HasPrefix(path, "internal/repocheck/") {
			continue
		}
		for _, line := range r.lines(src) {
			hits = append(hits, fmt.Sprintf("%s:%d: %s", path, line, r.what))
		}
	}
	return hits
}

func TestStyle(t *testing.T) {
	root := moduleRoot(t)
	files := goFiles(t, root)
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range styleHits(f, src) {
			t.Error(h)
		}
	}
	t.Logf("%d Go files checked against %d rules", len(files), len(styleRules))
}

// TestStyleCatches: each rule finds what it names, and an exempt path is let through.
func TestStyleCatches(t *testing.T) {
	for _, tc := range []struct {
		path, src string
		hits      int
	}{
		{"fsbus/x.go", "if fe, ok := err.(*errs.Error); ok {}", 1},
		{"fsbus/x_test.go", "e := errOut.(*exec.ExitError)", 1},
		{"fsbus/x.go", "if errors.As(err, &fe) {}", 0},
		{"ferry/x.go", "s := &fsbus.Session{Channel: ch}", 1},
		{"fsbus/x.go", "s := &fsbus.Session{Channel: ch}", 0},
		{"ferry/x.go", "all := []*fsbus.Session{a, b}", 0},
		{"fsbus/x.go", "type Reading = bootclock.Reading", 1},
		{"fsbus/x_test.go", "type Reading = bootclock.Reading", 0},
		{"fsbus/x.go", "type node = chainNode[core]", 0},
		{"ferry/x.go", "sort.Slice(rows, func(i, j int) bool { return rows[i].Code < rows[j].Code })", 1},
		{"fsbus/fold/x.go", "sort.Strings(ids)\nsort.SliceStable(cs, less)", 2},
		{"mcpserver/x.go", "sort.Sort(byName(list)); sort.Stable(x); sort.Ints(ns)", 3},
		{"ferry/x_test.go", "sort.Strings(names)", 0},
		{"ferry/x.go", "slices.SortFunc(rows, func(a, b exitRow) int { return cmp.Compare(a.Code, b.Code) })", 0},
		{"fsbus/x.go", "i := sort.Search(len(old), f)", 0},
		{"fsbus/fold/x.go", "w, idem, _ := strings.Cut(k, \"\\x00\")", 1},
		{"ferry/x.go", "parts := strings.Split(key, \"\\x00\")", 1},
		{"fsbus/gitsync/x.go", "for _, p := range strings.Split(out, \"\\x00\") {", 0},
		{"fsbus/x.go", "k := [2]string{writer, idem}", 0},
		{"ledger/x.go", "if err := f.Sync(); err != nil {", 1},
		{"ledger/x.go", "if err := fsutil.Sync(f); err != nil {", 0},
		{"internal/fsutil/x.go", "return f.Sync()", 0},
		{"ledger/x_test.go", "f.Sync()", 0},
		{"ledger/x.go", "(*os.File).Sync(f)", 1},
		{"ledger/x.go", "syscall.Fsync(int(f.Fd()))", 1},
		{"ledger/x.go", "unix.Fdatasync(fd)", 1},
		{"ledger/x.go", "os.OpenFile(p, os.O_WRONLY|os.O_SYNC, 0)", 1},
		{"ledger/x.go", "err = fsutil.SyncDir(dir); wg.Synced()", 0},
	} {
		if got := len(styleHits(tc.path, []byte(tc.src))); got != tc.hits {
			t.Errorf("%s: %q: %d hits, want %d", tc.path, tc.src, got, tc.hits)
		}
	}
}

// maxStringRun is the most string parameters in a row an exported method of package
// fsbus takes: past it the arguments are an options struct (NewOrderOptions,
// NoteOptions), so a call cannot swap a note and an idempotency key unseen.
const maxStringRun = 2

// stringRuns returns one "path:line: what" per exported method declared in src (a
// file of package fsbus) that takes more than maxStringRun string parameters in a row.
func stringRuns(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var hits []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || !fd.Name.IsExported() {
			continue
		}
		run, longest := 0, 0
		for _, p := range fd.Type.Params.List {
			if id, ok := p.Type.(*ast.Ident); !ok || id.Name != "string" {
				run = 0
				continue
			}
			run += max(len(p.Names), 1)
			longest = max(longest, run)
		}
		if longest > maxStringRun {
			hits = append(hits, fmt.Sprintf("%s:%d: %s.%s takes %d string parameters in a row: pass an options struct",
				path, fset.Position(fd.Pos()).Line, recvName(fd), fd.Name.Name, longest))
		}
	}
	return hits, nil
}

// recvName is the name of fd's receiver type, without a pointer or type parameters.
func recvName(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

// facadeSources returns the non-test Go files of package fsbus (its directory only),
// by slash path from the module root.
func facadeSources(t *testing.T, root string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "fsbus", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		src, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out["fsbus/"+filepath.Base(n)] = src
	}
	return out
}

func TestOptionsStructs(t *testing.T) {
	srcs := facadeSources(t, moduleRoot(t))
	for _, p := range slices.Sorted(maps.Keys(srcs)) {
		hits, err := stringRuns(p, srcs[p])
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			t.Error(h)
		}
	}
}

// TestOptionsStructsCatches: a run of three strings is found however it is written;
// two, a broken run, an unexported method and a function are not.
func TestOptionsStructsCatches(t *testing.T) {
	for _, tc := range []struct {
		decl string
		hits int
	}{
		{"func (s *Session) Submit(q, ref, note, key string) error", 1},
		{"func (s *Session) Fail(q string, reason string, key string) error", 1},
		{"func (h Home) Has(project string, agent, run string) bool", 1},
		{"func (c *chain[S]) Add(n int, a, b, c string) {}", 1},
		{"func (s *Session) Review(q, verdict string, opt NoteOptions) error", 0},
		{"func (s *Session) Mixed(a, b string, n int, c, d string) error", 0},
		{"func (s *Session) progress(q, note, failure, key string) error", 0},
		{"func ObjectPath(root, writer, id string) string", 0},
	} {
		hits, err := stringRuns("fsbus/x.go", []byte("package fsbus\n\n"+tc.decl+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != tc.hits {
			t.Errorf("%s: %q, want %d hits", tc.decl, hits, tc.hits)
		}
	}
}

// facadeValues are the façade's long-lived values (ADR 0016): a call returns what it
// did, or hands it to a callback, rather than piling it up on one of these for the
// caller to read and clear.
var facadeValues = []string{"Channel", "Session", "Home"}

// accumulations returns one "path:line: what" per assignment in a method of a façade
// value that appends to an exported slice field of one (Session embeds *Channel, so
// their fields are taken together), srcs being the files of package fsbus.
func accumulations(srcs map[string][]byte) ([]string, error) {
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	fields := map[string]bool{}
	for p, src := range srcs {
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files[p] = f
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !slices.Contains(facadeValues, ts.Name.Name) {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					if at, ok := fl.Type.(*ast.ArrayType); ok && at.Len == nil {
						for _, n := range fl.Names {
							fields[n.Name] = n.IsExported()
						}
					}
				}
			}
			return false
		})
	}
	var hits []string
	for _, p := range slices.Sorted(maps.Keys(files)) {
		for _, d := range files[p].Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List[0].Names) == 0 || fd.Body == nil || !slices.Contains(facadeValues, recvName(fd)) {
				continue
			}
			recv := fd.Recv.List[0].Names[0].Name
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for i, l := range as.Lhs {
					sel, ok := l.(*ast.SelectorExpr)
					if !ok || !fields[sel.Sel.Name] || rootIdent(sel) != recv || i >= len(as.Rhs) {
						continue
					}
					if call, ok := as.Rhs[i].(*ast.CallExpr); ok {
						if fn, ok := call.Fun.(*ast.Ident); ok && fn.Name == "append" {
							hits = append(hits, fmt.Sprintf("%s:%d: %s.%s appends to %s.%s: return what the call did (or pass it to a callback) instead",
								p, fset.Position(as.Pos()).Line, recvName(fd), fd.Name.Name, recvName(fd), sel.Sel.Name))
						}
					}
				}
				return true
			})
		}
	}
	return hits, nil
}

// rootIdent is the name x.y.z starts from ("" for anything but an identifier).
func rootIdent(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.SelectorExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

func TestNoAccumulation(t *testing.T) {
	hits, err := accumulations(facadeSources(t, moduleRoot(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		t.Error(h)
	}
}

// TestNoAccumulationCatches: an append to an exported slice field of a façade value in
// its method is found, through the embedded Channel too; an unexported field, a local
// slice, another type's field and a plain function are not.
func TestNoAccumulationCatches(t *testing.T) {
	src := map[string][]byte{
		"fsbus/session.go": []byte(`package fsbus
type Session struct {
	*Channel
	Expired []string
	pending []string
}
type Channel struct{ Notes []string }
type Report struct{ Lines []string }
`),
		"fsbus/write.go": []byte(`package fsbus
func (s *Session) write(done []string) {
	s.Expired = append(s.Expired, done...)
	s.Channel.Notes = append(s.Channel.Notes, "n")
	s.pending = append(s.pending, done...)
	var out []string
	out = append(out, done...)
}
func (c Channel) Note(n string) { c.Notes, _ = append(c.Notes, n), 0 }
func (r *Report) Add(l string) { r.Lines = append(r.Lines, l) }
func settle(s *Session, done []string) { s.Expired = append(s.Expired, done...) }
`),
	}
	hits, err := accumulations(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 3 {
		t.Errorf("hits %q, want s.Expired, s.Channel.Notes and c.Notes", hits)
	}
}
