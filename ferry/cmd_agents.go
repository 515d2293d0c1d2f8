package main

import (
	"fmt"
	"text/tabwriter"
)

// AgentsCmd is `ferry agents`.
type AgentsCmd struct{}

// Run implements the command.
func (c *AgentsCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	rows := ch.Agents(v)
	if g.JSON {
		if rows == nil {
			return g.printJSON([]any{})
		}
		return g.printJSON(rows)
	}
	if len(rows) == 0 {
		g.printf("no agents yet; an agent runs `ferry join --as NAME`\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLEVEL\tSEATED\tLIVENESS\tAPP\tMACHINE")
	for _, r := range rows {
		if r.Retired {
			r.Liveness = "retired"
		}
		fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", r.Name, r.Level, r.Seated, r.Liveness, r.App, r.Machine)
	}
	return tw.Flush()
}
