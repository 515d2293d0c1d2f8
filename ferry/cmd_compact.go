package main

import (
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// CompactCmd is `ferry compact`: the owner signs where the past ends (docs/format.md
// §20, ADR 0019).
type CompactCmd struct {
	Settle   string `help:"Cover only entries this machine first saw at least this long ago, such as 90m or 0s (default: policy.settle_s, 24h while the policy sets none, as ferry policy shows)." placeholder:"DURATION"`
	Force    bool   `help:"Compact although seated writers were not seen to advance within the settle time, or (the first compact) a writer's segment holds no agent.support naming format 2."`
	TakeOver bool   `name:"take-over" help:"Write the checkpoint on this device although another is the compactor: for a compactor gone for good. Refused while the compactor's master segment or presence changed within policy.settle_s (or --settle, when longer); the new head names this device."`
}

// Help is the long help.
func (c *CompactCmd) Help() string {
	return "Writes the owner's next checkpoint: the state at a cut covering every entry this\n" +
		"machine first saw at least the settle time ago, signed by the master key. From\n" +
		"then on every machine folds from that state and the entries above the cut:\n" +
		"orders accepted or cancelled and asks answered at the cut are final, and an\n" +
		"entry above the cut on one of them is superseded and reported to those involved.\n" +
		"Only the owner compacts, on the device the last checkpoint names as compactor\n" +
		"(`ferry policy set compactor=DEVICE` hands it over at the next checkpoint;\n" +
		"--take-over moves it here when the compactor is gone for good).\n" +
		"A checkpoint whose head or state has not counted here for the settle time\n" +
		"after its entry arrived (a compactor lost before its files synced) is\n" +
		"replaced by the next one, written here.\n" +
		"It refuses while seated writers were not seen to advance within the settle time\n" +
		"(their entries not yet here would land above the cut), unless --force is given;\n" +
		"revoke a key before compacting, not after. Nothing new settled: nothing written.\n" +
		"The first compact moves the channel to format 2 (channel.toml signed again): it\n" +
		"refuses, naming them, while segments of seated, unretired writers hold no\n" +
		"agent.support naming format 2 (a ferry that reads format 2 writes one with its\n" +
		"first entry), unless --force is given; ferry builds that read format 1 only\n" +
		"then refuse the channel.\n" +
		"Before building it, compact moves to archive/ every chain's frozen files that a\n" +
		"checkpoint this machine saw count policy.archive_grace_s ago covers, and names\n" +
		"the chains with no file of that checkpoint's epoch yet: theirs wait for their\n" +
		"writer to write again, or to be retired."
}

// ownerAction marks compact the owner's (docs/format.md §13, the master row).
func (c *CompactCmd) ownerAction(*Globals) string { return "compact the ledger (checkpoint)" }

// Run implements the command.
func (c *CompactCmd) Run(g *Globals) error {
	opt := fsbus.CompactOptions{Force: c.Force, TakeOver: c.TakeOver}
	if c.Settle != "" {
		d, err := time.ParseDuration(c.Settle)
		if err == nil && d < 0 {
			return errs.Errorf(errs.Invalid, "give a duration that is not negative, such as 24h, 90m or 0s", "--settle %s: a negative duration is refused", c.Settle)
		}
		if err != nil {
			return errs.Errorf(errs.Invalid, "give a duration such as 24h, 90m or 0s", "--settle %q is not a duration", c.Settle)
		}
		opt.Settle, opt.SettleSet = d, true
	}
	s, err := g.Master()
	if err != nil {
		return err
	}
	r, err := s.Compact(opt)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(r)
	}
	if r.Entry == "" {
		g.printf("✔ nothing new has settled (settle %s): nothing written\n", fold.ShortDuration(r.Settle))
		printArchived(g, r)
		return nil
	}
	g.printf("✔ checkpoint epoch %d: %d entries covered in %d segments; the state keeps %d lines and %d final things in %d chunks (%d new)\n",
		r.Epoch, r.Covered, r.Segments, r.Lines, r.Terminal, r.Chunks, r.Written)
	g.printf("  head %s, entry %s\n", r.Head, r.Entry)
	if c.TakeOver {
		g.printf("  compactor: this device now (its head names it; a policy.set compactor=<this device> was written)\n")
	}
	if r.Replaces != "" {
		g.printf("  replaces checkpoint %s, which had not counted here for the settle time\n", r.Replaces)
	}
	for _, w := range r.Unsettled {
		g.printf("  compacted past %s, not seen to advance %s (--force)\n", w, fold.SettleWindow(r.Settle))
	}
	for _, seg := range r.Unsupported {
		g.printf("  compacted past segment %s, which holds no agent.support naming format 2 (--force)\n", seg)
	}
	g.printf("  channel format %d\n", r.Format)
	printArchived(g, r)
	return nil
}

// printArchived prints the frozen files compact moved to archive/ and the chains whose
// files wait for their writer (docs/format.md §21 "Moving frozen files").
func printArchived(g *Globals, r *fold.CompactResult) {
	for _, f := range r.Archived {
		g.printf("  moved %s to archive/\n", strings.TrimPrefix(f, "archive/"))
	}
	for _, c := range r.Waiting {
		g.printf("  %s: its frozen files stay until it writes again (or is retired): no file of the checkpoint past its archive grace yet\n", c)
	}
}
