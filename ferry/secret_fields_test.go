package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
)

// The secret guard's table over the CLI (docs/format.md "Input caps and the secret
// guard"): every leaf command of kong's model (catalogModel, as docs/commands.md is
// built) is a channel writer with a base command line here, or is listed in
// secretNotWriting with why. Each writer's every string argument and string flag —
// its own and the globals — is set to token-shaped values and the command run
// in-process; it is refused, or the value appears nowhere: not in any file of the
// channel folder (names included) or of FERRY_HOME, not on stdout or stderr. A new
// command, argument or flag is in the table without an edit; a new command with no
// line here fails it.

// secretNotWriting are the leaf commands that write nothing to the channel.
var secretNotWriting = map[string]string{
	"key show": "reads", "agents": "reads", "access show": "reads", "status": "reads",
	"order list": "reads", "order show": "reads", "talk sent": "reads", "talk show": "reads",
	"ask status": "reads", "primary status": "reads", "decision list": "reads",
	"handin list": "reads", "catchup": "reads", "ledger tail": "reads", "ledger verify": "reads",
	"watch": "reads", "doctor": "reads", "mcp servers": "reads", "mcp list": "reads",
	"version": "prints", "inspect": "reads", "completion": "prints", "update check": "reads",
	"search": "reads", "secret get": "reads", "secret list": "reads", "policy show": "reads",
	"mcp call":  "calls a gateway server's tool; writes nothing to the channel",
	"mcp serve": "serves MCP: its tools are TestSecretFieldsMCP's table (mcpserver)",
	"key new":   "machine-local key", "key lock": "machine-local key", "key unlock": "machine-local key",
	"key export": "machine-local key", "key import": "machine-local key",
	"mcp add": "machine-local gateway config", "mcp remove": "machine-local gateway config",
	"demo": "a throw-away sandbox", "update apply": "replaces this binary",
	"master repin": "machine-local pin", "pause": "machine-local switch", "resume": "machine-local switch",
	"connect":      "writes an app's config; its join is fsbus.Join, the join row",
	"archive move": "moves archived files out of the folder whole; writes no new bytes",
}

// secretLocal are the string arguments that name files or folders on this machine:
// never written to the channel, though a command that succeeds may print them.
var secretLocal = map[string]bool{
	"init <dir>": true, "--workspace": true, "--from-file": true, "--config": true,
	"--exec": true, "--workdir": true, "--channel": true,
}

// secretCLI is one writer's base command line: positional values and flags.
type secretCLI struct {
	pos, flags []string
	stdin      string
	// mayFail: the base line fails here for a reason of its own (no git remote, no
	// config file); its strings are still tried.
	mayFail bool
}

// secretCLIWorld is the channel the table writes to, on one FERRY_HOME: the owner
// (master), "actor" (orchestrator) and "peer" (member), and a workspace.
type secretCLIWorld struct {
	t             *testing.T
	home, dir, ws string
	n             int
	master, actor *fsbus.Session
	peer          *fsbus.Session
}

func (w *secretCLIWorld) run(stdin string, args ...string) (int, string, string) {
	var o, e bytes.Buffer
	code := runIO(args, strings.NewReader(stdin), &o, &e)
	return code, o.String(), e.String()
}

func (w *secretCLIWorld) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *secretCLIWorld) fresh(prefix string) string {
	w.n++
	return fmt.Sprintf("%s%d", prefix, w.n)
}

func (w *secretCLIWorld) order(s *fsbus.Session) string {
	o, err := s.NewOrder(fsbus.NewOrderOptions{Title: "plain"})
	w.must(err)
	return o.ID
}

func (w *secretCLIWorld) held() string {
	id := w.order(w.peer)
	_, err := w.actor.Claim(id, "")
	w.must(err)
	return id
}

// seated joins and seats a fresh agent.
func (w *secretCLIWorld) seated() string {
	name := w.fresh("extra")
	c, err := fsbus.Open(fsHome(w.home), w.dir)
	w.must(err)
	_, err = fsbus.Join(c, name, "test")
	w.must(err)
	_, err = w.master.Grant(fsbus.GrantOptions{Agent: name, Level: "member"})
	w.must(err)
	return name
}

