package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/bootclock"
)

// testClock and testBoot, when set, are the wall clock and the boot clock of every
// channel this process opens. Only the test binary sets them
// (ferry/lifecycle_script_test.go), so journeys can let hours pass on one machine, or
// step its wall clock alone (ADR 0013); the ferry binary always uses the real clocks
// and reads no variable that moves them.
var (
	testClock func() time.Time
	testBoot  func() bootclock.Reading
)

// orderSession opens the --as session of an order command with AutoSettle:
// its write first closes the windows that writer is entitled to close on this machine
// — its own claims whose execution window passed, the queue windows of orders it
// wrote — under the same lock, at no extra read. printOrderResult reports them.
func (g *Globals) orderSession() (*fsbus.Session, error) {
	s, err := g.Session()
	if err != nil {
		return nil, err
	}
	s.AutoSettle = func(expired []string) { g.expired = append(g.expired, expired...) }
	return s, nil
}

// noteExpired reports on stderr the orders the command's write expired.
func (g *Globals) noteExpired() {
	for _, id := range g.expired {
		fprintf(g.stderr, "ferry: note: order %s timed out: its window closed by this machine's clock; it can be claimed again\n", id)
	}
	g.expired = nil
}

// holderSeen is a holder's liveness and what this machine knows of it. The age is
// when this machine last saw a change from the holder (its arrival log,
// docs/design.md §2 rule 7): for an agent on another machine that is when its change
// reached this one, never "seen on this machine" of an agent that is not here. An
// agent is here when this machine holds its key; else the machine it joined from is
// named.
func holderSeen(ch *fsbus.Channel, v *fsbus.View, holder string) string {
	l, age := ch.Liveness(v, holder)
	where := "on another machine"
	if a := v.State.Agents[holder]; a != nil && a.Machine != "" {
		where = "on " + a.Machine
	}
	if ch.Home.HasKey(ch.Project(), holder) {
		if age < 0 {
			return l + " (it works on this machine; no change from it yet)"
		}
		return fmt.Sprintf("%s (it works on this machine; its last change was %s)", l, ago(age))
	}
	if age < 0 {
		return fmt.Sprintf("%s (it works %s; nothing from it has reached this machine yet)", l, where)
	}
	return fmt.Sprintf("%s (it works %s; its last change reached this machine %s)", l, where, ago(age))
}

// ago phrases an age in seconds: "just now" under a second, else "1m30s ago", "2h ago".
func ago(age int64) string {
	if age <= 0 {
		return "just now"
	}
	return fold.ShortDuration((time.Duration(age) * time.Second).String()) + " ago"
}

// showLifecycle prints an order's window (this machine's clock), its holder's liveness
// as this machine saw it, its releases and the dependencies it waits for.
func showLifecycle(g *Globals, ch *fsbus.Channel, v *fsbus.View, o *fold.Order) {
	if o.Holder != "" {
		g.printf("liveness  %s %s\n", o.Holder, holderSeen(ch, v, o.Holder))
	}
	if w, ok := ch.Window(v, o); ok {
		left := time.Until(w.Deadline).Truncate(time.Second)
		if ch.Now != nil {
			left = w.Deadline.Sub(ch.Now()).Truncate(time.Second)
		}
		when := "closes in " + left.String()
		if left <= 0 {
			when = "closed; the " + map[string]string{fsbus.WindowExecution: "holder's", fsbus.WindowQueue: "author's"}[w.Kind] + " machine expires it"
		}
		g.printf("window    %s until %s (this machine's clock), %s\n", w.Kind, w.Deadline.Local().Format("2006-01-02 15:04"), when)
	}
	if o.Releases > 0 {
		g.printf("releases  %d of %d\n", o.Releases, fold.MaxReleases)
	}
	if why := v.State.BlockedForGood(o); why != "" && !fold.Terminal(o.State) {
		g.printf("blocked   %s\n", why)
	} else if b := v.State.Blocking(o); len(b) > 0 {
		g.printf("waits for %s (not accepted yet)\n", strings.Join(b, ", "))
	}
}

