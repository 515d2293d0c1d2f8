package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/ferry/internal/appconfig"
	"github.com/ferryhq/ferry/fsbus/fold"
)

// TestConnectNames: <app>-<machine>, a worktree suffix, 63 bytes at most.
func TestConnectNames(t *testing.T) {
	for _, tc := range []struct{ app, machine, wt, want string }{
		{"claude-code", "Box", "", "claude-code-box"},
		{"cursor", "my_laptop", "feature.x", "cursor-my-laptop-feature-x"},
		{"codex", "", "", "codex"},
	} {
		if got := defaultAgentName(tc.app, tc.machine, tc.wt); got != tc.want {
			t.Errorf("%v: got %q", tc, got)
		}
	}
	long := defaultAgentName("claude-desktop", strings.Repeat("m", 40), strings.Repeat("w", 40))
	if len(long) > 63 || !fold.ValidName(long) {
		t.Errorf("long name %q", long)
	}
}

// TestConnectWorktree: in a second git worktree, a project-level entry gets a name of
// its own; in the main worktree it does not.
func TestConnectWorktree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is needed on CI")
		}
		t.Log("no git: readGit reports no repository, covered by the name test")
		return
	}
	dir := t.TempDir()
	repo, wt := filepath.Join(dir, "repo"), filepath.Join(dir, "feat-login")
	git := func(d string, args ...string) {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = d
		c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(repo, 0o755)
	git(repo, "init", "-q")
	git(repo, "commit", "-q", "--allow-empty", "-m", "x")
	git(repo, "worktree", "add", "-q", wt)
	gi, ok := readGit(repo)
	if !ok || gi.Linked {
		t.Errorf("main worktree: %+v %v", gi, ok)
	}
	gi, ok = readGit(filepath.Join(wt))
	if !ok || !gi.Linked || filepath.Base(gi.TopLevel) != "feat-login" {
		t.Errorf("linked worktree: %+v %v", gi, ok)
	}
	if _, ok := readGit(dir); ok {
		t.Errorf("outside a repository: ok")
	}
}

// TestConnectAppsEnum: the apps `ferry connect` takes are appconfig.Apps, in order.
func TestConnectAppsEnum(t *testing.T) {
	f, _ := reflect.TypeFor[ConnectCmd]().FieldByName("App")
	var names []string
	for _, a := range appconfig.Apps {
		names = append(names, string(a))
	}
	if got, want := f.Tag.Get("enum"), strings.Join(names, ","); got != want {
		t.Errorf("ConnectCmd.App enum %q, appconfig.Apps %q", got, want)
	}
}
