package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/watch"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/internal/sessionlease"
	"github.com/ferryhq/ferry/mcpserver/gateway"
)

// Instructions are the server instructions every client shows its model (docs/design.md
// §4: ≤ 250 tokens, aim ≤ 200; the budget test holds them to it).
const Instructions = `ferry: your team's channel in a synced folder; nothing needs to be running.
1. Call ferry_join first, then ferry_catchup; later pass its "next" as since. Never read history.
2. ferry_orders: list, claim, progress, submit (a reference: commit, branch or hand-in id; never the work itself), review others' results.
3. ferry_talk: read only what is new (it marks it read); post to an agent, "master" (the owner) or "all".
4. ferry_primary status before taking over; take over only when it says the holder is silent.
5. Need the owner's yes? ferry_ask_human raise with a recommendation, then status.
6. Never put secrets, keys or code in the channel. Writes accept an idempotency key.
7. Reads are short; detail:true says more. Opt-in groups: --tools admin (search, get, status), --tools legacy.`

// FerryConfig configures the ferry tools of `ferry mcp serve`.
type FerryConfig struct {
	// Agent is the one identity this server acts as (--as).
	Agent string
	// Workspace is the root of order file pointers (--workspace); "" means the git
	// top-level of the server's current directory, else that directory.
	Workspace string
	// Open opens the channel (the CLI resolves --channel/--project). It is called on the
	// first tool call, never at start-up: initialize must not read the channel.
	Open func() (*fsbus.Channel, error)
	// Version is serverInfo.version.
	Version string
	// Log receives diagnostics (stderr).
	Log io.Writer
	// PresenceEvery is how often a running server rewrites its presence file; 0 means
	// 60 s (docs/design.md §2 "Orders, asks, presence").
	PresenceEvery time.Duration
	// Commands returns the CLI's command catalog as JSON ({"commands":[…]}), walked
	// from kong's model of the whole CLI and served as ferry://<project>/commands
	// (docs/mcp.md "Resources"). It is called once, on the first read that needs it;
	// nil serves no commands resource. The server never imports the CLI.
	Commands func() (json.RawMessage, error)
	// Capabilities feed ferry://<project>/capabilities; empty fields get defaults (see
	// Capabilities).
	Capabilities Capabilities
	// Watch configures the long-poll of wait_s (fsnotify, or polling when forced).
	Watch watch.WatchOptions
	// Groups are the opt-in tool groups served besides the core tools (--tools):
	// GroupAdmin, GroupLegacy; NewFerry refuses any other name (invalid).
	Groups []string
	// UpdateExe is the binary ferry_update apply replaces; "" means the running one
	// (os.Executable). Tests set a copy.
	UpdateExe string
	// ReadOnly serves the legacy read tools only, and nothing that writes (--read-only,
	// the predecessor's stance); with GroupAdmin it is refused (invalid).
	ReadOnly bool
	// Gateway are the MCP servers whose tools GroupGateway forwards, from
	// gateway.Servers; ignored without that group.
	Gateway []*gateway.Server
	// GatewayError is why the gateway's config could not be read (gateway.Servers'
	// error): the server still starts, with the core tools and no gateway tools, logs
	// it, and reports it in ferry://<project>/capabilities as gateway_error.
	GatewayError error
}

// Ferry is the state of one `ferry mcp serve` process: its agent, the channel once
// opened, and the identity lease once taken.
type Ferry struct {
	cfg FerryConfig

	mu      sync.Mutex
	ch      *fsbus.Channel
	lease   *sessionlease.Lease
	stop    chan struct{} // closed by Close: ends the lease's heartbeat
	leaseBy string        // who holds the lease's file instead of this process, as last logged
	ticking bool
	doing   string
	app     string // the MCP client's name, from initialize

	srv *Server // the server NewFerry built (its tools, for the capabilities resource)
	// commands is cfg.Commands called once (nil when cfg.Commands is nil).
	commands func() (json.RawMessage, error)

	own       map[string]bool  // the names of ferry's own tools (not the gateway's): pause.go
	gatewayOn bool             // GroupGateway is served
	gateway   *gateway.Gateway // its children, started lazily; closed by Close
}

