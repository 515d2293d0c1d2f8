package main

import (
	"fmt"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
)

// StatusCmd is `ferry status`, the owner's view.
type StatusCmd struct{}

// Run implements the command.
func (c *StatusCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	s := ch.Status(v)
	if g.JSON {
		return g.printJSON(s)
	}
	g.printf("project %s · %s", s.Project, plural(s.Entries, "entry", "entries"))
	sep := " · orders"
	// Every state the json counts, pointer_stale and validation_failed included, in
	// stage-rank order.
	for _, st := range fold.OrderStates() {
		if n := s.Counts[st]; n > 0 {
			g.printf("%s %s=%d", sep, st, n)
			sep = ""
		}
	}
	g.printf("\n")
	if s.Primary.State == "held" {
		g.printf("primary    %s (%s)\n", s.Primary.Holder, s.Primary.Liveness)
	}
	if p := ch.Home.Paused(ch.Project()); p != nil { // cmd_pause.go
		g.printf("paused     %s: ferry resume lifts it\n", strings.TrimPrefix(pauseLine(p), "paused: "))
	}
	for _, a := range s.Asks {
		g.printf("ask        %s %s: ferry ask approve|reject|send-back %s\n", a.ID, a.Title, a.ID)
	}
	if s.Messages.Waiting > 0 {
		g.printf("messages   %d to you unread: ferry talk read --as master\n", s.Messages.Waiting)
		for _, m := range s.Messages.Oldest {
			g.printf("           %s from %s: %s\n", m.ID, m.From, strings.ReplaceAll(m.Preview, "\n", " "))
		}
	}
	for _, a := range s.ToSeat {
		g.printf("to seat    %s (%s on %s): ferry grant %s --level member\n", a.Name, orDash(a.App), orDash(a.Machine), a.Name)
	}
	for _, a := range s.KeyChanges {
		g.printf("key change %s is seated with %s but its newest join announces %s (%s on %s); re-seat only if you replaced it: ferry grant %s --key %s\n",
			a.Name, a.Key, a.JoinKey, orDash(a.App), orDash(a.Machine), a.Name, a.JoinKey)
	}
	for _, r := range s.Reviews {
		g.printf("review due %s \"%s\" submitted by %s\n", r.ID, r.Title, orDash(r.Holder))
	}
	for _, ct := range s.Contests {
		g.printf("contested  %s: %s by %s won over", ct.Ref, ct.Winner.Type, ct.Winner.By)
		for _, l := range ct.Losers {
			g.printf(" %s by %s", l.Type, l.By)
		}
		g.printf(" (superseded)\n")
		if g.As != "" {
			for _, l := range ct.Losers {
				if l.By == g.As {
					g.printf("           you (%s) lost %s to %s\n", g.As, ct.Ref, ct.Winner.By)
				}
			}
		}
	}
	for _, d := range s.Disputes {
		g.printf("disputed   the owner's checkpoint of epoch %d by %s: first difference at %s; nothing is compacted on it (ferry doctor)\n", d.Epoch, d.Writer, d.First)
	}
	for _, q := range s.Quiet {
		g.printf("not seen   %s holds %s, %s for %ds\n", q.Holder, q.Order, q.Liveness, q.AgeS)
	}
	for _, w := range s.Ahead {
		g.printf("clock      %s writes HLCs more than max_skew ahead of this machine's clock; not absorbed\n", w)
	}
	if s.Ignored+s.Problems > 0 {
		g.printf("attention  %s, %s: run `ferry ledger verify`\n", plural(s.Ignored, "ignored entry", "ignored entries"), plural(s.Problems, "ledger problem", "ledger problems"))
	}
	if len(s.ToSeat)+len(s.KeyChanges)+len(s.Reviews)+len(s.Contests)+len(s.Quiet)+len(s.Asks)+s.Messages.Waiting == 0 {
		g.printf("nothing waits on you\n")
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural renders "1 entry" / "3 entries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
