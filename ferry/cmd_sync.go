package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SyncCmd is `ferry sync --git`.
type SyncCmd struct {
	Git bool `help:"Carry the channel with git: commit this machine's files, pull with rebase, push." required:""`
}

// Help is the long help.
func (c *SyncCmd) Help() string {
	return `For a channel kept in a git repository (a branch with an upstream). Commits only the
files this machine wrote — its own ledger segments, the objects and presence files of
its writers, memory notes edited here — then fetches, rebases onto the upstream and
pushes; a push rejected because another machine pushed first is retried once. Each
file has one writer, so nothing ferry writes can conflict; a conflict in memory/ notes
edited on two machines is reported with the files to merge, and the rebase aborted —
nothing is lost. Run it whenever you want to exchange (a cron job, a git hook). Sync
tools (Syncthing, Dropbox, OneDrive) need no command.`
}

// Run implements the command.
func (c *SyncCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	res, err := ch.SyncGit(ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	switch n := len(res.Committed); n {
	case 0:
		g.printf("nothing to commit from this machine\n")
	default:
		g.printf("✔ committed %d file(s) as %.12s on %s\n", n, res.Commit, res.Branch)
	}
	if res.Pulled > 0 {
		g.printf("✔ pulled %d commit(s) from %s (%d file(s)), rebased\n", res.Pulled, res.Remote, res.PulledFiles)
	} else {
		g.printf("up to date with %s/%s\n", res.Remote, res.Branch)
	}
	if res.Pushed > 0 {
		g.printf("✔ pushed %d commit(s) to %s", res.Pushed, res.Remote)
		if res.Retried {
			g.printf(" (after another machine's push: pulled again)")
		}
		g.printf("\n")
	}
	if n := len(res.LeftAlone); n > 0 {
		g.printf("left alone: %d changed file(s) that are not this machine's to commit:", n)
		for i, p := range res.LeftAlone {
			if i == 5 {
				g.printf(" …")
				break
			}
			g.printf(" %s", p)
		}
		g.printf("\n")
	}
	return nil
}
