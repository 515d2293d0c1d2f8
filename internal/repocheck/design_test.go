package repocheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// designDoc is the page whose table TestDesignTable checks, relative to the module root.
const designDoc = "docs/design.md"

// concernHeading is the heading the table sits under (docs/design.md, last section).
const concernHeading = "## Where each concern lives"

// concernRow is one row of the table: a concern, the packages (module-relative import
// paths) and the files (repository-relative paths) it lives in.
type concernRow struct {
	line     int // 1-based line in the document
	concern  string
	packages []string
	files    []string
}

// backticked matches one `code span` of a table cell.
var backticked = regexp.MustCompile("`([^`]+)`")

// moduleRoot is the directory of the go.mod above the test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// parseConcernTable reads the markdown table under concernHeading: a header row naming
// the columns concern, package and files (in any order), a separator row, then one row
// per concern whose package and files cells hold backticked paths. It returns an error
// when the heading, the table or a column is missing, or a row names no package or file.
func parseConcernTable(doc string) ([]concernRow, error) {
	lines := strings.Split(doc, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == concernHeading })
	if start < 0 {
		return nil, fmt.Errorf("no heading %q", concernHeading)
	}
	var rows []concernRow
	col := map[string]int{}
	inTable := false
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			break // the next section
		}
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break // the table ended
			}
			continue
		}
		cells := splitRow(l)
		if !inTable {
			inTable = true
			for k, c := range cells {
				col[strings.ToLower(c)] = k
			}
			for _, want := range []string{"concern", "package", "files"} {
				if _, ok := col[want]; !ok {
					return nil, fmt.Errorf("line %d: the table has no column %q (columns: %s)", i+1, want, strings.Join(cells, ", "))
				}
			}
			continue
		}
		if strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			continue // the separator row
		}
		cell := func(name string) string {
			if k := col[name]; k < len(cells) {
				return cells[k]
			}
			return ""
		}
		r := concernRow{line: i + 1, concern: cell("concern"), packages: spans(cell("package")), files: spans(cell("files"))}
		if r.concern == "" || len(r.packages) == 0 || len(r.files) == 0 {
			return nil, fmt.Errorf("line %d: a row needs a concern, a backticked package and a backticked file: %s", i+1, l)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table rows under %q", concernHeading)
	}
	return rows, nil
}

// splitRow splits a markdown table row into its trimmed cells.
func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	cells := strings.Split(l, "|")
	for k := range cells {
		cells[k] = strings.TrimSpace(cells[k])
	}
	return cells
}

// spans is the text of every backticked span of cell.
func spans(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// modulePackages is every directory under root holding a non-test .go file, as a
// slash path relative to root ("." for root itself). Like the go command, it skips
// directories named testdata or starting with "." or "_", and nested modules.
func modulePackages(root string) ([]string, error) {
	var pkgs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !isPackageFile(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		if rel := filepath.ToSlash(rel); !slices.Contains(pkgs, rel) {
			pkgs = append(pkgs, rel)
		}
		return nil
	})
	slices.Sort(pkgs)
	return pkgs, err
}

// isPackageFile reports whether a file of this name makes its directory a package.
func isPackageFile(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") &&
		!strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_")
}

// checkDesignTable returns one line per problem of rows against the tree at root: a
// path that is not clean and relative, a path that does not exist, a package cell that
// is not a package of the module, and a package of the module no row lists.
func checkDesignTable(root string, rows []concernRow) ([]string, error) {
	pkgs, err := modulePackages(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	listed := map[string]bool{}
	exists := func(r concernRow, p string) bool {
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, `\`) {
			problems = append(problems, fmt.Sprintf("%s:%d (%s): `%s` is not a clean relative slash path", designDoc, r.line, r.concern, p))
			return false
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				problems = append(problems, fmt.Sprintf("%s:%d (%s): `%s` does not exist", designDoc, r.line, r.concern, p))
			} else {
				problems = append(problems, fmt.Sprintf("%s:%d (%s): `%s`: %v", designDoc, r.line, r.concern, p, err))
			}
			return false
		}
		return true
	}
	for _, r := range rows {
		for _, p := range r.packages {
			if !exists(r, p) {
				continue
			}
			if !slices.Contains(pkgs, p) {
				problems = append(problems, fmt.Sprintf("%s:%d (%s): `%s` in the package column is not a package of the module (no non-test .go file)", designDoc, r.line, r.concern, p))
				continue
			}
			listed[p] = true
		}
		for _, f := range r.files {
			exists(r, f)
		}
	}
	for _, p := range pkgs {
		if !listed[p] {
			problems = append(problems, fmt.Sprintf("%s: package `%s` is in no row's package column of %q", designDoc, p, concernHeading))
		}
	}
	return problems, nil
}

// TestDesignTable: every path docs/design.md's table of concerns names exists, and
// every package of the module is in its package column, so the table cannot go stale
// when a file moves or a package is added.
func TestDesignTable(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(designDoc)))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseConcernTable(string(doc))
	if err != nil {
		t.Fatalf("%s: %v", designDoc, err)
	}
	problems, err := checkDesignTable(root, rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%s: %d concerns checked", designDoc, len(rows))
}

// TestDesignTableCatches: the check fails on a missing path, a package cell that is no
// package and an unlisted package, and ignores testdata, hidden directories, test-only
// directories and nested modules.
func TestDesignTableCatches(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":                    "module example.com/m\n",
		"a/a.go":                    "package a\n",
		"b/b.go":                    "package b\n",
		"docs/x.md":                 "x\n",
		"c/testdata/x.go":           "package x\n",
		".hidden/h.go":              "package h\n",
		"_skip/s.go":                "package s\n",
		"d/d_test.go":               "package d\n",
		"nested/go.mod":             "module example.com/n\n",
		"nested/n.go":               "package n\n",
		"e/.tmp.go":                 "package e\n",
		"fixtures/gen/main.go":      "package main\n",
		"fixtures/gen/main_test.go": "package main\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := "# x\n\n" + concernHeading + "\n\nintro\n\n" +
		"| concern | package | files |\n|---|---|---|\n" +
		"| a | `a` | `a/a.go`, `a/missing.go` |\n" +
		"| docs | `docs` | `docs/x.md` |\n" +
		"| gen | `fixtures/gen` | `fixtures/gen/main.go`, `../outside.go` |\n" +
		"\n## Next\n\n| concern | package | files |\n|---|---|---|\n| b | `b` | `b/b.go` |\n"
	rows, err := parseConcernTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("parsed %d rows, want 3 (the table ends at the next heading): %+v", len(rows), rows)
	}
	problems, err := checkDesignTable(root, rows)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{
		"`a/missing.go` does not exist",
		"`docs` in the package column is not a package",
		"`../outside.go` is not a clean relative slash path",
		"package `b` is in no row",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	for _, never := range []string{"testdata", ".hidden", "_skip", "`d`", "nested", "`e`", "`fixtures/gen`"} {
		if strings.Contains(all, never) {
			t.Errorf("problems name %s, which is no package to list:\n%s", never, all)
		}
	}
	if len(problems) != 4 {
		t.Errorf("%d problems, want 4:\n%s", len(problems), all)
	}

	for _, bad := range []string{
		"# x\n",
		concernHeading + "\n\n| concern | files |\n|---|---|\n| a | `a/a.go` |\n",
		concernHeading + "\n\n| concern | package | files |\n|---|---|---|\n| a | a | `a/a.go` |\n",
		concernHeading + "\n\ntext only\n",
	} {
		if _, err := parseConcernTable(bad); err == nil {
			t.Errorf("parseConcernTable(%q) = nil error", bad)
		}
	}
}
