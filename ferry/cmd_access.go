package main

import (
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
)

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
		return errs.Errorf(errs.Invalid, "pass --as NAME", "no agent name given")
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	res := ch.Access(v, g.As)
	if g.JSON {
		return g.printJSON(res)
	}
	g.printf("%s: level %s, seated %v, joined %v, key on this machine %v (seated key here: %v)\n",
		res.Agent, res.Level, res.Seated, res.Joined, res.KeyHere, res.SeatedKeyHere)
	if len(res.Scopes) > 0 {
		// Scoped grant (issue 8): only orders carrying one of these labels.
		g.printf("  scopes: %s (claims and offers only of orders carrying one of these labels)\n", strings.Join(res.Scopes, ", "))
	}
	if res.Next != "" {
		g.printf("  next: %s\n", res.Next)
	}
	return nil
}
