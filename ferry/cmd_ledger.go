package main

import (
	"fmt"

	"github.com/ferryhq/ferry/fsbus"
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
type LedgerVerifyCmd struct{}

// Run implements the command. It exits non-zero (category invalid) when anything is wrong.
func (c *LedgerVerifyCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	ch.Thorough = true // every object and segment byte read again, not the fold checkpoint (ADR 0011)
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
		// Each kind's fix follows its first line only (issue 8): a hundred forged
		// lines need one fix, not a hundred.
		fixed := map[string]bool{}
		fix := func(key string) {
			if f := r.Fixes[key]; f != "" && !fixed[key] {
				fixed[key] = true
				g.printf("%-13s   fix: %s\n", "", f)
			}
		}
		for _, p := range r.Ledger.Problems {
			where := p.Path
			if p.Line > 0 {
				where = fmt.Sprintf("%s:%d", p.Path, p.Line)
			}
			g.printf("%-13s %s: %s\n", p.Kind, where, p.Detail)
			fix(p.Kind)
		}
		for _, f := range r.Ledger.Forks {
			g.printf("%-13s %s/%s seq %d: %d losing records (kept %s)\n", "fork", f.Writer, f.Device, f.Seq, len(f.Losers), f.Winner.Hash())
			fix("fork")
		}
		for _, ig := range r.Ignored {
			g.printf("%-13s %s/%s#%d %s: %s\n", "ignored", ig.Writer, ig.Device, ig.Seq, ig.Type, ig.Reason)
			fix("ignored: " + ig.Reason)
		}
		for _, o := range r.Objects {
			g.printf("%-13s %s\n", "object", o)
			fix("object")
		}
		for _, l := range r.Lost {
			g.printf("%-13s %s\n", "lost", l)
			fix("lost")
		}
		for _, l := range r.Vanished {
			g.printf("%-13s %s\n", fsbus.KindVanished, l)
			fix(fsbus.KindVanished)
		}
		for _, e := range r.Edited {
			g.printf("%-13s %s\n", fsbus.KindEdited, e)
			fix(fsbus.KindEdited)
		}
		for _, l := range r.Links {
			g.printf("%-13s %s\n", fsbus.KindLink, l)
			fix(fsbus.KindLink)
		}
		for _, c := range r.Rivals {
			g.printf("%-13s %s\n", fsbus.KindRival, fsbus.RivalDetail(c))
			fix(fsbus.KindRival)
		}
		for _, k := range r.KeyChanges {
			g.printf("%-13s %s is seated with %s; its newest join announces %s (%s on %s)\n", fsbus.KindKeyChange, k.Agent, k.Seated, k.Announce, orDash(k.App), orDash(k.Machine))
			fix(fsbus.KindKeyChange)
		}
	}
	if !r.OK() {
		n := len(r.Ledger.Problems) + len(r.Ledger.Forks) + len(r.Ignored) + len(r.Objects) + len(r.Lost) + len(r.Vanished) + len(r.Edited) + len(r.Links) + len(r.Rivals)
		return fsbus.Errorf(fsbus.CatInvalid, "records listed above count for nothing; nothing was changed",
			"ledger verify found %s", plural(n, "problem", "problems"))
	}
	if !g.JSON {
		g.printf("✔ ledger verified: %d segments, %d entries, no problems\n", r.Ledger.Segments, r.Ledger.Entries)
	}
	return nil
}
