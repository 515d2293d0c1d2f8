package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/mcpserver"
)

// The Client tests run real child processes: the test binary re-executed with
// fakeServerEnv set, which TestMain turns into one of the fake servers below instead
// of running the tests.
const fakeServerEnv = "FERRY_CLIENT_TEST_SERVER"

// TestMain runs a fake server when fakeServerEnv is set, else the tests; after them
// it removes the gateway fixture buildFixture built.
func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServerEnv); mode != "" {
		os.Exit(runFakeServer(mode))
	}
	code := m.Run()
	if gwfixture.dir != "" {
		os.RemoveAll(gwfixture.dir)
	}
	os.Exit(code)
}

// Timeouts: short where a test expects the timeout to fire, long where it must not
// (a loaded machine may take a while to start a race-built binary).
const (
	firing  = 300 * time.Millisecond
	patient = 30 * time.Second
)

// runFakeServer runs the fake server of one mode on stdin and stdout and returns its
// exit status. Modes:
//   - good: the real Server (New) with an echo tool;
//   - silent: reads stdin, never answers;
//   - exit-now: exits 7 at once;
//   - slow-call: answers initialize, never answers tools/call; ping answers the ids it
//     saw cancelled; exits 0 at EOF;
//   - deaf: answers initialize, then never reads stdin again;
//   - reply-then-exit: answers the first tools/call and exits 3 at once;
//   - ignore-eof: answers initialize, never exits after stdin closes;
//   - garbage: writes non-JSON and stray lines before every answer, and sends the client
//     a request (roots/list) before answering tools/call with the client's answer.
func runFakeServer(mode string) int {
	f := &fakeConn{r: bufio.NewReader(os.Stdin)}
	switch mode {
	case "good":
		srv, err := mcpserver.New(mcpserver.Options{
			Name: "fake-good", Version: "1.2.3", Log: os.Stderr,
			Tools: []*mcpserver.Tool{{
				Name:        "echo",
				Description: "Return the arguments.",
				InputSchema: json.RawMessage(`{"type":"object"}`),
				Call:        func(ctx context.Context, args json.RawMessage) (any, error) { return args, nil },
			}},
		})
		if err == nil {
			err = srv.Serve(context.Background(), os.Stdin, os.Stdout)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 1
		}
		return 0
	case "silent":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return hang()
	case "exit-now":
		fmt.Fprintln(os.Stderr, "fake: exiting at once")
		return 7
	case "slow-call":
		f.handshake("fake-slow")
		var cancelled []json.RawMessage
		for {
			m, ok := f.next()
			if !ok {
				return 0
			}
			switch m.Method {
			case "notifications/cancelled":
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				_ = json.Unmarshal(m.Params, &p)
				cancelled = append(cancelled, p.RequestID)
			case "ping":
				b, _ := json.Marshal(map[string]any{"cancelled": cancelled})
				f.answer(m.ID, string(b))
			}
		}
	case "deaf":
		f.handshake("fake-deaf")
		return hang()
	case "reply-then-exit":
		f.handshake("fake-reply-then-exit")
		for {
			m, ok := f.next()
			if !ok {
				return 1
			}
			if m.Method == "tools/call" {
				f.answer(m.ID, `{"content":[{"type":"text","text":"last words"}]}`)
				fmt.Fprintln(os.Stderr, "fake: exiting after the reply")
				return 3
			}
		}
	case "ignore-eof":
		f.handshake("fake-ignore-eof")
		for {
			if _, ok := f.next(); !ok {
				return hang()
			}
		}
	case "garbage":
		f.garbage = true
		f.handshake("fake-garbage")
		for {
			m, ok := f.next()
			if !ok {
				return 0
			}
			if m.Method != "tools/call" {
				continue
			}
			f.send(`{"jsonrpc":"2.0","id":"s-1","method":"roots/list"}`)
			a, ok := f.next()
			if !ok {
				return 1
			}
			text := fmt.Sprintf("client answered %s with %s", a.ID, a.Error)
			b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
			f.answer(m.ID, string(b))
		}
	}
	fmt.Fprintf(os.Stderr, "fake: unknown mode %q\n", mode)
	return 2
}

// hang stands for "never": far longer than any test waits, yet a child orphaned by a
// crashed test binary does not linger for long. A test expecting the child killed
// tells a kill from this exit.
func hang() int {
	time.Sleep(2 * time.Minute)
	return 0
}

// fakeConn is a fake server's end of the wire.
type fakeConn struct {
	r       *bufio.Reader
	garbage bool // write garbageLines before every answer
}

