package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Long-running readers as real processes (`ferry watch` and `ferry talk read
// --follow`): a ferry process starts, another process writes, the lines arrive, and the
// reader stops with exit 0 — on SIGINT (not on Windows, which cannot send one to a
// child), on the end of stdin with --until-eof, or after --for.

// follower is a running long-lived ferry process and its output, line by line.
type follower struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // stdout
	ready chan string // the first stderr line
	first string      // that line

	mu   sync.Mutex
	errs strings.Builder // stderr so far
}

// stderr returns what the process wrote to stderr so far.
func (f *follower) stderr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stderr()
}

// startFollower starts ferry args on m (env added to its environment) and waits for
// its first stderr line, which it prints once it is watching.
func startFollower(t *testing.T, m *mcpMachine, env []string, args ...string) *follower {
	t.Helper()
	f := &follower{t: t, cmd: m.command(args...), lines: make(chan string, 100), ready: make(chan string, 1)}
	f.cmd.Env = append(f.cmd.Env, env...)
	var err error
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	so, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	se, err := f.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cmd.Process.Kill(); f.cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(so)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
	}()
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(se)
		first := true
		for sc.Scan() {
			if first {
				f.ready <- sc.Text()
				first = false
			}
			f.mu.Lock()
			f.errs.WriteString(sc.Text() + "\n")
			f.mu.Unlock()
		}
		if first {
			close(f.ready)
		}
	}()
	select {
	case l, ok := <-f.ready:
		if !ok || !strings.HasPrefix(l, "ferry: ") {
			t.Fatalf("ferry %v did not start watching: %q", args, l)
		}
		f.first = l
	case <-time.After(mcpDeadline):
		t.Fatalf("ferry %v: no ready line", args)
	}
	return f
}

// until reads stdout lines until ok accepts the lines so far, and returns them.
func (f *follower) until(what string, ok func([]string) bool) []string {
	f.t.Helper()
	var got []string
	deadline := time.After(mcpDeadline)
	for !ok(got) {
		select {
		case l, open := <-f.lines:
			if !open {
				f.t.Fatalf("%s: the process ended; lines %q; stderr %s", what, got, f.stderr())
			}
			got = append(got, l)
		case <-deadline:
			f.t.Fatalf("%s: lines so far %q", what, got)
		}
	}
	return got
}

// stop ends the process as the test's variant says and checks it exits 0.
func (f *follower) stop(how string) {
	f.t.Helper()
	switch how {
	case "signal":
		if err := f.cmd.Process.Signal(os.Interrupt); err != nil {
			f.t.Fatal(err)
		}
	case "eof":
		f.stdin.Close()
	}
	done := make(chan error, 1)
	go func() {
		for range f.lines { // drain, so the process never blocks on a full pipe
		}
		done <- f.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			f.t.Fatalf("stopped by %s: %v (want exit 0); stderr %s", how, err, f.stderr())
		}
	case <-time.After(mcpDeadline):
		f.t.Fatalf("stopped by %s: the process did not end", how)
	}
}

// stopWays are the ways a test stops a follower: a signal where the OS can send one
// to a child, and the end of stdin everywhere.
func stopWays() []string {
	if runtime.GOOS == "windows" {
		return []string{"eof"}
	}
	return []string{"signal", "eof"}
}

