package main

import (
	"context"

	"strings"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/synchealth"
)

// PrimaryCmd groups the primary verbs (docs/design.md §3). `ferry primary` alone shows
// the status.
type PrimaryCmd struct {
	Status  PrimaryStatusCmd  `cmd:"" default:"1" help:"Show the holder, its liveness, the standbys, the brief and the take rule."`
	Standby PrimaryStandbyCmd `cmd:"" help:"Record that you are available to take over."`
	Take    PrimaryTakeCmd    `cmd:"" aliases:"takeover" help:"Take the primary role (refused while the holder is heard from)."`
	Release PrimaryReleaseCmd `cmd:"" help:"Hand the primary role back."`
	Brief   PrimaryBriefCmd   `cmd:"" help:"Record the primary's objective and constraints."`
}

// PrimaryStatusCmd is `ferry primary status`.
type PrimaryStatusCmd struct{}

// Help is the long help.
func (c *PrimaryStatusCmd) Help() string {
	return "Liveness (alive, quiet, silent) is this machine's view: how long ago it last saw a\n" +
		"writer's entries arrive or its presence file change, under the channel's policy,\n" +
		"measured on the boot clock (a wall-clock step or a reboot restarts it)."
}

// Run implements the command.
func (c *PrimaryStatusCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	return printPrimary(g, ch.PrimaryStatus(v).WithSync(synchealth.Probe(context.Background(), ch.Root)))
}

// PrimaryStandbyCmd is `ferry primary standby`.
type PrimaryStandbyCmd struct {
	keyFlag
}

// Run implements the command.
func (c *PrimaryStandbyCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	p, err := s.PrimaryStandby(c.Key)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(p)
	}
	g.printf("✔ %s is on standby (holder: %s)\n", s.Name, primaryHolderText(p))
	return nil
}

// PrimaryTakeCmd is `ferry primary take` (alias takeover).
type PrimaryTakeCmd struct {
	keyFlag
}

// Help is the long help.
func (c *PrimaryTakeCmd) Help() string {
	return "Allowed when nobody holds the role, when it was released, or when this machine has\n" +
		"not seen the holder write for the policy's silent period (30 min by default),\n" +
		"measured on the boot clock: a wall-clock step or a reboot restarts it.\n" +
		"Needs level orchestrator."
}

// Run implements the command.
func (c *PrimaryTakeCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	p, err := s.PrimaryTake(c.Key)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(p)
	}
	g.printf("✔ %s holds the primary role since %s", p.Holder, p.Since)
	if p.Previous != "" && p.Previous != p.Holder {
		g.printf(" (previous holder: %s)", p.Previous)
	}
	g.printf("\n")
	return nil
}

// PrimaryReleaseCmd is `ferry primary release`.
type PrimaryReleaseCmd struct {
	keyFlag
}

// Run implements the command.
func (c *PrimaryReleaseCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	p, err := s.PrimaryRelease(c.Key)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(p)
	}
	g.printf("✔ %s released the primary role\n", s.Name)
	return nil
}

// PrimaryBriefCmd is `ferry primary brief --objective … --constraint …`.
type PrimaryBriefCmd struct {
	Objective  string   `help:"What the team works towards now: one line." required:"" placeholder:"LINE"`
	Constraint []string `help:"A constraint, one line (repeat, at most 5)." sep:"none" placeholder:"LINE"`
	keyFlag
}

// Run implements the command.
func (c *PrimaryBriefCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	p, err := s.PrimaryBrief(c.Objective, c.Constraint, c.Key)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(p)
	}
	g.printf("✔ brief recorded by %s: %s\n", s.Name, p.Brief.Objective)
	return nil
}

func primaryHolderText(p *fsbus.PrimaryStatus) string {
	if p.Holder == "" {
		return "none"
	}
	return p.Holder + ", " + p.Liveness
}

// printPrimary prints the primary role: JSON, or one fact a line.
func printPrimary(g *Globals, p *fsbus.PrimaryStatus) error {
	if g.JSON {
		return g.printJSON(p)
	}
	switch p.State {
	case fold.PrimaryHeld:
		g.printf("primary   %s (%s, heard from %s ago) since %s\n", p.Holder, p.Liveness, fsbus.Span(p.AgeS), p.Since)
	case fold.PrimaryReleased:
		g.printf("primary   none (released by %s)\n", p.Previous)
	default:
		g.printf("primary   none\n")
	}
	if b := p.Brief; b != nil {
		g.printf("objective %s", b.Objective)
		if b.By != p.Holder {
			g.printf(" (from %s)", b.By)
		}
		g.printf("\n")
		for _, c := range b.Constraints {
			g.printf("  - %s\n", c)
		}
	}
	for _, s := range p.Standbys {
		g.printf("standby   %s (%s, heard from %s ago)\n", s.Name, s.Liveness, fsbus.Span(s.AgeS))
	}
	rule := p.Rule
	if strings.Contains(rule, "may take") {
		rule += " (`ferry primary take`)" // the rule itself names no command: MCP agents read it too
	}
	g.printf("rule      %s\n", rule)
	if p.Sync != nil {
		g.printf("sync      %s: %s\n", p.Sync.Delivery, p.Sync.Note)
	}
	for _, ct := range p.Contests {
		g.printf("contested %s by %s won over", ct.Winner.Type, ct.Winner.By)
		for _, l := range ct.Losers {
			g.printf(" %s by %s", l.Type, l.By)
		}
		g.printf(" (superseded)\n")
	}
	if p.Pending > 0 {
		g.printf("pending   %d entries wait for the entry they build on (pending sync)\n", p.Pending)
	}
	return nil
}
