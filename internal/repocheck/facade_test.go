package repocheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The façade's size (ADR 0016): the non-test lines of fsbus/*.go and the exported names
// go doc shows for it, small enough to read in an afternoon. What only fsbus needs
// goes below it (fsbus/internal, or a package below the façade when the surfaces name
// its types); what only reads the façade goes on top of it.
const (
	facadeMaxLines = 8100
	facadeMaxNames = 120
)

// facadeSize counts dir's non-test Go lines and its exported names as `go doc -short`
// lists them: each function, each type, and each const or var declaration (a group
// counts once, as go doc shows one line for it).
func facadeSize(dir string) (lines, names int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return 0, 0, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return 0, 0, err
		}
		lines += bytes.Count(src, []byte("\n"))
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			return 0, 0, err
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names++
				}
			case *ast.GenDecl:
				exported := 0
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names++
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								exported++
							}
						}
					}
				}
				if exported > 0 {
					names++
				}
			}
		}
	}
	return lines, names, nil
}

func TestFacadeSize(t *testing.T) {
	lines, names, err := facadeSize(filepath.Join(moduleRoot(t), "fsbus"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fsbus: %d non-test lines (at most %d), %d exported names (at most %d)",
		lines, facadeMaxLines, names, facadeMaxNames)
	if lines > facadeMaxLines {
		t.Errorf("fsbus has %d non-test lines, over %d: move what only fsbus uses below it (fsbus/internal, ADR 0016)", lines, facadeMaxLines)
	}
	if names > facadeMaxNames {
		t.Errorf("fsbus exports %d names, over %d: unexport what no caller outside fsbus names (ADR 0016)", names, facadeMaxNames)
	}
}

// TestFacadeSizeCounts holds the count to go doc's way of listing a package: a
// function, a type, and a const or var group count once each; methods, unexported
// names and test files do not count.
func TestFacadeSizeCounts(t *testing.T) {
	dir := t.TempDir()
	src := `package p

const (
	A = 1
	B = 2
	c = 3
)

var D, e = 1, 2

type T struct{}

func (T) M() {}

func F() {}

func g() {}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc TestX() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, names, err := facadeSize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if lines != strings.Count(src, "\n") || names != 4 {
		t.Errorf("facadeSize = %d lines, %d names; want %d lines, 4 names (the const group, the var group, T, F)", lines, names, strings.Count(src, "\n"))
	}
}
