package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ferry/internal/appconfig"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/internal/errs"
)

// ConnectCmd is `ferry connect APP [--scope user|project] [--print] [--remove] [--hook]`:
// it writes (or removes) an app's MCP entry for ferry and joins its agent.
type ConnectCmd struct {
	App    string `arg:"" enum:"claude-desktop,claude-code,codex,cursor" help:"The app: claude-desktop, claude-code, codex or cursor."`
	Scope  string `help:"Write the user-level config or the project's (claude-code, cursor)." enum:"user,project" default:"user"`
	Print  bool   `help:"Show the entry only: write nothing, join nothing."`
	Remove bool   `help:"Remove ferry's entry (and hook), nothing else."`
	Hook   bool   `help:"Claude Code: also install a SessionStart hook running ferry catchup."`
}

// Help is the long help.
func (c *ConnectCmd) Help() string {
	return `Writes the app's MCP server entry "ferry" for <this binary> mcp serve --as NAME
--project ID, joins the agent (as ferry join does) and prints the one command the
owner runs to seat it. The entry's env carries FERRY_HOME and where Syncthing is found
(STHOMEDIR, STCONFDIR, SYNCTHING_API_URL) when they are set, so sync health works from
the app; SYNCTHING_API_KEY is never written: connect says to set it in the app's
environment. Files: Claude Desktop's
claude_desktop_config.json in "~/Library/Application Support/Claude" (macOS),
%APPDATA%\Claude (Windows) or ~/.config/Claude (Linux); Claude Code's ~/.claude.json
(through "claude mcp add-json" when claude is on PATH) or, with --scope project, the
repository's .mcp.json; Cursor's ~/.cursor/mcp.json or <repo>/.cursor/mcp.json;
Codex's ~/.codex/config.toml ($CODEX_HOME honoured), edited as text: only the
[mcp_servers.ferry] table and its subtables change, comments and everything else stay
byte for byte; an entry written as dotted keys or an inline table is refused, with the
tables to paste by hand.

Other servers and unknown keys (env keys ferry does not set included) are kept; a
second run changes nothing; the file is copied to <file>.bak-<UTC time>[-N] (never
overwriting an older backup) before any change and replaced atomically with its mode
kept; a file that does not parse is refused and left as it is. No token or passphrase is
ever written. The files are written before the agent joins; if the join fails they are
put back, so a failed connect changes nothing. Without --as the name is
<app>-<machine>, and a project-level entry in a second git worktree adds the
worktree's folder name; but when that name is not joined here and another agent is
joined for the app on this machine, the entry is for that agent (several: refused,
name one with --as). --hook (claude-code) adds a SessionStart hook
in .claude/settings.json (project) or ~/.claude/settings.json that runs ferry catchup,
so a session starts informed. Restart the app to load the entry. --remove reports the
agent the removed entry served (its --as); that agent stays in the channel.`
}

// connectReport is what --json prints.
type connectReport struct {
	App     string            `json:"app"`
	Agent   string            `json:"agent"`
	Project string            `json:"project"`
	Server  appconfig.Server  `json:"server"`
	Config  *appconfig.Result `json:"config,omitempty"`
	Hook    *appconfig.Result `json:"hook,omitempty"`
	Join    *fsbus.JoinResult `json:"join,omitempty"`
	Notes   []string          `json:"notes,omitempty"`
}

// Run implements the command.
func (c *ConnectCmd) Run(g *Globals) error {
	if c.Hook && appconfig.App(c.App) != appconfig.ClaudeCode {
		return errs.Errorf(errs.Invalid, "drop --hook", "--hook is for claude-code only")
	}
	if c.Print && c.Remove {
		return errs.Errorf(errs.Invalid, "pass one of --print and --remove", "--print and --remove exclude each other")
	}
	env, err := appconfig.Machine()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return errs.Errorf(errs.Internal, "run ferry from its installed path", "finding this binary's path: %v", err)
	}
	return c.connect(g, env, exe, machineLabel())
}

