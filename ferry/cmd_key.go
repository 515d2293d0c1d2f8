package main

import (
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/ledger"
)

// KeyCmd groups key commands.
type KeyCmd struct {
	New  KeyNewCmd  `cmd:"" help:"Make a key for an agent on this machine without announcing it."`
	Show KeyShowCmd `cmd:"" help:"Print the public key of an agent (or of the master)."`
}

// KeyNewCmd is `ferry key new --as NAME`.
type KeyNewCmd struct{}

// Run implements the command.
func (c *KeyNewCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	if g.As == "" {
		return fsbus.Errorf(fsbus.CatInvalid, "pass --as NAME", "no agent name given")
	}
	if !fsbus.ValidName(g.As) {
		return fsbus.Errorf(fsbus.CatInvalid, "use a-z, 0-9 and '-'", "%q is not a portable name", g.As)
	}
	k, err := ch.Home.NewKey(ch.Project(), g.As)
	if err != nil {
		return err
	}
	return printKey(g, g.As, ledger.FormatKey(k.Public()))
}

// KeyShowCmd is `ferry key show [--as NAME]`.
type KeyShowCmd struct{}

// Run implements the command.
func (c *KeyShowCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	name := g.As
	if name == "" {
		name = fsbus.MasterWriter
	}
	k, err := ch.Home.LoadKey(ch.Project(), name)
	if err != nil {
		return err
	}
	return printKey(g, name, ledger.FormatKey(k.Public()))
}

func printKey(g *Globals, name, key string) error {
	if g.JSON {
		return g.printJSON(map[string]string{"name": name, "key": key})
	}
	g.printf("%s %s\n", name, key)
	return nil
}
