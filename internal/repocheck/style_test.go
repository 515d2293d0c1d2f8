package repocheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
}

// goFiles is every .go file of the module, as slash paths relative to root, skipping
// testdata, hidden and underscore directories.
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
		for _, loc := range r.re.FindAllIndex(src, -1) {
			line := 1 + strings.Count(string(src[:loc[0]]), "\n")
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
	} {
		if got := len(styleHits(tc.path, []byte(tc.src))); got != tc.hits {
			t.Errorf("%s: %q: %d hits, want %d", tc.path, tc.src, got, tc.hits)
		}
	}
}