// connect is Run with the machine injected.
func (c *ConnectCmd) connect(g *Globals, env appconfig.Env, exe, machine string) error {
	app, scope := appconfig.App(c.App), appconfig.Scope(c.Scope)
	rep := &connectReport{App: c.App}
	root, worktree := env.Cwd, ""
	if gi, ok := readGit(env.Cwd); ok {
		root = gi.TopLevel
		if gi.Linked && scope == appconfig.Project {
			worktree = filepath.Base(gi.TopLevel)
		}
	}
	file, err := appconfig.Path(app, scope, env, root)
	if err != nil {
		return err
	}
	if strings.Contains(filepath.ToSlash(exe), "/go-build") {
		rep.Notes = append(rep.Notes, "this ferry is a temporary build (go run): install it (go install ./ferry) and connect again, or the app will not find it later")
	}
	// The project: named, or the channel's (opening reads; joining writes).
	var ch *fsbus.Channel
	rep.Project = g.Project
	if !c.Remove && (!c.Print || g.Project == "") {
		if ch, err = g.Open(); err != nil {
			return err
		}
		rep.Project = ch.Project()
	}
	rep.Agent = g.As
	switch {
	case rep.Agent == "" && c.Remove:
		// The agent the removed entry served (its --as), not a default that may never
		// have existed; "" when there is no entry.
		rep.Agent = appconfig.EntryAgent(app, file)
	case rep.Agent == "":
		look := ch
		if look == nil { // --print --project P: the channel is read when it can be
			look, _ = g.Open()
		}
		if rep.Agent, err = c.pickAgent(look, defaultAgentName(c.App, machine, worktree), worktree != "", rep); err != nil {
			return err
		}
	}
	if rep.Agent != "" {
		if err := fold.CheckName("agent name", rep.Agent); err != nil {
			return err
		}
	}
	rep.Server = appconfig.Server{Command: exe, Args: []string{"mcp", "serve", "--as", rep.Agent, "--project", rep.Project},
		Env: appconfig.ServerEnv(env)}
	if !c.Remove && strings.TrimSpace(env.Getenv(synchealth.EnvKey)) != "" {
		rep.Notes = append(rep.Notes, "the Syncthing API key comes from "+synchealth.EnvKey+
			" here, which ferry never writes into a config: set "+synchealth.EnvKey+" in the app's environment too, or sync health cannot ask Syncthing from the app")
	}
	hookCmd := shellQuote(exe) + " catchup --as " + rep.Agent + " --project " + rep.Project
	if fh := env.Getenv("FERRY_HOME"); fh != "" && env.GOOS != "windows" {
		hookCmd = "FERRY_HOME=" + shellQuote(fh) + " " + hookCmd // the same home as the server's
	}
	if c.Remove {
		hookCmd = ""
	}

	if c.Print {
		return c.printSnippet(g, rep, file, hookCmd)
	}
	// Every file is checked before anything is joined or written: a bad one changes
	// nothing. The files are written first and the agent joined last; a join that fails
	// puts the files back, so a failed connect leaves no entry and no joined agent.
	change := appconfig.Change{App: app, Scope: scope, Root: root, Server: rep.Server, Remove: c.Remove}
	if c.Hook {
		change.Hook = hookCmd
	}
	config, hook, err := change.Apply(env)
	if err != nil {
		return err
	}
	rep.Config = config
	if hook != nil && (c.Hook || hook.Action == "removed") {
		rep.Hook = hook
	}
	if err := c.join(ch, rep); err != nil {
		return appconfig.Undo(err, config, hook)
	}
	if g.JSON {
		return g.printJSON(rep)
	}
	c.printReport(g, rep)
	return nil
}

// pickAgent is the agent an entry without --as is for (`ferry connect --help`):
// def (<app>-<machine>[-<worktree>]) when it is joined on this machine, when
// no agent is joined here for the app, or in a second worktree (own says so, whose
// project-level entry has an agent of its own); else the one agent joined here for the
// app (said in a note). Several: an invalid error listing them. ch nil: def.
func (c *ConnectCmd) pickAgent(ch *fsbus.Channel, def string, own bool, rep *connectReport) (string, error) {
	if ch == nil || own {
		return def, nil
	}
	v, err := ch.Load()
	if err != nil {
		return "", err
	}
	local := ch.LocalAgents(v, c.App)
	switch {
	case len(local) == 0 || slices.Contains(local, def):
		return def, nil
	case len(local) == 1:
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s is the agent joined for %s on this machine, so the entry is for it (--as NAME picks another)", local[0], c.App))
		return local[0], nil
	}
	return "", errs.Errorf(errs.Invalid, fmt.Sprintf("name the one this entry is for: ferry connect %s --as NAME", c.App),
		"%d agents are joined for %s on this machine (%s), and ferry cannot tell which one this entry is for; nothing was written",
		len(local), c.App, strings.Join(local, ", "))
}

// join maps the project and joins the agent (as ferry join does); ch nil: nothing.
func (c *ConnectCmd) join(ch *fsbus.Channel, rep *connectReport) error {
	if ch == nil {
		return nil
	}
	undo, err := ch.Home.MapForJoin(ch.Project(), ch.Root, false, "by running `ferry join --as "+rep.Agent+" --channel "+ch.Root+" --force` first")
	if err != nil {
		return err
	}
	if rep.Join, err = fsbus.Join(ch, rep.Agent, c.App); err != nil {
		undo()
	}
	return err
}

