package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/runner"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/textsafe"
)

// InspectCmd is `ferry inspect [--as NAME]` (docs/runs.md "`ferry inspect`").
type InspectCmd struct {
	All bool `help:"Include accepted and cancelled orders."`
}

// Help explains the columns.
func (c *InspectCmd) Help() string {
	return `One row per order: state, holder (with the run and pid when an unattended run on
this machine holds it), age (since this machine first saw the order), idle time
(since its last entry arrived), retries (releases, fails and expiries) and the
last error (the note of the newest of those). With --as, only the orders that
agent wrote or holds. Times are this machine's own clock.`
}

// Run implements the command.
func (c *InspectCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	if g.As != "" && v.State.Agents[g.As] == nil && g.As != fold.MasterWriter {
		return errs.Errorf(errs.NotFound, "list agents with `ferry agents`", "no agent %q in this channel", g.As)
	}
	rows := runner.Inspect(ch, v, g.As, c.All)
	if g.JSON {
		if rows == nil {
			rows = []runner.InspectRow{}
		}
		return g.printJSON(rows)
	}
	if len(rows) == 0 {
		g.printf("no orders\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tHOLDER\tAGE\tIDLE\tRETRIES\tLAST ERROR\tTITLE")
	for _, r := range rows {
		holder := orDash(r.Holder)
		if r.Run != nil {
			holder += fmt.Sprintf(" (%s pid %d)", r.Run.Run, r.Run.PID)
		}
		fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.State, holder, ageText(r.AgeS), ageText(r.IdleS), r.Retries,
			orDash(oneLine(r.LastError, 60)), oneLine(r.Title, 50))
	}
	return tw.Flush()
}

// ageText is a duration in seconds as "45s", "12m", "3h", "2d" ("?" when unknown).
func ageText(s int64) string {
	if s < 0 {
		return "?"
	}
	d := time.Duration(s) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", s)
	case d < time.Hour:
		return fmt.Sprintf("%dm", s/60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", s/3600)
	}
	return fmt.Sprintf("%dd", s/86400)
}

// oneLine is s on one line (newlines and tabs as spaces), cut to n runes with "…".
func oneLine(s string, n int) string {
	s, _ = textsafe.Cut(strings.Join(strings.Fields(s), " "), n)
	return s
}