// NewFerry builds the MCP server with ferry's six core tools and the opt-in groups of
// cfg.Groups, or with cfg.ReadOnly the legacy read tools only (docs/design.md §4;
// see surface). Errors: invalid for an unknown group or ReadOnly with admin.
func NewFerry(cfg FerryConfig) (*Server, *Ferry, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.PresenceEvery <= 0 {
		cfg.PresenceEvery = 60 * time.Second
	}
	f := &Ferry{cfg: cfg}
	if cfg.Commands != nil {
		f.commands = sync.OnceValues(cfg.Commands)
	}
	tools, instructions, err := f.surface()
	if err != nil {
		return nil, nil, err
	}
	f.own = map[string]bool{}
	for _, t := range tools {
		f.own[t.Name] = true
	}
	var more ToolSource
	if f.gatewayOn && cfg.GatewayError != nil {
		fmt.Fprintf(cfg.Log, "mcp: gateway: serving no gateway tools: %v\n", cfg.GatewayError)
		f.cfg.Capabilities.GatewayError = gateway.CleanText(cfg.GatewayError.Error())
		f.cfg.Gateway = nil
	}
	if f.gatewayOn {
		reserved := FerryToolNames()
		for _, t := range tools {
			reserved = append(reserved, t.Name)
		}
		f.gateway = gateway.New(f.cfg.Gateway, gateway.Options{Reserved: reserved, Log: cfg.Log, Version: cfg.Version})
		more = gatewayTools{f.gateway}
	}
	srv, err := New(Options{
		More:         more,
		Name:         "ferry",
		Version:      cfg.Version,
		Instructions: instructions,
		Tools:        tools,
		Log:          cfg.Log,
		ToolError:    f.toolError,
		Gate:         f.pauseGate,
		Resources:    f.Resources(),
		// The client's name becomes the app an MCP ferry_join announces (display only).
		OnClientInfo: func(name, _ string) { f.SetClientApp(name) },
	})
	f.srv = srv
	return srv, f, err
}

// Close releases the identity lease and ends the gateway's children.
func (f *Ferry) Close() {
	if f.gateway != nil {
		f.gateway.Close()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease != nil {
		close(f.stop)
		f.lease.Release()
		f.lease = nil
	}
}

// toolError renders a failure as "category: message — hint"; an internal error gets a
// correlation id, its details go to the log only.
func (f *Ferry) toolError(err error) string {
	var fe *errs.Error
	if errors.As(err, &fe) && fe.Category != errs.Internal {
		return toolWords(fe.Error())
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled: the call was cancelled before it finished — call again if still needed"
	}
	id := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	// The log may quote a caller's input too: every credential-looking span is cut
	// (an over-cut key in a log line costs nothing).
	text, _ := secretguard.Redact(err.Error())
	fmt.Fprintf(f.cfg.Log, "mcp: internal error [%s]: %s\n", id, text)
	return "internal: the call failed [" + id + "] — details are in the server's log on this machine"
}

// channel opens the channel on first use.
func (f *Ferry) channel() (*fsbus.Channel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch != nil {
		return f.ch, nil
	}
	ch, err := f.cfg.Open()
	if err != nil {
		return nil, err
	}
	f.ch = ch
	return ch, nil
}

// read opens a fresh view of the channel.
func (f *Ferry) read() (*fsbus.Channel, *fsbus.View, error) {
	ch, err := f.channel()
	if err != nil {
		return nil, nil, err
	}
	v, err := ch.Load()
	return ch, v, err
}

// session is the agent's session for a call that writes or acknowledges: it takes the
// identity lease first, so two live servers never act as one agent
// (docs/mcp.md "One session per agent").
func (f *Ferry) session() (*fsbus.Session, error) {
	ch, err := f.channel()
	if err != nil {
		return nil, err
	}
	if err := f.takeLease(ch); err != nil {
		return nil, err
	}
	s, err := ch.As(f.cfg.Agent)
	if s != nil {
		s.Workspace = f.cfg.Workspace
	}
	return s, err
}

// readSession is the agent's session for a call that neither writes nor
// acknowledges: no lease.
func (f *Ferry) readSession() (*fsbus.Session, error) {
	ch, err := f.channel()
	if err != nil {
		return nil, err
	}
	return ch.As(f.cfg.Agent)
}

// takeLease takes the machine-local session lease on (project, agent) for the life of
// the process (fsbus.SessionLease, under the config dir), or returns a conflict naming
// the process that holds it. Once taken, every PresenceEvery it is renewed
// (renewLease).
func (f *Ferry) takeLease(ch *fsbus.Channel) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease != nil {
		return nil
	}
	l, holder, err := ch.Home.TakeSessionLease(ch.Project(), f.cfg.Agent)
	if err != nil {
		return fmt.Errorf("taking the identity lease: %w", err)
	}
	if l == nil {
		return errs.Errorf(errs.Conflict,
			fmt.Sprintf("give this session a name of its own, e.g. `ferry mcp serve --as %s-2` (then ferry join and the owner's grant)", f.cfg.Agent),
			"%s is already acting as %s in project %s on this machine; two sessions under one name would read each other's messages",
			holder, f.cfg.Agent, ch.Project())
	}
	f.lease, f.stop = l, make(chan struct{})
	go func(stop <-chan struct{}) {
		t := time.NewTicker(f.cfg.PresenceEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				f.renewLease()
			}
		}
	}(f.stop)
	return nil
}

