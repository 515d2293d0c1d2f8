package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// git as the carrier (docs/sync.md "git"): real git, a bare repository on disk, two
// machines (two FERRY_HOMEs, two clones). git is required: it is installed wherever the
// suite runs (CI included), and its absence fails the test rather than skipping it.

// gitEnv is the environment of every git, and every ferry running git, of one test:
// this process's without the variables that point git at another repository or
// identity, with no system configuration and a global one in the test's own home, so
// the machine's git configuration is ignored. It is given to each process rather than
// set on this one, so the git tests run in parallel.
type gitEnv []string

// isolateGit returns the git environment of test t.
func isolateGit(t *testing.T) gitEnv {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required by this test (ferry sync --git): %v", err)
	}
	home := t.TempDir()
	set := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + filepath.Join(home, ".gitconfig")}
	drop := []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"}
	var env gitEnv
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, k) && !slices.ContainsFunc(set, func(s string) bool { return strings.HasPrefix(s, k+"=") }) {
			env = append(env, kv)
		}
	}
	return append(env, set...)
}

// machine returns a new machine of t running bin whose processes get env.
func (env gitEnv) machine(t *testing.T, bin string) *mcpMachine {
	m := newMCPMachine(t, bin)
	m.base = env
	return m
}

// command returns an unstarted git in dir.
func (env gitEnv) command(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	return cmd
}

