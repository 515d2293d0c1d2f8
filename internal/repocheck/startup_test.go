package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// startupCompiles are the calls that compile at package init when they stand in a
// package-level variable's value or in an init function: every process pays for them,
// whatever the command (use internal/lazyre, or compile on first use).
var startupCompiles = map[string]bool{
	"regexp.MustCompile": true, "regexp.Compile": true,
	"regexp.MustCompilePOSIX": true, "regexp.CompilePOSIX": true,
	"jsonschema.NewCompiler": true, "jsonschema.CompileString": true, "jsonschema.MustCompileString": true,
	// Tables: CRC-32C's builds 8 KB of slicing tables.
	"crc32.MakeTable": true, "crc64.MakeTable": true,
}

// startupHits returns one "path:line: call" per call of startupCompiles in src that runs
// at package init: in the value of a package-level var (outside a function literal) or
// in an init function.
func startupHits(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var hits []string
	walk := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false // runs when called, not at init
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && startupCompiles[x.Name+"."+sel.Sel.Name] {
						hits = append(hits, fsetLine(fset, path, n.Pos())+": "+x.Name+"."+sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok == token.VAR {
				for _, s := range d.Specs {
					for _, v := range s.(*ast.ValueSpec).Values {
						walk(v)
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" {
				walk(d.Body)
			}
		}
	}
	return hits, nil
}

// TestNothingCompiledAtStartup: no package of the module compiles a regular expression
// or a JSON Schema, or builds a checksum table, while the program starts.
func TestNothingCompiledAtStartup(t *testing.T) {
	eachNonTestHit(t, startupHits, "compiles at start-up: use internal/lazyre (or compile on first use)")
}

func TestNothingCompiledAtStartupCatches(t *testing.T) {
	src := "package p\n\nvar a = regexp.MustCompile(`x`)\n\nvar t = []struct{ re *regexp.Regexp }{{regexp.MustCompile(`y`)}}\n\nvar lazy = func() *regexp.Regexp { return regexp.MustCompile(`z`) }\n\nfunc init() { _ = regexp.MustCompile(`w`) }\n\nfunc f() { _ = regexp.MustCompile(`v`) }\n\nvar tab = crc32.MakeTable(crc32.Castagnoli)\n"
	hits, err := startupHits("p/p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 4 || !strings.HasPrefix(hits[0], "p/p.go:3:") || !strings.HasPrefix(hits[1], "p/p.go:5:") || !strings.HasPrefix(hits[2], "p/p.go:9:") || !strings.HasPrefix(hits[3], "p/p.go:13:") {
		t.Errorf("hits = %q, want lines 3, 5, 9 and 13 (not a function literal nor a function run later)", hits)
	}
}
