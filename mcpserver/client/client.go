// Package client is a minimal MCP client for a stdio server run as a child process:
// the gateway's children, and `ferry mcp serve` driven by the demo and the benchmarks.
//
//	c, err := client.Start(ctx, exec.Command("my-server"), client.Options{Strict: true})
//	...
//	tools, err := c.ListTools(ctx)
//	res, err := c.CallTool(ctx, "echo", map[string]any{"x": 1})
//	err = c.Close() // EOF, then a kill after Options.ExitTimeout
//
// Every request is bounded by a timeout on whose expiry the child is killed; a JSON-RPC
// error answer is a *protocol.Error, a tool's failure a ToolResult with IsError.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/internal/ijson"
	"github.com/ferryhq/ferry/internal/procgroup"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/mcpserver/internal/protocol"
)

// Errors of Start and Call; callers test them with errors.Is.
var (
	// ErrTimeout is returned by Start and Call when the server did not answer in time;
	// the child has then been killed and the Conn is unusable.
	ErrTimeout = errors.New("mcpserver: server did not answer in time")
	// ErrServerExited is returned by Call when the child exited (or closed its stdout)
	// before answering, and by every Call after the Conn is closed or killed.
	ErrServerExited = errors.New("mcpserver: server exited")
	// ErrGarbage is returned by Start and Call of a Strict client whose server wrote a
	// line on stdout that is not a JSON-RPC message; the child has then been killed.
	ErrGarbage = errors.New("mcpserver: server wrote garbage on stdout")
	// ErrNotIJSON is returned by Call when the server's answer is JSON that is not
	// I-JSON (RFC 7493): a member name twice, invalid UTF-8, a lone surrogate escape.
	// The answer is not used; the child keeps running.
	ErrNotIJSON = errors.New("mcpserver: server answered JSON that is not I-JSON")
)

// Options configure a Conn. Zero values take the defaults shown.
type Options struct {
	// StartTimeout bounds spawning the child and its answer to initialize (10 s).
	StartTimeout time.Duration
	// CallTimeout bounds each later request (30 s).
	CallTimeout time.Duration
	// ExitTimeout bounds how long Close waits for the child to exit after EOF (5 s).
	ExitTimeout time.Duration
	// ProtocolVersion is sent in initialize (the newest version of the legacy handshake).
	ProtocolVersion string
	// Name and Version are the clientInfo sent in initialize ("ferry", "").
	Name, Version string
	// Strict kills the child at the first stdout line that is not a JSON-RPC message
	// (MCP stdio: stdout carries nothing else); pending and later calls then fail with
	// ErrGarbage. Off, such lines are skipped and only the timeouts end a wait. Strict
	// also kills a child that closed its stdout (EOF) and is still running a second
	// later (ErrServerExited), unless Close caused it.
	Strict bool
	// ProcessGroup starts the child in a process group of its own (unix) and kills the
	// whole group on a kill and at Close, so a wrapper's children die with it. On Linux
	// the child also gets SIGKILL when ferry dies (Pdeathsig; its own children do not:
	// a ferry killed with SIGKILL can leave them running). On Windows the child starts
	// in a new process group (a console Ctrl-C does not reach it) and is killed alone.
	ProcessGroup bool
	// MaxMessage bounds one line on stdout, in bytes (16 MiB). A longer line is garbage:
	// skipped, or with Strict the child is killed.
	MaxMessage int
}

// Conn is a connection to a stdio MCP server run as a child process: one JSON-RPC
// message per line each way, requests matched to responses by id, every
// request bounded by a timeout on whose expiry the child is killed. It speaks the
// legacy handshake (initialize, then notifications/initialized) and nothing the server
// could ask of it: server requests are answered -32601, notifications ignored.
//
// A Conn is safe for concurrent Calls.
type Conn struct {
	opts Options
	cmd  *exec.Cmd
	in   io.WriteCloser
	errb *procgroup.TailBuffer // the child's stderr, when the caller left cmd.Stderr nil

	// Init is the server's answer to initialize.
	Init protocol.InitializeResult // the server's answer to initialize

	wmu sync.Mutex // one write of one whole line per message

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *reply
	killed  bool
	reason  error // why the client killed the child (ErrGarbage), nil when it did not
	closing bool  // Close was called: the child's stdout is expected to end

	readDone chan struct{} // closed when readLoop ends (stdout hit EOF or was closed)
	exited   chan struct{} // closed once the child was reaped and its output read
	waitErr  error         // cmd.Wait's result, set before exited is closed
}

// ToolResult is a tools/call result.
type ToolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text,omitempty"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// Text is the concatenated text content of r (for a failure: "category: message — hint").
func (r *ToolResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// reply is the answer to one request, as readLoop hands it to the call waiting on its
// id.
type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *protocol.Error `json:"error"`
	err    error           // the answer was refused here (ErrNotIJSON)
}

