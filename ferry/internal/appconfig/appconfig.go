package appconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/lazyre"
)

// App is an AI app whose MCP config ferry edits, by the name `ferry connect` takes.
type App string

// The apps.
const (
	ClaudeDesktop App = "claude-desktop"
	ClaudeCode    App = "claude-code"
	Codex         App = "codex"
	Cursor        App = "cursor"
)

// Apps are the apps, in help order.
var Apps = []App{ClaudeDesktop, ClaudeCode, Codex, Cursor}

// appNames is Apps joined for a hint.
func appNames() string {
	names := make([]string, len(Apps))
	for i, a := range Apps {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// Scope says which of an app's configs: the user's, or a project's (Claude Code and
// Cursor only).
type Scope string

// The scopes.
const (
	User    Scope = "user"
	Project Scope = "project"
)

// Env is what this package reads from the machine, injected so tests run on temporary
// home dirs and compute every OS's paths.
type Env struct {
	GOOS   string              // runtime.GOOS, or the OS under test
	Getenv func(string) string // os.Getenv
	Home   string              // the user's home dir (os.UserHomeDir)
	Cwd    string              // the working dir: its git top level is a project's root
	Now    func() time.Time    // backup names
	// LookPath finds a program on PATH (exec.LookPath); nil: none is looked for.
	LookPath func(string) (string, error)
	// Run runs a program and returns its combined output (exec.Command).
	Run func(name string, args ...string) ([]byte, error)
}

// Machine is this machine's Env: runtime.GOOS, os.Getenv, os.UserHomeDir, os.Getwd,
// time.Now, exec.LookPath and exec.Command. It fails (internal) when the home or the
// working dir cannot be found.
func Machine() (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, errs.Errorf(errs.Internal, "set HOME (USERPROFILE on Windows)", "finding the home dir: %v", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return Env{}, errs.Errorf(errs.Internal, "", "finding the working dir: %v", err)
	}
	return Env{GOOS: runtime.GOOS, Getenv: os.Getenv, Home: home, Cwd: cwd, Now: time.Now,
		LookPath: exec.LookPath,
		Run:      func(name string, args ...string) ([]byte, error) { return exec.Command(name, args...).CombinedOutput() }}, nil
}

// joinFor joins path elements with goos's separator (a Windows path computed on Linux
// in a test still reads C:\Users\…).
func joinFor(goos string, elem ...string) string {
	if goos != "windows" {
		return path.Join(elem...)
	}
	parts := make([]string, 0, len(elem))
	for i, e := range elem {
		e = strings.ReplaceAll(e, "/", `\`)
		if i > 0 {
			e = strings.Trim(e, `\`)
		} else {
			e = strings.TrimRight(e, `\`)
		}
		if e != "" {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, `\`)
}

// Path is the config file app reads for scope on env.GOOS:
//
//   - claude-desktop (user only): macOS ~/Library/Application Support/Claude/,
//     Windows %APPDATA%\Claude\, else $XDG_CONFIG_HOME/Claude/ or ~/.config/Claude/;
//     file claude_desktop_config.json.
//   - claude-code: user ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json when set),
//     project <root>/.mcp.json.
//   - cursor: user ~/.cursor/mcp.json, project <root>/.cursor/mcp.json.
//   - codex (user only): $CODEX_HOME/config.toml, default ~/.codex/config.toml.
//
// root is the project's root (its git top level). It returns invalid for an unknown
// app, a scope the app does not read, or a missing %APPDATA% on Windows.
func Path(app App, scope Scope, env Env, root string) (string, error) {
	g := env.GOOS
	userOnly := func() error {
		if scope == Project {
			return errs.Errorf(errs.Invalid, "drop --scope project", "%s reads a user-level config only", app)
		}
		return nil
	}
	switch app {
	case ClaudeDesktop:
		if err := userOnly(); err != nil {
			return "", err
		}
		switch g {
		case "darwin":
			return joinFor(g, env.Home, "Library", "Application Support", "Claude", "claude_desktop_config.json"), nil
		case "windows":
			appdata := env.Getenv("APPDATA")
			if appdata == "" {
				return "", errs.Errorf(errs.Invalid, "set APPDATA (normally C:\\Users\\<you>\\AppData\\Roaming)", "%%APPDATA%% is not set")
			}
			return joinFor(g, appdata, "Claude", "claude_desktop_config.json"), nil
		default:
			dir := env.Getenv("XDG_CONFIG_HOME")
			if dir == "" || !filepath.IsAbs(dir) {
				dir = joinFor(g, env.Home, ".config")
			}
			return joinFor(g, dir, "Claude", "claude_desktop_config.json"), nil
		}
	case ClaudeCode:
		if scope == Project {
			return joinFor(g, root, ".mcp.json"), nil
		}
		if d := env.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
			return joinFor(g, d, ".claude.json"), nil
		}
		return joinFor(g, env.Home, ".claude.json"), nil
	case Cursor:
		if scope == Project {
			return joinFor(g, root, ".cursor", "mcp.json"), nil
		}
		return joinFor(g, env.Home, ".cursor", "mcp.json"), nil
	case Codex:
		if err := userOnly(); err != nil {
			return "", err
		}
		if d := env.Getenv("CODEX_HOME"); d != "" {
			return joinFor(g, d, "config.toml"), nil
		}
		return joinFor(g, env.Home, ".codex", "config.toml"), nil
	}
	return "", errs.Errorf(errs.Invalid, "pick one of "+appNames(), "unknown app %q", app)
}

// HookPath is Claude Code's settings file for a SessionStart hook: user
// ~/.claude/settings.json ($CLAUDE_CONFIG_DIR/settings.json when set), project
// <root>/.claude/settings.json.
func HookPath(scope Scope, env Env, root string) string {
	if scope == Project {
		return joinFor(env.GOOS, root, ".claude", "settings.json")
	}
	if d := env.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return joinFor(env.GOOS, d, "settings.json")
	}
	return joinFor(env.GOOS, env.Home, ".claude", "settings.json")
}

// Server is the command an app spawns: `<binary> mcp serve --as NAME --project ID`,
// with in its env the variables of ownedEnvKeys this ferry runs with (so the app's
// server finds the same keys, project map and Syncthing). Nothing secret.
type Server struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

// ownedEnvKeys are the variables ferry carries into the app's env entry when they are
// set where `ferry connect` runs, and owns there (set, changed or taken out; other env
// keys are kept): FERRY_HOME (ferry's keys and project map), and where ferry finds
// Syncthing (fsbus/synchealth's syncthingConfigPaths and locateSyncthing): STHOMEDIR, STCONFDIR
// and SYNCTHING_API_URL. SYNCTHING_API_KEY is a secret and never written.
var ownedEnvKeys = []string{"FERRY_HOME", "STHOMEDIR", "STCONFDIR", synchealth.EnvURL}

// ServerEnv is the env of ferry's entry: the variables of ownedEnvKeys that are set, a
// relative Syncthing dir made absolute from the working dir (the app starts the server
// elsewhere); nil when none is.
func ServerEnv(env Env) map[string]string {
	var out map[string]string
	for _, k := range ownedEnvKeys {
		v := env.Getenv(k)
		if k != "FERRY_HOME" {
			v = strings.TrimSpace(v)
		}
		if v == "" {
			continue
		}
		if (k == "STHOMEDIR" || k == "STCONFDIR") && !isAbsFor(env.GOOS, v) && env.Cwd != "" {
			v = joinFor(env.GOOS, env.Cwd, v)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// isAbsFor reports whether p is absolute on goos.
func isAbsFor(goos, p string) bool {
	if goos != "windows" {
		return strings.HasPrefix(p, "/")
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') || strings.HasPrefix(p, `\\`)
}

// Result says what one config edit did.
type Result struct {
	File   string `json:"file"`
	Action string `json:"action"` // added, updated, unchanged, removed, absent (print: none made)
	Backup string `json:"backup,omitempty"`
	Note   string `json:"note,omitempty"`
	// undo puts the file back as it was before the edit (nil: nothing to undo).
	undo func() error
}

// Changed reports whether the edit wrote the file.
func (r *Result) Changed() bool {
	return r.Action == "added" || r.Action == "updated" || r.Action == "removed"
}

// editConfig reads file (missing: empty), lets edit change the decoded document, and
// writes it back when the edit changed it: backup first (writeBackup), then an atomic
// write keeping the file's mode (perm for a new file). A symlinked file is written
// through to its target. decode/encode are the format's. An unparsable file is an
// invalid error and nothing is written; a failed write is an internal error, the
// backup made for it is removed and the file is as it was. A UTF-8 byte-order mark at
// the start of a JSON file is dropped on write and said in the result's note (the
// backup keeps it). The result's undo puts the file back as it was (so a connect whose
// join fails changes nothing).
func editConfig(file string, perm fs.FileMode, now time.Time, decode func([]byte) (any, error),
	edit func(doc any) (any, string, error), encode func(any) ([]byte, error)) (*Result, error) {
	res := &Result{File: file}
	target := file
	if t, err := filepath.EvalSymlinks(file); err == nil {
		target = t
	}
	old, err := os.ReadFile(target)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Errorf(errs.Internal, "check the file's permissions; nothing was written", "reading %s: %v", file, err)
	}
	if exists {
		if fi, err := os.Stat(target); err == nil {
			perm = fi.Mode().Perm()
		}
	}
	doc, err := decode(old)
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "fix or move the file aside, then run ferry connect again; nothing was written",
			"%s is not valid: %v", file, err)
	}
	doc, action, err := edit(doc)
	if err != nil {
		return nil, err
	}
	res.Action = action
	if !res.Changed() {
		return res, nil
	}
	data, err := encode(doc)
	if err != nil {
		return nil, errs.Errorf(errs.Internal, "", "encoding %s: %v", file, err)
	}
	if exists {
		if res.Backup, err = writeBackup(target, old, perm, now); err != nil {
			return nil, errs.Errorf(errs.Internal, "check that the folder is writable; nothing was written", "backing up %s: %v", file, err)
		}
	}
	if err := fsutil.WriteFile(target, data, perm); err != nil {
		if res.Backup != "" {
			os.Remove(res.Backup)
		}
		return nil, errs.Errorf(errs.Internal, "check that the folder is writable; nothing was written", "writing %s: %v", file, err)
	}
	if bytes.HasPrefix(old, utf8BOM) && !bytes.HasPrefix(data, utf8BOM) {
		res.Note = "the UTF-8 byte-order mark at the start of the file was dropped (the backup keeps it)"
	}
	res.undo = restoreFile(target, old, exists, perm, res.Backup)
	return res, nil
}

// restoreFile is an undo: it writes old back to target (or removes target when it did
// not exist) and then removes the backup made for the change.
func restoreFile(target string, old []byte, existed bool, perm fs.FileMode, backup string) func() error {
	return func() error {
		var err error
		if existed {
			err = fsutil.WriteFile(target, old, perm)
		} else if err = os.Remove(target); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		if err == nil && backup != "" {
			os.Remove(backup)
		}
		return err
	}
}

// Undo puts back the files the edits changed, newest first (nil results are skipped),
// and returns err with its hint saying whether that worked (errors change nothing).
func Undo(err error, edits ...*Result) error {
	var failed []string
	for i := len(edits) - 1; i >= 0; i-- {
		if r := edits[i]; r != nil && r.undo != nil {
			if uerr := r.undo(); uerr != nil {
				failed = append(failed, fmt.Sprintf("%s could not be put back (%v); its old content is in %s", r.File, uerr, r.Backup))
			}
		}
	}
	note := "the app's config was put back as it was"
	if len(failed) > 0 {
		note = strings.Join(failed, "; ")
	}
	var fe *errs.Error
	if errors.As(err, &fe) {
		hint := note
		if fe.Hint != "" {
			hint = fe.Hint + "; " + note
		}
		return errs.Errorf(fe.Category, hint, "%s", fe.Message)
	}
	return errs.Errorf(errs.Internal, note, "%v", err)
}

// writeBackup copies data to <target>.bak-<UTC time to the second>, or, when that name
// is taken, to the same name with -2, -3, … appended (so two changes within one
// second keep both originals). An existing backup is never overwritten: the file is
// created with O_EXCL. It returns the name written.
func writeBackup(target string, data []byte, perm fs.FileMode, now time.Time) (string, error) {
	base := target + ".bak-" + now.UTC().Format("20060102T150405Z")
	for n := 1; n <= 1000; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil {
			err = fsutil.Sync(f)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", err
		}
		return name, nil
	}
	return "", fmt.Errorf("1000 backups named %s-N already exist; remove old ones", base)
}

// --- JSON, order kept ---------------------------------------------------------

// jsonObject is a JSON object with its members in file order, values kept as raw
// bytes, so an edit changes ferry's entry and nothing else.
type jsonObject []jsonMember

type jsonMember struct {
	Key   string
	Value json.RawMessage
}

// parseObject decodes a JSON object keeping member order. Empty input (a new or blank
// file) is an empty object.
func parseObject(data []byte) (jsonObject, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return jsonObject{}, nil
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("the top level is not a JSON object")
	}
	obj := jsonObject{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		obj = append(obj, jsonMember{Key: kt.(string), Value: raw})
	}
	return obj, nil
}

func (o jsonObject) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// set replaces key's value in place or appends it.
func (o jsonObject) set(key string, v json.RawMessage) jsonObject {
	for i, m := range o {
		if m.Key == key {
			o[i].Value = v
			return o
		}
	}
	return append(o, jsonMember{Key: key, Value: v})
}

func (o jsonObject) del(key string) jsonObject {
	out := o[:0]
	for _, m := range o {
		if m.Key != key {
			out = append(out, m)
		}
	}
	return out
}

// MarshalJSON writes the members in order.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// subObject is o[key] as an object (absent: empty); a non-object is an error.
func (o jsonObject) subObject(key string) (jsonObject, error) {
	raw, ok := o.get(key)
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return jsonObject{}, nil
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, errs.Errorf(errs.Invalid, "fix the file, then run ferry connect again; nothing was written", "%q is not a JSON object", key)
	}
	return parseObject(raw)
}

func encodeJSON(doc any) ([]byte, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// utf8BOM is the byte-order mark some Windows editors put at the start of a UTF-8 file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// decodeJSON parses a JSON object keeping member order; a leading UTF-8 byte-order
// mark is accepted and dropped (encodeJSON writes none).
func decodeJSON(data []byte) (any, error) { return parseObject(bytes.TrimPrefix(data, utf8BOM)) }

// mustRaw is v as compact JSON without HTML escaping.
func mustRaw(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// editJSONServer sets (or, with remove, deletes) servers.ferry under the top-level key
// "mcpServers". Keys in ferry's existing entry other than command, args, env and type
// are kept.
func editJSONServer(entry Server, withType, remove bool) func(any) (any, string, error) {
	return func(d any) (any, string, error) {
		doc := d.(jsonObject)
		servers, err := doc.subObject("mcpServers")
		if err != nil {
			return nil, "", err
		}
		cur, had := servers.get("ferry")
		if remove {
			if !had {
				return doc, "absent", nil
			}
			return doc.set("mcpServers", mustRaw(servers.del("ferry"))), "removed", nil
		}
		want := jsonObject{}
		if had {
			if t := bytes.TrimSpace(cur); len(t) > 0 && t[0] == '{' {
				if want, err = parseObject(cur); err != nil {
					return nil, "", err
				}
			}
		}
		if withType {
			want = want.set("type", mustRaw("stdio"))
		}
		want = want.set("command", mustRaw(entry.Command)).set("args", mustRaw(entry.Args))
		env := map[string]any{}
		if raw, ok := want.get("env"); ok {
			_ = json.Unmarshal(raw, &env) // not an object: replaced
		}
		mergeEnv(env, entry.Env)
		if len(env) > 0 {
			want = want.set("env", mustRaw(env))
		} else {
			want = want.del("env")
		}
		next := mustRaw(want)
		if had && sameJSON(cur, next) {
			return doc, "unchanged", nil
		}
		action := "added"
		if had {
			action = "updated"
		}
		return doc.set("mcpServers", mustRaw(servers.set("ferry", next))), action, nil
	}
}

// ferryEnvOf is the env of mcpServers.ferry in doc (nil: none).
func ferryEnvOf(doc jsonObject) json.RawMessage {
	servers, err := doc.subObject("mcpServers")
	if err != nil {
		return nil
	}
	raw, ok := servers.get("ferry")
	if !ok {
		return nil
	}
	entry, err := parseObject(raw)
	if err != nil {
		return nil
	}
	env, _ := entry.get("env")
	return env
}

// ferryHookRe recognises ferry's SessionStart hook command: a ferry binary (quoted or
// not) running catchup.
var ferryHookRe = lazyre.New(`(^|[/\\])ferry(\.exe)?"? catchup( |$)`)

// editHook installs (or removes) a SessionStart hook running command in Claude Code's
// settings: hooks.SessionStart[] is a list of {matcher, hooks:[{type, command}]}. An
// existing ferry catchup hook is replaced; other hooks and keys are kept.
func editHook(command string, remove bool) func(any) (any, string, error) {
	return func(d any) (any, string, error) {
		doc := d.(jsonObject)
		hooks, err := doc.subObject("hooks")
		if err != nil {
			return nil, "", err
		}
		var groups []map[string]any
		if raw, ok := hooks.get("SessionStart"); ok {
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil, "", errs.Errorf(errs.Invalid, "fix the file, then run ferry connect again; nothing was written", "hooks.SessionStart is not a list of hook groups: %v", err)
			}
		}
		found, same := false, false
		var out []map[string]any
		for _, g := range groups {
			list, _ := g["hooks"].([]any)
			var keep []any
			for _, h := range list {
				hm, _ := h.(map[string]any)
				c, _ := hm["command"].(string)
				if ferryHookRe.MatchString(c) {
					found = true
					same = same || c == command
					continue
				}
				keep = append(keep, h)
			}
			if len(list) > 0 && len(keep) == 0 {
				continue // a group holding only ferry's hook
			}
			if len(list) > 0 {
				g["hooks"] = keep
			}
			out = append(out, g)
		}
		if remove {
			if !found {
				return doc, "absent", nil
			}
			if len(out) == 0 {
				hooks = hooks.del("SessionStart")
			} else {
				hooks = hooks.set("SessionStart", mustRaw(out))
			}
			return doc.set("hooks", mustRaw(hooks)), "removed", nil
		}
		if same && countFerryHooks(groups) == 1 {
			return doc, "unchanged", nil
		}
		out = append(out, map[string]any{"matcher": "", "hooks": []any{map[string]any{"type": "command", "command": command}}})
		action := "added"
		if found {
			action = "updated"
		}
		return doc.set("hooks", mustRaw(hooks.set("SessionStart", mustRaw(out)))), action, nil
	}
}

func countFerryHooks(groups []map[string]any) int {
	n := 0
	for _, g := range groups {
		list, _ := g["hooks"].([]any)
		for _, h := range list {
			hm, _ := h.(map[string]any)
			if c, _ := hm["command"].(string); ferryHookRe.MatchString(c) {
				n++
			}
		}
	}
	return n
}

// checkEdit is a dry run of editConfig: it returns the invalid error for a file that
// exists and does not parse, or whose shape the edit refuses (mcpServers not an
// object, …), so a command touching several files refuses before it changes any.
func checkEdit(file string, decode func([]byte) (any, error), edit func(any) (any, string, error)) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil // missing (a new file) or unreadable: editConfig says which
	}
	doc, err := decode(data)
	if err != nil {
		return errs.Errorf(errs.Invalid, "fix or move the file aside, then run ferry connect again; nothing was written",
			"%s is not valid: %v", file, err)
	}
	if _, _, err := edit(doc); err != nil {
		var fe *errs.Error
		if errors.As(err, &fe) {
			return errs.Errorf(fe.Category, fe.Hint, "%s: %s", file, fe.Message)
		}
		return err
	}
	return nil
}

// claudeSpec is the JSON `claude mcp add-json` takes for entry, with env as its env
// (nil: none).
func claudeSpec(entry Server, env json.RawMessage) json.RawMessage {
	spec := jsonObject{}.set("type", mustRaw("stdio")).set("command", mustRaw(entry.Command)).set("args", mustRaw(entry.Args))
	if env != nil {
		spec = spec.set("env", env)
	}
	return mustRaw(spec)
}

// editViaClaude makes Claude Code's user-level entry through its own CLI, `claude mcp
// add-json --scope user ferry JSON` (and `claude mcp remove --scope user ferry` first
// when an entry is there), because Claude Code keeps rewriting ~/.claude.json while it
// runs and an edit of ours could be lost. file is read first, so an equal entry runs
// nothing (idempotent) and an unparsable file is refused before anything runs; it is
// backed up (writeBackup) before the CLI runs. A CLI failure puts the file back as it
// was, removes the backup and is an internal error carrying the CLI's output. After
// the CLI exits 0 the file is read again: an entry the CLI did not leave there (it
// may exit 0 and write nothing) is written by ferry itself, atomically, and said in
// the note. The result's undo puts the file back as it was.
func editViaClaude(claude, file string, entry Server, remove bool, now time.Time, run func(string, ...string) ([]byte, error)) (*Result, error) {
	res := &Result{File: file}
	old, err := os.ReadFile(file)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Errorf(errs.Internal, "check the file's permissions; nothing was written", "reading %s: %v", file, err)
	}
	doc, err := decodeJSON(old)
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "fix or move the file aside, then run ferry connect again; nothing was written",
			"%s is not valid: %v", file, err)
	}
	edit := editJSONServer(entry, true, remove)
	edited, action, err := edit(doc)
	if err != nil {
		return nil, err
	}
	res.Action = action
	if !res.Changed() {
		return res, nil
	}
	perm := fs.FileMode(0o600)
	if exists {
		if fi, err := os.Stat(file); err == nil {
			perm = fi.Mode().Perm()
		}
		if res.Backup, err = writeBackup(file, old, perm, now); err != nil {
			return nil, errs.Errorf(errs.Internal, "check that the folder is writable; nothing was written", "backing up %s: %v", file, err)
		}
	}
	undo := restoreFile(file, old, exists, perm, res.Backup)
	// failed puts the file back and says whether that worked, for the hint.
	failed := func() string {
		if err := undo(); err != nil {
			return fmt.Sprintf("putting %s back failed too (%v): the old file is in %s", file, err, res.Backup)
		}
		return "nothing was changed"
	}
	steps := [][]string{}
	if action != "added" {
		steps = append(steps, []string{"mcp", "remove", "--scope", "user", "ferry"})
	}
	if !remove {
		spec := claudeSpec(entry, ferryEnvOf(edited.(jsonObject))) // env keys of the user's kept beside ferry's
		steps = append(steps, []string{"mcp", "add-json", "--scope", "user", "ferry", string(spec)})
	}
	for _, args := range steps {
		if out, err := run(claude, args...); err != nil {
			return nil, errs.Errorf(errs.Internal, "run `claude "+strings.Join(args[:len(args)-1], " ")+" …` by hand, or ferry connect claude-code --print to see the entry; "+failed(),
				"claude %s %s failed: %v: %s", args[0], args[1], err, strings.TrimSpace(string(out)))
		}
	}
	res.undo = undo
	res.Note = "written by `claude mcp`"
	after, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Errorf(errs.Internal, "check the file's permissions; "+failed(), "reading %s after `claude mcp`: %v", file, err)
	}
	d, err := decodeJSON(after)
	if err != nil {
		return nil, errs.Errorf(errs.Internal, "check with `claude mcp get ferry`; "+failed(), "%s does not parse after `claude mcp` ran: %v", file, err)
	}
	d, again, err := edit(d)
	if err != nil {
		return nil, errs.Errorf(errs.Internal, "check with `claude mcp get ferry`; "+failed(), "%s after `claude mcp` ran: %v", file, err)
	}
	if again == "unchanged" || again == "absent" {
		return res, nil
	}
	// The CLI exited 0 without the change: ferry makes it in the file itself.
	data, err := encodeJSON(d)
	if err == nil {
		err = fsutil.WriteFile(file, data, perm)
	}
	if err != nil {
		return nil, errs.Errorf(errs.Internal, "check that the folder is writable; "+failed(), "`claude mcp` exited 0 but did not change %s, and writing it failed: %v", file, err)
	}
	res.Note = "`claude mcp` exited 0 but did not change " + file + "; ferry edited the file itself (check with `claude mcp get ferry`)"
	return res, nil
}

// EntryAgent is the agent named by --as in the args of ferry's entry in app's config
// file (the mcpServers.ferry entry; mcp_servers.ferry in Codex's TOML): "" when the
// file, the entry or the flag is missing or does not parse.
func EntryAgent(app App, file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	var args []string
	if app == Codex {
		doc, err := decodeTOMLMap(data)
		if err != nil {
			return ""
		}
		servers, _ := doc["mcp_servers"].(map[string]any)
		entry, _ := servers["ferry"].(map[string]any)
		list, _ := entry["args"].([]any)
		for _, a := range list {
			if s, ok := a.(string); ok {
				args = append(args, s)
			}
		}
	} else {
		doc, err := decodeJSON(data)
		if err != nil {
			return ""
		}
		servers, err := doc.(jsonObject).subObject("mcpServers")
		if err != nil {
			return ""
		}
		raw, ok := servers.get("ferry")
		if !ok {
			return ""
		}
		var entry struct {
			Args []string `json:"args"`
		}
		if json.Unmarshal(raw, &entry) != nil {
			return ""
		}
		args = entry.Args
	}
	for i, a := range args {
		if a == "--as" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--as="); ok {
			return v
		}
	}
	return ""
}
