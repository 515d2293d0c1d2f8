package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/autocompact"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/recheck"
	"github.com/ferryhq/ferry/fsbus/runner"
	"github.com/ferryhq/ferry/internal/errs"
)

// DaemonCmd is `ferry daemon --config FILE [--once|--status]` (docs/runs.md
// "`ferry daemon`").
type DaemonCmd struct {
	Config string `required:"" help:"TOML file of handlers per agent and task type." placeholder:"FILE" type:"path"`
	Once   bool   `help:"One pass for each agent (at most one order each), then exit." xor:"mode"`
	Status bool   `help:"Show each agent's daemon lease owner and run journal health, then exit." xor:"mode"`
}

// Help shows the config format.
func (c *DaemonCmd) Help() string {
	return `Runs ferry run's loop for every agent the config names, one daemon per agent on
this machine (a lease: a second daemon for the same agent exits with an error
naming the owner's pid). A restart settles what a crashed daemon held.

  workdir = "."          # the files' working directory (relative to this file)
  queue   = "off"        # job queue for heavy orders ({order} = order id)
  poll    = "5s"         # how often to look for ready orders
  beat    = "60s"        # heartbeat period while a run is going

  [[handler]]
  agent = "builder"      # the agent the daemon claims as
  task  = "build"        # the order's task type; "*" or omitted: any
  exec  = "./build.sh"   # run without a shell (relative to this file)
  env   = ["GOPATH"]     # variables passed by name

Unknown keys are refused by name. See docs/runs.md.`
}

// daemonConfig is the TOML of `ferry daemon --config`.
type daemonConfig struct {
	Workdir string           `toml:"workdir"`
	Queue   string           `toml:"queue"`
	Poll    string           `toml:"poll"`
	Beat    string           `toml:"beat"`
	Handler []*daemonHandler `toml:"handler"`

	poll, beat time.Duration
	dir        string // the config file's folder
	queue      runner.Queue
}

type daemonHandler struct {
	Agent string   `toml:"agent"`
	Task  string   `toml:"task"`
	Exec  string   `toml:"exec"`
	Env   []string `toml:"env"`

	h *runner.Handler
}

// loadDaemonConfig reads and checks a daemon config. Errors (invalid, naming the file
// and what to fix): unreadable TOML, unknown keys (each named), no handlers, a handler
// without agent or exec, a bad agent name, task or env name, an exec file that is
// missing or not executable, two handlers for one agent and task, bad durations, a
// queue command not found, a workdir that is not a folder.
func loadDaemonConfig(path string) (*daemonConfig, error) {
	bad := func(format string, args ...any) error {
		return errs.Errorf(errs.Invalid, "see `ferry daemon --help` for the config format", "config %s: %s", path, fmt.Sprintf(format, args...))
	}
	var cfg daemonConfig
	md, err := toml.DecodeFile(path, &cfg)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errs.Errorf(errs.Invalid, "check the path", "config %s does not exist", path)
		}
		return nil, bad("%v", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, bad("unknown keys: %s", strings.Join(keys, ", "))
	}
	cfg.dir = filepath.Dir(path)
	for _, d := range []struct {
		text string
		out  *time.Duration
		def  time.Duration
		name string
	}{{cfg.Poll, &cfg.poll, 5 * time.Second, "poll"}, {cfg.Beat, &cfg.beat, 60 * time.Second, "beat"}} {
		*d.out = d.def
		if d.text != "" {
			v, err := time.ParseDuration(d.text)
			if err != nil || v <= 0 {
				return nil, bad("%s = %q is not a positive duration (e.g. \"5s\")", d.name, d.text)
			}
			*d.out = v
		}
	}
	if len(cfg.Handler) == 0 {
		return nil, bad("no [[handler]]: name at least one agent and the file it runs")
	}
	seen := map[[2]string]int{} // (agent, task) → handler number
	for i, h := range cfg.Handler {
		n := i + 1
		switch {
		case h.Agent == "":
			return nil, bad("handler %d has no agent", n)
		case !fold.ValidName(h.Agent):
			return nil, bad("handler %d: %q is not an agent name", n, h.Agent)
		case h.Exec == "":
			return nil, bad("handler %d (agent %s) has no exec", n, h.Agent)
		case strings.ContainsAny(h.Task, " \t\r\n"):
			return nil, bad("handler %d: task %q holds white space", n, h.Task)
		}
		if h.Task == "*" {
			h.Task = ""
		}
		key := [2]string{h.Agent, h.Task}
		if prev, dup := seen[key]; dup {
			return nil, bad("handlers %d and %d both serve agent %s, task %s", prev, n, h.Agent, orAny(h.Task))
		}
		seen[key] = n
		if err := runner.CheckEnvNames(h.Env); err != nil {
			return nil, bad("handler %d: %v", n, errMsg(err))
		}
		file, err := resolveExec(h.Exec, cfg.dir)
		if err != nil {
			return nil, bad("handler %d: %v", n, errMsg(err))
		}
		h.h = &runner.Handler{Exec: file, Env: h.Env, Task: h.Task}
	}
	wd, err := workdir(cfg.Workdir, cfg.dir)
	if err != nil {
		return nil, bad("%v", errMsg(err))
	}
	cfg.Workdir = wd
	q, err := runner.ResolveQueue(cfg.Queue, "config")
	if err != nil {
		return nil, bad("%v", errMsg(err))
	}
	cfg.queue = q
	return &cfg, nil
}