func TestWatchProcess(t *testing.T) {
	t.Parallel()
	m := newMCPMachine(t, ferryExe(t))
	ch := m.channel("acme", "alice", "bob", "carol")
	m.must("--as", "alice", "talk", "send", "--to", "bob", "before the watch", "--channel", ch)
	for _, mode := range []struct {
		name string
		env  []string
		args []string
	}{
		{"fsnotify", nil, []string{"--interval", "1h"}}, // only change events can wake it
		{"poll", []string{"FERRY_WATCH=poll"}, []string{"--interval", "100ms"}},
	} {
		for _, how := range stopWays() {
			t.Run(mode.name+"/"+how, func(t *testing.T) {
				args := append([]string{"watch", "--as", "bob", "--channel", ch, "--json"}, mode.args...)
				if how == "eof" {
					args = append(args, "--until-eof")
				}
				f := startFollower(t, m, mode.env, args...)
				if !strings.Contains(f.first, map[string]string{"fsnotify": "change events", "poll": "polling"}[mode.name]) {
					t.Errorf("ready line %q does not say %s", f.first, mode.name)
				}
				text := "hello bob via " + mode.name + "/" + how
				m.must("--as", "alice", "talk", "send", "--to", "bob", text, "--channel", ch)
				m.must("--as", "alice", "talk", "send", "--to", "carol", "not for bob", "--channel", ch)
				m.must("--as", "carol", "order", "new", "Order for "+how, "--channel", ch)
				var events []map[string]any
				f.until("message, order and entries", func(lines []string) bool {
					events = events[:0]
					msg, order, entries := false, false, 0
					for _, l := range lines {
						var e map[string]any
						if err := json.Unmarshal([]byte(l), &e); err != nil {
							t.Fatalf("not a JSON line: %q", l)
						}
						events = append(events, e)
						switch e["kind"] {
						case "message":
							if e["preview"] == "not for bob" || e["preview"] == "before the watch" {
								t.Fatalf("bob was told of %v", e)
							}
							msg = msg || e["preview"] == text && e["from"] == "alice"
						case "order":
							order = order || e["title"] == "Order for "+how && e["state"] == "open"
						case "entry":
							entries++
						}
					}
					return msg && order && entries >= 3
				})
				f.stop(how)
			})
		}
	}
	// Text lines, and --for ends a watch by itself.
	so := m.must("watch", "--as", "bob", "--channel", ch, "--for", "300ms")
	if so != "" {
		t.Errorf("a watch with nothing new printed %q", so)
	}
	// Bad flags change nothing and say why.
	for _, args := range [][]string{
		{"watch", "--channel", ch, "--interval", "0s"},
		{"watch", "--channel", ch, "--for", "-1s"},
		{"watch", "--channel", ch, "--as", "Not A Name"},
		{"talk", "read", "--as", "bob", "--channel", ch, "--for", "1s"},
		{"talk", "read", "--as", "bob", "--channel", ch, "--until-eof"},
	} {
		if _, se, code := m.ferry(args...); code != 2 || !strings.Contains(se, "ferry: error: invalid: ") || !strings.Contains(se, "ferry: hint: ") {
			t.Errorf("ferry %v: exit %d, %q; want invalid (2) with a hint", args, code, se)
		}
	}
}

func TestTalkReadFollowProcess(t *testing.T) {
	t.Parallel()
	m := newMCPMachine(t, ferryExe(t))
	ch := m.channel("acme", "alice", "bob")
	m.must("--as", "alice", "talk", "send", "--to", "bob", "unread before", "--channel", ch)
	for _, how := range stopWays() {
		t.Run(how, func(t *testing.T) {
			args := []string{"talk", "read", "--follow", "--as", "bob", "--channel", ch}
			if how == "eof" {
				args = append(args, "--until-eof")
			}
			f := startFollower(t, m, nil, args...)
			first := "first via " + how
			second := "second via " + how
			m.must("--as", "alice", "talk", "send", "--to", "bob", first, "--channel", ch)
			m.must("--as", "alice", "talk", "send", "--to", "all", second, "--channel", ch)
			lines := f.until("both messages", func(ls []string) bool {
				j := strings.Join(ls, "\n")
				return strings.Contains(j, "  "+first) && strings.Contains(j, "  "+second)
			})
			j := strings.Join(lines, "\n")
			if how == stopWays()[0] && !strings.Contains(j, "  unread before") {
				t.Errorf("the unread message was not printed first: %q", j)
			}
			if strings.Index(j, first) > strings.Index(j, second) {
				t.Errorf("messages out of order: %q", j)
			}
			f.stop(how)
			// The follower marked what it printed as read.
			if so := m.must("--as", "bob", "talk", "read", "--channel", ch); !strings.HasPrefix(so, "nothing new") {
				t.Errorf("after the follow, talk read prints %q; want nothing new", so)
			}
		})
	}
	// --peek --json: one message per line, nothing marked read.
	f := startFollower(t, m, nil, "talk", "read", "--follow", "--peek", "--json", "--until-eof", "--as", "bob", "--channel", ch)
	m.must("--as", "alice", "talk", "send", "--to", "bob", "peeked", "--channel", ch)
	f.until("the peeked message", func(ls []string) bool {
		for _, l := range ls {
			var msg struct{ Preview string }
			if err := json.Unmarshal([]byte(l), &msg); err != nil {
				t.Fatalf("not a JSON line: %q", l)
			}
			if msg.Preview == "peeked" {
				return true
			}
		}
		return false
	})
	f.stop("eof")
	if so := m.must("--as", "bob", "talk", "read", "--channel", ch); !strings.Contains(so, "  peeked") {
		t.Errorf("a peeked message was marked read: %q", so)
	}
}
