package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/runner"
	"github.com/ferryhq/ferry/internal/fsutil"
)

// localPolicy is what a command does when a machine-local file cannot be written
// (docs/format.md §18): files whose loss breaks a promise fail the command, naming the
// file and the OS error, with the channel unchanged; caches whose loss only costs time
// give one warning and the command goes on.
type localPolicy int

const (
	mustFail localPolicy = iota
	warnOnce
)

// localKinds classifies every machine-local file a command writes, by its path under
// FERRY_HOME (slashes). A path no row matches fails TestMachineLocalWritesOnENOSPC:
// a new kind of machine-local file must say here what its loss costs.
var localKinds = []struct {
	name   string
	re     *regexp.Regexp
	policy localPolicy
}{
	{"device id", regexp.MustCompile(`^config/device$`), mustFail},
	{"project map", regexp.MustCompile(`^config/projects\.toml$`), mustFail},
	{"key", regexp.MustCompile(`^config/keys/[^/]+/[^/]+\.key(\.locked)?(\.old-\d+|\.next-.*)?$`), mustFail},
	{"pin", regexp.MustCompile(`^config/pins/[^/]+\.pub$`), mustFail},
	{"pause switch", regexp.MustCompile(`^config/paused(\.json|/[^/]+\.json)$`), mustFail},
	{"high-water mark", regexp.MustCompile(`^config/segments/[^/]+/[^/]+$`), mustFail},
	{"arrival log", regexp.MustCompile(`^cache/channels/[^/]+/arrivals-[0-9a-f]{16}\.log$`), mustFail},
	{"local index", regexp.MustCompile(`^cache/channels/[^/]+/index-[0-9a-f]{16}\.bin$`), warnOnce},
	{"fold checkpoint", regexp.MustCompile(`^cache/channels/[^/]+/fold-[0-9a-f]{16}\.bin$`), warnOnce},
	{"verified channel.toml copy", regexp.MustCompile(`^cache/channels/[^/]+/channel-[0-9a-f]{16}\.toml$`), warnOnce},
	{"presence sightings", regexp.MustCompile(`^cache/channels/[^/]+/presence\.seen$`), warnOnce},
	{"run journal", regexp.MustCompile(`^cache/channels/[^/]+/runs/[^/]+\.journal$`), warnOnce},
}

// afterEntry lists the steps that write a must-fail kind only after their entry is in
// the ledger: failing then would invite a retry that writes twice, so the step warns
// and succeeds, and the next command of that machine fails naming the file.
var afterEntry = map[string]string{
	"pin": "master rotate", // the pin follows the rotation the command just wrote
}

func localKind(rel string) int {
	for i, k := range localKinds {
		if k.re.MatchString(rel) {
			return i
		}
	}
	return -1
}

// localStep is one command of the scenario, run on machine a or b: the CLI with args,
// or, for what only a long-running process does (an MCP session's presence, a run's
// journal), fn on a session of agent as.
type localStep struct {
	machine string
	args    []string
	as      string
	fn      func(s *fsbus.Session) error
}

// localScenario touches every kind of machine-local file two machines write in
// ordinary use: set-up, grants, writes, reads, a pause, a master rotation a second
// machine's pin follows.
var localScenario = []localStep{
	{machine: "a", args: []string{"init", "CH", "--project", "acme"}},
	{machine: "a", args: []string{"join", "--as", "alice", "--app", "claude-code"}},
	{machine: "a", args: []string{"grant", "alice"}},
	{machine: "a", args: []string{"--as", "alice", "order", "new", "One"}},
	{machine: "a", args: []string{"--as", "alice", "order", "new", "Two"}},
	{machine: "b", args: []string{"join", "--as", "bob", "--app", "codex", "--channel", "CH"}},
	{machine: "a", args: []string{"grant", "bob"}},
	{machine: "b", args: []string{"--as", "bob", "talk", "send", "--to", "alice", "hello"}},
	{machine: "a", args: []string{"--as", "alice", "talk", "read"}},
	{machine: "a", args: []string{"pause", "--reason", "maintenance"}},
	{machine: "a", args: []string{"resume"}},
	{machine: "a", args: []string{"master", "rotate"}},
	{machine: "b", args: []string{"--as", "bob", "order", "list"}},
	{machine: "b", args: []string{"--as", "bob", "order", "new", "Three"}},
	{machine: "a", args: []string{"presence"}, as: "alice", fn: func(s *fsbus.Session) error { return s.WritePresence("testing", nil) }},
	{machine: "b", args: []string{"--as", "bob", "order", "list"}},
	{machine: "a", args: []string{"journal"}, as: "alice", fn: func(s *fsbus.Session) error {
		runner.Journal(s, runner.JournalEvent{Event: "start"})
		return nil
	}},
}

