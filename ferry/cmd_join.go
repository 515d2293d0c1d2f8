package main

import (
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
)

// JoinCmd is `ferry join --as NAME [--project ID]`.
type JoinCmd struct {
	App   string `help:"The AI app the agent runs in (claude-code, codex, cursor, …)."`
	Force bool   `help:"Map the project to this channel even when this machine maps it to another folder."`
}

// Help is the long help.
func (c *JoinCmd) Help() string {
	return "Makes the agent's key on this machine (0600) if missing and announces it with a\n" +
		"signed agent.join. Idempotent. The agent counts once the owner seats it with `ferry grant`.\n" +
		"It maps the project to the channel on this machine; a project mapped to another folder\n" +
		"is refused unless --force."
}

// Run implements the command.
func (c *JoinCmd) Run(g *Globals) error {
	if g.As == "" {
		return errs.Errorf(errs.Invalid, "pass --as NAME (default names: <app>-<machine>)", "no agent name given")
	}
	ch, err := g.Open()
	if err != nil {
		return err
	}
	// A folder mapped elsewhere is not taken over without --force, and a refused join
	// leaves the map as it was.
	undo, err := ch.Home.MapForJoin(ch.Project(), ch.Root, c.Force, "")
	if err != nil {
		return err
	}
	res, err := fsbus.Join(ch, g.As, c.App)
	if err != nil {
		undo()
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	verb := "joined"
	if !res.Wrote {
		verb = "already announced"
	}
	g.printf("✔ %s %s in %s (key %s)\n", res.Agent, verb, res.Project, res.Key)
	if res.Seated {
		g.printf("  seated at level %s\n", res.Level)
	} else {
		g.printf("  not seated yet; the owner runs: %s\n", res.Next)
	}
	return nil
}
