package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
)

// HandinCmd groups the hand-in verbs (docs/design.md §3).
type HandinCmd struct {
	Add  HandinAddCmd  `cmd:"" help:"Name work handed in: a commit, branch or path, and a note."`
	List HandinListCmd `cmd:"" aliases:"ls" help:"List hand-ins, newest first."`
}

// HandinAddCmd is `ferry handin add --ref REF --note NOTE`.
type HandinAddCmd struct {
	Ref  string `help:"Where the work is: a commit, branch or path in the work repo." required:"" placeholder:"REF"`
	Note string `help:"What it is (at most 2 KiB, or @FILE)." placeholder:"TEXT"`
	keyFlag
}

// Help is the long help.
func (c *HandinAddCmd) Help() string {
	return "The work stays in the work repo; the channel holds only the reference. Any seated\n" +
		"agent may hand in, a worker too. A submit may name the printed h- id as its --ref."
}

// Run implements the command.
func (c *HandinAddCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	note, err := readArg(c.Note)
	if err != nil {
		return err
	}
	h, err := s.HandinAdd(c.Ref, fsbus.NoteOptions{Note: note, Key: c.Key})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(h)
	}
	g.printf("✔ handed in %s: %s\n", h.ID, h.Ref)
	return nil
}

// HandinListCmd is `ferry handin list`.
type HandinListCmd struct {
	By    string `help:"Only this agent's hand-ins." placeholder:"NAME"`
	Limit int    `help:"At most this many (0: all)." default:"0"`
}

// Run implements the command.
func (c *HandinListCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	hs := v.State.ListHandins(fold.HandinFilter{By: c.By, Limit: c.Limit})
	if g.JSON {
		return g.printJSON(hs)
	}
	if len(hs) == 0 {
		g.printf("no hand-ins\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBY\tREF\tNOTE")
	for _, h := range hs {
		ref := h.Ref
		if h.Missing {
			ref = "(pending sync)"
		}
		note, _, _ := strings.Cut(h.Note, "\n")
		fprintf(tw, "%s\t%s\t%s\t%s\n", h.ID, h.By, ref, note)
	}
	return tw.Flush()
}