// garbageLines are what a broken server may print on stdout: none is an answer to
// anything the client asked.
var garbageLines = []string{
	"this is not JSON",
	`{"jsonrpc":"2.0","id":`,
	"",
	"[1,2,3]",
	"null",
	`"a string"`,
	`{"jsonrpc":"2.0","id":4242,"result":{"stray":true}}`,
	`{"jsonrpc":"2.0","id":"1","result":{"protocolVersion":"wrong id type"}}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`,
}

type fakeMessage struct {
	ID     json.RawMessage     `json:"id"`
	Method string              `json:"method"`
	Params json.RawMessage     `json:"params"`
	Error  *mcpserver.RPCError `json:"error"`
}

// next reads the next message; false at EOF.
func (f *fakeConn) next() (fakeMessage, bool) {
	for {
		line, err := f.r.ReadBytes('\n')
		if s := strings.TrimSpace(string(line)); s != "" {
			var m fakeMessage
			if json.Unmarshal([]byte(s), &m) != nil {
				fmt.Fprintf(os.Stderr, "fake: not JSON: %q\n", s)
				os.Exit(1)
			}
			return m, true
		}
		if err != nil {
			return fakeMessage{}, false
		}
	}
}

func (f *fakeConn) send(line string) { _, _ = os.Stdout.WriteString(line + "\n") }

func (f *fakeConn) answer(id json.RawMessage, result string) {
	if f.garbage {
		for _, g := range garbageLines {
			f.send(g)
		}
	}
	f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

// handshake answers initialize as server name.
func (f *fakeConn) handshake(name string) {
	m, ok := f.next()
	if !ok || m.Method != "initialize" {
		fmt.Fprintf(os.Stderr, "fake: want initialize first, got %q\n", m.Method)
		os.Exit(1)
	}
	f.answer(m.ID, fmt.Sprintf(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":%q,"version":"0"}}`, name))
}

// fakeCommand is the command running the fake server of mode.
func fakeCommand(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeServerEnv+"="+mode)
	return cmd
}

// startFake starts the fake server of mode and fails the test if Start fails; the
// child is killed at the end of the test if still running.
func startFake(t *testing.T, mode string, opts mcpserver.ClientOptions) (*mcpserver.Client, *exec.Cmd) {
	t.Helper()
	cmd := fakeCommand(t, mode)
	c, err := mcpserver.Start(context.Background(), cmd, opts)
	if err != nil {
		t.Fatalf("Start(%s): %v", mode, err)
	}
	t.Cleanup(c.Kill)
	return c, cmd
}

// wantKilled fails the test unless the child was reaped and had been killed. Call it
// only once the Client waited for the child (Start failed, Close or Kill returned).
func wantKilled(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	ps := cmd.ProcessState
	if ps == nil {
		t.Fatal("the child was not reaped")
	}
	if ps.Success() {
		t.Fatalf("the child exited 0, want killed")
	}
	if runtime.GOOS != "windows" && ps.String() != "signal: killed" {
		t.Fatalf("the child ended with %q, want signal: killed", ps)
	}
}

func TestClientRoundTrip(t *testing.T) {
	for _, tc := range []struct{ ask, want string }{
		{"", mcpserver.LatestVersion},
		{"2025-03-26", "2025-03-26"},
		{"1999-01-01", mcpserver.LatestVersion},
	} {
		t.Run("version="+tc.ask, func(t *testing.T) {
			c, cmd := startFake(t, "good", mcpserver.ClientOptions{
				StartTimeout: patient, CallTimeout: patient, ExitTimeout: patient, ProtocolVersion: tc.ask,
			})
			if c.Init.ProtocolVersion != tc.want {
				t.Errorf("negotiated protocol %q, want %q", c.Init.ProtocolVersion, tc.want)
			}
			if c.Init.ServerInfo.Name != "fake-good" || c.Init.ServerInfo.Version != "1.2.3" {
				t.Errorf("serverInfo %+v", c.Init.ServerInfo)
			}

			r, err := c.CallTool(context.Background(), "echo", map[string]string{"text": "hi <ferry> ünï"})
			if err != nil {
				t.Fatal(err)
			}
			if r.IsError || r.Text() != `{"text":"hi <ferry> ünï"}` {
				t.Errorf("echo: isError %v, text %q", r.IsError, r.Text())
			}
			var sc struct{ Text string }
			if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.Text != "hi <ferry> ünï" {
				t.Errorf("structuredContent %s (%v)", r.StructuredContent, err)
			}

			// JSON-RPC errors come back as *RPCError with their code.
			var re *mcpserver.RPCError
			if err := c.Call(context.Background(), "no/such/method", nil, nil); !errors.As(err, &re) || re.Code != mcpserver.CodeMethodNotFound {
				t.Errorf("unknown method: %v, want code %d", err, mcpserver.CodeMethodNotFound)
			}
			if _, err := c.CallTool(context.Background(), "nope", nil); !errors.As(err, &re) || re.Code != mcpserver.CodeInvalidParams {
				t.Errorf("unknown tool: %v, want code %d", err, mcpserver.CodeInvalidParams)
			}

			// Concurrent calls each get their own answer.
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					want := fmt.Sprintf(`{"n":%d}`, i)
					r, err := c.CallTool(context.Background(), "echo", json.RawMessage(want))
					if err != nil || r.Text() != want {
						t.Errorf("call %d: %v %+v", i, err, r)
					}
				})
			}
			wg.Wait()

			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if !cmd.ProcessState.Success() {
				t.Errorf("the server ended with %s, want exit 0", cmd.ProcessState)
			}
			if err := c.Call(context.Background(), "ping", nil, nil); !errors.Is(err, mcpserver.ErrServerExited) {
				t.Errorf("Call after Close: %v, want ErrServerExited", err)
			}
		})
	}
}

