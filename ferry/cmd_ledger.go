package main

import (
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
)

// LedgerCmd groups ledger commands.
type LedgerCmd struct {
	Tail   LedgerTailCmd   `cmd:"" help:"Print the newest entries in merged order."`
	Verify LedgerVerifyCmd `cmd:"" help:"Check chains, signatures, forks, grants and object files."`
}

// LedgerTailCmd is `ferry ledger tail [-n N]`.
type LedgerTailCmd struct {
	N int `short:"n" help:"How many entries (0: all)." default:"20"`
}

// Run implements the command.
func (c *LedgerTailCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	es := v.Tail(c.N)
	if g.JSON {
		out := make([]any, 0, len(es))
		for i := range es {
			out = append(out, &es[i])
		}
		return g.printJSON(out)
	}
	for i := range es {
		e := &es[i]
		mark := " "
		if !v.State.Counts(e.Hash()) {
			mark = "!"
		}
		ref := ""
		if e.Ref != "" { // an entry about no one thing (msg.ack) ends at its type, with no blank
			ref = " " + e.Ref
		}
		g.printf("%s %s %s/%s#%d %s%s\n", mark, e.HLC, e.Writer, e.Device, e.Seq, e.Type, ref)
	}
	return nil
}

// LedgerVerifyCmd is `ferry ledger verify`.
type LedgerVerifyCmd struct {
	Archive []string `help:"Also read the ledger files in DIR (where ferry archive move took them) and check every chain from its first entry. Repeatable." placeholder:"DIR"`
}

// Help is the long help.
func (c *LedgerVerifyCmd) Help() string {
	return "Lists the findings `ferry doctor` starts with, each with a one-line fix: a git\n" +
		"operation stopped over the channel, torn tails, malformed lines, broken chains, forks,\n" +
		"bad signatures, unknown keys, entries the fold ignored, conflict copies of segments\n" +
		"(merged or not), records found only in a copy ferry does not merge (with the name to\n" +
		"rename it to), other writers' lines inside a segment, records lost or vanished, rival\n" +
		"creates, links, key changes, and objects that are wrong, edited or copied. Nothing is\n" +
		"changed. Exits non-zero (category invalid) when a finding is an error; warnings and\n" +
		"info do not. Files moved to archive/ are read too, and every owner's checkpoint\n" +
		"folded again from them; history that left the folder (`ferry archive move DIR`)\n" +
		"is reported as absent, or with --archive DIR read and checked from each chain's\n" +
		"first entry."
}

// Run implements the command. It exits non-zero (category invalid) when a finding is an
// error.
func (c *LedgerVerifyCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	ch.Thorough = true // every object and segment byte read again, not the fold checkpoint (ADR 0011)
	if err := ch.SetArchiveDirs(c.Archive); err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	r, err := ch.Verify(v)
	if err != nil {
		return err
	}
	if g.JSON {
		if err := g.printJSON(r); err != nil {
			return err
		}
	} else {
		// The findings `ferry doctor` starts with (verify.Report.Findings), one line
		// each, "(warning)" or "(info)" after the ones that are no error. Each fix
		// follows the first finding of its check that needs it: a hundred
		// forged lines need one fix, not a hundred.
		fixed := map[string]bool{}
		for _, f := range r.Findings {
			where := ""
			if f.Path != "" {
				where = f.Path + ": "
			}
			mark := ""
			if f.Level != verify.LevelError {
				mark = " (" + f.Level + ")"
			}
			g.printf("%-13s %s%s%s\n", f.Check, where, f.Detail, mark)
			for _, l := range f.Lines {
				g.printf("%-13s   %s\n", "", l)
			}
			if k := f.Check + "\x00" + f.Fix; f.Fix != "" && !fixed[k] {
				fixed[k] = true
				g.printf("%-13s   fix: %s\n", "", f.Fix)
			}
		}
	}
	if !r.OK() {
		return errs.Errorf(errs.Invalid, "each finding above names its fix; nothing was changed",
			"ledger verify found %s", plural(r.Errors, "problem", "problems"))
	}
	if !g.JSON {
		if r.Warnings > 0 {
			g.printf("✔ ledger verified: %d segments, %d entries, no errors (%s)\n", r.Ledger.Segments, r.Ledger.Entries, plural(r.Warnings, "warning", "warnings"))
		} else {
			g.printf("✔ ledger verified: %d segments, %d entries, no problems\n", r.Ledger.Segments, r.Ledger.Entries)
		}
	}
	return nil
}
