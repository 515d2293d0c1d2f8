package appconfig

import "io/fs"

// Change is ferry's entry in one app's config, to write or to take out, and for Claude
// Code the SessionStart hook beside it.
type Change struct {
	App    App
	Scope  Scope
	Root   string // the project's root (its git top level): where project configs are
	Server Server // the entry to write
	// Remove takes ferry's entry out instead (and, for Claude Code, ferry's hook).
	Remove bool
	// Hook is the command of the SessionStart hook to install in Claude Code's settings
	// (HookPath); "" installs none.
	Hook string
}

// hooked reports whether the change edits Claude Code's settings too.
func (c Change) hooked() bool {
	return c.Hook != "" || (c.Remove && c.App == ClaudeCode)
}

// Apply makes the change: it checks every file it will edit first (one that does not
// parse, or whose shape the edit refuses, is an invalid error and nothing is written),
// then edits the app's config (Path) and then the hook's settings. A config that also
// holds the app's own account state or secrets (Codex's, Claude Code's user config) is
// created with mode 0600, others 0644; an existing file keeps its mode. Claude Code's
// user config goes through its CLI when env.LookPath finds claude (it rewrites that file
// while it runs). hook is nil when the change edits no hook. A failed hook edit puts the
// config back (Undo). Give both results to Undo to put everything back, e.g. when what
// follows the edit fails.
func (c Change) Apply(env Env) (config, hook *Result, err error) {
	file, err := Path(c.App, c.Scope, env, c.Root)
	if err != nil {
		return nil, nil, err
	}
	decode, edit, encode := decodeJSON, editJSONServer(c.Server, c.App == ClaudeCode, c.Remove), encodeJSON
	if c.App == Codex {
		decode, edit, encode = decodeTOML, editTOMLServer(c.Server, c.Remove), encodeTOML
	}
	hookFile, hookEdit := HookPath(c.Scope, env, c.Root), editHook(c.Hook, c.Remove)
	if err := checkEdit(file, decode, edit); err != nil {
		return nil, nil, err
	}
	if c.hooked() {
		if err := checkEdit(hookFile, decodeJSON, hookEdit); err != nil {
			return nil, nil, err
		}
	}
	now := env.Now()
	perm := fs.FileMode(0o644)
	if c.App == Codex || (c.App == ClaudeCode && c.Scope == User) {
		perm = 0o600 // files that also hold the app's own account state or secrets
	}
	claude := ""
	if c.App == ClaudeCode && c.Scope == User && env.LookPath != nil {
		claude, _ = env.LookPath("claude")
	}
	if claude != "" {
		config, err = editViaClaude(claude, file, c.Server, c.Remove, now, env.Run)
	} else {
		config, err = editConfig(file, perm, now, decode, edit, encode)
	}
	if err != nil || !c.hooked() {
		return config, nil, err
	}
	if hook, err = editConfig(hookFile, 0o644, now, decodeJSON, hookEdit, encodeJSON); err != nil {
		return nil, nil, Undo(err, config)
	}
	return config, hook, nil
}

// Snippet is ferry's entry for s in app's config format, as a file holding only it:
// the [mcp_servers.ferry] tables for Codex, else a JSON object with mcpServers.ferry.
func Snippet(app App, s Server) ([]byte, error) {
	if app == Codex {
		return []byte(tomlSnippet(s)), nil
	}
	d, _, _ := editJSONServer(s, app == ClaudeCode, false)(jsonObject{})
	return encodeJSON(d)
}

// ClaudeAddJSON is the JSON argument of `claude mcp add-json --scope user ferry` for s.
func ClaudeAddJSON(s Server) string {
	var env []byte
	if len(s.Env) > 0 {
		env = mustRaw(s.Env)
	}
	return string(claudeSpec(s, env))
}

// HookSnippet is Claude Code's settings holding only the SessionStart hook that runs
// command.
func HookSnippet(command string) ([]byte, error) {
	d, _, _ := editHook(command, false)(jsonObject{})
	return encodeJSON(d)
}