func TestClientStartNeedsStdoutUnset(t *testing.T) {
	cmd := fakeCommand(t, "good")
	cmd.Stdout = io.Discard
	if _, err := mcpserver.Start(context.Background(), cmd, mcpserver.ClientOptions{}); err == nil {
		t.Fatal("Start with cmd.Stdout set succeeded")
	}
	if cmd.Process != nil {
		t.Fatal("Start with cmd.Stdout set started the child")
	}
}

func TestClientStartTimeout(t *testing.T) {
	cmd := fakeCommand(t, "silent")
	c, err := mcpserver.Start(context.Background(), cmd, mcpserver.ClientOptions{StartTimeout: firing})
	if !errors.Is(err, mcpserver.ErrTimeout) || c != nil {
		t.Fatalf("Start: %v, want ErrTimeout", err)
	}
	wantKilled(t, cmd)
}

func TestClientServerExitsAtStart(t *testing.T) {
	cmd := fakeCommand(t, "exit-now")
	c, err := mcpserver.Start(context.Background(), cmd, mcpserver.ClientOptions{StartTimeout: patient})
	if !errors.Is(err, mcpserver.ErrServerExited) || c != nil {
		t.Fatalf("Start: %v, want ErrServerExited", err)
	}
	if cmd.ProcessState == nil {
		t.Fatal("the child was not reaped")
	}
}

func TestClientCallTimeout(t *testing.T) {
	c, cmd := startFake(t, "slow-call", mcpserver.ClientOptions{StartTimeout: patient, CallTimeout: firing, ExitTimeout: patient})
	if _, err := c.CallTool(context.Background(), "anything", nil); !errors.Is(err, mcpserver.ErrTimeout) {
		t.Fatalf("CallTool: %v, want ErrTimeout", err)
	}
	if err := c.Call(context.Background(), "ping", nil, nil); !errors.Is(err, mcpserver.ErrServerExited) {
		t.Errorf("Call after the timeout: %v, want ErrServerExited", err)
	}
	if err := c.Close(); !errors.Is(err, mcpserver.ErrServerExited) {
		t.Errorf("Close after the timeout: %v, want ErrServerExited", err)
	}
	wantKilled(t, cmd)
}

// A request the child will not read (its stdin pipe is full) is bounded by the call
// timeout too, not only the wait for the answer.
func TestClientCallTimeoutStdinFull(t *testing.T) {
	c, cmd := startFake(t, "deaf", mcpserver.ClientOptions{StartTimeout: patient, CallTimeout: firing, ExitTimeout: patient})
	big := map[string]string{"text": strings.Repeat("x", 4<<20)} // far over any pipe buffer
	if _, err := c.CallTool(context.Background(), "echo", big); !errors.Is(err, mcpserver.ErrTimeout) {
		t.Fatalf("CallTool: %v, want ErrTimeout", err)
	}
	if err := c.Close(); !errors.Is(err, mcpserver.ErrServerExited) {
		t.Errorf("Close after the timeout: %v, want ErrServerExited", err)
	}
	wantKilled(t, cmd)
}

