package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
)

// AskCmd groups the ask verbs (docs/design.md §3): an agent asks the owner before a
// risky step; only the owner answers.
type AskCmd struct {
	Raise    AskRaiseCmd    `cmd:"" help:"Ask the owner to decide before a risky step."`
	Status   AskStatusCmd   `cmd:"" aliases:"list,ls,show" help:"Show an ask, your asks, or every ask waiting on the owner."`
	Approve  AskApproveCmd  `cmd:"" help:"Approve a pending ask (owner only)."`
	Reject   AskRejectCmd   `cmd:"" help:"Reject a pending ask (owner only)."`
	SendBack AskSendBackCmd `cmd:"" name:"send-back" aliases:"send_back" help:"Send a pending ask back to its asker for more work (owner only)."`
}

// AskRaiseCmd is `ferry ask raise TITLE --recommendation … [--reasoning …]`.
type AskRaiseCmd struct {
	Title          string `arg:"" help:"One-line question, at most 200 characters."`
	Recommendation string `help:"What you propose the owner decide, at most 1,200 characters (or @FILE)." required:"" placeholder:"TEXT"`
	Reasoning      string `help:"Why, at most 1,200 characters (or @FILE)." placeholder:"TEXT"`
	keyFlag
}

// Help is the long help.
func (c *AskRaiseCmd) Help() string {
	return "The ask waits, pending, until the owner approves, rejects or sends it back with a\n" +
		"signed answer. Check it with `ferry ask status ID`."
}

// Run implements the command.
func (c *AskRaiseCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	rec, err := readArg(c.Recommendation)
	if err != nil {
		return err
	}
	why, err := readArg(c.Reasoning)
	if err != nil {
		return err
	}
	a, err := s.AskRaise(fsbus.AskRaiseOptions{Title: c.Title, Recommendation: rec, Reasoning: why, Key: c.Key})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(a)
	}
	g.printf("✔ asked %s \"%s\" — state %s\n", a.ID, a.Title, a.State)
	g.printf("  the owner answers with: ferry ask approve|reject|send-back %s [--note …]\n", a.ID)
	return nil
}

// AskStatusCmd is `ferry ask status [ID]`.
type AskStatusCmd struct {
	ID string `arg:"" optional:"" help:"Ask id or unique prefix; without it, list asks."`
}

// Help is the long help.
func (c *AskStatusCmd) Help() string {
	return "With an id: the whole ask, its verdict and the owner's note. Without: with --as NAME\n" +
		"(or FERRY_AGENT) that agent's asks, newest first; else every ask waiting on the owner,\n" +
		"oldest first."
}

// Run implements the command.
func (c *AskStatusCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	if c.ID != "" {
		a, err := v.State.FindAsk(c.ID)
		if err != nil {
			return err
		}
		if g.JSON {
			return g.printJSON(a)
		}
		printAsk(g, a)
		return nil
	}
	var list []*fold.Ask
	mine := g.As != "" && g.As != fold.MasterWriter
	if mine {
		list = v.State.AsksBy(g.As, true)
	} else {
		list = v.State.PendingAsks()
	}
	if g.JSON {
		return g.printJSON(list)
	}
	if len(list) == 0 {
		if mine {
			g.printf("%s has raised no asks\n", g.As)
		} else {
			g.printf("no asks wait on the owner\n")
		}
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAUTHOR\tRAISED\tTITLE")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cleanArgs([]any{a.ID, a.State, a.Author, a.Raised, a.Title})...)
	}
	return tw.Flush()
}

// printAsk prints one ask in full.
func printAsk(g *Globals, a *fold.Ask) {
	g.printf("%s  %s\n", a.ID, a.Title)
	g.printf("state           %s\n", a.State)
	g.printf("author          %s\n", a.Author)
	g.printf("raised          %s\n", a.Raised)
	if a.Missing {
		g.printf("pending sync    the ask's text has not arrived on this machine yet\n")
	}
	if a.Pending > 0 {
		g.printf("pending sync    %d entries wait for the entry they build on\n", a.Pending)
	}
	if a.Recommendation != "" {
		g.printf("recommendation  %s\n", indentRest(a.Recommendation))
	}
	if a.Reasoning != "" {
		g.printf("reasoning       %s\n", indentRest(a.Reasoning))
	}
	if a.AnsweredBy != "" {
		g.printf("answered        %s by %s\n", a.Answered, a.AnsweredBy)
	}
	if a.Note != "" {
		g.printf("note            %s\n", indentRest(a.Note))
	}
	for _, l := range a.Superseded {
		g.printf("contested       %s's %s at %s lost to the verdict above (superseded)", l.By, l.Verdict, l.HLC)
		if l.Note != "" {
			g.printf(": %s", l.Note)
		}
		g.printf("\n")
	}
	if a.State == fold.AskPending && !a.Missing {
		g.printf("the owner answers with: ferry ask approve|reject|send-back %s [--note …]\n", a.ID)
	}
}

// indentRest indents every line after the first to the value column of printAsk.
func indentRest(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+strings.Repeat(" ", 16))
}

// askAnswerArgs are the arguments of the three answering verbs.
type askAnswerArgs struct {
	ID   string `arg:"" help:"Ask id or unique prefix."`
	Note string `help:"Note to the asker, at most 2 KiB."`
	keyFlag
}

// ownerAction marks the three answering verbs the owner's (docs/format.md §13: ask.answer
// is on the master row), so an agent that names itself (--as or FERRY_AGENT) on the
// owner's machine is refused before anything runs (checkOwner) and never answers through
// the owner's key.
func (c *askAnswerArgs) ownerAction(*Globals) string { return "answer asks (ask.answer)" }

// answer runs the verb as the owner (the master key on this machine).
func (c *askAnswerArgs) answer(g *Globals, verdict, done string) error {
	s, err := g.Master()
	if err != nil {
		return err
	}
	a, err := s.AskAnswer(c.ID, verdict, fsbus.NoteOptions{Note: c.Note, Key: c.Key})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(a)
	}
	g.printf("✔ %s %s \"%s\" (asked by %s) — state %s\n", done, a.ID, a.Title, a.Author, a.State)
	return nil
}

// AskApproveCmd is `ferry ask approve ID [--note …]`.
type AskApproveCmd struct{ askAnswerArgs }

// Run implements the command.
func (c *AskApproveCmd) Run(g *Globals) error {
	return c.answer(g, fold.VerdictApprove, "approved")
}

// AskRejectCmd is `ferry ask reject ID [--note …]`.
type AskRejectCmd struct{ askAnswerArgs }

// Run implements the command.
func (c *AskRejectCmd) Run(g *Globals) error {
	return c.answer(g, fold.VerdictReject, "rejected")
}

// AskSendBackCmd is `ferry ask send-back ID [--note …]`.
type AskSendBackCmd struct{ askAnswerArgs }

// Run implements the command.
func (c *AskSendBackCmd) Run(g *Globals) error {
	return c.answer(g, fold.VerdictSendBack, "sent back")
}