// localWorld is one run of the scenario in its own directory.
type localWorld struct {
	t    *testing.T
	dir  string
	ch   string
	step int // the step running now
}

func newLocalWorld(t *testing.T) *localWorld {
	dir := t.TempDir()
	return &localWorld{t: t, dir: dir, ch: filepath.Join(dir, "ch")}
}

func (w *localWorld) home(machine string) string { return filepath.Join(w.dir, "home-"+machine) }

// rel returns path relative to the home it lies in, with slashes, or "" when it lies
// in no home of this world.
func (w *localWorld) rel(path string) string {
	for _, m := range []string{"a", "b"} {
		if r, err := filepath.Rel(w.home(m), path); err == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r)
		}
	}
	return ""
}

// run runs step i in-process and returns its exit code and output.
func (w *localWorld) run(i int) (code int, stdout, stderr string) {
	st := localScenario[i]
	args := make([]string, len(st.args))
	for j, a := range st.args {
		args[j] = strings.ReplaceAll(a, "CH", w.ch)
	}
	w.t.Setenv("FERRY_HOME", w.home(st.machine))
	w.step = i
	var o, e bytes.Buffer
	if st.fn == nil {
		code = runIO(args, strings.NewReader(""), &o, &e)
		return code, o.String(), e.String()
	}
	err := func() error {
		h, err := fsbus.LocalHome()
		if err != nil {
			return err
		}
		h.Warn = func(msg string) { fmt.Fprintf(&e, "ferry: warning: %s\n", msg) }
		c, err := fsbus.Open(h, w.ch)
		if err != nil {
			return err
		}
		s, err := c.As(st.as)
		if err != nil {
			return err
		}
		return st.fn(s)
	}()
	if err != nil {
		fmt.Fprintf(&e, "ferry: error: %v\n", err)
		return 1, o.String(), e.String()
	}
	return 0, o.String(), e.String()
}