// renewLease is the lease's heartbeat: when its lock file was removed or replaced (a
// hand-deleted config dir), it takes the lease again on the file at the path. When
// another process got that file first, two sessions act as one agent: that is logged
// once, this server keeps serving (refusing its client mid-work would not end the
// other session), and each later heartbeat tries again, so the lease comes back when
// the other process ends.
func (f *Ferry) renewLease() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == nil {
		return
	}
	retaken, holder, err := f.lease.Renew()
	switch {
	case err != nil:
		fmt.Fprintf(f.cfg.Log, "mcp: %v\n", err)
	case holder != "":
		if holder != f.leaseBy {
			fmt.Fprintf(f.cfg.Log, "mcp: session lease %s was removed or replaced, and %s took it: two sessions act as %s on this machine; this one goes on serving and takes the lease back when that one ends\n",
				f.lease.Path(), holder, f.cfg.Agent)
		}
		f.leaseBy = holder
	case retaken:
		fmt.Fprintf(f.cfg.Log, "mcp: session lease %s was removed or replaced; took it again\n", f.lease.Path())
		f.leaseBy = ""
	}
}

// wrote records a write: presence is rewritten now and every PresenceEvery after, so
// a working agent never looks silent.
func (f *Ferry) wrote(s *fsbus.Session, doing string) {
	f.mu.Lock()
	f.doing = doing
	start := !f.ticking
	f.ticking = true
	f.mu.Unlock()
	f.heartbeat(s)
	if start {
		go func() {
			t := time.NewTicker(f.cfg.PresenceEvery)
			defer t.Stop()
			for range t.C {
				f.heartbeat(s)
			}
		}()
	}
}

// heartbeat rewrites the presence file with what the agent does and the orders it holds.
func (f *Ferry) heartbeat(s *fsbus.Session) {
	f.mu.Lock()
	doing := f.doing
	f.mu.Unlock()
	// The holder's own process closes its windows: expiries this machine's clock says
	// are due are written here, never by another machine.
	if _, err := s.SettleWindows(); err != nil {
		fmt.Fprintf(f.cfg.Log, "mcp: settling order windows: %v\n", err)
	}
	var runs []string
	if v, err := s.Load(); err == nil {
		for _, r := range v.State.ListOrders(fold.OrderFilter{Mine: s.Name, State: string(fold.StateClaimed)}) {
			if r.Holder == s.Name {
				runs = append(runs, r.ID)
			}
		}
	}
	if err := s.WritePresence(doing, runs); err != nil {
		fmt.Fprintf(f.cfg.Log, "mcp: writing presence: %v\n", err)
	}
	if _, err := s.MoveFrozen(false); err != nil { // docs/format.md §21 "Moving frozen files"
		fmt.Fprintf(f.cfg.Log, "mcp: moving frozen files: %v\n", err)
	}
}

