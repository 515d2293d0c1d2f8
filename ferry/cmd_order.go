package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/ferryhq/ferry/fsbus"
)

// OrderCmd groups the order verbs.
type OrderCmd struct {
	New      OrderNewCmd      `cmd:"" help:"Dispatch an order."`
	List     OrderListCmd     `cmd:"" aliases:"ls" help:"List orders."`
	Show     OrderShowCmd     `cmd:"" help:"Show one order with its history."`
	Claim    OrderClaimCmd    `cmd:"" help:"Claim an open order."`
	Progress OrderProgressCmd `cmd:"" help:"Report progress on a claimed order."`
	Submit   OrderSubmitCmd   `cmd:"" help:"Submit a result: a reference to the work and a short note."`
	Review   OrderReviewCmd   `cmd:"" help:"Accept a submitted result or ask for changes."`
	Release  OrderReleaseCmd  `cmd:"" help:"Give a claimed order back: it is open again."`
	Cancel   OrderCancelCmd   `cmd:"" help:"Cancel an order you wrote."`
	Offer    OrderOfferCmd    `cmd:"" aliases:"assign" help:"Offer an order to one agent."`
	Extend   OrderExtendCmd   `cmd:"" help:"Renew the execution window of your claim."`
	Fail     OrderFailCmd     `cmd:"" help:"End your attempt at an order, with the reason."`
	Decline  OrderDeclineCmd  `cmd:"" help:"Hand back an order offered to you."`
}

// keyFlag is the optional idempotency key of a mutation.
type keyFlag struct {
	Key string `help:"Idempotency key: a retry with the same key and arguments writes nothing."`
}

// OrderNewCmd is `ferry order new TITLE`.
type OrderNewCmd struct {
	Title    string   `arg:"" help:"One-line title."`
	Body     string   `help:"Markdown body (or @FILE)." placeholder:"TEXT"`
	Label    []string `help:"Labels." placeholder:"LABEL"`
	Priority string   `help:"low, normal or high." enum:",low,normal,high" default:""`
	Dep      []string `help:"Order ids this one waits for." placeholder:"ID"`
	To       string   `help:"Offer to this agent at creation." placeholder:"NAME"`
	keyFlag
}

// Run implements the command.
func (c *OrderNewCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	body, err := readArg(c.Body)
	if err != nil {
		return err
	}
	o, err := s.NewOrder(fsbus.NewOrderOptions{Title: c.Title, Body: body, Labels: c.Label, Priority: c.Priority, Deps: c.Dep, To: c.To, Key: c.Key})
	return printOrderResult(g, o, err, "dispatched")
}

// OrderListCmd is `ferry order list`.
type OrderListCmd struct {
	State string `help:"Only this state; 'active' hides accepted and cancelled." placeholder:"STATE"`
	Mine  bool   `help:"Only orders the --as agent wrote or holds."`
	Limit int    `help:"At most this many (0: all)." default:"0"`
	Ready bool   `help:"Only orders that can be claimed now (every dependency accepted)."`
}

// Run implements the command.
func (c *OrderListCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	f := fsbus.OrderFilter{State: c.State, Limit: c.Limit, Ready: c.Ready}
	if c.Mine {
		if g.As == "" {
			return fsbus.Errorf(fsbus.CatInvalid, "pass --as NAME", "--mine needs an agent")
		}
		f.Mine = g.As
	}
	rows := v.State.ListOrders(f)
	if g.JSON {
		if rows == nil {
			rows = []fsbus.OrderRow{}
		}
		return g.printJSON(rows)
	}
	if len(rows) == 0 {
		g.printf("no orders\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tHOLDER\tAUTHOR\tTITLE")
	for _, r := range rows {
		fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.State, orDash(r.Holder), r.Author, r.Title)
	}
	return tw.Flush()
}

// OrderShowCmd is `ferry order show ID`.
type OrderShowCmd struct {
	ID string `arg:"" help:"Order id or unique prefix."`
}

