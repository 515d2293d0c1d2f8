package main

import (
	"fmt"
	"text/tabwriter"
)

// DecisionCmd groups the decision verbs (docs/design.md §3).
type DecisionCmd struct {
	Record DecisionRecordCmd `cmd:"" help:"Record a decision: one line of at most 200 characters."`
	List   DecisionListCmd   `cmd:"" aliases:"ls" help:"List decisions, newest first."`
}

// DecisionRecordCmd is `ferry decision record LINE`.
type DecisionRecordCmd struct {
	Line string `arg:"" help:"The decision, one line."`
	keyFlag
}

// Help is the long help.
func (c *DecisionRecordCmd) Help() string {
	return "Needs level orchestrator. The line is held in the signed decision.record entry."
}

// Run implements the command.
func (c *DecisionRecordCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	d, err := s.DecisionRecord(c.Line, c.Key)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(d)
	}
	g.printf("✔ decision %s recorded: %s\n", d.ID, d.Line)
	return nil
}

// DecisionListCmd is `ferry decision list`.
type DecisionListCmd struct {
	Limit int `help:"At most this many (0: all)." default:"0"`
}

// Run implements the command.
func (c *DecisionListCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	ds := v.State.ListDecisions(c.Limit)
	if g.JSON {
		return g.printJSON(ds)
	}
	if len(ds) == 0 {
		g.printf("no decisions\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWHEN\tBY\tDECISION")
	for _, d := range ds {
		fprintf(tw, "%s\t%s\t%s\t%s\n", d.ID, d.HLC, d.By, d.Line)
	}
	return tw.Flush()
}
