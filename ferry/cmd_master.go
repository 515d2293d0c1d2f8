package main

import (
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// MasterCmd groups the owner's trust-root commands (ADR 0008).
type MasterCmd struct {
	Rotate MasterRotateCmd `cmd:"" help:"Move trust to a new master key, signed by the current one (owner only)."`
	Repin  MasterRepinCmd  `cmd:"" help:"Deliberately pin the master key a channel.toml names on this machine."`
}

// MasterRotateCmd is `ferry master rotate`.
type MasterRotateCmd struct{}

// Help is the long help.
func (c *MasterRotateCmd) Help() string {
	return "Makes a new master key on this machine and writes a master.rotate entry signed by the\n" +
		"current one. For every master segment it has seen it names the last seq the old key\n" +
		"covers; later master entries count only under the new key (docs/adr/0008). The old\n" +
		"key file is kept beside the new one as master.key.old-N. Other machines that pinned\n" +
		"the old key follow the rotation; a second machine holding the old master key needs\n" +
		"the new one: `ferry key export` here, `ferry key import` there."
}

// ownerAction marks master.rotate the owner's (docs/format.md §13, the master row).
func (c *MasterRotateCmd) ownerAction(*Globals) string {
	return "rotate the master key (master.rotate)"
}

// Run implements the command.
func (c *MasterRotateCmd) Run(g *Globals) error {
	s, err := g.Master()
	if err != nil {
		return err
	}
	was, _ := s.Home.KeyStatus(s.Project(), fold.MasterWriter)
	res, err := s.RotateMaster()
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	g.printf("✔ master key rotated\n  old: %s\n  new: %s\n  the old private key is kept in %s\n", res.Old, res.New, res.Backup)
	if was == fsbus.KeyLocked || was == fsbus.KeyUnlocked {
		g.printf("  the new key is not locked yet: run `ferry key lock`\n")
	}
	return nil
}

// MasterRepinCmd is `ferry master repin --key KEY`.
type MasterRepinCmd struct {
	Key string `required:"" help:"The master key channel.toml names, typed as the refusal showed it." placeholder:"KEY"`
}

// Help is the long help.
func (c *MasterRepinCmd) Help() string {
	return "Replaces the master key this machine pinned for the channel's project with the key\n" +
		"its channel.toml names. Only after checking with the owner, out of band, that they\n" +
		"really made a new master key: a channel.toml naming another key is otherwise what a\n" +
		"forged channel looks like. --key must be that key, so it never happens by accident.\n" +
		"Prints the old and the new pin. Needs --channel DIR, or --project ID mapped here."
}

// ownerAction marks re-pinning the owner's: the pin is this machine's trust in the master
// key (docs/format.md §13 "The pin"), and only the owner can confirm, out of band, that
// they made a new one.
func (c *MasterRepinCmd) ownerAction(*Globals) string { return "re-pin the master key" }

// Run implements the command.
func (c *MasterRepinCmd) Run(g *Globals) error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	dir := g.Channel
	if dir == "" {
		m, err := h.Projects()
		if err != nil {
			return err
		}
		switch {
		case g.Project != "" && m[g.Project] != "":
			dir = m[g.Project]
		case g.Project == "" && len(m) == 1:
			for _, d := range m {
				dir = d
			}
		default:
			return errs.Errorf(errs.Invalid, "pass --channel DIR", "no channel given to repin")
		}
	}
	old, pinned, err := fsbus.Repin(h, dir, c.Key)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(map[string]string{"old": old, "new": pinned})
	}
	if old == pinned {
		g.printf("✔ %s was already pinned; nothing changed\n", pinned)
		return nil
	}
	if old == "" {
		old = "(none)"
	}
	g.printf("✔ master key re-pinned\n  old: %s\n  new: %s\n", old, pinned)
	return nil
}
