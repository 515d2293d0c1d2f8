package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/search"
	"github.com/ferryhq/ferry/internal/errs"
)

// SearchCmd is `ferry search QUERY`: the same matcher and order as the MCP
// tool ferry_search (fsbus.Channel.Search).
type SearchCmd struct {
	Query  string `arg:"" help:"Words that must all appear (any case)."`
	Kind   string `help:"Only this kind: order, message, decision or ask." enum:",order,message,decision,ask" default:""`
	Limit  int    `help:"Hits per page (1-100)." default:"20"`
	Cursor string `help:"Next cursor of the previous page." placeholder:"C"`
}

// Help is the long help.
func (c *SearchCmd) Help() string {
	return "Searches order titles, bodies, notes and submitted summaries, messages, decisions and\n" +
		"asks, newest first. With --as, only messages that agent sent or was sent are searched;\n" +
		"without it, all of them. Paged: pass the printed next cursor as --cursor."
}

// Run implements the command.
func (c *SearchCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	// Validate before reading the channel: a bad query changes nothing and costs nothing.
	if _, err := search.Terms(c.Query); err != nil {
		return err
	}
	if c.Limit < 1 || c.Limit > fsbus.MaxSearchLimit {
		return errs.Errorf(errs.Invalid, "pass a limit from 1 to 100", "limit %d is out of range", c.Limit)
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	page, err := search.Find(ch, v, search.Options{Query: c.Query, Kind: c.Kind, Agent: g.As, Limit: c.Limit, Cursor: c.Cursor})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(page)
	}
	if page.Total == 0 {
		g.printf("no hits\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tWHEN\tBY\tTITLE / SNIPPET")
	for _, h := range page.Hits {
		text := h.Snippet
		if h.Title != "" {
			text = h.Title + " — " + h.Snippet
		}
		fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.Kind, h.ID, h.At, h.By, text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	g.printf("%d of %d hits\n", len(page.Hits), page.Total)
	if page.Next != "" {
		g.printf("next: %s\n", c.nextCommand(g, page.Next))
	}
	return nil
}

// nextCommand is the command line of the next page: every flag the user gave (--kind,
// --limit, --channel or --project, --as) and the cursor, quoted for a POSIX shell
// (a next line that drops a flag pages a different search).
func (c *SearchCmd) nextCommand(g *Globals, cursor string) string {
	args := []string{"ferry", "search", shellQuote(c.Query)}
	if c.Kind != "" {
		args = append(args, "--kind", c.Kind)
	}
	if c.Limit != 20 {
		args = append(args, "--limit", fmt.Sprint(c.Limit))
	}
	if g.Channel != "" {
		args = append(args, "--channel", shellQuote(g.Channel))
	}
	if g.Project != "" {
		args = append(args, "--project", shellQuote(g.Project))
	}
	if g.As != "" {
		args = append(args, "--as", shellQuote(g.As))
	}
	return strings.Join(append(args, "--cursor", shellQuote(cursor)), " ")
}