// orderJSON is `order show --json`: the order plus what this machine measures — its
// window (deadline on this machine's clock) and its holder's liveness.
type orderJSON struct {
	*fold.Order
	Window         *fsbus.Window `json:"window,omitempty"`
	HolderLiveness string        `json:"holder_liveness,omitempty"`
	HolderAgeS     *int64        `json:"holder_age_s,omitempty"` // seconds since this machine last saw the holder
	RunVia         string        `json:"run_via,omitempty"`      // direct, or the job-queue command
	// Blocked says the order waits for a cancelled dependency: it can never be claimed.
	Blocked string `json:"blocked,omitempty"`
}

func lifecycleJSON(ch *fsbus.Channel, v *fsbus.View, o *fold.Order) orderJSON {
	out := orderJSON{Order: o}
	if !fold.Terminal(o.State) {
		out.Blocked = v.State.BlockedForGood(o)
	}
	if w, ok := ch.Window(v, o); ok {
		out.Window = &w
	}
	if o.Holder != "" {
		l, age := ch.Liveness(v, o.Holder)
		out.HolderLiveness = l
		if age >= 0 {
			out.HolderAgeS = &age
		}
	}
	return out
}

// OrderExtendCmd is `ferry order extend ID`.
type OrderExtendCmd struct {
	ID   string `arg:"" help:"Order id or unique prefix."`
	Note string `help:"Why more time is needed."`
	keyFlag
}

// Run implements the command.
func (c *OrderExtendCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Extend(c.ID, fsbus.NoteOptions{Note: c.Note, Key: c.Key})
	verb := "extended"
	if err == nil && slices.ContainsFunc(o.Warnings, func(w string) bool { return strings.HasPrefix(w, "capped at lifetime") }) {
		verb = "extended (capped at lifetime)"
	}
	return printOrderResult(g, o, err, verb)
}

// OrderFailCmd is `ferry order fail ID --reason TEXT`.
type OrderFailCmd struct {
	ID     string `arg:"" help:"Order id or unique prefix."`
	Reason string `help:"What went wrong, for whoever takes it next." required:""`
	keyFlag
}

// Run implements the command.
func (c *OrderFailCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Fail(c.ID, fsbus.NoteOptions{Note: c.Reason, Key: c.Key})
	return printOrderResult(g, o, err, "failed")
}

// OrderDeclineCmd is `ferry order decline ID`.
type OrderDeclineCmd struct {
	ID   string `arg:"" help:"Order id or unique prefix."`
	Note string `help:"Why."`
	keyFlag
}

// Run implements the command.
func (c *OrderDeclineCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Decline(c.ID, fsbus.NoteOptions{Note: c.Note, Key: c.Key})
	return printOrderResult(g, o, err, "declined")
}

// AgentCmd groups the verbs on one agent.
type AgentCmd struct {
	Retire AgentRetireCmd `cmd:"" help:"Retire an agent and give back every order it held."`
}

// AgentRetireCmd is `ferry agent retire NAME`.
type AgentRetireCmd struct {
	Name string `arg:"" help:"Agent to retire: yourself (--as NAME), or any agent as the owner (no --as)."`
}

// ownerAction: retiring another agent is the owner's (docs/format.md §13, the retire
// rule: of itself, worker; of others, master); an agent retiring itself (--as NAME with
// NAME the agent) acts as that agent.
func (c *AgentRetireCmd) ownerAction(g *Globals) string {
	if g.As != "" && g.As != fold.MasterWriter && g.As == c.Name {
		return ""
	}
	return "retire " + c.Name + " (agent.retire of another agent)"
}

// Run implements the command: as --as (the agent itself), or as the owner when --as
// is not given or is master.
func (c *AgentRetireCmd) Run(g *Globals) error {
	var s *fsbus.Session
	var err error
	if c.ownerAction(g) != "" {
		s, err = g.Master()
	} else {
		s, err = g.Session()
	}
	if err != nil {
		return err
	}
	ids, err := s.Retire(c.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		if ids == nil {
			ids = []string{}
		}
		return g.printJSON(map[string]any{"agent": c.Name, "released": ids})
	}
	g.printf("✔ retired %s", c.Name)
	if len(ids) > 0 {
		g.printf("; released %s", strings.Join(ids, ", "))
	}
	g.printf("\n")
	return nil
}