// channelDigest is a digest of every file (name and bytes) under the channel folder.
func (w *localWorld) channelDigest() string {
	h := sha256.New()
	var names []string
	filepath.WalkDir(w.ch, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, n := range names {
		b, _ := os.ReadFile(n)
		h.Write([]byte(n + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestMachineLocalWritesOnENOSPC injects ENOSPC, through fsutil's one fault seam, into
// each kind of machine-local file in turn, at every step of the scenario that writes it
// (-short: the first and the last): a must-fail kind fails that command (exit ≠ 0, the file and "no space left on
// device" named on stderr, the channel folder unchanged); a cache gives exactly one
// warning naming it and the command succeeds. A first pass records which kinds each
// step writes and fails on a path no kind matches.
func TestMachineLocalWritesOnENOSPC(t *testing.T) {
	writes := map[int][]int{} // kind → the steps writing it
	w := newLocalWorld(t)
	restore := fsutil.SetFault(func(op fsutil.Op, path string) error {
		if op != fsutil.OpCreate {
			return nil
		}
		rel := w.rel(path)
		if rel == "" {
			return nil
		}
		k := localKind(rel)
		if k < 0 {
			t.Errorf("step %d (%v) writes %s, which no row of localKinds classifies", w.step, localScenario[w.step].args, rel)
			return nil
		}
		if st := writes[k]; len(st) == 0 || st[len(st)-1] != w.step {
			writes[k] = append(st, w.step)
		}
		return nil
	})
	for i := range localScenario {
		if code, _, stderr := w.run(i); code != 0 {
			restore()
			t.Fatalf("step %d %v: exit %d\n%s", i, localScenario[i].args, code, stderr)
		}
	}
	restore()
	for k, kind := range localKinds {
		if len(writes[k]) == 0 {
			t.Errorf("the scenario writes no %s: add a step that does", kind.name)
		}
	}
	for k := range localKinds {
		steps := writes[k]
		if testing.Short() && len(steps) > 2 {
			steps = []int{steps[0], steps[len(steps)-1]} // -short: the first and last step writing k
		}
		for _, step := range steps {
			testLocalWriteFault(t, k, step)
		}
	}
}

// testLocalWriteFault runs the scenario up to step, then step with ENOSPC injected into
// every write of kind k, and checks the outcome kind k's policy names.
func testLocalWriteFault(t *testing.T, k, step int) {
	kind := localKinds[k]
	{ // the block keeps the body's indentation of the loop it came from
		t.Run(fmt.Sprintf("%s/step_%d_%s", strings.ReplaceAll(kind.name, " ", "_"), step, localScenario[step].args[0]), func(t *testing.T) {
			w := newLocalWorld(t)
			for i := 0; i < step; i++ {
				if code, _, stderr := w.run(i); code != 0 {
					t.Fatalf("step %d %v: exit %d\n%s", i, localScenario[i].args, code, stderr)
				}
			}
			var hit []string
			restore := fsutil.SetFault(func(op fsutil.Op, path string) error {
				if rel := w.rel(path); rel != "" && localKind(rel) == k {
					hit = append(hit, path)
					return &fs.PathError{Op: string(op), Path: path, Err: syscall.ENOSPC}
				}
				return nil
			})
			before := w.channelDigest()
			code, _, stderr := w.run(step)
			restore()
			if len(hit) == 0 {
				t.Fatalf("step %d %v wrote no %s this time", step, localScenario[step].args, kind.name)
			}
			policy := kind.policy
			late := afterEntry[kind.name] != "" && strings.Join(localScenario[step].args, " ") == afterEntry[kind.name]
			if late {
				policy = warnOnce
			}
			switch policy {
			case mustFail:
				if code == 0 {
					t.Fatalf("step %d %v succeeded with its %s unwritable (%s):\n%s", step, localScenario[step].args, kind.name, hit[0], stderr)
				}
				if !strings.Contains(stderr, hit[0]) || !strings.Contains(stderr, syscall.ENOSPC.Error()) {
					t.Errorf("the refusal does not name the file %s and the OS error:\n%s", hit[0], stderr)
				}
				if step > 0 && w.channelDigest() != before {
					t.Errorf("step %d %v failed but changed the channel folder", step, localScenario[step].args)
				}
			case warnOnce:
				if code != 0 {
					t.Fatalf("step %d %v failed on an unwritable cache (%s): exit %d\n%s", step, localScenario[step].args, kind.name, code, stderr)
				}
				if n := strings.Count(stderr, "ferry: warning: "); n != 1 || !strings.Contains(stderr, hit[0]) {
					t.Errorf("want exactly one warning naming %s, got %d:\n%s", hit[0], n, stderr)
				}
			}
			if late {
				defer fsutil.SetFault(func(op fsutil.Op, path string) error {
					if rel := w.rel(path); rel != "" && localKind(rel) == k {
						return &fs.PathError{Op: string(op), Path: path, Err: syscall.ENOSPC}
					}
					return nil
				})()
				var o, e bytes.Buffer
				if code := runIO([]string{"order", "list"}, strings.NewReader(""), &o, &e); code == 0 || !strings.Contains(e.String(), hit[0]) {
					t.Errorf("the next command of the machine went on without its %s (exit %d):\n%s", kind.name, code, e.String())
				}
			}
		})
	}
}
