package main

import "github.com/ferryhq/ferry/fsbus"

// GrantCmd is `ferry grant NAME --level L` and `ferry grant revoke NAME`.
type GrantCmd struct {
	Set    GrantSetCmd    `cmd:"" default:"withargs" help:"Seat an agent at a level (also: ferry grant NAME)."`
	Revoke GrantRevokeCmd `cmd:"" help:"Revoke an agent's grant: its later entries count for nothing."`
}

// GrantSetCmd seats an agent.
type GrantSetCmd struct {
	Name  string   `arg:"" help:"Agent to seat."`
	Level string   `help:"worker, member or orchestrator." enum:"worker,member,orchestrator" default:"member"`
	Scope []string `help:"Scopes (e.g. order labels the agent may claim)."`
	Key   string   `help:"Seat this public key instead of the one the agent announced."`
}

// Help is the long help.
func (c *GrantSetCmd) Help() string {
	return "Writes a master-signed grant.set binding the agent's announced key to a level.\n" +
		"Runs on the machine that holds the master key. Idempotent."
}

// ownerAction marks grant.set the owner's (docs/format.md §13, the master row).
func (c *GrantSetCmd) ownerAction(*Globals) string { return "seat agents (grant.set)" }

// Run implements the command.
func (c *GrantSetCmd) Run(g *Globals) error {
	s, err := g.Master()
	if err != nil {
		return err
	}
	a, err := s.Grant(fsbus.GrantOptions{Agent: c.Name, Level: c.Level, Scopes: c.Scope, Key: c.Key})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(a)
	}
	g.printf("✔ %s seated at level %s\n", a.Name, a.Level)
	return nil
}

// GrantRevokeCmd revokes an agent.
type GrantRevokeCmd struct {
	Name string `arg:"" help:"Agent to revoke."`
}

// ownerAction marks grant.revoke the owner's (docs/format.md §13, the master row).
func (c *GrantRevokeCmd) ownerAction(*Globals) string { return "revoke grants (grant.revoke)" }

// Run implements the command.
func (c *GrantRevokeCmd) Run(g *Globals) error {
	s, err := g.Master()
	if err != nil {
		return err
	}
	a, err := s.Revoke(c.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(a)
	}
	g.printf("✔ %s revoked\n", a.Name)
	return nil
}