var actionWords = map[string]string{
	"added": "added ferry to", "updated": "updated ferry in", "unchanged": "ferry already set in",
	"removed": "removed ferry from", "absent": "no ferry entry in",
}

func (c *ConnectCmd) printReport(g *Globals, rep *connectReport) {
	line := func(what string, r *appconfig.Result) {
		g.printf("✔ %s %s %s", what, actionWords[r.Action], r.File)
		if !r.Changed() {
			g.printf("; nothing changed")
		}
		g.printf("\n")
		if r.Backup != "" {
			g.printf("  backup: %s\n", r.Backup)
		}
		if r.Note != "" {
			g.printf("  note: %s\n", r.Note)
		}
	}
	line(rep.App+":", rep.Config)
	if rep.Hook != nil {
		line("SessionStart hook:", rep.Hook)
	}
	switch {
	case c.Remove && !rep.Config.Changed() && (rep.Hook == nil || !rep.Hook.Changed()):
		g.printf("  nothing was there to remove\n")
	case c.Remove && rep.Agent != "":
		g.printf("  the agent %s stays in the channel; the owner retires it there if it is gone for good\n", rep.Agent)
	case c.Remove:
		g.printf("  the agent it served stays in the channel; the owner retires it there if it is gone for good\n")
	default:
		g.printf("  server: %s %s\n", rep.Server.Command, strings.Join(rep.Server.Args, " "))
	}
	if j := rep.Join; j != nil {
		verb := "joined"
		if !j.Wrote {
			verb = "already announced"
		}
		g.printf("✔ %s %s in %s (key %s)\n", j.Agent, verb, j.Project, j.Key)
		if j.Seated {
			g.printf("  seated at level %s\n", j.Level)
		} else {
			g.printf("  not seated yet; the owner runs: %s\n", j.Next)
		}
	}
	for _, n := range rep.Notes {
		g.printf("  note: %s\n", n)
	}
	switch {
	case rep.Config.Changed() && c.Remove:
		g.printf("  restart the app to stop ferry's server\n")
	case rep.Config.Changed():
		g.printf("  restart the app to load it\n")
	}
}

// printSnippet shows what connect would write, in the file's own format.
func (c *ConnectCmd) printSnippet(g *Globals, rep *connectReport, file, hookCmd string) error {
	if g.JSON {
		rep.Config = &appconfig.Result{File: file, Action: "print"}
		return g.printJSON(rep)
	}
	g.printf("# %s: %s\n", c.App, file)
	app := appconfig.App(c.App)
	b, err := appconfig.Snippet(app, rep.Server)
	if err != nil {
		return err
	}
	g.printf("%s", b)
	if app == appconfig.ClaudeCode && appconfig.Scope(c.Scope) == appconfig.User {
		g.printf("# or, with Claude Code's CLI: claude mcp add-json --scope user ferry '%s'\n", appconfig.ClaudeAddJSON(rep.Server))
	}
	if c.Hook {
		b, err := appconfig.HookSnippet(hookCmd)
		if err != nil {
			return err
		}
		g.printf("# SessionStart hook (.claude/settings.json)\n%s", b)
	}
	for _, n := range rep.Notes {
		g.printf("# note: %s\n", n)
	}
	return nil
}

// gitInfo is what git says about the working dir: its top level and whether it is a
// second (linked) worktree, whose git dir differs from the common dir.
type gitInfo struct {
	TopLevel string
	Linked   bool
}

// readGit asks git about dir; ok is false outside a repository or without git.
func readGit(dir string) (gitInfo, bool) {
	cmd := exec.Command("git", "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return gitInfo{}, false
	}
	l := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(l) != 3 {
		return gitInfo{}, false
	}
	return gitInfo{TopLevel: filepath.FromSlash(l[0]), Linked: filepath.Clean(l[1]) != filepath.Clean(l[2])}, true
}

// defaultAgentName is <app>-<machine>, and for a project-level entry in a second
// worktree of a repository <app>-<machine>-<worktree dir>, so two worktrees' agents
// never share a name. At most 63 bytes (a portable name).
func defaultAgentName(app, machine, worktree string) string {
	parts := []string{app}
	if m := fsbus.PortableLabel(machine); m != "" {
		parts = append(parts, m)
	}
	if w := fsbus.PortableLabel(worktree); w != "" {
		parts = append(parts, w)
	}
	n := strings.Join(parts, "-")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// machineLabel is this machine's host name up to its first dot, as fsbus writes it in
// agent.join.
func machineLabel() string {
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(h, ".")
	return fsbus.PortableLabel(h)
}

// shellQuote quotes s for a hook command line when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(s) + `"`
}
