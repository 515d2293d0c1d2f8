package main

import (
	"path/filepath"

	"github.com/ferryhq/ferry/fsbus"
)

// InitCmd is `ferry init DIR --project ID`.
type InitCmd struct {
	Dir   string `arg:"" help:"Folder for the channel, usually inside a synced folder." type:"path"`
	Title string `help:"Human title of the channel (default: the project id)."`
}

// Help is the long help.
func (c *InitCmd) Help() string {
	return "Creates the layout, channel.toml signed by a new master key (kept on this machine),\n" +
		"PROTOCOL.md, .gitattributes and .stignore, and maps the project to the folder."
}

// Run implements the command.
func (c *InitCmd) Run(g *Globals) error {
	if g.Project == "" {
		g.Project = filepath.Base(c.Dir)
	}
	h, err := g.Home()
	if err != nil {
		return err
	}
	ch, err := fsbus.Init(h, fsbus.InitOptions{Dir: c.Dir, Project: g.Project, Title: c.Title})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(map[string]any{"project": ch.Project(), "channel": ch.Root, "master": ch.Config.Master, "format": ch.Config.Format})
	}
	g.printf("✔ channel %s created in %s\n", ch.Project(), ch.Root)
	g.printf("  master key %s (kept on this machine)\n", ch.Config.Master)
	g.printf("next: ferry join --as NAME --project %s   (on each agent's machine)\n", ch.Project())
	return nil
}
