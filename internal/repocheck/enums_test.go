package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// untypedInTypedGroup returns one "path:line: name" per constant of a const group whose
// first constant has a type and which gives a value without repeating the type: Go
// types the rest of the group only where the value is omitted too, so
// `StateOffered = "offered"` under `StateOpen OrderState = "open"` is an untyped
// string, and the enum is typed in name only.
func untypedInTypedGroup(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var hits []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || len(g.Specs) < 2 {
			continue
		}
		first := g.Specs[0].(*ast.ValueSpec)
		if first.Type == nil {
			continue
		}
		for _, s := range g.Specs[1:] {
			v := s.(*ast.ValueSpec)
			if v.Type == nil && len(v.Values) > 0 {
				hits = append(hits, fsetLine(fset, path, v.Pos())+": "+v.Names[0].Name)
			}
		}
	}
	return hits, nil
}

func fsetLine(fset *token.FileSet, path string, p token.Pos) string {
	return path + ":" + strings.TrimPrefix(fset.Position(p).String(), fset.Position(p).Filename+":")
}

// eachNonTestHit runs check over every non-test Go file of the module and reports each
// hit it returns, followed by what.
func eachNonTestHit(t *testing.T, check func(path string, src []byte) ([]string, error), what string) {
	t.Helper()
	root := moduleRoot(t)
	for _, f := range goFiles(t, root) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		hits, err := check(f, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			t.Errorf("%s %s", h, what)
		}
	}
}

// TestTypedEnums: the module's enums (fold.OrderState, errs.Category, …) type every
// constant of their group.
func TestTypedEnums(t *testing.T) {
	eachNonTestHit(t, untypedInTypedGroup, "is a constant of a typed group without the type (it is untyped: give it the group's type)")
}

func TestTypedEnumsCatches(t *testing.T) {
	src := "package p\n\ntype S string\n\nconst (\n\tA S = \"a\"\n\tB = \"b\"\n\tC S = \"c\"\n)\n\nconst (\n\tX int = iota\n\tY\n)\n"
	hits, err := untypedInTypedGroup("p/p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || !strings.HasSuffix(hits[0], ": B") || !strings.HasPrefix(hits[0], "p/p.go:7:") {
		t.Errorf("hits = %q, want B at p/p.go:7 alone (iota's omitted values keep the type)", hits)
	}
}
