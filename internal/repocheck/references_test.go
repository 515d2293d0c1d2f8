package repocheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// refRule is one kind of reference the repository must not hold.
type refRule struct {
	what string
	re   *regexp.Regexp
}

// refRules are the references to what the repository does not contain. Each pattern is
// written so that this file's own text does not match it. The design is docs/design.md
// (cite "docs/design.md §N"); decisions are ADRs under docs/adr; history is git's.
var refRules = []refRule{
	{"the design file outside the repository (cite docs/design.md)", regexp.MustCompile(`DESIG[N]\.md`)},
	{"a section of the design outside the repository (cite docs/design.md §N)", regexp.MustCompile(`DESIG[N] ?§`)},
	{"the design outside the repository (cite docs/design.md)", regexp.MustCompile(`\bDESIG[N]\b`)},
	{"a directory outside the repository", regexp.MustCompile(`\.\./shared\b`)},
	{"reference documents outside the repository", regexp.MustCompile(`\bseeds/`)},
	{"the history of how the code was built (state the fact, or cite an ADR)", regexp.MustCompile(`(?i)\b(issue|session|finding)s? [0-9]`)},
}

// adrCite matches an ADR cited by number, and adrLink a link to an ADR file.
var (
	adrCite = regexp.MustCompile(`\bADR ([0-9]{4})\b`)
	adrLink = regexp.MustCompile(`\badr/([0-9]{4}-[A-Za-z0-9-]*\.md)`)
)

// isTextCandidate reports whether the file at slash path rel is one the check reads:
// Go, markdown, text, txtar scripts, TOML, the justfile and the CI script.
func isTextCandidate(rel string) bool {
	switch path.Ext(rel) {
	case ".go", ".md", ".txt", ".txtar", ".toml":
		return true
	}
	return path.Base(rel) == "justfile" || rel == ".ci/run"
}

// textFiles is every candidate file of the tree at root, as slash paths: the files git
// tracks or would add (untracked, not ignored) when root is in a git work tree, else
// every file below root but .git.
func textFiles(root string) ([]string, error) {
	var all []string
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				all = append(all, f)
			}
		}
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".git" {
					return filepath.SkipDir
				}
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			all = append(all, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var out []string
	for _, f := range all {
		if isTextCandidate(f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// scanReferences returns one "path:line: what: text" per offending line of files (slash
// paths under root). A file that no longer exists (deleted, not yet staged) is skipped.
func scanReferences(root string, files []string) (hits []string, err error) {
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 64*1024), len(b)+1)
		for n := 1; sc.Scan(); n++ {
			what := offence(root, sc.Text())
			if what == "" {
				continue
			}
			text := strings.TrimSpace(sc.Text())
			if r := []rune(text); len(r) > 140 {
				text = string(r[:140]) + "…"
			}
			hits = append(hits, fmt.Sprintf("%s:%d: %s: %s", rel, n, what, text))
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", rel, err)
		}
	}
	return hits, nil
}

// offence names the first rule line breaks, or "" when it breaks none. An ADR cited
// by number or linked must be a file in root's docs/adr.
func offence(root, line string) string {
	for _, r := range refRules {
		if r.re.MatchString(line) {
			return r.what
		}
	}
	for _, m := range adrCite.FindAllStringSubmatch(line, -1) {
		if found, _ := filepath.Glob(filepath.Join(root, "docs", "adr", m[1]+"-*.md")); len(found) == 0 {
			return "ADR " + m[1] + " is not in docs/adr"
		}
	}
	for _, m := range adrLink.FindAllStringSubmatch(line, -1) {
		if _, err := os.Stat(filepath.Join(root, "docs", "adr", m[1])); err != nil {
			return "docs/adr/" + m[1] + " does not exist"
		}
	}
	for _, m := range repoPath.FindAllStringSubmatch(line, -1) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
			return m[1] + " does not exist"
		}
	}
	return ""
}

// repoPath matches a backticked path into one of the repository's top-level Go trees,
// such as `fsbus/internal/guard/guard.go`: the file it names must exist.
var repoPath = regexp.MustCompile("`((?:ferry|fsbus|ledger|mcpserver|internal)/[A-Za-z0-9_./-]+\\.(?:go|md|json|txtar|toml))`")

// TestNoOutsideReferences: no text file of the repository points at the design kept
// outside it, at a directory beside it, at reference documents it does not hold, at an
// ADR it does not have, or at the history of how it was built.
func TestNoOutsideReferences(t *testing.T) {
	root := moduleRoot(t)
	files, err := textFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "docs/design.md") {
		t.Fatalf("docs/design.md is not among the %d files listed: the listing is wrong", len(files))
	}
	hits, err := scanReferences(root, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files checked", len(files))
	if len(hits) > 0 {
		t.Errorf("%d lines refer to what the repository does not contain:\n%s", len(hits), strings.Join(hits, "\n"))
	}
}

// TestNoOutsideReferencesCatches: every rule fires on what it is for, and not on the
// forms the repository uses (docs/design.md §N, an existing ADR, another project's
// issue as owner/repo#N).
func TestNoOutsideReferencesCatches(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs", "adr"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "adr", "0001-x.md"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Built from pieces, so that this file itself passes TestNoOutsideReferences.
	design, iss, sess, find := "DES"+"IGN", "iss"+"ue", "sess"+"ion", "find"+"ing"
	bad := []string{
		"see " + design + ".md for why",
		"as " + design + " §2 rule 7 says",
		design + "'s table listed standby",
		"cat ../" + "shared/notes",
		"the ADR in " + "see" + "ds/000.txt",
		"(" + iss + " 7)",
		"the guard (`fsbus/" + "gone.go`) runs first",
		"Iss" + "ue 9 asks for it",
		iss + "s 2–5",
		"the end of " + sess + " 3",
		"fresh-user " + find + "s 1, 2",
		find + " 9e",
		"ADR " + "0099 says so",
		"[ADR](adr/" + "0002-y.md)",
	}
	good := []string{
		"docs/design.md §2 rule 7",
		"ADR " + "0001 §3 and [it](adr/" + "0001-x.md)",
		"mark3labs/mcp-go#588, anthropics/claude-code #123",
		"a " + sess + " lease, two " + sess + "s under one name",
		"each " + find + " with a one-line fix",
		"design decisions",
	}
	var lines []string
	lines = append(lines, bad...)
	lines = append(lines, good...)
	if err := os.WriteFile(filepath.Join(root, "notes.md"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "later"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "later", "x.go"), []byte("// "+iss+" 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "data.json"), []byte(`"`+iss+` 3"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := textFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"docs/adr/" + "0001-x.md", "later/x.go", "notes.md"}; !slices.Equal(files, want) {
		t.Errorf("textFiles = %v, want %v", files, want)
	}
	hits, err := scanReferences(root, files)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	for _, h := range hits {
		if strings.HasPrefix(h, "later/x.go:") {
			got[-1] = true
			continue
		}
		var n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(h, "notes.md:"), "%d:", &n); err != nil {
			t.Fatalf("hit %q is not notes.md:N: …", h)
		}
		got[n] = true
	}
	for k, l := range bad {
		if !got[k+1] {
			t.Errorf("line %d %q was not reported", k+1, l)
		}
	}
	for k, l := range good {
		if got[len(bad)+k+1] {
			t.Errorf("line %d %q was reported", len(bad)+k+1, l)
		}
	}
	if !got[-1] {
		t.Error("later/x.go's history reference was not reported")
	}
}