// in runs git in dir and returns its trimmed output, failing the test on an error.
func (env gitEnv) in(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := env.command(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// identity gives the repository dir a committer (CI has no global identity).
func (env gitEnv) identity(t *testing.T, dir, name string) {
	env.in(t, dir, "config", "user.name", name)
	env.in(t, dir, "config", "user.email", name+"@example.com")
	env.in(t, dir, "config", "commit.gpgsign", "false")
}

// syncResult is the JSON ferry sync --git --json prints.
type syncResult struct {
	Committed []string `json:"committed"`
	Pulled    int      `json:"pulled"`
	Pushed    int      `json:"pushed"`
	Retried   bool     `json:"retried"`
	LeftAlone []string `json:"left_alone"`
}

// gsync runs ferry sync --git on m for channel ch and returns what it did.
func gsync(t *testing.T, m *mcpMachine, ch string) syncResult {
	t.Helper()
	so := m.must("sync", "--git", "--json", "--channel", ch)
	var r syncResult
	if err := json.Unmarshal([]byte(so), &r); err != nil {
		t.Fatalf("sync output %q: %v", so, err)
	}
	if len(r.LeftAlone) > 0 {
		t.Errorf("sync left files alone: %v", r.LeftAlone)
	}
	return r
}

// TestGitSyncTwoMachines: two machines write orders and messages concurrently, claim
// one order at once, and sync through a bare repository alternately — once with a push
// rejected because the other machine pushed first; both converge to one state, git
// never conflicts, and ledger verify is clean on both.
func TestGitSyncTwoMachines(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	git := isolateGit(t)
	root := t.TempDir()
	bare := filepath.Join(root, "origin.git")
	git.in(t, root, "init", "-q", "--bare", "-b", "main", bare)

	// Machine A: a repository with one commit, pushed; the channel inside it.
	a, b := git.machine(t, bin), git.machine(t, bin)
	repoA := filepath.Join(a.dir, "repo")
	git.in(t, a.dir, "init", "-q", "-b", "main", repoA)
	git.identity(t, repoA, "machine-a")
	if err := os.WriteFile(filepath.Join(repoA, "README.md"), []byte("project notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git.in(t, repoA, "add", "README.md")
	git.in(t, repoA, "commit", "-q", "-m", "start")
	git.in(t, repoA, "remote", "add", "origin", bare)
	git.in(t, repoA, "push", "-q", "-u", "origin", "main")
	chA := filepath.Join(repoA, "ch")
	a.must("init", chA, "--project", "acme")
	a.must("join", "--as", "alice", "--channel", chA)
	a.must("grant", "alice", "--level", "member", "--channel", chA)
	r := gsync(t, a, chA)
	if r.Pushed != 1 || !contains(r.Committed, "channel.toml") || !contains(r.Committed, "PROTOCOL.md") {
		t.Fatalf("first sync on A: %+v", r)
	}
	if so := a.must("sync", "--git", "--channel", chA); !strings.Contains(so, "nothing to commit") || !strings.Contains(so, "up to date") {
		t.Errorf("a second sync with nothing new says %q", so)
	}

	// Machine B: a clone; bob joins there; the owner seats him from A.
	repoB := filepath.Join(b.dir, "repo")
	git.in(t, b.dir, "clone", "-q", bare, repoB)
	git.identity(t, repoB, "machine-b")
	chB := filepath.Join(repoB, "ch")
	b.must("join", "--as", "bob", "--channel", chB)
	gsync(t, b, chB)
	if r := gsync(t, a, chA); r.Pulled != 1 {
		t.Fatalf("A did not pull bob's join: %+v", r)
	}
	a.must("grant", "bob", "--level", "member", "--channel", chA)
	gsync(t, a, chA)
	gsync(t, b, chB)

	// Rounds: both machines write at once, then sync, alternating who goes first
	// (-short: one round with A first, one with B).
	rounds := []int{0, 1, 2, 3}
	if testing.Short() {
		rounds = rounds[:2]
	}
	write := func(m *mcpMachine, ch, who, to string, round int) {
		m.must("--as", who, "order", "new", fmt.Sprintf("%s's order %d", who, round), "--channel", ch)
		m.must("--as", who, "talk", "send", "--to", to, fmt.Sprintf("%s's message %d", who, round), "--channel", ch)
	}
	for _, round := range rounds {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); write(a, chA, "alice", "bob", round) }()
		go func() { defer wg.Done(); write(b, chB, "bob", "alice", round) }()
		wg.Wait()
		if round%2 == 0 {
			gsync(t, a, chA)
			gsync(t, b, chB)
		} else {
			gsync(t, b, chB)
			gsync(t, a, chA)
		}
	}

	// A push rejected: B's pre-push hook makes A write and sync first, so the remote
	// moves under B's push; B pulls again and pushes (once).
	write(a, chA, "alice", "bob", 10)
	write(b, chB, "bob", "alice", 10)
	hook := filepath.Join(repoB, ".git", "hooks", "pre-push")
	mark := filepath.Join(b.dir, "hook-ran")
	script := fmt.Sprintf("#!/bin/sh\n[ -f %q ] && exit 0\n: > %q\nFERRY_HOME=%q exec %q sync --git --channel %q >/dev/null\n",
		filepath.ToSlash(mark), filepath.ToSlash(mark), filepath.ToSlash(a.home), filepath.ToSlash(bin), filepath.ToSlash(chA))
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// An edit outside the channel, not staged (the channel may live in a project's
	// repo): it is neither committed nor lost by the rebase (--autostash).
	readme := filepath.Join(repoB, "README.md")
	if err := os.WriteFile(readme, []byte("project notes\nwork in progress on B\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := gsync(t, b, chB); !r.Retried || r.Pushed != 1 || r.Pulled == 0 {
		t.Errorf("B's sync after A pushed under it: %+v, want one retry, a pull and one commit pushed", r)
	}
	os.Remove(hook)
	if raw, _ := os.ReadFile(readme); string(raw) != "project notes\nwork in progress on B\n" {
		t.Errorf("B's unstaged edit after the sync: %q", raw)
	}
	if d := git.in(t, repoB, "diff", "--name-only"); d != "README.md" {
		t.Errorf("unstaged after the sync: %q, want README.md only", d)
	}
	git.in(t, repoB, "checkout", "-q", "README.md")

	// Both claim one order before they sync: a contest, not a git conflict.
	so := a.must("--as", "alice", "order", "new", "Contested work", "--json", "--channel", chA)
	var o struct{ ID string }
	if err := json.Unmarshal([]byte(so), &o); err != nil {
		t.Fatal(err)
	}
	gsync(t, a, chA)
	gsync(t, b, chB)
	a.must("--as", "alice", "order", "claim", o.ID, "--channel", chA)
	b.must("--as", "bob", "order", "claim", o.ID, "--channel", chB)
	gsync(t, a, chA)
	gsync(t, b, chB)
	gsync(t, a, chA)

	// Converged: one history, one state, verified.
	if ha, hb := git.in(t, repoA, "rev-parse", "HEAD"), git.in(t, repoB, "rev-parse", "HEAD"); ha != hb {
		t.Errorf("HEADs differ: A %s, B %s", ha, hb)
	}
	for _, args := range [][]string{{"order", "list", "--json"}, {"order", "show", o.ID, "--json"}, {"--as", "master", "talk", "sent", "--json"}} {
		sa := folded(t, a.must(append(args, "--channel", chA)...))
		sb := folded(t, b.must(append(args, "--channel", chB)...))
		if sa != sb {
			t.Errorf("ferry %v differs:\nA: %s\nB: %s", args, sa, sb)
		}
	}
	if show := a.must("order", "show", o.ID, "--channel", chA); !strings.Contains(show, "contest") && !strings.Contains(show, "superseded") {
		t.Errorf("the claim race is not reported:\n%s", show)
	}
	orders := a.must("order", "list", "--channel", chA)
	for _, who := range []string{"alice", "bob"} {
		for _, round := range append(slices.Clone(rounds), 10) {
			if !strings.Contains(orders, fmt.Sprintf("%s's order %d", who, round)) {
				t.Errorf("%s's order %d is missing after the syncs", who, round)
			}
		}
	}
	for _, m := range []struct {
		name string
		m    *mcpMachine
		ch   string
		repo string
	}{{"A", a, chA, repoA}, {"B", b, chB, repoB}} {
		if so, se, code := m.m.ferry("ledger", "verify", "--channel", m.ch); code != 0 {
			t.Errorf("ledger verify on %s: exit %d\n%s%s", m.name, code, so, se)
		}
		// Nothing ferry wrote is left uncommitted (.stignore is machine-local).
		if st := git.in(t, m.repo, "status", "--porcelain", "--untracked-files=all"); strings.TrimSpace(strings.ReplaceAll(st, "?? ch/.stignore", "")) != "" {
			t.Errorf("%s: uncommitted after the last sync:\n%s", m.name, st)
		}
		for _, who := range []string{"alice", "bob"} {
			to := map[string]string{"alice": "bob", "bob": "alice"}[who]
			sent := m.m.must("--as", who, "talk", "sent", "--limit", "100", "--channel", m.ch)
			if n, want := strings.Count(sent, who+"'s message"), len(rounds)+1; n != want {
				t.Errorf("%s: %s sent %d messages to %s, want %d:\n%s", m.name, who, n, to, want, sent)
			}
		}
	}

	// Human notes edited on both machines: the one place git can conflict. The second
	// sync reports the file, aborts the rebase and keeps the local commit and text.
	for _, m := range []struct {
		ch, text string
	}{{chA, "A says: ship on Friday\n"}, {chB, "B says: ship on Monday\n"}} {
		if err := os.MkdirAll(filepath.Join(m.ch, "memory"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.ch, "memory", "plan.md"), []byte(m.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := gsync(t, a, chA); !contains(r.Committed, "memory/plan.md") {
		t.Fatalf("A did not commit its note: %+v", r)
	}
	before := git.in(t, repoB, "rev-parse", "@{upstream}")
	so, se, code := b.ferry("sync", "--git", "--channel", chB)
	if code != exitCodes["conflict"] || !strings.Contains(se, "ch/memory/plan.md") || !strings.Contains(se, "nothing was lost") {
		t.Fatalf("a conflicting note: exit %d\n%s%s", code, so, se)
	}
	if raw, _ := os.ReadFile(filepath.Join(chB, "memory", "plan.md")); string(raw) != "B says: ship on Monday\n" {
		t.Errorf("B's note after the conflict: %q", raw)
	}
	if files := git.in(t, repoB, "log", "-1", "--name-only", "--format="); !strings.Contains(files, "ch/memory/plan.md") {
		t.Errorf("B's commit of the note is gone: last commit holds %q", files)
	}
	for _, p := range []string{"rebase-merge", "rebase-apply"} {
		if _, err := os.Stat(filepath.Join(repoB, ".git", p)); err == nil {
			t.Errorf("a rebase is left in progress (%s)", p)
		}
	}
	if after := git.in(t, repoB, "rev-parse", "@{upstream}"); after == before {
		t.Errorf("B did not fetch A's note before rebasing")
	}
	if _, se, code := b.ferry("ledger", "verify", "--channel", chB); code != 0 {
		t.Errorf("ledger verify on B after the conflict: %s", se)
	}
}

// TestGitSyncRefusals: every setup ferry sync --git cannot work in is refused with its
// reason and a hint, and changes nothing.
func TestGitSyncRefusals(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	git := isolateGit(t)
	m := git.machine(t, bin)
	root := t.TempDir()
	bare := filepath.Join(root, "origin.git")
	git.in(t, root, "init", "-q", "--bare", "-b", "main", bare)

	newRepo := func(name string) (repo, ch string) {
		repo = filepath.Join(root, name)
		git.in(t, root, "init", "-q", "-b", "main", repo)
		git.identity(t, repo, "m")
		ch = filepath.Join(repo, "ch")
		m.must("init", ch, "--project", name)
		return repo, ch
	}
	refuse := func(what, ch string, env []string, code int, msg, hint string) {
		t.Helper()
		cmd := m.command("sync", "--git", "--channel", ch)
		cmd.Env = append(cmd.Env, env...)
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		got := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			got = ee.ExitCode()
		}
		if got != code || !strings.Contains(se.String(), msg) || !strings.Contains(se.String(), "ferry: hint: "+hint) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d with %q and hint %q", what, got, se.String(), code, msg, hint)
		}
	}

	// Not in a repository at all.
	plain := filepath.Join(root, "plain", "ch")
	m.must("init", plain, "--project", "plain")
	refuse("not a repository", plain, nil, 2, "is not in a git repository", "run `git init`")

	// No remote, then a remote but no upstream.
	repo, ch := newRepo("noremote")
	refuse("no remote", ch, nil, 2, "has no remote", "git remote add origin URL")
	git.in(t, repo, "remote", "add", "origin", bare)
	refuse("no upstream", ch, nil, 2, "branch main has no upstream", "set it once: git push -u origin main")
	if out := git.in(t, repo, "status", "--porcelain"); !strings.Contains(out, "?? ch/") {
		t.Errorf("a refused sync staged or committed something: %q", out)
	}

	// Detached HEAD.
	git.in(t, repo, "add", "ch/channel.toml")
	git.in(t, repo, "commit", "-q", "-m", "channel")
	git.in(t, repo, "push", "-q", "-u", "origin", "main")
	git.in(t, repo, "checkout", "-q", "--detach")
	refuse("detached HEAD", ch, nil, 2, "HEAD is detached", "check out a branch")
	git.in(t, repo, "checkout", "-q", "main")

	// Someone else's change staged: ferry will not commit it with its own.
	if err := os.WriteFile(filepath.Join(repo, "src.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git.in(t, repo, "add", "src.go")
	head := git.in(t, repo, "rev-parse", "HEAD")
	refuse("staged foreign file", ch, nil, 5, "staged changes that are not this machine's channel files: src.go", "commit them yourself")
	if now := git.in(t, repo, "rev-parse", "HEAD"); now != head {
		t.Errorf("a refused sync committed")
	}
	if st := git.in(t, repo, "diff", "--cached", "--name-only"); st != "src.go" {
		t.Errorf("the index after a refused sync: %q", st)
	}
	git.in(t, repo, "reset", "-q", "src.go")

	// A rebase already in progress is left to the user.
	if err := os.MkdirAll(filepath.Join(repo, ".git", "rebase-merge"), 0o755); err != nil {
		t.Fatal(err)
	}
	refuse("rebase in progress", ch, nil, 5, "a git rebase is in progress", "finish it")
	os.RemoveAll(filepath.Join(repo, ".git", "rebase-merge"))

	// git missing from PATH.
	empty := t.TempDir()
	refuse("git missing", ch, []string{"PATH=" + empty}, 4, "git is not installed", "install git")

	// The remote is gone: the commit is made and kept, the fetch fails, retry later.
	git.in(t, repo, "remote", "set-url", "origin", filepath.Join(root, "moved.git"))
	refuse("remote unreachable", ch, nil, 8, "fetching from origin failed", "check the network")
	if n := git.in(t, repo, "rev-list", "--count", "@{upstream}..HEAD"); n != "1" {
		t.Errorf("the commit made before the failed fetch is not kept: %s ahead", n)
	}
	// Without --git, sync says what it is for.
	if _, se, code := m.ferry("sync", "--channel", ch); code != 2 || !strings.Contains(se, "--git") {
		t.Errorf("sync without --git: exit %d %q", code, se)
	}
}

// folded returns the JSON out without the members each machine measures on its own
// clock (an order's window, its holder's liveness): the rest is the folded state, the
// same on every machine once the files have met (docs/design.md §2 rule 7).
func folded(t *testing.T, out string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"window", "holder_liveness", "holder_age_s"} {
				delete(x, k)
			}
			for _, c := range x {
				strip(c)
			}
		case []any:
			for _, c := range x {
				strip(c)
			}
		}
	}
	strip(v)
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGitSyncClonedDevice: machine B's ferry home is a copy of
// A's (same device id, same keys). Both append to one segment, so the rebase of B's
// sync conflicts in it. The error names the cause (two machines with one device id) and
// the steps of the fix, never "edit each file"; the rebase is aborted cleanly. Run
// while a rebase is stopped, doctor names the rebase first instead of calling the
// conflict markers malformed lines.
func TestGitSyncClonedDevice(t *testing.T) {
	t.Parallel()
	bin := ferryExe(t)
	git := isolateGit(t)
	root := t.TempDir()
	bare := filepath.Join(root, "origin.git")
	git.in(t, root, "init", "-q", "--bare", "-b", "main", bare)
	a, b := git.machine(t, bin), git.machine(t, bin)
	repoA := filepath.Join(a.dir, "repo")
	git.in(t, a.dir, "init", "-q", "-b", "main", repoA)
	git.identity(t, repoA, "machine-a")
	git.in(t, repoA, "remote", "add", "origin", bare)
	chA := filepath.Join(repoA, "ch")
	a.must("init", chA, "--project", "acme")
	a.must("join", "--as", "alice", "--channel", chA)
	a.must("grant", "alice", "--level", "member", "--channel", chA)
	git.in(t, repoA, "add", "-A")
	git.in(t, repoA, "commit", "-q", "-m", "start")
	git.in(t, repoA, "push", "-q", "-u", "origin", "main")

	// B: a clone of the repository, and a copy of A's ferry home.
	if err := os.CopyFS(b.home, os.DirFS(a.home)); err != nil {
		t.Fatal(err)
	}
	repoB := filepath.Join(b.dir, "repo")
	git.in(t, b.dir, "clone", "-q", bare, repoB)
	git.identity(t, repoB, "machine-b")
	chB := filepath.Join(repoB, "ch")
	a.must("--as", "alice", "order", "new", "written on A", "--channel", chA)
	b.must("--as", "alice", "order", "new", "written on B", "--channel", chB)
	gsync(t, a, chA)
	head := git.in(t, repoB, "rev-parse", "HEAD")
	so, se, code := b.ferry("sync", "--git", "--channel", chB)
	if code != exitCodes["conflict"] {
		t.Fatalf("sync on the clone: exit %d\n%s%s", code, so, se)
	}
	for _, want := range []string{"ch/ledger/alice/", "two machines use one device id", "never edit a segment by hand", "config", "device (ferry makes a new device id", "git checkout --theirs", "ferry doctor"} {
		if !strings.Contains(se, want) {
			t.Errorf("the conflict message lacks %q:\n%s", want, se)
		}
	}
	if strings.Contains(se, "edit each file") {
		t.Errorf("the conflict message tells to edit segments:\n%s", se)
	}
	for _, p := range []string{"rebase-merge", "rebase-apply", "MERGE_HEAD"} {
		if _, err := os.Stat(filepath.Join(repoB, ".git", p)); err == nil {
			t.Errorf("left in progress: %s", p)
		}
	}
	if got := git.in(t, repoB, "rev-parse", "HEAD"); got == head {
		t.Errorf("B's own commit is gone (HEAD still %s)", got)
	}
	if st := git.in(t, repoB, "status", "--porcelain"); st != "" {
		t.Errorf("the abort left changes: %q", st)
	}

	// A rebase stopped on the conflict (the user ran git pull --rebase by hand): doctor
	// names it first, and does not call the conflict markers malformed.
	cmd := git.command(repoB, "pull", "-q", "--rebase")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("git pull --rebase did not stop on the conflict: %s", out)
	}
	so, se, _ = b.ferry("doctor", "--channel", chB)
	lines := strings.Split(strings.TrimSpace(so), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "error   git a git rebase is in progress") {
		t.Fatalf("doctor mid-rebase:\n%s%s", so, se)
	}
	if strings.Contains(so, "malformed") {
		t.Errorf("doctor mid-rebase calls conflict markers malformed:\n%s", so)
	}

	// The steps the hint names work: B gets a new device, keeps its records as a copy,
	// syncs; both machines then read both orders' records (the fork is reported).
	git.in(t, repoB, "rebase", "--abort")
	segs, _ := filepath.Glob(filepath.Join(chB, "ledger", "alice", "*.jsonl"))
	if len(segs) != 1 {
		t.Fatalf("alice's segments on B: %v", segs)
	}
	seg, _ := filepath.Rel(repoB, segs[0])
	seg = filepath.ToSlash(seg)
	if err := os.Remove(filepath.Join(b.home, "config", "device")); err != nil {
		t.Fatal(err)
	}
	cmd = git.command(repoB, "merge", "-q", "@{upstream}")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("git merge did not stop on the conflict: %s", out)
	}
	mine := git.in(t, repoB, "show", "HEAD:"+seg)
	if err := os.WriteFile(filepath.Join(repoB, strings.TrimSuffix(seg, ".jsonl")+".clone.jsonl"), []byte(mine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git.in(t, repoB, "checkout", "--theirs", "--", seg)
	git.in(t, repoB, "add", "-A", "ch/ledger/alice")
	git.in(t, repoB, "commit", "-q", "--no-edit")
	gsync(t, b, chB)
	gsync(t, a, chA)
	for _, m := range []struct {
		m  *mcpMachine
		ch string
	}{{a, chA}, {b, chB}} {
		so, se, _ := m.m.ferry("doctor", "--channel", m.ch)
		if !strings.Contains(so, "fork alice/") || strings.Contains(so, "error   git") || strings.Contains(so, "malformed") {
			t.Errorf("doctor after the fix:\n%s%s", so, se)
		}
	}
}
