package main

import "strings"

// CatchupCmd is `ferry catchup [--since CURSOR]`.
type CatchupCmd struct {
	Since string `help:"Cursor from an earlier catchup: list only what changed since." placeholder:"CURSOR"`
}

// Help is the long help.
func (c *CatchupCmd) Help() string {
	return "A bounded digest, never history: the primary and its brief, the newest decisions,\n" +
		"open orders, your own, reviews you may give, your asks, messages waiting on you,\n" +
		"contests you are part of. Pass the printed cursor as --since next time."
}

// Run implements the command.
func (c *CatchupCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	v, err := s.Load()
	if err != nil {
		return err
	}
	d := s.Catchup(v, s.Name, c.Since)
	if g.JSON {
		return g.printJSON(d)
	}
	g.printf("%s (%s)", d.Agent, d.Level)
	if d.Since {
		g.printf(", changes since your cursor")
	}
	g.printf("\n")
	if d.Seat != "" {
		g.printf("seat      %s\n", d.Seat)
	}
	switch {
	case d.Compacted:
		g.printf("(cursor %s is from before the owner's checkpoint of epoch %d: showing the full digest)\n", shown(c.Since), d.Epoch)
	case c.Since != "" && !d.Since:
		g.printf("(cursor %s is not from this machine's log: showing the full digest)\n", shown(c.Since))
	}
	p := d.Primary
	switch p.State {
	case "held":
		g.printf("primary   %s (%s) — %s\n", p.Holder, p.Liveness, p.Rule)
	default:
		g.printf("primary   %s — %s\n", p.State, p.Rule)
	}
	if d.Brief != nil {
		g.printf("brief     %s (by %s)\n", d.Brief.Objective, d.Brief.By)
		for _, line := range d.Brief.Constraints {
			g.printf("          - %s\n", line)
		}
	}
	for _, dec := range d.Decisions {
		g.printf("decided   %s (%s)\n", dec.Line, dec.By)
	}
	section := func(name string, n int) { g.printf("%s (%d)\n", name, n) }
	section("mine", len(d.Mine))
	for _, r := range d.Mine {
		g.printf("  %s %-17s %s\n", r.ID, r.State, r.Title)
	}
	section("open", len(d.Open))
	for _, r := range d.Open {
		g.printf("  %s %-17s %s\n", r.ID, r.State, r.Title)
	}
	section("reviews", len(d.Reviews))
	for _, r := range d.Reviews {
		g.printf("  %s submitted by %s: %s\n", r.ID, orDash(r.Holder), r.Title)
	}
	if len(d.Asks) > 0 {
		section("asks", len(d.Asks))
		for _, a := range d.Asks {
			g.printf("  %s %-9s %s", a.ID, a.State, a.Title)
			if a.Note != "" {
				g.printf(" — %s", a.Note)
			}
			g.printf("\n")
		}
	}
	g.printf("messages  %d waiting", d.Messages.Waiting)
	if d.Messages.Waiting > 0 {
		g.printf(" (ferry talk read --as %s)", d.Agent)
	}
	g.printf("\n")
	for _, m := range d.Messages.Oldest {
		g.printf("  %s from %s: %s\n", m.ID, m.From, strings.ReplaceAll(m.Preview, "\n", " "))
	}
	for _, ct := range d.Contested {
		g.printf("contested %s: %s won; lost: %s", ct.Ref, ct.Winner, strings.Join(ct.Lost, ", "))
		if ct.Checkpoint > 0 {
			g.printf(" (final at the owner's checkpoint of epoch %d)", ct.Checkpoint)
		}
		g.printf("\n")
	}
	if d.Truncated {
		g.printf("(truncated: `ferry order list`, `ferry decision list` and `ferry ask status` show everything)\n")
	}
	g.printf("next: ferry catchup --as %s --since %s\n", d.Agent, d.Next)
	return nil
}