// decode parses a tool's arguments into v, refusing unknown JSON as invalid params.
func decode(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return errs.Errorf(errs.Invalid, "check the tool's input schema", "arguments do not decode: %v", err)
	}
	return nil
}

// need returns an invalid error when a field an action requires is empty.
// All missing fields are named, in a stable order.
func need(action string, fields map[string]string) error {
	var missing []string
	for name, v := range fields {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	list := strings.Join(missing, " and ")
	return errs.Errorf(errs.Invalid, "pass "+list+" with action "+action, "action %s needs %s", action, list)
}

// clientApp is the app to announce in agent.join: the MCP client's name from
// initialize when known (e.g. "claude-code"), else "" (keep what was announced).
func (f *Ferry) clientApp() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.app
}

// SetClientApp records the client's name from initialize (clientInfo.name), made
// portable by fsbus.PortableLabel.
func (f *Ferry) SetClientApp(name string) {
	app := fsbus.PortableLabel(name)
	f.mu.Lock()
	f.app = app
	f.mu.Unlock()
}

// toolVocabulary rewrites the CLI commands an fsbus hint names into the tool calls an
// agent can make, so a hint over MCP is always actionable (ADR 0002 §8; failures are
// "category: message — hint"). Commands only the owner runs (`ferry grant`, `ferry ask
// approve`) stay as they are: the agent relays them.
var toolVocabulary = []struct {
	re   *lazyre.Regexp
	with string
}{
	{lazyre.New("`ferry join --as [^`]*`"), "`ferry_join`"},
	{lazyre.New("`ferry catchup[^`]*`"), "`ferry_catchup`"},
	{lazyre.New("`ferry order list[^`]*`"), "`ferry_orders` action list"},
	{lazyre.New("`ferry order show[^`]*`"), "`ferry_orders` action show"},
	{lazyre.New("`ferry order (claim|progress|submit|review)[^`]*`"), "`ferry_orders` action $1"},
	{lazyre.New("`ferry primary (take|takeover)`"), "`ferry_primary` action takeover"},
	{lazyre.New("`ferry primary (status|standby|release)`"), "`ferry_primary` action $1"},
	{lazyre.New("`ferry ask status[^`]*`"), "`ferry_ask_human` action status"},
	{lazyre.New("`ferry talk read --peek`"), "`ferry_talk` read with peek:true"},
	{lazyre.New("`ferry talk read[^`]*`"), "`ferry_talk` action read"},
	{lazyre.New("`ferry agents`"), "`ferry_join` (its alive list)"},
	{lazyre.New(`--peek\b`), "peek:true"},
	{lazyre.New(`pass --to NAME, --to master or --to all`), "pass to: an agent name, master or all"},
	{lazyre.New(`pass --ref COMMIT\|BRANCH\|h-ID`), "pass ref: a commit, branch or hand-in id"},
	{lazyre.New("`ferry talk send --to ([a-z0-9-]+)[^`]*`"), "`ferry_talk` action send to $1"},
	// MCP passes every value inline and reads no file: no hint may name @FILE. The
	// specific forms first, then any left.
	{lazyre.New(`, or --body @FILE`), ""},
	{lazyre.New(`--body @FILE`), "text"},
	{lazyre.New(`with --result JSON\|@FILE \(MCP: result\)`), "in result (JSON)"},
	{lazyre.New(`\s*\(or @FILE[^)]*\)`), ""},
	{lazyre.New(`\|@FILE\b`), ""},
	{lazyre.New(`,? or @FILE\b`), ""},
	{lazyre.New(`@FILE\b`), "the value inline"},
}

func toolWords(s string) string {
	for _, v := range toolVocabulary {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}
