package main

import "fmt"

// CatchupCmd is `ferry catchup [--since CURSOR]`.
type CatchupCmd struct {
	Since string `help:"Cursor from an earlier catchup: list only what changed since." placeholder:"CURSOR"`
}

// Help is the long help.
func (c *CatchupCmd) Help() string {
	return "A bounded digest, never history: open orders you may claim, your own, reviews you may\n" +
		"give, contests you are involved in. Pass the printed cursor as --since next time."
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
	for _, ct := range d.Contested {
		lost := ""
		for _, l := range ct.Losers {
			lost += fmt.Sprintf(" %s by %s", l.Type, l.By)
		}
		g.printf("contested %s: %s by %s won;%s superseded\n", ct.Ref, ct.Winner.Type, ct.Winner.By, lost)
	}
	if d.Truncated {
		g.printf("(truncated: `ferry order list` shows everything)\n")
	}
	g.printf("next: ferry catchup --as %s --since %s\n", d.Agent, d.Next)
	return nil
}
