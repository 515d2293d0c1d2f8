package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/gofrs/flock"
)

// The gateway's configuration (docs/mcp.md "Where the servers are kept"): the MCP
// servers a `ferry mcp serve --tools gateway` forwards to, kept in TOML on this
// machine, never in the channel (a command line is per machine):
//
//   - machine-wide: <config>/servers.toml (<config> is fsbus.Home.ConfigDir);
//   - project-local: <config>/projects/<project>/servers.toml, seen only by a gateway
//     serving that project. A project-local entry shadows a machine-wide one of the same
//     name.
//
// Each file is one table per server:
//
//	[servers.github]
//	command = "/usr/local/bin/github-mcp"
//	args = ["stdio"]
//	env = ["GITHUB_TOKEN"]      # names passed from ferry's environment, or NAME=VALUE
//	startup_timeout = "10s"
//	call_timeout = "60s"
//
// Decoding is strict: an unknown key fails, naming it. Writes are atomic and serialised
// by a lock file beside the config (servers.toml.lock).

// Gateway scopes: where an entry is kept.
const (
	ScopeMachine = "machine"
	ScopeProject = "project"
)

// Default gateway timeouts.
const (
	DefaultStartupTimeout = 10 * time.Second
	DefaultCallTimeout    = 60 * time.Second
)