// Start runs cmd (which must not have been started, and whose Stdin and Stdout must be
// unset) and performs the initialize handshake within opts.StartTimeout. On any failure
// the child is killed and reaped before Start returns.
func Start(ctx context.Context, cmd *exec.Cmd, opts Options) (*Conn, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.ExitTimeout <= 0 {
		opts.ExitTimeout = 5 * time.Second
	}
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = protocol.LatestVersion
	}
	if opts.Name == "" {
		opts.Name = "ferry"
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = 16 << 20
	}
	if cmd.Stdout != nil {
		return nil, errors.New("mcpserver: Start needs cmd.Stdout unset: it carries the server's answers")
	}
	c := &Conn{opts: opts, cmd: cmd, pending: map[int64]chan *reply{}, readDone: make(chan struct{}), exited: make(chan struct{})}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("mcpserver: connecting stdin: %w", err)
	}
	// stdout is a pipe of our own, not cmd.StdoutPipe: Wait would close that as soon as
	// the child exits, dropping an answer written just before exit and not yet read.
	out, w, err := os.Pipe()
	if err != nil {
		_ = in.Close()
		return nil, fmt.Errorf("mcpserver: connecting stdout: %w", err)
	}
	cmd.Stdout = w
	c.in = in
	if cmd.Stderr == nil {
		c.errb = &procgroup.TailBuffer{Max: 4 << 10}
		cmd.Stderr = c.errb
	}
	// The child's stderr may outlive it in a grandchild; never let that hang Wait.
	cmd.WaitDelay = exitGrace
	if opts.ProcessGroup {
		procgroup.Set(cmd)
	}
	err = cmd.Start()
	_ = w.Close() // the child holds its own copy
	if err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("mcpserver: starting %s: %w", cmd.Path, err)
	}
	go c.readLoop(out)
	if opts.Strict {
		go c.watchHangup()
	}
	go c.reap(out)

	params := map[string]any{
		"protocolVersion": opts.ProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      protocol.Implementation{Name: opts.Name, Version: opts.Version},
	}
	if err := c.call(ctx, opts.StartTimeout, "initialize", params, &c.Init); err != nil {
		c.kill()
		<-c.exited
		return nil, fmt.Errorf("mcpserver: initializing %s: %w", cmd.Path, err)
	}
	if err := c.Notify("notifications/initialized", nil); err != nil {
		c.kill()
		<-c.exited
		return nil, err
	}
	return c, nil
}

// Call sends one request and decodes its result into result (unless nil), within
// opts.CallTimeout. A JSON-RPC error answer is returned as a *protocol.Error. On timeout the
// child is killed and ErrTimeout returned; when ctx ends first, the request is
// cancelled (notifications/cancelled) and ctx's error returned.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, c.opts.CallTimeout, method, params, result)
}

