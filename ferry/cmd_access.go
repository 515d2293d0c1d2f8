package main

import "github.com/ferryhq/ferry/fsbus"

// AccessCmd is `ferry access show`.
type AccessCmd struct {
	Show AccessShowCmd `cmd:"" default:"1" help:"Show an agent's level, scopes and seat."`
}

// AccessShowCmd shows what --as may do.
type AccessShowCmd struct{}

// Run implements the command.
func (c *AccessShowCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	if g.As == "" {
		return fsbus.Errorf(fsbus.CatInvalid, "pass --as NAME", "no agent name given")
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	out := map[string]any{"agent": g.As, "level": "none", "seated": false, "key_here": ch.Home.HasKey(ch.Project(), g.As)}
	if a := v.State.Agents[g.As]; a != nil {
		out["level"], out["seated"], out["scopes"], out["retired"] = a.Level, a.Seated, a.Scopes, a.Retired
	}
	if g.JSON {
		return g.printJSON(out)
	}
	g.printf("%s: level %v, seated %v, key on this machine %v\n", g.As, out["level"], out["seated"], out["key_here"])
	if out["seated"] == false {
		g.printf("  the owner seats it with: ferry grant %s --level member --project %s\n", g.As, ch.Project())
	}
	return nil
}