func newSecretCLIWorld(t *testing.T) *secretCLIWorld {
	w := &secretCLIWorld{t: t, home: filepath.Join(t.TempDir(), "home"), ws: t.TempDir()}
	t.Setenv(fsbus.EnvHome, w.home)
	t.Setenv("FERRY_AGENT", "")
	t.Setenv("FERRY_CHANNEL", "")
	w.dir = filepath.Join(t.TempDir(), "acme")
	for _, args := range [][]string{
		{"init", w.dir, "--project", "acme"},
		{"join", "--as", "actor", "--project", "acme"},
		{"grant", "actor", "--level", "orchestrator", "--project", "acme"},
		{"join", "--as", "peer", "--project", "acme"},
		{"grant", "peer", "--level", "member", "--project", "acme"},
	} {
		if code, o, e := w.run("", args...); code != 0 {
			t.Fatalf("ferry %v: exit %d\n%s%s", args, code, o, e)
		}
	}
	c, err := fsbus.Open(fsHome(w.home), w.dir)
	w.must(err)
	for _, s := range []struct {
		p    **fsbus.Session
		name string
	}{{&w.master, fold.MasterWriter}, {&w.actor, "actor"}, {&w.peer, "peer"}} {
		*s.p, err = c.As(s.name)
		w.must(err)
	}
	w.must(os.WriteFile(filepath.Join(w.ws, "a.txt"), []byte("one\ntwo\n"), 0o644))
	w.actor.Workspace = w.ws
	w.must(os.WriteFile(filepath.Join(w.dir, "releases", "ferry"), []byte("binary"), 0o644))
	return w
}

// bases are the writers' base command lines, made fresh for each try (a try that
// succeeded used up what it acted on).
func (w *secretCLIWorld) bases() map[string]func() secretCLI {
	as := []string{"--as", "actor"}
	flags := func(f ...string) []string { return append(f, as...) }
	self, err := os.Executable()
	w.must(err)
	m := map[string]func() secretCLI{
		"init": func() secretCLI {
			return secretCLI{pos: []string{filepath.Join(w.t.TempDir(), "ch")}, flags: []string{"--project", w.fresh("proj"), "--title", "A channel"}}
		},
		"join": func() secretCLI { return secretCLI{flags: []string{"--as", w.fresh("agent"), "--app", "test"}} },
		"grant set": func() secretCLI {
			return secretCLI{pos: []string{w.seated()}, flags: []string{"--level", "member", "--scope", "backend"}}
		},
		"grant revoke": func() secretCLI { return secretCLI{pos: []string{w.seated()}} },
		"agent retire": func() secretCLI { return secretCLI{pos: []string{w.seated()}} },
		"order new": func() secretCLI {
			return secretCLI{pos: []string{"A new order"}, flags: flags("--body", "text", "--label", "backend", "--pointer", "a.txt", "--task", "code_review", "--to", "peer", "--key", w.fresh("k"), "--workspace", w.ws)}
		},
		"order claim": func() secretCLI {
			return secretCLI{pos: []string{w.order(w.peer)}, flags: flags("--key", w.fresh("k"))}
		},
		"order progress": func() secretCLI { return secretCLI{pos: []string{w.held(), "halfway"}, flags: as} },
		"order submit": func() secretCLI {
			return secretCLI{pos: []string{w.held()}, flags: flags("--ref", "main", "--note", "done", "--result", `{"ok":true}`)}
		},
		"order review": func() secretCLI {
			id := w.order(w.actor)
			_, err := w.peer.Claim(id, "")
			w.must(err)
			_, err = w.peer.Submit(id, fsbus.SubmitOptions{Reference: "main", Note: "done"})
			w.must(err)
			return secretCLI{pos: []string{id}, flags: flags("--accept", "--note", "fine")}
		},
		"order release": func() secretCLI { return secretCLI{pos: []string{w.held()}, flags: flags("--note", "n")} },
		"order cancel":  func() secretCLI { return secretCLI{pos: []string{w.order(w.actor)}, flags: flags("--note", "n")} },
		"order offer":   func() secretCLI { return secretCLI{pos: []string{w.order(w.actor)}, flags: flags("--to", "peer")} },
		"order extend":  func() secretCLI { return secretCLI{pos: []string{w.held()}, flags: flags("--note", "n")} },
		"order fail":    func() secretCLI { return secretCLI{pos: []string{w.held()}, flags: flags("--reason", "blocked")} },
		"order decline": func() secretCLI {
			o, err := w.peer.NewOrder(fsbus.NewOrderOptions{Title: "for you", To: "actor"})
			w.must(err)
			return secretCLI{pos: []string{o.ID}, flags: flags("--note", "n")}
		},
		"order verify": func() secretCLI {
			f := w.fresh("p") + ".txt" // pointed at, then changed: the order can go stale
			w.must(os.WriteFile(filepath.Join(w.ws, f), []byte("one\n"), 0o644))
			o, err := w.actor.NewOrder(fsbus.NewOrderOptions{Title: "pointed", Pointers: []string{f}})
			w.must(err)
			w.must(os.WriteFile(filepath.Join(w.ws, f), []byte("two\n"), 0o644))
			return secretCLI{pos: []string{o.ID}, flags: flags("--mark", "--workspace", w.ws)}
		},
		"talk send": func() secretCLI { return secretCLI{pos: []string{"hello"}, flags: flags("--to", "peer")} },
		"talk read": func() secretCLI { return secretCLI{flags: as} },
		"talk ack": func() secretCLI {
			m, err := w.peer.TalkSend(fsbus.TalkSendOptions{To: "actor", Body: "hi"})
			w.must(err)
			return secretCLI{pos: []string{m.ID}, flags: as}
		},
		"ask raise": func() secretCLI {
			return secretCLI{pos: []string{"Drop it?"}, flags: flags("--recommendation", "yes", "--reasoning", "old")}
		},
		"ask approve":     w.askBase,
		"ask reject":      w.askBase,
		"ask send-back":   w.askBase,
		"primary standby": func() secretCLI { return secretCLI{flags: as} },
		"primary take":    func() secretCLI { return secretCLI{flags: as} },
		"primary release": func() secretCLI { w.take(); return secretCLI{flags: as} },
		"primary brief": func() secretCLI {
			w.take()
			return secretCLI{flags: flags("--objective", "Ship", "--constraint", "no downtime")}
		},
		"decision record": func() secretCLI { return secretCLI{pos: []string{"Ship on Friday"}, flags: as} },
		"handin add":      func() secretCLI { return secretCLI{flags: flags("--ref", "commit:abc123", "--note", "n")} },
		"secret put": func() secretCLI {
			return secretCLI{pos: []string{"db-password"}, flags: flags("--to", "peer"), stdin: "v4lue-123"}
		},
		"update approve": func() secretCLI {
			return secretCLI{pos: []string{"1.0." + w.fresh("")}, flags: []string{"--platform", "linux/amd64=releases/ferry"}}
		},
		"master rotate": func() secretCLI { return secretCLI{} },
		"compact":       func() secretCLI { return secretCLI{flags: []string{"--settle", "0s", "--force"}} },
		"policy set": func() secretCLI {
			return secretCLI{pos: []string{fmt.Sprintf("quiet_after_s=%d", 100+w.n)}}
		},
		"run": func() secretCLI {
			return secretCLI{flags: flags("--once", "--exec", self, "--label", "none-such", "--env", "HOME", "--workdir", w.ws, "--queue", "off")}
		},
		"daemon": func() secretCLI {
			return secretCLI{flags: []string{"--once", "--config", filepath.Join(w.ws, "none.toml")}, mayFail: true}
		},
		"sync": func() secretCLI { return secretCLI{flags: []string{"--git"}, mayFail: true} },
	}
	for path, mk := range m {
		if path != "init" { // init makes a channel of its own; the others name this one
			m[path] = func() secretCLI { b := mk(); b.flags = append(b.flags, "--channel", w.dir); return b }
		}
	}
	return m
}

