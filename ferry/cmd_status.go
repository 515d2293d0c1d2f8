package main

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
	g.printf("project %s · %d entries · orders", s.Project, s.Entries)
	for _, st := range []string{"open", "offered", "claimed", "submitted", "changes_requested", "accepted", "cancelled", "failed", "timed_out"} {
		if n := s.Counts[st]; n > 0 {
			g.printf(" %s=%d", st, n)
		}
	}
	g.printf("\n")
	for _, a := range s.ToSeat {
		g.printf("to seat    %s (%s on %s): ferry grant %s --level member\n", a.Name, orDash(a.App), orDash(a.Machine), a.Name)
	}
	for _, r := range s.Reviews {
		g.printf("review due %s %q submitted by %s\n", r.ID, r.Title, orDash(r.Holder))
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
	for _, q := range s.Quiet {
		g.printf("not seen   %s holds %s, %s for %ds\n", q.Holder, q.Order, q.Liveness, q.AgeS)
	}
	for _, w := range s.Ahead {
		g.printf("clock      %s writes HLCs more than max_skew ahead of this machine's clock; not absorbed\n", w)
	}
	if s.Ignored+s.Problems > 0 {
		g.printf("attention  %d ignored entries, %d ledger problems: run `ferry ledger verify`\n", s.Ignored, s.Problems)
	}
	if len(s.ToSeat)+len(s.Reviews)+len(s.Contests)+len(s.Quiet) == 0 {
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