func orAny(task string) string {
	if task == "" {
		return "*"
	}
	return task
}

// agents lists the config's agents, sorted.
func (cfg *daemonConfig) agents() []string {
	var out []string
	for _, h := range cfg.Handler {
		if !contains(out, h.Agent) {
			out = append(out, h.Agent)
		}
	}
	slices.Sort(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pick returns agent's handler for an order of task type task: the exact task first,
// then the agent's catch-all ("*"), else nil.
func (cfg *daemonConfig) pick(agent, task string) *runner.Handler {
	var any *runner.Handler
	for _, h := range cfg.Handler {
		if h.Agent != agent {
			continue
		}
		if h.Task == task && task != "" {
			return h.h
		}
		if h.Task == "" {
			any = h.h
		}
	}
	return any
}

// Run implements the command.
func (c *DaemonCmd) Run(g *Globals) error {
	cfg, err := loadDaemonConfig(c.Config)
	if err != nil {
		return err
	}
	ch, err := g.Open()
	if err != nil {
		return err
	}
	if c.Status {
		return c.status(g, ch, cfg)
	}
	// Every agent's key first: an agent that cannot run here takes no lease, so
	// `--status` never shows a daemon that did not start.
	sessions := map[string]*fsbus.Session{}
	for _, a := range cfg.agents() {
		s, err := ch.As(a)
		if err != nil {
			return err
		}
		sessions[a] = s
	}
	var leases []*runner.Lease
	defer func() {
		for _, l := range leases {
			l.Release()
		}
	}()
	for _, a := range cfg.agents() {
		l, err := runner.TakeLease(ch.Home, ch.Project(), a, c.Config)
		if err != nil {
			return err
		}
		leases = append(leases, l)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var runners []*runner.Runner
	for _, a := range cfg.agents() {
		s := sessions[a]
		agent := a
		r := &runner.Runner{S: s, Queue: cfg.queue, Workdir: cfg.Workdir, Beat: cfg.beat, Log: g.stderr,
			Pick: func(_ *fold.Order, spec runner.Spec) *runner.Handler { return cfg.pick(agent, spec.Task) }}
		if _, err := r.Start(); err != nil {
			return fmt.Errorf("agent %s: %w", a, err)
		}
		runners = append(runners, r)
	}
	fmt.Fprintf(g.stderr, "ferry daemon: pid %d serving %s\n", os.Getpid(), strings.Join(cfg.agents(), ", "))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []*runner.Result
		first   error
	)
	if !c.Once {
		recheck.Start(ctx, g.Open, cfg.agents()[0], g.stderr) // the owner's checkpoint folded again (fsbus/recheck)
		wg.Add(1)
		go func() { // waited for: a stop never cuts a checkpoint's write short
			defer wg.Done()
			autoCompact(ctx, g, cfg.beat)
		}()
	}
	for _, r := range runners {
		wg.Add(1)
		go func(r *runner.Runner) {
			defer wg.Done()
			res, err := r.Loop(ctx, cfg.poll, c.Once)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("agent %s: %w", r.S.Name, err)
				stop() // one agent's fatal error stops the daemon: a partial daemon misleads
			}
			if res != nil {
				results = append(results, res)
			}
			runner.Journal(r.S, runner.JournalEvent{Event: "stop", Note: "daemon stopped"})
		}(r)
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if c.Once {
		if g.JSON {
			if results == nil {
				results = []*runner.Result{}
			}
			return g.printJSON(results)
		}
		if len(results) == 0 {
			g.printf("no order ready for %s\n", strings.Join(cfg.agents(), ", "))
		}
		for _, res := range results {
			printRunResult(g, res)
		}
	}
	return nil
}

// daemonStatus is one agent's row of `ferry daemon --status`.
type daemonStatus struct {
	Agent   string                `json:"agent"`
	Running bool                  `json:"running"`
	Owner   *runner.LeaseOwner    `json:"owner,omitempty"` // the current or last owner
	Runs    []fsbus.RunRecord     `json:"runs"`            // live runs of the agent here
	Journal *runner.JournalHealth `json:"journal"`
}

func (c *DaemonCmd) status(g *Globals, ch *fsbus.Channel, cfg *daemonConfig) error {
	var rows []daemonStatus
	for _, a := range cfg.agents() {
		ow, held := runner.ReadLeaseOwner(ch.Home, ch.Project(), a)
		jh, err := runner.ReadJournal(ch.Home, ch.Project(), a)
		if err != nil {
			return err
		}
		runs := ch.Home.LiveRuns(ch.Project(), a)
		if runs == nil {
			runs = []fsbus.RunRecord{}
		}
		rows = append(rows, daemonStatus{Agent: a, Running: held, Owner: ow, Runs: runs, Journal: jh})
	}
	if g.JSON {
		return g.printJSON(rows)
	}
	for _, r := range rows {
		switch {
		case r.Running && r.Owner != nil:
			g.printf("%s: daemon running, pid %d since %s (config %s)\n", r.Agent, r.Owner.PID, r.Owner.Started, r.Owner.Config)
		case r.Running:
			g.printf("%s: daemon running (owner file missing)\n", r.Agent)
		case r.Owner != nil:
			g.printf("%s: no daemon running (last: pid %d, started %s)\n", r.Agent, r.Owner.PID, r.Owner.Started)
		default:
			g.printf("%s: no daemon has run here\n", r.Agent)
		}
		tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
		for _, run := range r.Runs {
			fprintf(tw, "  run %s\torder %s\tpid %d\tsince %s\tbeat %s\n", run.Run, run.Order, run.PID, run.Started, run.Beat)
		}
		tw.Flush()
		j := r.Journal
		if !j.Exists {
			g.printf("  journal: empty (%s)\n", j.Path)
			continue
		}
		health := "healthy"
		if j.Bad > 0 {
			health = fmt.Sprintf("%d damaged lines", j.Bad)
		}
		g.printf("  journal: %s, %d events, %d submitted, %d failed (%s)\n", health, j.Events, j.Done, j.Failures, j.Path)
		if j.Last != nil {
			g.printf("  last event: %s\n", strings.Join(nonEmpty(j.Last.At, j.Last.Event, j.Last.Order, j.Last.Outcome), " "))
		}
		if j.LastFail != nil {
			g.printf("  last failure: %s %s: %s\n", j.LastFail.At, j.LastFail.Order, firstLineOf(j.LastFail.Note))
		}
	}
	return nil
}

func firstLineOf(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// errMsg is an error's message without its category and hint.
func errMsg(err error) string {
	var fe *errs.Error
	if errors.As(err, &fe) {
		return fe.Message
	}
	return err.Error()
}

func nonEmpty(parts ...string) []string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// backoff is when the daemon tries an automatic compaction again: at every beat while
// tries succeed; after a failed one, a beat later, then twice as long after each
// further failure, up to an hour.
type backoff struct {
	beat, wait time.Duration // wait: the next failure's delay (0: one beat)
	next       time.Time     // no try before it
}

// due reports whether a try may run at now.
func (b *backoff) due(now time.Time) bool { return !now.Before(b.next) }

// ok records a try that did not fail.
func (b *backoff) ok() { b.wait, b.next = 0, time.Time{} }

// fail records a try at now that failed.
func (b *backoff) fail(now time.Time) {
	if b.wait == 0 {
		b.wait = b.beat
	}
	b.next, b.wait = now.Add(b.wait), min(2*b.wait, time.Hour)
}

// unsettledNote names the seated writers a compaction covered without seeing them
// advance within the settle time ("" when none).
func unsettledNote(r *fold.CompactResult) string {
	if len(r.Unsettled) == 0 {
		return ""
	}
	return fmt.Sprintf("; past %s, not seen to advance %s (their entries arriving later land above the cut)", strings.Join(r.Unsettled, ", "), fold.SettleWindow(r.Settle))
}

// autoCompact is the daemon's automatic compaction (package fsbus/autocompact): every
// beat it asks whether the owner's next checkpoint is due on this machine and writes
// it when it is; what it did, or why it could not, is logged when that changes. A
// compaction that failed or was refused (a dispute, a checkpoint not counting here), or
// that was due and wrote nothing, is tried again after a beat, then after twice as
// long each time, up to an hour: each try reads the ledger whole.
func autoCompact(ctx context.Context, g *Globals, beat time.Duration) {
	t := time.NewTicker(beat)
	defer t.Stop()
	last, bo := "", &backoff{beat: beat}
	var ch *fsbus.Channel
	for {
		if now := time.Now(); bo.due(now) {
			var d autocompact.Decision
			var r *fold.CompactResult
			var err error
			if ch == nil {
				ch, err = g.Open()
			}
			if err == nil {
				d, r, err = autocompact.Run(ctx, ch, now)
			}
			key, msg, failed := "", "", true
			switch {
			case err != nil:
				key, msg = "error "+err.Error(), fmt.Sprintf("ferry daemon: automatic compaction (%s): %v", d.Reason, err)
			case r != nil && r.Entry != "":
				key, msg, failed = "compacted "+r.Entry, fmt.Sprintf("ferry daemon: compacted (%s): the owner's checkpoint of epoch %d, %s%s", d.Reason, r.Epoch, r.Head, unsettledNote(r)), false
			case d.Due: // due, yet the cut covered nothing new (objects not arrived): back off too
				key, msg = "due", "ferry daemon: automatic compaction due ("+d.Reason+"): nothing new has settled"
			default:
				failed = false
			}
			if failed {
				bo.fail(now)
			} else {
				bo.ok()
			}
			if key != last && msg != "" {
				fmt.Fprintln(g.stderr, msg)
			}
			last = key
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