func (w *secretCLIWorld) askBase() secretCLI {
	a, err := w.actor.AskRaise(fsbus.AskRaiseOptions{Title: "Go?", Recommendation: "yes"})
	w.must(err)
	return secretCLI{pos: []string{a.ID}, flags: []string{"--note", "ok"}}
}

// take makes actor the primary (a take when it holds already writes nothing).
func (w *secretCLIWorld) take() {
	_, err := w.actor.PrimaryTake("")
	w.must(err)
}

// stringValue reports whether v holds text (a string or a list of strings).
func stringValue(v *kong.Value) bool {
	t := v.Target.Type()
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() == reflect.String
}

// cliShapes are the token shapes a string is tried with (fsbus/secretguard.go): free
// text (a GitHub token), a portable name (a GitLab token: passes the syntax of names,
// labels, task types and ids), and JSON whose member name is a token (a structured
// result's keys). Each try has tokens of its own.
func cliShapes(seed uint64) (shapes, tokens []string) {
	tok := func(s uint64, n int, alpha string) string {
		r := rand.New(rand.NewPCG(s, s*7+1))
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[r.IntN(len(alpha))]
		}
		return string(b)
	}
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	gh := "ghp_" + tok(3*seed, 36, alnum)
	gl := "glpat-" + tok(3*seed+1, 24, "abcdefghijklmnopqrstuvwxyz0123456789")
	key := "ghp_" + tok(3*seed+2, 36, alnum)
	return []string{gh, gl, `{"ok":{"` + key + `":1}}`}, []string{gh, gl, key}
}

// withArg is base with positional i set to v.
func withArg(b secretCLI, i int, v string) secretCLI {
	pos := slices.Clone(b.pos)
	for len(pos) <= i {
		pos = append(pos, "x")
	}
	pos[i] = v
	b.pos = pos
	return b
}