// CallTool runs tools/call for one tool. A tool's failure is a result with IsError set,
// not an error; errors are the transport's and the protocol's.
func (c *Conn) CallTool(ctx context.Context, name string, args any) (*ToolResult, error) {
	if args == nil {
		args = struct{}{}
	}
	var r ToolResult
	if err := c.Call(ctx, "tools/call", map[string]any{"name": name, "arguments": args}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Notify sends a notification (no answer is expected).
func (c *Conn) Notify(method string, params any) error {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	return c.write(m)
}

// Close closes the child's stdin (EOF, the MCP way to end a stdio session) and waits up
// to opts.ExitTimeout for it to exit. With opts.ProcessGroup (unix) the rest of the
// child's process group is then killed: nothing it started outlives the session. It returns nil only when the child exited 0; a
// child still running after the timeout is killed and ErrTimeout returned.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.wmu.Lock()
	_ = c.in.Close()
	c.wmu.Unlock()
	c.mu.Lock()
	killed := c.killed
	c.mu.Unlock()
	select {
	case <-c.exited:
	case <-time.After(c.opts.ExitTimeout):
		c.kill()
		<-c.exited
		if !killed {
			return fmt.Errorf("%w: still running %s after its stdin closed; killed it", ErrTimeout, c.opts.ExitTimeout)
		}
	}
	if c.opts.ProcessGroup {
		// What the child left behind (a wrapper script's `sleep &`) ends with it.
		_ = procgroup.Kill(c.cmd.Process)
	}
	if killed {
		return fmt.Errorf("%w: it had been killed", ErrServerExited)
	}
	// ErrWaitDelay: the child exited 0, but a process it left behind holds its stderr.
	if c.waitErr != nil && !errors.Is(c.waitErr, exec.ErrWaitDelay) {
		return c.withStderr(fmt.Errorf("mcpserver: server exit: %w", c.waitErr))
	}
	return nil
}

// Kill ends the child at once and reaps it.
func (c *Conn) Kill() {
	c.kill()
	<-c.exited
}

// Alive reports whether the child runs and was not killed.
func (c *Conn) Alive() bool {
	c.mu.Lock()
	killed := c.killed
	c.mu.Unlock()
	select {
	case <-c.exited:
		return false
	default:
		return !killed
	}
}

// Pid is the child's process id.
func (c *Conn) Pid() int { return c.cmd.Process.Pid }

func (c *Conn) call(ctx context.Context, timeout time.Duration, method string, params, result any) error {
	c.mu.Lock()
	if c.killed {
		c.mu.Unlock()
		if c.reason != nil {
			return c.reason
		}
		return ErrServerExited
	}
	c.nextID++
	id := c.nextID
	ch := make(chan *reply, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	// The timeout bounds the write too: a child that stopped reading its stdin blocks it
	// once the pipe is full, and killing the child is what ends that write.
	written := make(chan error, 1)
	go func() { written <- c.write(m) }()
	select {
	case err := <-written:
		if err != nil {
			return err
		}
	case <-t.C:
		c.kill()
		return fmt.Errorf("%w: sending %s took over %s; killed the server", ErrTimeout, method, timeout)
	}
	decode := func(r *reply) error {
		if r.err != nil {
			return r.err
		}
		if r.Error != nil {
			return r.Error
		}
		if result != nil {
			if err := json.Unmarshal(r.Result, result); err != nil {
				return fmt.Errorf("mcpserver: decoding the %s result: %w", method, err)
			}
		}
		return nil
	}
	select {
	case r := <-ch:
		return decode(r)
	case <-t.C:
		c.kill()
		return fmt.Errorf("%w: %s took over %s; killed the server", ErrTimeout, method, timeout)
	case <-ctx.Done():
		_ = c.Notify("notifications/cancelled", map[string]any{"requestId": id, "reason": ctx.Err().Error()})
		return ctx.Err()
	case <-c.exited:
		select {
		case r := <-ch: // the answer came just before the child went away
			return decode(r)
		default:
		}
		if c.reason != nil {
			return c.reason
		}
		return c.withStderr(fmt.Errorf("%w before answering %s (%v)", ErrServerExited, method, c.waitErr))
	}
}

// ListTools runs tools/list, following nextCursor until the last page (at most 100
// pages), and returns every tool as the server described it.
func (c *Conn) ListTools(ctx context.Context) ([]Tool, error) {
	var all []Tool
	cursor := ""
	for range 100 {
		var params map[string]any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		var page struct {
			Tools      []Tool `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := c.Call(ctx, "tools/list", params, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Tools...)
		if page.NextCursor == "" {
			return all, nil
		}
		if page.NextCursor == cursor {
			return nil, fmt.Errorf("mcpserver: tools/list answered the cursor %q it was given", cursor)
		}
		cursor = page.NextCursor
	}
	return nil, errors.New("mcpserver: tools/list has more than 100 pages")
}

// Tool is one tool as the server's tools/list describes it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// write sends one message as one line under the write lock.
func (c *Conn) write(m any) error {
	b, err := protocol.Marshal(m)
	if err != nil {
		return fmt.Errorf("mcpserver: encoding a request: %w", err)
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.in.Write(b); err != nil {
		return fmt.Errorf("%w: writing to its stdin: %v", ErrServerExited, err)
	}
	return nil
}

// watchHangup kills a child (of a Strict client) that closed its stdout but did not
// exit within exitGrace: it can answer nothing more, and must not linger.
func (c *Conn) watchHangup() {
	<-c.readDone
	select {
	case <-c.exited:
		return
	case <-time.After(exitGrace):
	}
	c.mu.Lock()
	if c.closing || c.killed {
		c.mu.Unlock()
		return
	}
	c.reason = c.withStderr(fmt.Errorf("%w: it closed its stdout but kept running; killed it", ErrServerExited))
	c.mu.Unlock()
	c.kill()
}

// exitGrace is how long, after the child exited, its output may still take to end: a
// process it left behind (a shell wrapper's grandchild) can hold stdout and stderr open.
const exitGrace = time.Second

// reap waits for the child to exit, then for readLoop to read what it wrote, for at most
// exitGrace; then it closes stdout (ending readLoop) and marks the client exited.
func (c *Conn) reap(out *os.File) {
	err := c.cmd.Wait()
	select {
	case <-c.readDone:
	case <-time.After(exitGrace):
		go out.Close() // on some systems Close waits for the blocked Read
	}
	c.waitErr = err
	close(c.exited)
}

// readLoop hands each response to the call waiting on its id until stdout ends.
func (c *Conn) readLoop(out io.ReadCloser) {
	defer close(c.readDone)
	defer out.Close()
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := readLine(r, c.opts.MaxMessage)
		if errors.Is(err, errLineTooLong) {
			c.garbage(fmt.Sprintf("a line over %d bytes", c.opts.MaxMessage))
			continue
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			c.handle(line)
		}
		if err != nil {
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most max bytes; a longer one is consumed to its end
// and errLineTooLong returned.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > max {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, part...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// garbage handles a stdout line that is no JSON-RPC message: with Strict it kills the
// child, naming what it printed.
func (c *Conn) garbage(what string) {
	if !c.opts.Strict {
		return
	}
	c.mu.Lock()
	if c.reason == nil && !c.killed {
		c.reason = c.withStderr(fmt.Errorf("%w: %s; killed the server", ErrGarbage, what))
	}
	c.mu.Unlock()
	c.kill()
}

func (c *Conn) handle(line []byte) {
	c.mu.Lock()
	broken := c.reason != nil
	c.mu.Unlock()
	if broken {
		return // a Strict client killed the child: nothing after the garbage counts
	}
	var ie *ijson.Error
	if errors.As(ijson.Check(line), &ie) && ie.Kind != ijson.Syntax {
		c.notIJSON(line, ie)
		return
	}
	var m protocol.Message
	if json.Unmarshal(line, &m) != nil || !bytes.HasPrefix(line, []byte("{")) {
		// Not JSON-RPC: a broken server. Strict kills it; else the caller's timeout
		// ends the wait.
		if len(line) > 80 {
			line = append(line[:77:77], "..."...)
		}
		c.garbage(fmt.Sprintf("%q", line))
		return
	}
	if m.Method != "" {
		if !m.IsNotification() {
			// Not from this goroutine: a server that is not reading its stdin must not
			// stop us reading its answers.
			go c.write(protocol.Response{JSONRPC: "2.0", ID: m.ID, Error: protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %s", m.Method)})
		}
		return
	}
	id, err := strconv.ParseInt(string(bytes.TrimSpace(m.ID)), 10, 64)
	if err != nil {
		return
	}
	r := &reply{Result: m.Result}
	if len(m.Error) > 0 {
		r.Error = &protocol.Error{}
		if json.Unmarshal(m.Error, r.Error) != nil {
			r.Error = protocol.Errorf(protocol.CodeInternalError, "undecodable error object: %s", m.Error)
		}
	}
	c.mu.Lock()
	ch := c.pending[id]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r: // buffered for one answer
		default: // a second answer to one id (a broken server): dropped, never blocks the reader
		}
	}
}

// notIJSON handles a stdout line that is JSON but not I-JSON (RFC 7493); nothing of it
// is used, since readers disagree on what it says. A request or notification of the
// server's own (it has a method) is answered as Server answers one
// (protocol.RefuseNonIJSON).
// A response fails, with ErrNotIJSON and the reason, every waiting call that one of its
// top-level ids names — a repeated id names each of its values — and is otherwise
// dropped, as an answer to no call is. The child keeps running.
func (c *Conn) notIJSON(line []byte, why error) {
	if methods, _ := protocol.TopLevel(line, "method"); len(methods) > 0 {
		if r := protocol.RefuseNonIJSON(line, why, secretguard.RedactIJSON(why)); r != nil {
			go c.write(*r) // not from the reading goroutine, as in handle
		}
		return
	}
	ids, _ := protocol.TopLevel(line, "id")
	for _, raw := range ids {
		id, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil {
			continue
		}
		c.mu.Lock()
		ch := c.pending[id]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- &reply{err: fmt.Errorf("%w: %w", ErrNotIJSON, why)}:
			default:
			}
		}
	}
}

// kill kills the child once; reap then sees it exit.
func (c *Conn) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed {
		return
	}
	c.killed = true
	if c.opts.ProcessGroup {
		_ = procgroup.Kill(c.cmd.Process)
	} else {
		_ = c.cmd.Process.Kill()
	}
}

// StderrError is a client error that carries the last line the child wrote on its
// stderr (captured when cmd.Stderr was unset); its text is the error's, then ": " and
// that line.
type StderrError struct {
	Err  error
	Tail string
}

func (e *StderrError) Error() string { return e.Err.Error() + ": " + e.Tail }
func (e *StderrError) Unwrap() error { return e.Err }

// withStderr is err, as a *StderrError when the child's stderr was captured and is not
// empty.
func (c *Conn) withStderr(err error) error {
	if c.errb == nil {
		return err
	}
	s := strings.TrimSpace(c.errb.String())
	if s == "" {
		return err
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return &StderrError{Err: err, Tail: s}
}
