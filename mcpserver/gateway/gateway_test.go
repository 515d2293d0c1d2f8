package gateway_test

// The gateway against real child processes: mcpserver/testdata/gwfixture, a small MCP server
// built here that misbehaves on demand.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/mcpserver/client"
	"github.com/ferryhq/ferry/mcpserver/gateway"
)

// Timeouts: short where a test expects the timeout to fire, long where it must not
// (a loaded machine may take a while to start a race-built binary).
const (
	firing  = 300 * time.Millisecond
	patient = 30 * time.Second
)

// buildFixture builds ../testdata/gwfixture (mcpserver's, shared with ferry's tests)
// into a temp dir of t.
func buildFixture(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gwfixture")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		goBin = "go"
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, "../testdata/gwfixture").CombinedOutput(); err != nil {
		t.Fatalf("building the fixture: %v\n%s", err, out)
	}
	return bin
}

// fixtureEnv is the environment the gateway reads for its children in these tests.
func fixtureEnv(extra map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := extra[name]; ok {
			return v, true
		}
		if name == "PATH" || name == "SystemRoot" {
			return os.LookupEnv(name)
		}
		return "", false
	}
}

// readPids returns the pids the fixture appended to path.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, n)
	}
	return pids
}

// waitGone fails the test unless pid is gone within the deadline (the client reaps its
// child, so a killed child leaves no zombie behind).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(patient)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantCategory fails unless err is an *errs.Error of cat whose text holds each of subs.
func wantCategory(t *testing.T, err error, cat errs.Category, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", cat)
	}
	if got := errs.CategoryOf(err); got != cat {
		t.Fatalf("category %s (%v), want %s", got, err, cat)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func resultText(t *testing.T, raw json.RawMessage) (string, bool) {
	t.Helper()
	var r client.ToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r.Text(), r.IsError
}

var gatewayNameRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

func TestGatewayToolNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 70)
	servers := []string{"gh", "a-b", "a", "srv", "my_srv", "my-srv", "ferry", "ferry-x", "gw_ferry", "list"}
	refs := []gateway.ToolRef{
		{"gh", "Get-Issue"},   // 0: sanitised plainly
		{"a-b", "c"},          // 1: collides with 2 → both suffixed
		{"a", "b.c"},          // 2
		{"list", "tasks"},     // 3: equals a reserved name (a legacy tool) → suffixed
		{"srv", long},         // 4: too long → cut and suffixed
		{"srv", "ünï"},        // 5: non-ASCII → '_'
		{"my_srv", "list"},    // 6: server prefix shared with my-srv → suffixed prefix
		{"my-srv", "list"},    // 7
		{"ferry", "join"},     // 8: a server named ferry never names a ferry_* tool
		{"ferry-x", "orders"}, // 9: nor does ferry-x
		{"gw_ferry", "join"},  // 10: shares gw_ferry with 8 → both prefixes suffixed
	}
	// Some of ferry's own names, as mcpserver.FerryToolNames has them.
	reserved := map[string]bool{"ferry_join": true, "ferry_orders": true, "ferry_search": true, "list_tasks": true}
	got := gateway.ToolNames(servers, refs, reserved)
	if got[0] != "gh_get_issue" || got[9] != "gw_ferry_x_orders" {
		t.Errorf("plain names: %q", got)
	}
	suffixed := func(i int, base string) {
		if !regexp.MustCompile(`^` + base + `_[0-9a-f]{6}$`).MatchString(got[i]) {
			t.Errorf("name %d = %q, want %s and a 6-hex suffix", i, got[i], base)
		}
	}
	suffixed(1, "a_b_c")
	suffixed(2, "a_b_c")
	suffixed(3, "list_tasks")
	if !regexp.MustCompile(`^my_srv_[0-9a-f]{6}_list$`).MatchString(got[6]) || !regexp.MustCompile(`^my_srv_[0-9a-f]{6}_list$`).MatchString(got[7]) {
		t.Errorf("servers my_srv and my-srv: %q %q", got[6], got[7])
	}
	if !regexp.MustCompile(`^gw_ferry_[0-9a-f]{6}_join$`).MatchString(got[8]) || !regexp.MustCompile(`^gw_ferry_[0-9a-f]{6}_join$`).MatchString(got[10]) {
		t.Errorf("servers ferry and gw_ferry: %q %q", got[8], got[10])
	}
	if len(got[4]) != 64 || !strings.HasPrefix(got[4], "srv_xxx") {
		t.Errorf("long name %q (%d bytes)", got[4], len(got[4]))
	}
	seen := map[string]bool{}
	for i, n := range got {
		if !gatewayNameRE.MatchString(n) {
			t.Errorf("name %d %q breaks ^[a-z0-9_]{1,64}$", i, n)
		}
		if seen[n] || reserved[n] || strings.HasPrefix(n, "ferry_") {
			t.Errorf("name %q repeats, or is ferry's", n)
		}
		seen[n] = true
	}
	// Deterministic: the same refs in another order get the same names.
	rev := slices.Clone(refs)
	slices.Reverse(rev)
	again := gateway.ToolNames(servers, rev, reserved)
	slices.Reverse(again)
	if !slices.Equal(got, again) {
		t.Errorf("order changed the names:\n%q\n%q", got, again)
	}
	// A server alone is named as among others it cannot collide with: adding a server
	// renames no one else's tools.
	if alone := gateway.ToolNames([]string{"ferry"}, refs[8:9], reserved); alone[0] != "gw_ferry_join" {
		t.Errorf("server ferry alone: %q", alone)
	}
	more := gateway.ToolNames(append(slices.Clone(servers), "zzz"), append(slices.Clone(refs), gateway.ToolRef{"zzz", "echo"}), reserved)
	if !slices.Equal(more[:len(got)], got) {
		t.Errorf("adding server zzz renamed others:\n%q\n%q", got, more[:len(got)])
	}
}

