package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
)

// CLI conventions (docs/exit-codes.md): exit codes documented from the one map, shell
// completion for four shells, build info in `ferry version`.

const exitCodesDoc = "../docs/exit-codes.md"

// TestExitCodesDoc fails when docs/exit-codes.md is not what exitCodes renders now;
// -update rewrites it.
func TestExitCodesDoc(t *testing.T) {
	got := exitCodesMarkdown()
	if regenerating() {
		if err := os.WriteFile(exitCodesDoc, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(exitCodesDoc)
	if err != nil {
		t.Fatalf("reading %s: %v (run go test ./ferry -run TestExitCodesDoc -update)", exitCodesDoc, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go test ./ferry -run TestExitCodesDoc -update and commit it", exitCodesDoc)
	}
}

// TestExitCodesCovered: every category has a code and a meaning, codes are distinct,
// and `ferry --help` and README.md state the same codes.
func TestExitCodesCovered(t *testing.T) {
	cats := []errs.Category{errs.Internal, errs.Invalid, errs.Denied, errs.NotFound, errs.Conflict,
		errs.Locked, errs.Stale, errs.RetryNeeded, errs.Paused, errs.Superseded}
	seen := map[int]errs.Category{0: "ok"}
	for _, c := range cats {
		code, ok := exitCodes[c]
		if !ok || exitMeaning[c] == "" {
			t.Errorf("category %s: code %d (%v), meaning %q", c, code, ok, exitMeaning[c])
		}
		if other, dup := seen[code]; dup {
			t.Errorf("code %d for both %s and %s", code, other, c)
		}
		seen[code] = c
	}
	if len(exitCodes) != len(cats) || len(exitMeaning) != len(cats) {
		t.Errorf("exitCodes has %d entries, exitMeaning %d; categories %d", len(exitCodes), len(exitMeaning), len(cats))
	}
	var out, errb bytes.Buffer
	run([]string{"--help"}, &out, &errb)
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if !strings.Contains(words(out.String()), words(exitCodesLine())) {
		t.Errorf("ferry --help lacks %q:\n%s", exitCodesLine(), out.String())
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range exitRows()[1:] {
		if want := fmt.Sprintf("%d %s", r.Code, r.Category); !strings.Contains(words(string(readme)), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}

// TestReadmeSaysFirstRunCost: README's opening, before its first section, says what the
// first `go run ./ferry demo` costs (it downloads and compiles, about how long) and about
// how long `go test ./...` takes, so a newcomer does not take the wait for a hang.
func TestReadmeSaysFirstRunCost(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := strings.Cut(string(readme), "\n## ")
	top = strings.Join(strings.Fields(top), " ")
	for _, want := range []string{"The first `go run ./ferry demo` downloads the modules and compiles ferry", "minutes", "`go test ./...` takes"} {
		if !strings.Contains(top, want) {
			t.Errorf("README.md's opening does not say %q", want)
		}
	}
}

// TestCompletionScripts: each shell's script names every command and alias, every flag
// and every fixed flag value of the CLI; the bash script parses (bash -n).
func TestCompletionScripts(t *testing.T) {
	app, err := catalogModel()
	if err != nil {
		t.Fatal(err)
	}
	cat := commandCatalog(app)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		var out, errb bytes.Buffer
		if code := run([]string{"completion", shell}, &out, &errb); code != 0 {
			t.Fatalf("completion %s: exit %d: %s", shell, code, errb.String())
		}
		s := out.String()
		for _, c := range cat.Commands {
			ws := strings.Fields(c.Path)
			for i := range ws {
				if !strings.Contains(s, "'"+strings.Join(ws[:i+1], " ")+"'") {
					t.Errorf("%s: no %q", shell, strings.Join(ws[:i+1], " "))
				}
			}
			for _, a := range c.Aliases {
				if !strings.Contains(s, "|"+a+"'") {
					t.Errorf("%s: no alias %q of %s", shell, a, c.Path)
				}
			}
			for _, f := range c.Flags {
				if !strings.Contains(s, "--"+f.Name) {
					t.Errorf("%s: %s: no flag --%s", shell, c.Path, f.Name)
				}
				for _, v := range f.Enum {
					if !strings.Contains(s, v) {
						t.Errorf("%s: %s --%s: no value %q", shell, c.Path, f.Name, v)
					}
				}
			}
		}
		if shell == "bash" {
			f := filepath.Join(t.TempDir(), "ferry.bash")
			os.WriteFile(f, out.Bytes(), 0o644)
			if b, err := exec.Command("bash", "-n", f).CombinedOutput(); err != nil {
				t.Errorf("bash -n: %v\n%s", err, b)
			}
		}
	}
}

// TestCompletionBash runs the bash completion function as bash would on TAB.
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bash is needed on CI")
		}
		t.Log("no bash here; TestCompletionScripts checks the script's contents")
		return
	}
	var out, errb bytes.Buffer
	run([]string{"completion", "bash"}, &out, &errb)
	f := filepath.Join(t.TempDir(), "ferry.bash")
	os.WriteFile(f, out.Bytes(), 0o644)
	for _, tc := range []struct {
		line string // the words before the cursor, the last being the one completed
		want []string
		not  []string
	}{
		{"ferry ord", []string{"order"}, []string{"init"}},
		{"ferry order l", []string{"list"}, nil},
		{"ferry order ls --st", []string{"--state"}, nil},
		{"ferry connect ", []string{"claude-code", "claude-desktop", "codex", "cursor", "--scope"}, nil},
		{"ferry connect cursor --scope ", []string{"user", "project"}, []string{"--print"}},
		{"ferry --as bob grant set x --level ", []string{"member"}, nil},
		{"ferry grant codex-desktop --level ", []string{"worker", "member", "orchestrator"}, []string{"set", "revoke"}},
		{"ferry grant codex-desktop --l", []string{"--level"}, nil},
		{"ferry completion ", []string{"bash", "zsh", "fish", "powershell"}, nil},
		{"ferry --project acme talk ", []string{"send", "read"}, []string{"list"}},
	} {
		words := strings.Split(tc.line, " ")
		script := "source " + f + "\nCOMP_WORDS=(" + strings.Join(quoteAll(words), " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n_ferry\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		b, err := exec.Command("bash", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, b)
		}
		got := strings.Fields(string(b))
		for _, w := range tc.want {
			if !contains(got, w) {
				t.Errorf("%q: want %q among %v", tc.line, w, got)
			}
		}
		for _, w := range tc.not {
			if contains(got, w) {
				t.Errorf("%q: %q offered: %v", tc.line, w, got)
			}
		}
	}
}

// TestBuildInfo: the version and VCS stamps come from the build info, the module
// version without its leading v (as versions are written elsewhere); the linker's
// version wins.
func TestBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/ferryhq/ferry", Version: "v0.4.1"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-29T22:00:00Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "windows"}, {Key: "GOARCH", Value: "arm64"}}}
	got := buildInfo("dev", bi)
	want := BuildInfo{Version: "0.4.1", Module: "github.com/ferryhq/ferry", Revision: "abc123", Time: "2026-11-29T22:00:00Z",
		Modified: true, Format: fsbus.FormatVersion, Go: "go1.26.8", OS: "windows", Arch: "arm64"}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got := buildInfo("v9.9.9", bi); got.Version != "v9.9.9" {
		t.Errorf("the linker's version lost: %q", got.Version)
	}
	bi.Main.Version = "(devel)"
	if got := buildInfo("dev", bi); got.Version != "dev" {
		t.Errorf("(devel) shown: %q", got.Version)
	}
	if got := buildInfo("dev", nil); got.Version != "dev" || got.Format != fsbus.FormatVersion || got.Go == "" {
		t.Errorf("no build info: %+v", got)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v BuildInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Format != fsbus.FormatVersion || v.OS == "" || v.Version == "" {
		t.Errorf("version --json: %v %s", err, out.String())
	}
}

// TestNoProgressOffTerminal: a channel opened with stderr not a terminal gets no
// progress hook, so nothing but plain text reaches a pipe or a file.
func TestNoProgressOffTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []io.Writer{&bytes.Buffer{}, f} {
		if loadProgress(w) != nil {
			t.Errorf("%T: progress hook off a terminal", w)
		}
	}
	t.Setenv("FERRY_HOME", filepath.Join(t.TempDir(), "home"))
	dir := filepath.Join(t.TempDir(), "acme")
	var out, errb bytes.Buffer
	if code := run([]string{"init", dir, "--project", "acme"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	g := &Globals{Channel: dir, stdout: &out, stderr: f}
	c, err := g.Open()
	if err != nil {
		t.Fatal(err)
	}
	if c.Progress != nil {
		t.Errorf("Open set a progress hook for a file")
	}
}