// A cancelled context ends the Call with its error, tells the server
// (notifications/cancelled), and leaves the child running and usable.
func TestClientCallCancelled(t *testing.T) {
	c, cmd := startFake(t, "slow-call", mcpserver.ClientOptions{StartTimeout: patient, CallTimeout: patient, ExitTimeout: patient})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.CallTool(ctx, "anything", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("CallTool: %v, want context.Canceled", err)
	}
	var seen struct{ Cancelled []int64 }
	if err := c.Call(context.Background(), "ping", nil, &seen); err != nil {
		t.Fatalf("ping after the cancellation: %v", err)
	}
	// ids: 1 initialize, 2 the cancelled call.
	if len(seen.Cancelled) != 1 || seen.Cancelled[0] != 2 {
		t.Errorf("server saw cancelled ids %v, want [2]", seen.Cancelled)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !cmd.ProcessState.Success() {
		t.Errorf("the server ended with %s, want exit 0", cmd.ProcessState)
	}
}

// A server that answers and exits at once: the answer is read before the exit is
// reported. Repeated, since the reply and the exit race.
func TestClientReplyThenExit(t *testing.T) {
	for i := range 10 {
		c, cmd := startFake(t, "reply-then-exit", mcpserver.ClientOptions{StartTimeout: patient, CallTimeout: patient, ExitTimeout: patient})
		r, err := c.CallTool(context.Background(), "last", nil)
		if err != nil {
			t.Fatalf("run %d: CallTool: %v", i, err)
		}
		if r.Text() != "last words" {
			t.Fatalf("run %d: CallTool answered %q", i, r.Text())
		}
		if err := c.Call(context.Background(), "ping", nil, nil); !errors.Is(err, mcpserver.ErrServerExited) {
			t.Fatalf("run %d: Call after the exit: %v, want ErrServerExited", i, err)
		}
		// The child exited 3 on its own: Close reports that, with its last stderr line.
		err = c.Close()
		if err == nil || errors.Is(err, mcpserver.ErrTimeout) || errors.Is(err, mcpserver.ErrServerExited) ||
			!strings.Contains(err.Error(), "fake: exiting after the reply") {
			t.Fatalf("run %d: Close: %v, want the exit status and stderr", i, err)
		}
		if cmd.ProcessState.ExitCode() != 3 {
			t.Fatalf("run %d: the server ended with %s, want exit status 3", i, cmd.ProcessState)
		}
	}
}

func TestClientCloseIgnoredEOF(t *testing.T) {
	c, cmd := startFake(t, "ignore-eof", mcpserver.ClientOptions{StartTimeout: patient, CallTimeout: patient, ExitTimeout: firing})
	if err := c.Close(); !errors.Is(err, mcpserver.ErrTimeout) {
		t.Fatalf("Close: %v, want ErrTimeout", err)
	}
	wantKilled(t, cmd)
}

// Lines that are not answers to a pending request (not JSON, truncated, not an
// object, an unknown or mistyped id, a notification) are skipped; a request from the
// server is answered -32601.
func TestClientSkipsGarbage(t *testing.T) {
	c, cmd := startFake(t, "garbage", mcpserver.ClientOptions{StartTimeout: patient, CallTimeout: patient, ExitTimeout: patient})
	if c.Init.ServerInfo.Name != "fake-garbage" || c.Init.ProtocolVersion != "2025-06-18" {
		t.Errorf("initialize answered %+v", c.Init)
	}
	for range 2 {
		r, err := c.CallTool(context.Background(), "anything", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`client answered "s-1" with jsonrpc error %d: method not found: roots/list`, mcpserver.CodeMethodNotFound)
		if r.Text() != want {
			t.Errorf("CallTool answered %q, want %q", r.Text(), want)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !cmd.ProcessState.Success() {
		t.Errorf("the server ended with %s, want exit 0", cmd.ProcessState)
	}
}

// A Strict client kills a server at its first stdout line that is not JSON-RPC, and at
// a line over MaxMessage, naming what it printed (issue 9: the gateway's children).
func TestClientStrict(t *testing.T) {
	cmd := fakeCommand(t, "garbage")
	_, err := mcpserver.Start(context.Background(), cmd, mcpserver.ClientOptions{StartTimeout: patient, Strict: true})
	if !errors.Is(err, mcpserver.ErrGarbage) || !strings.Contains(err.Error(), `"this is not JSON"`) {
		t.Fatalf("Start: %v, want ErrGarbage quoting the line", err)
	}
	wantKilled(t, cmd)

	cmd = fakeCommand(t, "good")
	_, err = mcpserver.Start(context.Background(), cmd, mcpserver.ClientOptions{StartTimeout: patient, Strict: true, MaxMessage: 10})
	if !errors.Is(err, mcpserver.ErrGarbage) || !strings.Contains(err.Error(), "a line over 10 bytes") {
		t.Fatalf("Start: %v, want ErrGarbage for a long line", err)
	}
	wantKilled(t, cmd)
}