// withFlag is base with every --name dropped and --name=v added.
func withFlag(b secretCLI, f *kong.Flag, v string) secretCLI {
	var out []string
	for i := 0; i < len(b.flags); i++ {
		a := b.flags[i]
		if a == "--"+f.Name {
			if !f.IsBool() {
				i++
			}
			continue
		}
		if strings.HasPrefix(a, "--"+f.Name+"=") {
			continue
		}
		out = append(out, a)
	}
	b.flags = append(out, "--"+f.Name+"="+v)
	return b
}

// treeText is every path and file content under dir.
func treeText(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + "\n")
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
			b.WriteByte('\n')
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSecretFieldsCLI(t *testing.T) {
	t.Chdir(t.TempDir()) // a relative path tried as a folder (init <dir>) lands here
	app, err := catalogModel()
	if err != nil {
		t.Fatal(err)
	}
	w := newSecretCLIWorld(t)
	bases := w.bases()
	var globals []*kong.Flag
	for _, f := range app.Flags {
		if !f.Hidden && stringValue(f.Value) {
			globals = append(globals, f)
		}
	}
	seen := map[string]bool{}
	tries := 0
	perField := 3 // shapes tried per field (cliShapes); -short: one, each in turn
	if testing.Short() {
		perField = 1
	}
	var written []string // every token a try was given, but in a local path
	for _, n := range app.Leaves(true) {
		path := leafPath(n)
		seen[path] = true
		mk, writes := bases[path]
		if _, ok := secretNotWriting[path]; ok == writes {
			t.Errorf("%s: give it a base command line in bases (it writes) or a line in secretNotWriting, not both", path)
			continue
		}
		if !writes {
			continue
		}
		words := strings.Fields(path)
		if b := mk(); !b.mayFail {
			if code, o, e := w.run(b.stdin, append(append(slices.Clone(words), b.pos...), b.flags...)...); code != 0 {
				t.Errorf("%s: the base line fails (exit %d): %s%s", path, code, o, e)
				continue
			}
		}
		type field struct {
			name string
			set  func(b secretCLI, v string) secretCLI
		}
		var fields []field
		for i, p := range n.Positional {
			if stringValue(p) {
				fields = append(fields, field{path + " <" + p.Name + ">", func(b secretCLI, v string) secretCLI { return withArg(b, i, v) }})
			}
		}
		var flags []*kong.Flag
		for _, group := range n.AllFlags(true) {
			flags = append(flags, group...)
		}
		done := map[*kong.Flag]bool{}
		for _, f := range append(flags, globals...) {
			if stringValue(f.Value) && !done[f] {
				done[f] = true
				fields = append(fields, field{"--" + f.Name, func(b secretCLI, v string) secretCLI { return withFlag(b, f, v) }})
			}
		}
		for _, fd := range fields {
			local := secretLocal[fd.name] || secretLocal[strings.TrimPrefix(fd.name, path+" ")]
			tries++
			shapes, tokens := cliShapes(uint64(tries))
			base := mk() // reused until a try succeeds: a refusal changes nothing
			for i := range perField {
				if perField == 1 {
					i = tries % 3
				}
				shape := shapes[i]
				b := fd.set(base, shape)
				args := append(append(slices.Clone(words), b.pos...), b.flags...)
				code, stdout, stderr := w.run(b.stdin, args...)
				if code == 0 {
					base = mk()
				}
				tok := tokens[i]
				where := []string{}
				if strings.Contains(stderr, tok) {
					where = append(where, "stderr")
				}
				if strings.Contains(stdout, tok) && (code != 0 || !local) {
					where = append(where, "stdout")
				}
				if !local {
					written = append(written, tok)
				}
				if !local && code == 0 { // a refusal writes nothing: the look at the end covers it
					if strings.Contains(treeText(t, w.dir), tok) {
						where = append(where, "the channel folder")
					}
					if strings.Contains(treeText(t, w.home), tok) {
						where = append(where, "FERRY_HOME")
					}
				}
				if len(where) > 0 {
					t.Errorf("ferry %s %s=%.24s…: the value reached %s (exit %d)\n%s%s", path, fd.name, shape, strings.Join(where, ", "), code, stdout, stderr)
				}
			}
		}
	}
	all := treeText(t, w.dir) + treeText(t, w.home)
	for _, tok := range written {
		if strings.Contains(all, tok) {
			t.Errorf("a try wrote %.24s… to the channel folder or FERRY_HOME", tok)
		}
	}
	for p := range secretNotWriting {
		if !seen[p] {
			t.Errorf("secretNotWriting names %q, which is no command", p)
		}
	}
	for p := range bases {
		if !seen[p] {
			t.Errorf("bases names %q, which is no command", p)
		}
	}
	t.Logf("%d fields × %d shapes", tries, perField)
}