func TestGatewayConfig(t *testing.T) {
	t.Parallel()
	h := &fsbus.Home{ConfigDir: t.TempDir()}
	machine := gateway.ConfigPath(h, "")
	local := gateway.ConfigPath(h, "acme")
	add := func(path string, s *gateway.Server) error {
		return gateway.Update(path, func(m map[string]*gateway.Server) error {
			if err := s.Validate(); err != nil {
				return err
			}
			m[s.Name] = s
			return nil
		})
	}
	if err := add(machine, &gateway.Server{Name: "gh", Command: "gh-mcp", Args: []string{"stdio"}, Env: []string{"GITHUB_TOKEN"}, CallTimeout: "5s"}); err != nil {
		t.Fatal(err)
	}
	if err := add(machine, &gateway.Server{Name: "db", Command: "db-mcp"}); err != nil {
		t.Fatal(err)
	}
	if err := add(local, &gateway.Server{Name: "gh", Command: "other-gh"}); err != nil {
		t.Fatal(err)
	}
	all, err := gateway.Servers(h, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "db" || all[1].Name != "gh" || all[1].Command != "other-gh" || all[1].Scope != gateway.ScopeProject {
		t.Errorf("project view: %+v %+v", all[0], all[1])
	}
	m, err := gateway.Servers(h, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[1].Command != "gh-mcp" || m[1].Scope != gateway.ScopeMachine || m[1].Env[0] != "GITHUB_TOKEN" {
		t.Errorf("machine view: %+v", m)
	}
	if _, call := m[1].Timeouts(); call != 5*time.Second {
		t.Errorf("call timeout %s", call)
	}

	// Refusals change nothing.
	before, _ := os.ReadFile(machine)
	for _, bad := range []*gateway.Server{
		{Name: "Bad", Command: "x"},
		{Name: "-x", Command: "x"},
		{Name: strings.Repeat("a", 33), Command: "x"},
		{Name: "ok", Command: " "},
		{Name: "ok", Command: "x", Env: []string{"1BAD"}},
		{Name: "ok", Command: "x", StartupTimeout: "soon"},
		{Name: "ok", Command: "x", CallTimeout: "-1s"},
	} {
		wantCategory(t, add(machine, bad), errs.Invalid)
	}
	if after, _ := os.ReadFile(machine); string(after) != string(before) {
		t.Errorf("a refused add changed the file")
	}

	// Concurrent adds all land (the lock file serialises read-modify-write).
	errCh := make(chan error, 8)
	for i := range 8 {
		go func() { errCh <- add(machine, &gateway.Server{Name: "c" + strconv.Itoa(i), Command: "x"}) }()
	}
	for range 8 {
		if err := <-errCh; err != nil {
			t.Fatal(err)
		}
	}
	if m, err := gateway.Servers(h, ""); err != nil || len(m) != 10 {
		t.Fatalf("after 8 concurrent adds: %d servers (%v), want 10", len(m), err)
	}
	if err := gateway.Update(machine, func(m map[string]*gateway.Server) error {
		for i := range 8 {
			delete(m, "c"+strconv.Itoa(i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Strict decoding names the unknown keys.
	if err := os.WriteFile(machine, append(before, "\n[servers.zz]\ncommand = \"z\"\ncmd = \"typo\"\ntimeout = 3\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = gateway.Servers(h, "")
	wantCategory(t, err, errs.Invalid, "servers.zz.cmd", "servers.zz.timeout")
	if err := os.WriteFile(machine, []byte("[servers.BAD]\ncommand = \"z\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = gateway.Servers(h, "")
	wantCategory(t, err, errs.Invalid, "BAD")
	if err := os.WriteFile(machine, []byte("not = [toml"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = gateway.Servers(h, "")
	wantCategory(t, err, errs.Invalid, machine)
}

func TestGatewayChildEnv(t *testing.T) {
	t.Parallel()
	s := &gateway.Server{Name: "x", Command: "x", Env: []string{"WANTED", "MISSING", "SET=1", "PATH=/override"}}
	env := s.ChildEnv(fixtureEnv(map[string]string{"PATH": "/bin", "HOME": "/home/me", "WANTED": "w", "SECRET": "s"}))
	want := []string{"PATH=/override", "HOME=/home/me", "WANTED=w", "SET=1"}
	if !slices.Equal(env, want) {
		t.Errorf("ChildEnv = %q, want %q", env, want)
	}
	if env := (&gateway.Server{}).ChildEnv(func(string) (string, bool) { return "", false }); env == nil {
		t.Error("ChildEnv is nil: os/exec would pass the whole environment")
	}
}

// newFixtureGateway returns a gateway over one fixture server named fx.
func newFixtureGateway(t *testing.T, bin string, args []string, env map[string]string, s gateway.Server, opts ...func(*gateway.Options)) *gateway.Gateway {
	t.Helper()
	s.Name, s.Command, s.Args = "fx", bin, args
	if s.StartupTimeout == "" {
		s.StartupTimeout = patient.String()
	}
	if s.CallTimeout == "" {
		s.CallTimeout = patient.String()
	}
	o := gateway.Options{LookupEnv: fixtureEnv(env), Reserved: []string{"fx_hangup_2"}}
	for _, f := range opts {
		f(&o)
	}
	g := gateway.New([]*gateway.Server{&s}, o)
	t.Cleanup(g.Close)
	return g
}

func TestGatewayFixture(t *testing.T) {
	t.Parallel()
	bin := buildFixture(t)
	ctx := context.Background()

	t.Run("list-call-env", func(t *testing.T) {
		t.Parallel()
		g := newFixtureGateway(t, bin, []string{"-pages"}, map[string]string{"WANTED": "w", "SECRET": "s"},
			gateway.Server{Env: []string{"WANTED", "SET=1"}})
		if g.Pid("fx") != 0 {
			t.Fatal("the child started before any list or call")
		}
		tools, err := g.Named(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
			if tl.Name == "fx_echo" && (tl.Description() != "The echo tool." || !strings.Contains(string(tl.InputSchema()), `"x"`)) {
				t.Errorf("fx_echo passed through as %q %s", tl.Description(), tl.InputSchema())
			}
		}
		want := []string{"fx_echo", "fx_env", "fx_slow", "fx_hangup", "fx_crash", "fx_garbage", "fx_rpc_error", "fx_fail"}
		if !slices.Equal(names, want) {
			t.Fatalf("tools over 8 pages: %q, want %q", names, want)
		}
		raw, err := g.Call(ctx, "fx", "echo", json.RawMessage(`{"x":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		if text, isErr := resultText(t, raw); text != `{"x":"hi"}` || isErr {
			t.Errorf("echo: %q %v", text, isErr)
		}
		raw, err = g.Call(ctx, "fx", "env", nil)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := resultText(t, raw)
		got := strings.Split(text, ",")
		if !slices.Contains(got, "WANTED") || !slices.Contains(got, "SET") || slices.Contains(got, "SECRET") {
			t.Errorf("the child's environment: %q", got)
		}
		if runtime.GOOS != "windows" {
			if want := []string{"PATH", "SET", "WANTED"}; !slices.Equal(got, want) {
				t.Errorf("the child's environment: %q, want exactly %q", got, want)
			}
		}
		// A call through Forward, as the MCP server makes it: a failure is a result.
		for _, tl := range tools {
			switch tl.Name {
			case "fx_echo":
				out, err := g.Forward(ctx, tl, json.RawMessage(`{"x":"tool"}`))
				if err != nil {
					t.Fatal(err)
				}
				if text, _ := resultText(t, out); text != `{"x":"tool"}` {
					t.Errorf("fx_echo answered %q", text)
				}
			case "fx_rpc_error":
				out, err := g.Forward(ctx, tl, nil)
				if err != nil {
					t.Fatal(err)
				}
				if text, isErr := resultText(t, out); !isErr || !strings.HasPrefix(text, "invalid: MCP server fx refused rpc_error: ") {
					t.Errorf("fx_rpc_error answered %q (isError %v)", text, isErr)
				}
			}
		}
	})

	t.Run("tool-errors", func(t *testing.T) {
		t.Parallel()
		g := newFixtureGateway(t, bin, nil, nil, gateway.Server{})
		raw, err := g.Call(ctx, "fx", "fail", nil)
		if err != nil {
			t.Fatal(err)
		}
		if text, isErr := resultText(t, raw); text != "the widget is broken" || !isErr {
			t.Errorf("isError result passed through as %q %v", text, isErr)
		}
		_, err = g.Call(ctx, "fx", "rpc_error", nil)
		wantCategory(t, err, errs.Invalid, "bad widget", "-32602")
		// The child survives both.
		if _, err := g.Call(ctx, "fx", "echo", nil); err != nil {
			t.Fatalf("after tool errors: %v", err)
		}
		_, err = g.Call(ctx, "nope", "echo", nil)
		wantCategory(t, err, errs.NotFound, "nope")
	})

	t.Run("call-timeout-restart-backoff", func(t *testing.T) {
		t.Parallel()
		// One slow or crashing tool does not disable the server for the session; the
		// next call starts it again, at most StartsPerMinute times a minute, and
		// the refusal says when the next start is.
		pidfile := filepath.Join(t.TempDir(), "pids")
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile}, nil, gateway.Server{CallTimeout: firing.String()},
			func(o *gateway.Options) { o.Now = func() time.Time { return now } })
		_, err := g.Call(ctx, "fx", "slow", nil)
		wantCategory(t, err, errs.RetryNeeded, "did not answer slow within", "killed", "the next call starts it again")
		first := readPids(t, pidfile)
		waitGone(t, first[0])
		_, err = g.Call(ctx, "fx", "crash", nil)
		wantCategory(t, err, errs.RetryNeeded, "crashing on purpose", "the next call starts it again", "PATH, HOME", "its stderr is in the message")
		pids := readPids(t, pidfile)
		waitGone(t, pids[1])
		// After slow and crash, echo answers (a third child).
		if _, err := g.Call(ctx, "fx", "echo", nil); err != nil {
			t.Fatalf("after a timeout and a crash: %v", err)
		}
		if pids = readPids(t, pidfile); len(pids) != 3 || g.Pid("fx") != pids[2] {
			t.Fatalf("pids %v, running %d: want a third child", pids, g.Pid("fx"))
		}
		// Crashes spend the minute's starts (5); the next call is refused, naming the
		// time of the next start, and starts nothing.
		for i := 0; i < 3; i++ {
			_, err = g.Call(ctx, "fx", "crash", nil)
			wantCategory(t, err, errs.RetryNeeded, "crashing on purpose")
			pids = readPids(t, pidfile)
			waitGone(t, pids[len(pids)-1])
			if i < 2 {
				if _, err := g.Call(ctx, "fx", "echo", nil); err != nil {
					t.Fatalf("start %d: %v", 4+i, err)
				}
			}
		}
		now = now.Add(30 * time.Second)
		_, err = g.Call(ctx, "fx", "echo", nil)
		wantCategory(t, err, errs.RetryNeeded, "started 5 times in the last minute", "crashing on purpose",
			"starts it again after 12:01:00 (in 30s)", "ferry mcp list fx")
		if n := len(readPids(t, pidfile)); n != 5 {
			t.Errorf("%d children started, want 5", n)
		}
		// A minute after the first start, calls start it again.
		now = now.Add(31 * time.Second)
		if _, err := g.Call(ctx, "fx", "echo", nil); err != nil {
			t.Fatalf("a minute later: %v", err)
		}
		if n := len(readPids(t, pidfile)); n != 6 {
			t.Errorf("%d children started, want 6", n)
		}
	})

	t.Run("bad-names-and-escapes", func(t *testing.T) {
		t.Parallel()
		// Nameless and repeated tools are dropped with a warning; a description's
		// control characters never pass.
		var log strings.Builder
		g := newFixtureGateway(t, bin, []string{"-badnames"}, nil, gateway.Server{},
			func(o *gateway.Options) { o.Log = &log })
		tools, _ := g.Named(ctx, "")
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
			if tl.Name == "fx_echo" && tl.Description() != "The [31mecho[0m tool." {
				t.Errorf("fx_echo description %q", tl.Description())
			}
		}
		want := []string{"fx_echo", "fx_env", "fx_slow", "fx_hangup", "fx_crash", "fx_garbage", "fx_rpc_error", "fx_fail"}
		if !slices.Equal(names, want) {
			t.Errorf("tools %q, want %q", names, want)
		}
		if strings.Count(log.String(), "a tool with no name; dropped") != 2 || !strings.Contains(log.String(), `the tool "echo" twice; the second dropped`) {
			t.Errorf("log: %s", log.String())
		}
		if again, _ := g.Named(ctx, ""); len(again) != len(tools) {
			t.Errorf("second listing: %d tools", len(again))
		}
	})

	t.Run("ferry-child-env", func(t *testing.T) {
		t.Parallel()
		// A child that is ferry itself (here: Self names the fixture) also gets ferry's
		// home variables; any other child does not.
		env := map[string]string{"FERRY_HOME": "/h", "XDG_CONFIG_HOME": "/c", "SECRET": "s"}
		for _, self := range []bool{true, false} {
			g := newFixtureGateway(t, bin, nil, env, gateway.Server{}, func(o *gateway.Options) {
				if self {
					o.Self = bin
				} else {
					o.Self = os.Args[0]
				}
			})
			raw, err := g.Call(ctx, "fx", "env", nil)
			if err != nil {
				t.Fatal(err)
			}
			text, _ := resultText(t, raw)
			got := strings.Split(text, ",")
			has := slices.Contains(got, "FERRY_HOME") && slices.Contains(got, "XDG_CONFIG_HOME")
			if has != self || slices.Contains(got, "SECRET") {
				t.Errorf("self %v: the child's environment %q", self, got)
			}
		}
	})

	t.Run("not-executable", func(t *testing.T) {
		t.Parallel()
		if runtime.GOOS == "windows" {
			return // no execute bit there
		}
		plain := filepath.Join(t.TempDir(), "server")
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(plain, b, 0o644); err != nil {
			t.Fatal(err)
		}
		g := newFixtureGateway(t, plain, nil, nil, gateway.Server{})
		_, err = g.List(ctx, "fx")
		wantCategory(t, err, errs.NotFound, "not executable (permission denied)", "chmod +x "+plain)
	})

	t.Run("process-group", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile, "-grandchild"}, nil, gateway.Server{CallTimeout: firing.String()})
		_, err := g.Call(ctx, "fx", "slow", nil)
		wantCategory(t, err, errs.RetryNeeded, "killed")
		pids := readPids(t, pidfile)
		if len(pids) != 2 {
			t.Fatalf("pids %v, want the child's and the grandchild's", pids)
		}
		waitGone(t, pids[0])
		if runtime.GOOS != "windows" { // no process group there: the child alone is killed
			waitGone(t, pids[1])
		}
	})

	t.Run("close-ends-group", func(t *testing.T) {
		t.Parallel()
		// A wrapper's background process ends with the session (Close), not only on a
		// timeout.
		pidfile := filepath.Join(t.TempDir(), "pids")
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile, "-grandchild"}, nil, gateway.Server{})
		if _, err := g.Call(ctx, "fx", "echo", nil); err != nil {
			t.Fatal(err)
		}
		pids := readPids(t, pidfile)
		if len(pids) != 2 {
			t.Fatalf("pids %v, want the child's and the grandchild's", pids)
		}
		if !pidAlive(pids[1]) {
			t.Fatalf("the grandchild %d is gone before Close", pids[1])
		}
		g.Close()
		waitGone(t, pids[0])
		if runtime.GOOS != "windows" { // no process group there: the child alone is killed
			waitGone(t, pids[1])
		}
	})

	t.Run("hangup", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		// The call timeout is far off: the EOF on stdout is what ends the wait.
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile}, nil, gateway.Server{})
		_, err := g.Call(ctx, "fx", "hangup", nil)
		wantCategory(t, err, errs.RetryNeeded, "closed its stdout but kept running")
		if strings.Contains(err.Error(), "stderr") {
			t.Errorf("a child that wrote no stderr: %v", err)
		}
		waitGone(t, readPids(t, pidfile)[0])
	})

	t.Run("one-shot-hint", func(t *testing.T) {
		t.Parallel()
		// A gateway serving one command (ferry mcp call) does not promise that a next
		// call restarts the server.
		g := newFixtureGateway(t, bin, nil, nil, gateway.Server{},
			func(o *gateway.Options) { o.OneShot = true })
		_, err := g.Call(ctx, "fx", "crash", nil)
		wantCategory(t, err, errs.RetryNeeded, "crashing on purpose", "run the command again", "its stderr is in the message")
		if strings.Contains(err.Error(), "next call") {
			t.Errorf("one-shot hint: %v", err)
		}
	})

	t.Run("garbage", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile}, nil, gateway.Server{})
		_, err := g.Call(ctx, "fx", "garbage", nil)
		wantCategory(t, err, errs.Internal, "DEBUG widget count", "stdout")
		waitGone(t, readPids(t, pidfile)[0])
	})

	t.Run("not-i-json", func(t *testing.T) {
		t.Parallel()
		// An answer that is not I-JSON (RFC 7493) is not passed on: the call fails
		// (internal, naming why), the child keeps running and answers the next call.
		pidfile := filepath.Join(t.TempDir(), "pids")
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile}, nil, gateway.Server{})
		for tool, why := range map[string]string{
			"dupkey":    `duplicate member name "content" in the object at "/result"`,
			"dupid":     `duplicate member name "id" at the top level`,
			"badutf8":   "invalid UTF-8 at byte offset",
			"surrogate": `lone surrogate \ud800`,
		} {
			raw, err := g.Call(ctx, "fx", tool, nil)
			wantCategory(t, err, errs.Internal, "MCP server fx answered "+tool+" with JSON that is not I-JSON (RFC 7493), so it was not passed on: "+why, "fix the server")
			if raw != nil || strings.Contains(err.Error(), "evil") {
				t.Errorf("%s: passed on %s (%v)", tool, raw, err)
			}
		}
		raw, err := g.Call(ctx, "fx", "badnotify", json.RawMessage(`{"x":"after"}`))
		if err != nil {
			t.Fatalf("a call after a bad notification: %v", err)
		}
		if text, isErr := resultText(t, raw); isErr || text != `{"x":"after"}` {
			t.Errorf("echo after a bad notification: %q (isError %v)", text, isErr)
		}
		if pids := readPids(t, pidfile); len(pids) != 1 {
			t.Errorf("the child was started %d times, want once: it keeps running", len(pids))
		}
	})

	t.Run("slow-start", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile, "-slow-start", "1h"}, nil, gateway.Server{StartupTimeout: firing.String()})
		if tools, _ := g.Named(ctx, ""); len(tools) != 0 {
			t.Errorf("a server that never started listed %d tools", len(tools))
		}
		_, err := g.Call(ctx, "fx", "echo", nil)
		wantCategory(t, err, errs.RetryNeeded, "did not answer initialize within "+firing.String())
		for _, pid := range readPids(t, pidfile) {
			waitGone(t, pid)
		}
	})

	t.Run("list-backoff", func(t *testing.T) {
		t.Parallel()
		// A server that fails to list is tried again by Tools (every tools/list, and
		// every call of a forwarded tool) once a minute, not on each: six listings in
		// one minute start it once, never reaching the start bound.
		var log strings.Builder
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		g := newFixtureGateway(t, bin, []string{"-slow-start", "1h"}, nil, gateway.Server{StartupTimeout: firing.String()},
			func(o *gateway.Options) { o.Log, o.Now = &log, func() time.Time { return now } })
		for i := 0; i < 6; i++ {
			if tools, _ := g.Named(ctx, ""); len(tools) != 0 {
				t.Fatalf("listed %d tools", len(tools))
			}
		}
		if strings.Contains(log.String(), "started 5 times") || strings.Count(log.String(), "did not answer initialize") != 6 {
			t.Errorf("log after six listings in a minute:\n%s", log.String())
		}
		now = now.Add(61 * time.Second)
		_, err := g.List(ctx, "fx")
		wantCategory(t, err, errs.RetryNeeded, "did not answer initialize")
	})

	t.Run("garbage-start", func(t *testing.T) {
		t.Parallel()
		g := newFixtureGateway(t, bin, []string{"-garbage-start"}, nil, gateway.Server{})
		_, err := g.List(ctx, "fx")
		wantCategory(t, err, errs.Internal, "starting up, please wait")
	})

	t.Run("unknown-version", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		g := newFixtureGateway(t, bin, []string{"-pidfile", pidfile, "-proto", "2031-01-01"}, nil, gateway.Server{})
		_, err := g.List(ctx, "fx")
		wantCategory(t, err, errs.Internal, `protocol version "2031-01-01"`)
		waitGone(t, readPids(t, pidfile)[0])
	})

	t.Run("command-not-found", func(t *testing.T) {
		t.Parallel()
		g := newFixtureGateway(t, filepath.Join(t.TempDir(), "no-such-server"), nil, nil, gateway.Server{})
		_, err := g.List(ctx, "fx")
		wantCategory(t, err, errs.NotFound, "no-such-server")
	})
}
