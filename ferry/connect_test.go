package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
)

// Issue 9: `ferry connect` config paths, merges, idempotency, backups, removal,
// refusal of invalid files and worktree naming, on temporary home dirs.

func envOf(goos, home string, vars map[string]string) connectEnv {
	return connectEnv{goos: goos, home: home, getenv: func(k string) string { return vars[k] },
		now: func() time.Time { return time.Date(2026, 11, 29, 22, 30, 0, 0, time.UTC) }}
}

// TestConnectPaths: every app's config path on linux, darwin and windows.
func TestConnectPaths(t *testing.T) {
	for _, tc := range []struct {
		goos, app, scope string
		vars             map[string]string
		home, root, want string
	}{
		{"linux", "claude-desktop", "user", nil, "/home/u", "", "/home/u/.config/Claude/claude_desktop_config.json"},
		{"linux", "claude-desktop", "user", map[string]string{"XDG_CONFIG_HOME": "/xdg"}, "/home/u", "", "/xdg/Claude/claude_desktop_config.json"},
		{"linux", "claude-desktop", "user", map[string]string{"XDG_CONFIG_HOME": "rel"}, "/home/u", "", "/home/u/.config/Claude/claude_desktop_config.json"},
		{"darwin", "claude-desktop", "user", nil, "/Users/u", "", "/Users/u/Library/Application Support/Claude/claude_desktop_config.json"},
		{"windows", "claude-desktop", "user", map[string]string{"APPDATA": `C:\Users\u\AppData\Roaming`}, `C:\Users\u`, "", `C:\Users\u\AppData\Roaming\Claude\claude_desktop_config.json`},
		{"linux", "claude-code", "user", nil, "/home/u", "/src/r", "/home/u/.claude.json"},
		{"darwin", "claude-code", "project", nil, "/Users/u", "/src/r", "/src/r/.mcp.json"},
		{"windows", "claude-code", "user", nil, `C:\Users\u`, `C:\src\r`, `C:\Users\u\.claude.json`},
		{"windows", "claude-code", "project", nil, `C:\Users\u`, `C:\src\r`, `C:\src\r\.mcp.json`},
		{"darwin", "claude-code", "user", map[string]string{"CLAUDE_CONFIG_DIR": "/cc"}, "/Users/u", "/src/r", "/cc/.claude.json"},
		{"linux", "claude-code", "project", map[string]string{"CLAUDE_CONFIG_DIR": "/cc"}, "/home/u", "/src/r", "/src/r/.mcp.json"},
		{"linux", "cursor", "user", nil, "/home/u", "/src/r", "/home/u/.cursor/mcp.json"},
		{"linux", "cursor", "project", nil, "/home/u", "/src/r", "/src/r/.cursor/mcp.json"},
		{"darwin", "cursor", "user", nil, "/Users/u", "", "/Users/u/.cursor/mcp.json"},
		{"windows", "cursor", "project", nil, `C:\Users\u`, `C:\src\r`, `C:\src\r\.cursor\mcp.json`},
		{"linux", "codex", "user", nil, "/home/u", "", "/home/u/.codex/config.toml"},
		{"darwin", "codex", "user", map[string]string{"CODEX_HOME": "/opt/codex"}, "/Users/u", "", "/opt/codex/config.toml"},
		{"windows", "codex", "user", nil, `C:\Users\u`, "", `C:\Users\u\.codex\config.toml`},
	} {
		got, err := connectPath(tc.app, tc.scope, envOf(tc.goos, tc.home, tc.vars), tc.root)
		if err != nil || got != tc.want {
			t.Errorf("%s %s %s: got %q, %v; want %q", tc.goos, tc.app, tc.scope, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ goos, app, scope string }{
		{"windows", "claude-desktop", "user"}, // no APPDATA
		{"linux", "claude-desktop", "project"},
		{"linux", "codex", "project"},
		{"linux", "vscode", "user"},
	} {
		if _, err := connectPath(tc.app, tc.scope, envOf(tc.goos, "/h", nil), "/r"); !isCat(err, errs.Invalid) {
			t.Errorf("%s %s %s: want invalid, got %v", tc.goos, tc.app, tc.scope, err)
		}
	}
	if got := hookPath("project", envOf("windows", `C:\Users\u`, nil), `C:\r`); got != `C:\r\.claude\settings.json` {
		t.Errorf("hook path: %q", got)
	}
	if got := hookPath("user", envOf("darwin", "/Users/u", nil), "/r"); got != "/Users/u/.claude/settings.json" {
		t.Errorf("hook path: %q", got)
	}
	if got := hookPath("user", envOf("linux", "/home/u", map[string]string{"CLAUDE_CONFIG_DIR": "/cc"}), "/r"); got != "/cc/settings.json" {
		t.Errorf("hook path: %q", got)
	}
}

func isCat(err error, cat errs.Category) bool {
	var fe *errs.Error
	return errors.As(err, &fe) && fe.Category == cat
}

var testEntry = serverEntry{Command: "/opt/ferry/bin/ferry", Args: []string{"mcp", "serve", "--as", "cursor-box", "--project", "acme"}}

func jsonEdit(t *testing.T, file string, edit func(any) (any, string, error)) (*editResult, error) {
	t.Helper()
	return editConfig(file, 0o644, time.Date(2026, 11, 29, 22, 30, 0, 0, time.UTC), decodeJSON, edit, encodeJSON)
}

// TestConnectJSONMerge: other servers, unknown keys, their order and ferry's own extra
// keys are kept; a second run changes nothing; a backup holds the old bytes; the mode
// is kept; remove takes out ferry's entry only.
func TestConnectJSONMerge(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mcp.json")
	orig := `{"zeta": 1, "mcpServers": {"other": {"command": "x", "args": ["y"]}, "ferry": {"command": "/old/ferry", "disabled": false}}, "alpha": {"k": [1,2]}}`
	if err := os.WriteFile(file, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	res, err := jsonEdit(t, file, editJSONServer(testEntry, false, false))
	if err != nil || res.Action != "updated" {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	got, _ := os.ReadFile(file)
	if i, j, k := bytes.Index(got, []byte(`"zeta"`)), bytes.Index(got, []byte(`"mcpServers"`)), bytes.Index(got, []byte(`"alpha"`)); !(i < j && j < k) {
		t.Errorf("key order not kept:\n%s", got)
	}
	var doc struct {
		Zeta       int
		Alpha      map[string][]int
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Zeta != 1 || len(doc.Alpha["k"]) != 2 || doc.MCPServers["other"]["command"] != "x" {
		t.Errorf("other content lost: %s", got)
	}
	f := doc.MCPServers["ferry"]
	if f["command"] != testEntry.Command || f["disabled"] != false || len(f["args"].([]any)) != 6 {
		t.Errorf("ferry entry: %v", f)
	}
	if _, ok := f["type"]; ok {
		t.Errorf("type written for an app that does not use it: %v", f)
	}
	if b, _ := os.ReadFile(res.Backup); string(b) != orig || res.Backup != file+".bak-20261129T223000Z" {
		t.Errorf("backup %s holds %q", res.Backup, b)
	}
	if fi, _ := os.Stat(file); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	// Idempotent: a second run writes nothing (no new backup either).
	os.Remove(res.Backup)
	res, err = jsonEdit(t, file, editJSONServer(testEntry, false, false))
	if err != nil || res.Action != "unchanged" || res.Backup != "" {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	if again, _ := os.ReadFile(file); !bytes.Equal(again, got) {
		t.Errorf("second run changed the file")
	}
	if _, err := os.Stat(file + ".bak-20261129T223000Z"); err == nil {
		t.Errorf("second run made a backup")
	}
	// Remove: only ferry's entry goes.
	res, err = jsonEdit(t, file, editJSONServer(testEntry, false, true))
	if err != nil || res.Action != "removed" {
		t.Fatalf("remove: %+v, %v", res, err)
	}
	got, _ = os.ReadFile(file)
	doc.MCPServers = nil
	json.Unmarshal(got, &doc)
	if _, ok := doc.MCPServers["ferry"]; ok || doc.MCPServers["other"] == nil || doc.Zeta != 1 {
		t.Errorf("after remove: %s", got)
	}
	res, err = jsonEdit(t, file, editJSONServer(testEntry, false, true))
	if err != nil || res.Action != "absent" {
		t.Errorf("second remove: %+v, %v", res, err)
	}
}

// TestConnectJSONNew: a missing file (and its folder) is created with the entry; the
// claude-code entry carries type stdio; env carries FERRY_HOME when given.
func TestConnectJSONNew(t *testing.T) {
	file := filepath.Join(t.TempDir(), "Claude", "claude_desktop_config.json")
	e := testEntry
	e.Env = map[string]string{"FERRY_HOME": "/h/f"}
	res, err := jsonEdit(t, file, editJSONServer(e, true, false))
	if err != nil || res.Action != "added" || res.Backup != "" {
		t.Fatalf("%+v, %v", res, err)
	}
	var doc map[string]map[string]map[string]any
	b, _ := os.ReadFile(file)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	f := doc["mcpServers"]["ferry"]
	if f["type"] != "stdio" || f["env"].(map[string]any)["FERRY_HOME"] != "/h/f" {
		t.Errorf("entry: %v", f)
	}
}

// TestConnectInvalid: a file that does not parse, or whose mcpServers is not an
// object, is refused as invalid and left byte for byte as it was, with no backup.
func TestConnectInvalid(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		toml bool
	}{
		"truncated json":     {body: `{"mcpServers": {`},
		"json array":         {body: `[1,2]`},
		"mcpServers string":  {body: `{"mcpServers": "x"}`},
		"trailing garbage":   {body: `{"a":1} x`},
		"bad toml":           {body: "[mcp_servers\ncommand = ", toml: true},
		"mcp_servers scalar": {body: "mcp_servers = 3\n", toml: true},
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "c")
		os.WriteFile(file, []byte(tc.body), 0o644)
		decode, edit, encode := decodeJSON, editJSONServer(testEntry, false, false), encodeJSON
		if tc.toml {
			decode, edit, encode = decodeTOML, editTOMLServer(testEntry, false), encodeTOML
		}
		if err := checkEdit(file, decode, edit); !isCat(err, errs.Invalid) {
			t.Errorf("%s: checkEdit: want invalid, got %v", name, err)
		}
		_, err := editConfig(file, 0o644, time.Now(), decode, edit, encode)
		if !isCat(err, errs.Invalid) {
			t.Errorf("%s: want invalid, got %v", name, err)
		}
		if b, _ := os.ReadFile(file); string(b) != tc.body {
			t.Errorf("%s: file changed to %q", name, b)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
			t.Errorf("%s: files left: %v", name, m)
		}
	}
}

// TestConnectTOMLMerge: Codex's config.toml keeps other tables, unknown keys and
// ferry's own extra keys; a second run changes nothing; remove takes ferry's table out.
func TestConnectTOMLMerge(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.toml")
	orig := "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\nargs = [\"y\"]\n\n[mcp_servers.ferry]\ncommand = \"/old\"\nstartup_timeout_sec = 20\n\n[profiles.fast]\nmodel = \"mini\"\n"
	os.WriteFile(file, []byte(orig), 0o600)
	edit := func(remove bool) (*editResult, error) {
		return editConfig(file, 0o600, time.Now(), decodeTOML, editTOMLServer(testEntry, remove), encodeTOML)
	}
	res, err := edit(false)
	if err != nil || res.Action != "updated" || res.Backup == "" {
		t.Fatalf("%+v, %v", res, err)
	}
	if b, _ := os.ReadFile(file); !bytes.HasPrefix(b, []byte("# my settings\n")) {
		t.Errorf("comment not kept:\n%s", b)
	}
	var doc struct {
		Model      string
		MCPServers map[string]map[string]any `toml:"mcp_servers"`
		Profiles   map[string]map[string]string
	}
	if _, err := toml.DecodeFile(file, &doc); err != nil {
		t.Fatal(err)
	}
	f := doc.MCPServers["ferry"]
	if doc.Model != "o3" || doc.Profiles["fast"]["model"] != "mini" || doc.MCPServers["other"]["command"] != "x" ||
		f["command"] != testEntry.Command || f["startup_timeout_sec"] != int64(20) || len(f["args"].([]any)) != 6 {
		t.Errorf("merged: %+v", doc)
	}
	if res, err := edit(false); err != nil || res.Action != "unchanged" {
		t.Errorf("second run: %+v, %v", res, err)
	}
	if res, err := edit(true); err != nil || res.Action != "removed" {
		t.Errorf("remove: %+v, %v", res, err)
	}
	doc.MCPServers = nil
	toml.DecodeFile(file, &doc)
	if _, ok := doc.MCPServers["ferry"]; ok || doc.MCPServers["other"] == nil {
		t.Errorf("after remove: %+v", doc.MCPServers)
	}
}

// TestConnectHook: the SessionStart hook is added beside other hooks, is idempotent,
// replaces an older ferry catchup hook, and remove takes only it out.
func TestConnectHook(t *testing.T) {
	file := filepath.Join(t.TempDir(), "settings.json")
	orig := `{"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"SessionStart": [{"matcher": "", "hooks": [{"type": "command", "command": "echo hi"}]}, {"hooks": [{"type": "command", "command": "/old/ferry catchup --as x"}]}], "Stop": [{"hooks": []}]}}`
	os.WriteFile(file, []byte(orig), 0o644)
	cmd := "/opt/ferry catchup --as claude-code-box --project acme"
	res, err := jsonEdit(t, file, editHook(cmd, false))
	if err != nil || res.Action != "updated" {
		t.Fatalf("%+v, %v", res, err)
	}
	b, _ := os.ReadFile(file)
	if bytes.Contains(b, []byte("/old/ferry")) || !bytes.Contains(b, []byte(cmd)) || !bytes.Contains(b, []byte("echo hi")) ||
		!bytes.Contains(b, []byte("Bash(ls)")) || !bytes.Contains(b, []byte(`"Stop"`)) {
		t.Errorf("merged hooks:\n%s", b)
	}
	if res, err := jsonEdit(t, file, editHook(cmd, false)); err != nil || res.Action != "unchanged" {
		t.Errorf("second run: %+v, %v", res, err)
	}
	if res, err := jsonEdit(t, file, editHook("", true)); err != nil || res.Action != "removed" {
		t.Errorf("remove: %+v, %v", res, err)
	}
	b, _ = os.ReadFile(file)
	if bytes.Contains(b, []byte("catchup")) || !bytes.Contains(b, []byte("echo hi")) {
		t.Errorf("after remove:\n%s", b)
	}
	os.WriteFile(file, []byte(`{"hooks": {"SessionStart": {"x": 1}}}`), 0o644)
	if _, err := jsonEdit(t, file, editHook(cmd, false)); !isCat(err, errs.Invalid) {
		t.Errorf("SessionStart not a list: %v", err)
	}
}

// TestConnectSymlink: a symlinked config (dotfiles) is written through to its target;
// the link stays a link.
func TestConnectSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Log("symlinks need privileges on Windows; the write-through is the same code")
		return
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles-mcp.json")
	os.WriteFile(target, []byte(`{}`), 0o644)
	link := filepath.Join(dir, "mcp.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := jsonEdit(t, link, editJSONServer(testEntry, false, false)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a file")
	}
	if b, _ := os.ReadFile(target); !bytes.Contains(b, []byte("ferry")) {
		t.Errorf("target not written: %s", b)
	}
}

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
	if len(long) > 63 || !fsbus.ValidName(long) {
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

// TestConnectBackupNoCollision: issue 9 finding 5. Two changes within one second (the
// clock here is fixed) keep both originals, each in a backup of its own; an existing
// backup is never overwritten.
func TestConnectBackupNoCollision(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mcp.json")
	first := `{"mcpServers":{"ferry":{"command":"/my/handwritten","args":["ORIGINAL"]}}}`
	os.WriteFile(file, []byte(first), 0o644)
	now := time.Date(2026, 11, 29, 22, 30, 0, 0, time.UTC)
	e1, e2 := testEntry, testEntry
	e2.Args = []string{"mcp", "serve", "--as", "other-name"}
	r1, err := editConfig(file, 0o644, now, decodeJSON, editJSONServer(e1, false, false), encodeJSON)
	if err != nil || r1.Backup == "" {
		t.Fatalf("first: %+v, %v", r1, err)
	}
	second, _ := os.ReadFile(file)
	r2, err := editConfig(file, 0o644, now, decodeJSON, editJSONServer(e2, false, false), encodeJSON)
	if err != nil || r2.Backup == "" {
		t.Fatalf("second: %+v, %v", r2, err)
	}
	if r1.Backup == r2.Backup {
		t.Fatalf("both backups are %s", r1.Backup)
	}
	if !strings.HasSuffix(r2.Backup, ".bak-20261129T223000Z-2") {
		t.Errorf("second backup named %s", r2.Backup)
	}
	if b, _ := os.ReadFile(r1.Backup); string(b) != first {
		t.Errorf("first backup holds %q, want the original", b)
	}
	if b, _ := os.ReadFile(r2.Backup); !bytes.Equal(b, second) {
		t.Errorf("second backup holds %q, want %q", b, second)
	}
}

// TestConnectUndo: issue 9 finding 1. An edit's undo puts the file back (or removes a
// file it created) and removes the backup it made.
func TestConnectUndo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mcp.json")
	orig := `{"theme":"dark"}`
	os.WriteFile(file, []byte(orig), 0o644)
	r, err := editConfig(file, 0o644, time.Now(), decodeJSON, editJSONServer(testEntry, false, false), encodeJSON)
	if err != nil || r.undo == nil {
		t.Fatalf("edit: %+v, %v", r, err)
	}
	if err := r.undo(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != orig {
		t.Errorf("after undo the file holds %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Errorf("files left after undo: %v", m)
	}
	fresh := filepath.Join(dir, "new", "mcp.json")
	r, err = editConfig(fresh, 0o644, time.Now(), decodeJSON, editJSONServer(testEntry, false, false), encodeJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.undo(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file the edit created is still there after undo: %v", err)
	}
}

// TestConnectBOM: issue 9 finding s3. A JSON file starting with a UTF-8 byte-order
// mark is parsed; a write drops the mark and says so; checkEdit accepts it.
func TestConnectBOM(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte("\xEF\xBB\xBF{\"keep\":1}"), 0o644)
	edit := editJSONServer(testEntry, false, false)
	if err := checkEdit(file, decodeJSON, edit); err != nil {
		t.Fatalf("checkEdit: %v", err)
	}
	r, err := editConfig(file, 0o644, time.Now(), decodeJSON, edit, encodeJSON)
	if err != nil || !strings.Contains(r.Note, "byte-order mark") {
		t.Fatalf("edit: %+v, %v", r, err)
	}
	b, _ := os.ReadFile(file)
	if bytes.HasPrefix(b, utf8BOM) || !bytes.Contains(b, []byte(`"keep": 1`)) {
		t.Errorf("file now %q", b)
	}
	if bak, _ := os.ReadFile(r.Backup); !bytes.HasPrefix(bak, utf8BOM) {
		t.Errorf("backup lost the mark: %q", bak)
	}
}

// TestEntryAgent (re-test of issue 9): --remove names the agent of the entry it
// removes, read from its args (--as NAME or --as=NAME) in JSON and in codex's TOML;
// no file, no entry, no flag or a file that does not parse: "".
func TestEntryAgent(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		toml       bool
		want       string
	}{
		{"a.json", `{"mcpServers":{"other":{"args":["--as","x"]},"ferry":{"command":"f","args":["mcp","serve","--as","cc-lap","--project","acme"]}}}`, false, "cc-lap"},
		{"b.json", `{"mcpServers":{"ferry":{"args":["mcp","serve","--as=cc-eq"]}}}`, false, "cc-eq"},
		{"c.json", `{"mcpServers":{"other":{"args":["--as","x"]}}}`, false, ""},
		{"d.json", `{"mcpServers":{"ferry":{"args":["mcp","serve"]}}}`, false, ""},
		{"e.json", `{not json`, false, ""},
		{"f.toml", "[mcp_servers.ferry]\ncommand = \"f\"\nargs = [\"mcp\", \"serve\", \"--as\", \"codex-lap\"]\n", true, "codex-lap"},
		{"g.toml", "[mcp_servers.other]\nargs = [\"--as\", \"x\"]\n", true, ""},
	} {
		file := filepath.Join(dir, c.name)
		if err := os.WriteFile(file, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := entryAgent(file, c.toml); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := entryAgent(filepath.Join(dir, "missing.json"), false); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

// TestConnectCodexText: Codex's config.toml is edited as text. Every byte outside
// ferry's [mcp_servers.ferry] table and its subtables stays as it was (comments,
// order, spacing, CRLF); inside them a changed value is replaced in place, keeping the
// key's comment; env keys ferry does not write are kept.
func TestConnectCodexText(t *testing.T) {
	envEntry := testEntry
	envEntry.Env = map[string]string{"FERRY_HOME": "/h/f", "STHOMEDIR": "/st"}
	const args = `args = ["mcp", "serve", "--as", "cursor-box", "--project", "acme"]`
	const cmd = `command = "/opt/ferry/bin/ferry"`
	for _, tc := range []struct {
		name          string
		entry         serverEntry
		remove        bool
		before, after string
		action        string
	}{
		{name: "update keeps every comment", entry: testEntry, action: "updated",
			before: "# my codex settings\nmodel = \"o3\"  # the default\n\n# servers\n[mcp_servers.other]\ncommand = \"x\"   # other's\nargs = [\"y\"]\n\n# ferry, by hand\n[mcp_servers.ferry]\ncommand = \"/old\"  # keep this comment\nstartup_timeout_sec = 20 # seconds\n# a comment inside ferry's table\n\n[profiles.fast]\nmodel = \"mini\"\n",
			after:  "# my codex settings\nmodel = \"o3\"  # the default\n\n# servers\n[mcp_servers.other]\ncommand = \"x\"   # other's\nargs = [\"y\"]\n\n# ferry, by hand\n[mcp_servers.ferry]\n" + cmd + "  # keep this comment\nstartup_timeout_sec = 20 # seconds\n" + args + "\n# a comment inside ferry's table\n\n[profiles.fast]\nmodel = \"mini\"\n"},
		{name: "added after the last line", entry: envEntry, action: "added",
			before: "# top\nmodel = \"o3\"\n",
			after:  "# top\nmodel = \"o3\"\n\n[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n\n[mcp_servers.ferry.env]\nFERRY_HOME = \"/h/f\"\nSTHOMEDIR = \"/st\"\n"},
		{name: "no final newline", entry: testEntry, action: "added",
			before: "model = \"o3\" # last",
			after:  "model = \"o3\" # last\n\n[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n"},
		{name: "new file", entry: testEntry, action: "added",
			before: "",
			after:  "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n"},
		{name: "env table: ferry's keys set, the user's kept", entry: envEntry, action: "updated",
			before: "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n\n[mcp_servers.ferry.env]\n# mine\nRUST_LOG = \"debug\"\nFERRY_HOME = \"/old/home\"  # was\n\n# next\n[x]\ny = 1\n",
			after:  "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n\n[mcp_servers.ferry.env]\n# mine\nRUST_LOG = \"debug\"\nFERRY_HOME = \"/h/f\"  # was\nSTHOMEDIR = \"/st\"\n\n# next\n[x]\ny = 1\n"},
		{name: "env no longer set: ferry's keys out, the table with them when empty", entry: testEntry, action: "updated",
			before: "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n\n[mcp_servers.ferry.env]\nFERRY_HOME = \"/old/home\"\n\n[x]\ny = 1\n",
			after:  "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n\n[x]\ny = 1\n"},
		{name: "env no longer set: the user's env key stays", entry: testEntry, action: "updated",
			before: "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n[mcp_servers.ferry.env]\nSTCONFDIR = \"/old\"\nRUST_LOG = \"debug\"\n",
			after:  "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n[mcp_servers.ferry.env]\nRUST_LOG = \"debug\"\n"},
		{name: "inline env in ferry's table", entry: envEntry, action: "updated",
			before: "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\nenv = { FERRY_HOME = \"/old\", RUST_LOG = \"debug\" } # env\n",
			after:  "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\nenv = { FERRY_HOME = \"/h/f\", RUST_LOG = \"debug\", STHOMEDIR = \"/st\" } # env\n"},
		{name: "a multi-line args array is replaced whole", entry: testEntry, action: "updated",
			before: "[mcp_servers.ferry]\n" + cmd + "\nargs = [\n  \"mcp\", # the server\n  \"serve\",\n]\ntool_timeout_sec = 60\n",
			after:  "[mcp_servers.ferry]\n" + cmd + "\n" + args + "\ntool_timeout_sec = 60\n"},
		{name: "a header inside a multi-line string is text", entry: testEntry, action: "added",
			before: "notes = \"\"\"\n[mcp_servers.ferry]\ncommand = \"fake\"\n\"\"\"\nlit = '''\n[mcp_servers.ferry.env]\n'''\n",
			after:  "notes = \"\"\"\n[mcp_servers.ferry]\ncommand = \"fake\"\n\"\"\"\nlit = '''\n[mcp_servers.ferry.env]\n'''\n\n[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n"},
		{name: "ferry's subtable without its table", entry: testEntry, action: "updated",
			before: "a = 1\n\n[mcp_servers.ferry.tools.x]\nok = true\n",
			after:  "a = 1\n\n[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n\n[mcp_servers.ferry.tools.x]\nok = true\n"},
		{name: "quoted header, CRLF", entry: envEntry, action: "updated",
			before: "# c\r\n[mcp_servers.\"ferry\"]\r\ncommand = \"/old\"\r\n\r\n[z]\r\nq = 2\r\n",
			after:  "# c\r\n[mcp_servers.\"ferry\"]\r\n" + cmd + "\r\n" + args + "\r\n\r\n[mcp_servers.ferry.env]\r\nFERRY_HOME = \"/h/f\"\r\nSTHOMEDIR = \"/st\"\r\n\r\n[z]\r\nq = 2\r\n"},
		{name: "byte-order mark kept", entry: testEntry, action: "added",
			before: "\xEF\xBB\xBF# c\nmodel = \"o3\"\n",
			after:  "\xEF\xBB\xBF# c\nmodel = \"o3\"\n\n[mcp_servers.ferry]\n" + cmd + "\n" + args + "\n"},
		{name: "unchanged", entry: testEntry, action: "unchanged",
			before: "# c\n[mcp_servers.ferry]\ncommand = '/opt/ferry/bin/ferry' # literal\nargs = ['mcp', 'serve', '--as', 'cursor-box', '--project', 'acme']\n",
			after:  "# c\n[mcp_servers.ferry]\ncommand = '/opt/ferry/bin/ferry' # literal\nargs = ['mcp', 'serve', '--as', 'cursor-box', '--project', 'acme']\n"},
		{name: "remove between tables", remove: true, action: "removed",
			before: "# top\n[mcp_servers.other]\ncommand = \"x\"\n\n[mcp_servers.ferry]\n" + cmd + "\n# inside\n" + args + "\n\n[mcp_servers.ferry.env]\nFERRY_HOME = \"/h\"\n\n# profiles\n[profiles.fast]\nmodel = \"mini\"\n",
			after:  "# top\n[mcp_servers.other]\ncommand = \"x\"\n\n# profiles\n[profiles.fast]\nmodel = \"mini\"\n"},
		{name: "remove at the end", remove: true, action: "removed",
			before: "model = \"o3\" # keep\n\n[mcp_servers.ferry]\n" + cmd + "\n",
			after:  "model = \"o3\" # keep\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(file, []byte(tc.before), 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := editConfig(file, 0o600, time.Now(), decodeTOML, editTOMLServer(tc.entry, tc.remove), encodeTOML)
			if err != nil {
				t.Fatalf("edit: %v", err)
			}
			got, _ := os.ReadFile(file)
			if res.Action != tc.action || string(got) != tc.after {
				t.Errorf("action %s (want %s); file:\n%s\nwant:\n%s", res.Action, tc.action, got, tc.after)
			}
		})
	}
}

// TestConnectCodexRefuses: ferry's entry written as dotted keys or as an inline table
// (or an inline mcp_servers) is refused as invalid, the file is left byte for byte
// with no backup, and the hint holds the tables to paste by hand.
func TestConnectCodexRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"dotted under [mcp_servers]": "# c\n[mcp_servers]\nferry.command = \"/old\"\nferry.args = []\n",
		"dotted at the top":          "# c\nmcp_servers.ferry.command = \"/old\"\n",
		"inline under [mcp_servers]": "[mcp_servers]\nferry = { command = \"/old\", args = [] } # c\n",
		"inline mcp_servers":         "mcp_servers = { other = { command = \"x\" } } # c\n",
		"dotted env in ferry's":      "[mcp_servers.ferry]\ncommand = \"/old\"\nenv.FERRY_HOME = \"/h\" # c\n",
	} {
		for _, remove := range []bool{false, true} {
			dir := t.TempDir()
			file := filepath.Join(dir, "config.toml")
			os.WriteFile(file, []byte(body), 0o600)
			edit := editTOMLServer(testEntry, remove)
			_, err := editConfig(file, 0o600, time.Now(), decodeTOML, edit, encodeTOML)
			if remove && name == "inline mcp_servers" {
				if err != nil {
					t.Errorf("%s: remove of an absent entry: %v", name, err)
				}
				continue
			}
			var fe *errs.Error
			if !errors.As(err, &fe) || fe.Category != errs.Invalid {
				t.Errorf("%s (remove %v): want invalid, got %v", name, remove, err)
				continue
			}
			if !remove && !strings.Contains(fe.Hint, "[mcp_servers.ferry]\n"+`command = "/opt/ferry/bin/ferry"`) {
				t.Errorf("%s: the hint does not hold the snippet: %q", name, fe.Hint)
			}
			if err := checkEdit(file, decodeTOML, edit); !isCat(err, errs.Invalid) {
				t.Errorf("%s (remove %v): checkEdit: %v", name, remove, err)
			}
			if b, _ := os.ReadFile(file); string(b) != body {
				t.Errorf("%s: file changed to %q", name, b)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
				t.Errorf("%s: files left: %v", name, m)
			}
		}
	}
}

// TestVerifyTOMLEdit: the last guard of a Codex edit fails when the edited text does
// not parse, when a key outside ferry's entry changed, or when ferry's entry does not
// decode to what was meant.
func TestVerifyTOMLEdit(t *testing.T) {
	old, err := decodeTOMLMap([]byte("a = 1\n[mcp_servers.other]\ncommand = \"x\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"command": "f", "args": []any{"mcp"}}
	ok := "a = 1\n[mcp_servers.other]\ncommand = \"x\"\n[mcp_servers.ferry]\ncommand = \"f\"\nargs = [\"mcp\"]\n"
	if err := verifyTOMLEdit(old, []byte(ok), want); err != nil {
		t.Fatalf("a right edit: %v", err)
	}
	for name, text := range map[string]string{
		"does not parse":  ok + "[mcp_servers.ferry]\n",
		"other key":       strings.Replace(ok, "a = 1", "a = 2", 1),
		"other server":    strings.Replace(ok, `command = "x"`, `command = "y"`, 1),
		"ferry's entry":   strings.Replace(ok, `args = ["mcp"]`, `args = ["mcp", "x"]`, 1),
		"ferry's extra":   ok + "extra = 1\n",
		"server dropped":  "a = 1\n[mcp_servers.ferry]\ncommand = \"f\"\nargs = [\"mcp\"]\n",
		"entry left over": ok,
	} {
		w := want
		if name == "entry left over" {
			w = nil // a removal that left the entry
		}
		if err := verifyTOMLEdit(old, []byte(text), w); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestConnectJSONEnv: in ferry's env the keys ferry writes (FERRY_HOME, the Syncthing
// location) are set or taken out; the user's own env keys are kept.
func TestConnectJSONEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(file, []byte(`{"mcpServers":{"ferry":{"command":"/old","env":{"RUST_LOG":"debug","FERRY_HOME":"/old/home","STCONFDIR":"/old/st"}}}}`), 0o644)
	e := testEntry
	e.Env = map[string]string{"FERRY_HOME": "/h/f", "STHOMEDIR": "/st"}
	if _, err := jsonEdit(t, file, editJSONServer(e, false, false)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		MCPServers map[string]struct{ Env map[string]string } `json:"mcpServers"`
	}
	b, _ := os.ReadFile(file)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"RUST_LOG": "debug", "FERRY_HOME": "/h/f", "STHOMEDIR": "/st"}
	if got := doc.MCPServers["ferry"].Env; !reflect.DeepEqual(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}
}

// TestConnectServerEnv: the entry's env holds FERRY_HOME and where Syncthing was
// looked for (a relative dir made absolute from the working dir), never the API key.
func TestConnectServerEnv(t *testing.T) {
	for _, tc := range []struct {
		goos, cwd string
		vars      map[string]string
		want      map[string]string
	}{
		{"linux", "/w", nil, nil},
		{"linux", "/w", map[string]string{"SYNCTHING_API_KEY": "k", "XDG_STATE_HOME": "/s"}, nil},
		{"linux", "/w", map[string]string{"FERRY_HOME": "/f", "STHOMEDIR": "/st", "STCONFDIR": "rel", "SYNCTHING_API_URL": " http://127.0.0.1:1 ", "SYNCTHING_API_KEY": "k"},
			map[string]string{"FERRY_HOME": "/f", "STHOMEDIR": "/st", "STCONFDIR": "/w/rel", "SYNCTHING_API_URL": "http://127.0.0.1:1"}},
		{"windows", `C:\w`, map[string]string{"STHOMEDIR": `D:\st`, "STCONFDIR": `st`},
			map[string]string{"STHOMEDIR": `D:\st`, "STCONFDIR": `C:\w\st`}},
	} {
		env := envOf(tc.goos, "/h", tc.vars)
		env.cwd = tc.cwd
		if got := serverEnv(env); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.goos, tc.vars, got, tc.want)
		}
	}
}