// Run implements the command.
func (c *OrderShowCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	o, err := v.State.FindOrder(c.ID)
	if err != nil {
		return err
	}
	q, _ := fsbus.ResolveQueue("", "") // an unusable queue: heavy orders run directly
	via := ch.RunVia(o, q)
	if g.JSON {
		out := lifecycleJSON(ch, v, o)
		out.RunVia = via
		return g.printJSON(out)
	}
	g.printf("%s  %s\n", o.ID, o.Title)
	g.printf("state     %s\n", o.State)
	g.printf("run via   %s\n", via)
	g.printf("author    %s\n", o.Author)
	if o.Holder != "" {
		g.printf("holder    %s\n", o.Holder)
	}
	if o.OfferedTo != "" {
		g.printf("offered   %s\n", o.OfferedTo)
	}
	showLifecycle(g, ch, v, o)
	if len(o.Labels) > 0 {
		g.printf("labels    %s\n", strings.Join(o.Labels, ", "))
	}
	if o.Missing {
		g.printf("pending   the order's body has not arrived on this machine yet\n")
	}
	if o.Pending > 0 {
		g.printf("pending   %d entries wait for the entry they build on (pending sync)\n", o.Pending)
	}
	if o.Body != "" {
		g.printf("\n%s\n\n", strings.TrimRight(o.Body, "\n"))
	}
	if o.Result != nil {
		g.printf("result    %s by %s", o.Result.Reference, o.Result.By)
		if o.Result.Note != "" {
			g.printf(": %s", o.Result.Note)
		}
		g.printf("\n")
		if h := v.State.Handins[o.Result.Reference]; h != nil {
			g.printf("handin    %s by %s: %s", h.ID, h.By, h.Ref)
			if h.Note != "" {
				g.printf(" — %s", h.Note)
			}
			g.printf("\n")
		}
	}
	for _, p := range o.Progress {
		if p.Type == fsbus.TypeOrderExtend {
			g.printf("extended  %s %s", p.HLC, p.By)
			if p.Note != "" {
				g.printf(": %s", p.Note)
			}
			g.printf("\n")
			continue
		}
		g.printf("progress  %s %s: %s\n", p.HLC, p.By, p.Note)
	}
	for _, h := range o.History {
		typ := strings.TrimPrefix(h.Type, "order.")
		if h.Act != "" {
			typ = h.Act
		}
		g.printf("history   %s %-14s by %s", h.HLC, typ, h.By)
		if h.To != "" {
			g.printf(" to %s", h.To)
		}
		if h.Verdict != "" {
			g.printf(" (%s)", h.Verdict)
		}
		if h.Note != "" {
			g.printf(": %s", h.Note)
		}
		g.printf("\n")
	}
	for _, ct := range o.Contests {
		for _, l := range ct.Losers {
			who := l.By
			if who == g.As {
				who = "you (" + who + ")"
			}
			g.printf("contested %s's %s lost to %s's %s (superseded)\n", who, strings.TrimPrefix(l.Type, "order."), ct.Winner.By, strings.TrimPrefix(ct.Winner.Type, "order."))
		}
	}
	return nil
}

// OrderClaimCmd is `ferry order claim ID`.
type OrderClaimCmd struct {
	ID string `arg:"" help:"Order id or unique prefix."`
	keyFlag
}

// Run implements the command.
func (c *OrderClaimCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Claim(c.ID, c.Key)
	return printOrderResult(g, o, err, "claimed")
}

// OrderProgressCmd is `ferry order progress ID NOTE`.
type OrderProgressCmd struct {
	ID       string `arg:"" help:"Order id or unique prefix."`
	NoteArg  string `arg:"" optional:"" name:"note" help:"What changed, one short line (or --note)."`
	NoteFlag string `name:"note" help:"What changed, one short line."`
	keyFlag
}

// Run implements the command.
func (c *OrderProgressCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	note := c.NoteFlag
	if note == "" {
		note = c.NoteArg
	}
	o, err := s.Progress(c.ID, note, c.Key)
	return printOrderResult(g, o, err, "progress recorded on")
}

// OrderSubmitCmd is `ferry order submit ID --ref REF`.
type OrderSubmitCmd struct {
	ID   string `arg:"" help:"Order id or unique prefix."`
	Ref  string `help:"Where the work is: a commit, branch or hand-in id." required:""`
	Note string `help:"Short summary of the result."`
	keyFlag
}

// Run implements the command.
func (c *OrderSubmitCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Submit(c.ID, c.Ref, c.Note, c.Key)
	return printOrderResult(g, o, err, "submitted")
}

// OrderReviewCmd is `ferry order review ID --accept|--changes`.
type OrderReviewCmd struct {
	ID      string `arg:"" help:"Order id or unique prefix."`
	Accept  bool   `help:"Accept the result." xor:"verdict" required:""`
	Changes bool   `help:"Ask for changes." xor:"verdict" required:""`
	Note    string `help:"Review note."`
	keyFlag
}

// Run implements the command.
func (c *OrderReviewCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	verdict := "accept"
	if c.Changes {
		verdict = "changes"
	}
	o, err := s.Review(c.ID, verdict, c.Note, c.Key)
	return printOrderResult(g, o, err, "reviewed")
}

// OrderReleaseCmd is `ferry order release ID`.
type OrderReleaseCmd struct {
	ID   string `arg:"" help:"Order id or unique prefix."`
	Note string `help:"Why."`
	keyFlag
}

// Run implements the command.
func (c *OrderReleaseCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Release(c.ID, c.Note, c.Key)
	return printOrderResult(g, o, err, "released")
}

// OrderCancelCmd is `ferry order cancel ID`.
type OrderCancelCmd struct {
	ID   string `arg:"" help:"Order id or unique prefix."`
	Note string `help:"Why."`
	keyFlag
}

// Run implements the command.
func (c *OrderCancelCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Cancel(c.ID, c.Note, c.Key)
	return printOrderResult(g, o, err, "cancelled")
}

// OrderOfferCmd is `ferry order offer ID --to NAME`.
type OrderOfferCmd struct {
	ID string `arg:"" help:"Order id or unique prefix."`
	To string `help:"Agent to offer it to." required:"" placeholder:"NAME"`
	keyFlag
}

// Run implements the command.
func (c *OrderOfferCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	o, err := s.Offer(c.ID, c.To, c.Key)
	return printOrderResult(g, o, err, "offered")
}

func printOrderResult(g *Globals, o *fsbus.Order, err error, verb string) error {
	g.noteExpired()
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(o.Row())
	}
	g.printf("✔ %s %s \"%s\" — state %s", verb, o.ID, o.Title, o.State)
	if o.Holder != "" {
		g.printf(", holder %s", o.Holder)
	}
	g.printf("\n")
	return nil
}
