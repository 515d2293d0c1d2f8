package main

import (
	"context"
	"errors"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/doctor"
	"github.com/ferryhq/ferry/internal/errs"
)

// DoctorCmd is `ferry doctor`: what a synced folder did to the channel, and the fix for
// each finding (docs/sync.md "`ferry doctor`", ADR 0004).
type DoctorCmd struct{}

// Help is the long help.
func (c *DoctorCmd) Help() string {
	return "Checks a git rebase or merge stopped in the repository holding the channel, torn\n" +
		"tails, forks, conflict copies of segments (found by content) and whether they are\n" +
		"merged, records this machine read that are in no file any more, bad signatures and\n" +
		"unknown keys, object files no entry names, copied by a sync tool or not (fully)\n" +
		"arrived, writers' clocks running ahead, Syncthing's delivery and folder settings\n" +
		"(asked on loopback, 5 s at most), a .stignore Syncthing does not read (the channel a\n" +
		"subfolder of its Syncthing folder), contested things and conflict copies of memory\n" +
		"notes. Each finding comes with a one-line fix. Nothing is changed.\n" +
		"A channel.toml edited by hand (its signature fails) is named with the keys that\n" +
		"changed since this machine last verified it, and the rest is checked with the\n" +
		"master key pinned here; with no pin, nothing can be verified.\n" +
		"Exits non-zero (category invalid) when there are errors; warnings and info do not."
}

// Run implements the command.
func (c *DoctorCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if errors.Is(err, fsbus.ErrConfigUnverified) {
		// channel.toml was edited: check the rest with the pinned master key, and
		// name what changed (docs/format.md §8).
		ch, err = g.openWith(fsbus.OpenUnverified)
	}
	if err != nil {
		return err
	}
	ch.Thorough = true // every object and segment byte read again, not the fold checkpoint (ADR 0011)
	var v *fsbus.View
	if ch.Damage == nil || ch.Damage.Pin != "" {
		if v, err = ch.Load(); err != nil {
			return err
		}
	}
	r, err := doctor.Examine(context.Background(), ch, v)
	if err != nil {
		return err
	}
	if g.JSON {
		if err := g.printJSON(r); err != nil {
			return err
		}
	} else {
		for _, f := range r.Findings {
			where := ""
			if f.Path != "" {
				where = " " + f.Path + ":"
			}
			g.printf("%-7s %s%s %s\n", f.Level, f.Check, where, f.Detail)
			for _, l := range f.Lines {
				g.printf("          %s\n", l)
			}
			g.printf("          fix: %s\n", f.Fix)
		}
		if v != nil { // else nothing could be verified: no ledger was read
			g.printf("pending sync: %s waiting for their object, %s for their entry, %s for their basis\n",
				plural(r.Pending.Events, "entry", "entries"), plural(r.Pending.Objects, "object", "objects"), plural(r.Pending.Basis, "entry", "entries"))
		}
	}
	if !r.OK() {
		return errs.Errorf(errs.Invalid, "each finding above names its fix; nothing was changed",
			"doctor found %s and %s", plural(r.Errors, "error", "errors"), plural(r.Warnings, "warning", "warnings"))
	}
	if !g.JSON {
		g.printf("✔ no errors (%s, %s)\n", plural(r.Warnings, "warning", "warnings"), plural(len(r.Copies), "conflict copy", "conflict copies"))
	}
	return nil
}