// serverNameRE is the rule for a gateway server's name (docs/mcp.md
// "Where the servers are kept").
var serverNameRE = lazyre.New(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// envNameRE is the rule for an environment variable's name in an entry.
var envNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether name is a valid gateway server name:
// ^[a-z0-9][a-z0-9_-]{0,31}$.
func ValidName(name string) bool { return serverNameRE.MatchString(name) }

// Server is one configured MCP server.
type Server struct {
	// Name is the table key (ValidName).
	Name string `toml:"-" json:"name"`
	// Scope is ScopeMachine or ScopeProject: the file it came from (not stored).
	Scope string `toml:"-" json:"scope"`
	// Command is the program to run: an absolute path, or a name looked up in ferry's
	// PATH when the child starts.
	Command string `toml:"command" json:"command"`
	// Args are the program's arguments.
	Args []string `toml:"args,omitempty" json:"args,omitempty"`
	// Env is the child's environment beyond the base set (BaseEnv): "NAME"
	// passes ferry's own value (never stored), "NAME=VALUE" sets a value (stored in the
	// file: no secrets).
	Env []string `toml:"env,omitempty" json:"env,omitempty"`
	// StartupTimeout bounds spawning the child and its initialize answer (Go duration,
	// "10s" when empty).
	StartupTimeout string `toml:"startup_timeout,omitempty" json:"startup_timeout,omitempty"`
	// CallTimeout bounds each later request (Go duration, "60s" when empty).
	CallTimeout string `toml:"call_timeout,omitempty" json:"call_timeout,omitempty"`
}

// Timeouts returns the entry's start-up and call timeouts (defaults when empty).
func (s *Server) Timeouts() (startup, call time.Duration) {
	startup, call = DefaultStartupTimeout, DefaultCallTimeout
	if d, err := time.ParseDuration(s.StartupTimeout); err == nil && d > 0 {
		startup = d
	}
	if d, err := time.ParseDuration(s.CallTimeout); err == nil && d > 0 {
		call = d
	}
	return startup, call
}

// Validate checks an entry; it returns an invalid *errs.Error naming the bad field.
func (s *Server) Validate() error {
	if !ValidName(s.Name) {
		return errs.Errorf(errs.Invalid, "use 1–32 of a-z, 0-9, '_' and '-', starting with a letter or digit", "%q is not a valid server name", s.Name)
	}
	if strings.TrimSpace(s.Command) == "" {
		return errs.Errorf(errs.Invalid, "give the command after --, e.g. ferry mcp add NAME -- my-server --stdio", "server %s has no command", s.Name)
	}
	for _, e := range s.Env {
		name, _, _ := strings.Cut(e, "=")
		if !envNameRE.MatchString(name) {
			return errs.Errorf(errs.Invalid, "pass --env NAME or --env NAME=VALUE", "server %s: %q is not an environment variable name", s.Name, name)
		}
	}
	for _, d := range []struct{ key, v string }{{"startup_timeout", s.StartupTimeout}, {"call_timeout", s.CallTimeout}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 || v > time.Hour {
			return errs.Errorf(errs.Invalid, "use a Go duration between 1ms and 1h, e.g. 10s", "server %s: %s %q is not a valid duration", s.Name, d.key, d.v)
		}
	}
	return nil
}

// BaseEnv are the variables every child gets from ferry's environment when set,
// besides those its entry names: what a program needs to run at all on each OS (PATH
// to find its interpreter, the home and temp dirs, Windows' SystemRoot).
var BaseEnv = []string{"PATH", "HOME", "USERPROFILE", "SystemRoot", "TEMP", "TMP", "TMPDIR"}

// ChildEnv is the environment of s's child: BaseEnv and the entry's names from
// lookup (os.LookupEnv), then its NAME=VALUE settings. It is never nil (a nil Env would
// make os/exec pass ferry's whole environment).
func (s *Server) ChildEnv(lookup func(string) (string, bool)) []string {
	env := []string{}
	seen := map[string]int{}
	set := func(name, value string) {
		if i, ok := seen[name]; ok {
			env[i] = name + "=" + value
			return
		}
		seen[name] = len(env)
		env = append(env, name+"="+value)
	}
	for _, n := range BaseEnv {
		if v, ok := lookup(n); ok {
			set(n, v)
		}
	}
	for _, e := range s.Env {
		if name, value, ok := strings.Cut(e, "="); ok {
			set(name, value)
		} else if v, ok := lookup(e); ok {
			set(e, v)
		}
	}
	return env
}

// ConfigPath is the file of a scope: machine-wide when project is "", else
// project-local.
func ConfigPath(h *fsbus.Home, project string) string {
	if project == "" {
		return filepath.Join(h.ConfigDir, "servers.toml")
	}
	return filepath.Join(h.ConfigDir, "projects", project, "servers.toml")
}

// configFile is one servers.toml.
type configFile struct {
	Servers map[string]*Server `toml:"servers"`
}

// Load reads one config file (missing: none); every entry gets scope. Errors: invalid
// for a file that is not TOML, has unknown keys (named) or a bad entry.
func Load(path, scope string) ([]*Server, error) {
	var f configFile
	md, err := toml.DecodeFile(path, &f)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "fix the file by hand, or remove it and add the servers again", "reading %s: %v", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, errs.Errorf(errs.Invalid, "remove or rename them (known keys: command, args, env, startup_timeout, call_timeout)", "%s has unknown keys: %s", path, strings.Join(keys, ", "))
	}
	var out []*Server
	for name, s := range f.Servers {
		if s == nil {
			continue
		}
		s.Name, s.Scope = name, scope
		if err := s.Validate(); err != nil {
			return nil, errs.Errorf(errs.Invalid, "fix "+path, "%s: %v", path, err)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Server) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Servers returns the servers a gateway for project sees: the machine-wide ones and,
// when project is not "", that project's, a project-local entry shadowing a
// machine-wide one of the same name; sorted by name.
func Servers(h *fsbus.Home, project string) ([]*Server, error) {
	all, err := Load(ConfigPath(h, ""), ScopeMachine)
	if err != nil || project == "" {
		return all, err
	}
	local, err := Load(ConfigPath(h, project), ScopeProject)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Server{}
	for _, s := range all {
		byName[s.Name] = s
	}
	for _, s := range local {
		byName[s.Name] = s
	}
	out := make([]*Server, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Server) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Update rewrites one config file under its lock: change receives the current entries
// by name and may edit the map; its error aborts with nothing written. The file is
// replaced atomically.
func Update(path string, change func(map[string]*Server) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("making %s: %w", filepath.Dir(path), err)
	}
	lk := flock.New(path + ".lock")
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("locking %s: %w", path, err)
	}
	defer lk.Unlock()
	cur, err := Load(path, "")
	if err != nil {
		return err
	}
	m := map[string]*Server{}
	for _, s := range cur {
		m[s.Name] = s
	}
	if err := change(m); err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString("# MCP servers of ferry's gateway (ferry mcp add/remove; docs/mcp.md \"Gateway\").\n")
	if err := toml.NewEncoder(&b).Encode(configFile{Servers: m}); err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return fsutil.WriteFile(path, b.Bytes(), 0o600)
}
