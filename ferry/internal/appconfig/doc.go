// Package appconfig edits the MCP configs of AI apps (Claude Desktop, Claude Code,
// Codex, Cursor) for `ferry connect`: it knows where each app keeps its config, the
// config's format, and how to add, replace, take out and read ferry's entry there.
//
//	env, err := appconfig.Machine()
//	file, err := appconfig.Path(appconfig.Cursor, appconfig.User, env, root)
//	srv := appconfig.Server{Command: exe, Args: args, Env: appconfig.ServerEnv(env)}
//	config, hook, err := appconfig.Change{App: appconfig.Cursor, Scope: appconfig.User,
//		Root: root, Server: srv}.Apply(env)
//	if err := join(); err != nil {
//		return appconfig.Undo(err, config, hook) // every file as it was
//	}
//
// # Paths
//
// Every path is computed by Path (and HookPath) from an Env — a GOOS, an environment
// and a home dir — never from the running OS, so each OS's path is unit-tested on any
// machine. Claude Desktop's folder is the one os.UserConfigDir names on that OS (a
// relative $XDG_CONFIG_HOME is ignored).
//
// # Edits
//
// Every edit merges: other servers, unknown keys and ferry's own extra keys in its
// entry are kept (env keys ferry does not set included). It is idempotent: an equal
// entry writes nothing. Before any change the file is copied to
// <file>.bak-<UTC time>[-N], never overwriting an older backup; the file is then
// replaced atomically (fsutil.WriteFile) with its mode kept, and written through a
// symlink to its target. A file that does not parse is refused (invalid) and left as
// it is. JSON members keep their order and a leading UTF-8 byte-order mark is dropped
// (the backup keeps it). Codex's config.toml is edited as text: only ferry's
// [mcp_servers.ferry] tables change, comments and every other byte stay (toml.go).
// Every edit's Result can be undone (Undo) until the caller is done.
//
// No token or passphrase is ever written: the server signs with the agent's key, which
// stays in ferry's home, and SYNCTHING_API_KEY is never carried into an entry's env.
package appconfig
