package main

import (
	"path/filepath"

	"github.com/ferryhq/ferry/fsbus"
)

// InitCmd is `ferry init DIR --project ID`.
type InitCmd struct {
	Dir   string `arg:"" help:"Folder for the channel, usually inside a synced folder." type:"path"`
	Title string `help:"Human title of the channel (default: the project id)."`
	Force bool   `help:"Map the project to DIR even when this machine maps it to another folder."`
}

// Help is the long help.
func (c *InitCmd) Help() string {
	return "Creates the layout, channel.toml signed by a new master key (kept on this machine),\n" +
		"PROTOCOL.md, .gitattributes and .stignore, and maps the project to the folder.\n" +
		"A project this machine maps to another folder is refused unless --force."
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
	old, err := h.MappedDir(g.Project)
	if err != nil {
		return err
	}
	ch, err := fsbus.Init(h, fsbus.InitOptions{Dir: c.Dir, Project: g.Project, Title: c.Title, Force: c.Force})
	if err != nil {
		return err
	}
	if old == ch.Root {
		old = ""
	}
	if g.JSON {
		out := map[string]any{"project": ch.Project(), "channel": ch.Root, "master": ch.Config.Master, "format": ch.Config.Format}
		if old != "" {
			out["remapped_from"] = old
		}
		return g.printJSON(out)
	}
	g.printf("✔ channel %s created in %s\n", ch.Project(), ch.Root)
	if old != "" {
		g.printf("  %s was mapped to %s on this machine; it is mapped to %s now\n", ch.Project(), old, ch.Root)
	}
	g.printf("  master key %s (kept on this machine)\n", ch.Config.Master)
	g.printf("next: ferry join --as NAME --channel <this folder, as synced there>   (on each agent's machine)\n")
	return nil
}
