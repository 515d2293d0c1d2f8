package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/runner"
	"github.com/ferryhq/ferry/internal/errs"
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
	Verify   OrderVerifyCmd   `cmd:"" help:"Check an order's file pointers against this checkout."`
}

// keyFlag is the optional idempotency key of a mutation.
type keyFlag struct {
	Key string `help:"Idempotency key: a retry with the same key and arguments writes nothing."`
}

// OrderNewCmd is `ferry order new TITLE`.
type OrderNewCmd struct {
	Title     string   `arg:"" optional:"" help:"One-line title (or --title)."`
	TitleFlag string   `name:"title" help:"One-line title, as the MCP tool names it (or the argument)." placeholder:"TITLE"`
	Body      string   `help:"Markdown body (or @FILE)." placeholder:"TEXT"`
	Label     []string `help:"Labels." placeholder:"LABEL"`
	Priority  string   `help:"low, normal or high." placeholder:"low|normal|high"`
	Dep       []string `help:"Order ids this one waits for." placeholder:"ID"`
	To        string   `help:"Offer to this agent at creation." placeholder:"NAME"`
	keyFlag
	contractFlags
	workspaceFlag
}

// Validate takes the title from the argument or --title, exactly one of the two.
func (c *OrderNewCmd) Validate() error {
	switch {
	case c.Title != "" && c.TitleFlag != "":
		return errors.New("two titles: give the title as an argument or with --title, not both")
	case c.Title == "" && c.TitleFlag == "":
		return errors.New("no title: give it as an argument or with --title")
	case c.Title == "":
		c.Title = c.TitleFlag
	}
	return nil
}

// contractFlags are the contract of `ferry order new` (ADR 0003).
type contractFlags struct {
	Pointer      []string       `help:"A file the order is about, workspace-relative, optionally with lines (PATH:10-40); fingerprinted now." placeholder:"PATH" type:"pointer"`
	Schema       string         `help:"JSON Schema the result must satisfy (JSON or @FILE)." placeholder:"JSON"`
	Diff         string         `help:"A unified diff in the workspace for a review (fingerprinted like a pointer)." placeholder:"PATH"`
	Task         string         `help:"Task type, e.g. code_review or implementation." placeholder:"TYPE"`
	ReadOnly     bool           `help:"A review or audit: the worker reads, never changes the files."`
	ExecWindow   *time.Duration `help:"Execution window from the claim, at least 1s (leave out for the channel's)." placeholder:"DURATION"`
	Lifetime     *time.Duration `help:"Cap on the renewed execution window, at least 1s (leave out for the channel's)." placeholder:"DURATION"`
	QueueWindow  *time.Duration `help:"How long the order may wait unclaimed, at least 1s (leave out for the channel's)." placeholder:"DURATION"`
	Heavy        bool           `help:"Run it through this machine's job queue when one is set up."`
	Cores        int            `help:"Hint: CPU cores the run needs." placeholder:"N"`
	RAMGB        float64        `name:"ram-gb" help:"Hint: memory in GB." placeholder:"GB"`
	GPUMemGB     float64        `name:"gpu-mem-gb" help:"Hint: GPU memory in GB." placeholder:"GB"`
	ExpectedMins int            `name:"expected-minutes" help:"Hint: expected run time in minutes." placeholder:"N"`
}

// pointerMapper decodes --pointer (`type:"pointer"`): repeatable, each value one spec
// or several separated by commas (docs/commands.md, `--pointer=PATH,...`). kong's own
// slice decoding turns an empty value into no element at all, so `--pointer ""` would
// dispatch an order with no pointer; an empty value, or an empty spec between commas,
// is refused instead (invalid, before anything is written).
type pointerMapper struct{}

// Decode implements kong.Mapper.
func (pointerMapper) Decode(ctx *kong.DecodeContext, target reflect.Value) error {
	var v string
	if err := ctx.Scan.PopValueInto("pointer", &v); err != nil {
		return err
	}
	specs := kong.SplitEscaped(v, ',')
	empty := len(specs) == 0 || strings.HasSuffix(v, ",") && !strings.HasSuffix(v, `\,`)
	for _, s := range specs {
		empty = empty || strings.TrimSpace(s) == ""
	}
	if empty {
		return errors.New("an empty value points at no file: name a workspace-relative file (PATH or PATH:FIRST-LAST), or leave --pointer out")
	}
	for _, s := range specs {
		target.Set(reflect.Append(target, reflect.ValueOf(s)))
	}
	return nil
}

// PlaceHolder implements kong.PlaceHolderProvider: the help shows "PATH,...", as for
// kong's own comma-separated slices.
func (pointerMapper) PlaceHolder(f *kong.Flag) string { return f.PlaceHolder + ",..." }

// workspaceFlag is the root file pointers are relative to.
type workspaceFlag struct {
	Workspace string `help:"Workspace root of file pointers (default: the git top-level of the current directory, else the current directory)." placeholder:"DIR"`
}

// apply sets the session's workspace.
func (w workspaceFlag) apply(s *fsbus.Session) { s.Workspace = w.Workspace }

// options fills the contract members of opt.
func (c contractFlags) options(opt *fsbus.NewOrderOptions) error {
	if c.Schema != "" {
		schema, err := readArg(c.Schema)
		if err != nil {
			return err
		}
		opt.Schema = json.RawMessage(schema)
	}
	// A window given is at least 1 s: 0s or a negative one would not mean "the channel
	// default" to the reader of the command line; leaving the flag out does.
	secs := func(name string, d *time.Duration) (int64, error) {
		switch {
		case d == nil:
			return 0, nil
		case *d <= 0:
			return 0, errs.Errorf(errs.Invalid, "give a window of at least 1s such as 4h or 90m, or leave --"+name+" out to keep the channel's default", "--%s %s: a window is at least 1s", name, *d)
		case *d < time.Second || *d%time.Second != 0:
			return 0, errs.Errorf(errs.Invalid, "give windows as durations such as 4h or 90m", "--%s %s is not a whole number of seconds", name, *d)
		}
		return int64(*d / time.Second), nil
	}
	var w fold.Windows
	var err error
	if w.ExecS, err = secs("exec-window", c.ExecWindow); err != nil {
		return err
	}
	if w.LifetimeS, err = secs("lifetime", c.Lifetime); err != nil {
		return err
	}
	if w.QueueS, err = secs("queue-window", c.QueueWindow); err != nil {
		return err
	}
	if w != (fold.Windows{}) {
		opt.Windows = &w
	}
	if h := (fold.Hints{Cores: c.Cores, RAMGB: c.RAMGB, GPUMemGB: c.GPUMemGB, ExpectedMinutes: c.ExpectedMins}); h != (fold.Hints{}) {
		opt.Hints = &h
	}
	opt.Pointers, opt.Diff, opt.Task, opt.ReadOnly, opt.Heavy = c.Pointer, c.Diff, c.Task, c.ReadOnly, c.Heavy
	return nil
}

// Run implements the command.
func (c *OrderNewCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	c.apply(s)
	body, err := readArg(c.Body)
	if err != nil {
		return err
	}
	opt := fsbus.NewOrderOptions{Title: c.Title, Body: body, Labels: c.Label, Priority: c.Priority, Deps: c.Dep, To: c.To, Key: c.Key}
	if err := c.options(&opt); err != nil {
		return err
	}
	o, err := s.NewOrder(opt)
	return printOrderResult(g, o, err, "dispatched")
}

// OrderListCmd is `ferry order list`.
type OrderListCmd struct {
	State string `help:"Only this state (open, offered, claimed, submitted, changes_requested, accepted, cancelled, failed, timed_out, validation_failed, pointer_stale); 'active' hides accepted and cancelled; 'ready' is --ready." placeholder:"STATE"`
	Mine  bool   `help:"Only orders the --as agent wrote or holds."`
	Limit int    `help:"At most this many (0: all)." default:"0"`
	Ready bool   `help:"Only orders that can be claimed now (every dependency accepted); with --as, not those offered to another agent or outside its scopes."`
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
	if c.State == "ready" { // an alias of --ready
		c.State, c.Ready = "", true
	}
	if err := fold.CheckStateFilter(c.State); err != nil {
		return err
	}
	f := fold.OrderFilter{State: c.State, Limit: c.Limit, Ready: c.Ready, For: g.As}
	if c.Mine {
		if g.As == "" {
			return errs.Errorf(errs.Invalid, "pass --as NAME", "--mine needs an agent")
		}
		f.Mine = g.As
	}
	rows := v.State.ListOrders(f)
	if err := v.State.Base().Err(); err != nil { // a chunk of the owner's checkpoint: its orders are not listed
		fmt.Fprintf(g.stderr, "ferry: warning: orders final at the owner's checkpoint are missing from this list: %v (run `ferry doctor`)\n", err)
	}
	if g.JSON {
		if rows == nil {
			rows = []fold.OrderRow{}
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
	o = withSuperseded(v.State, o)
	q, _ := runner.ResolveQueue("", "") // an unusable queue: heavy orders run directly
	via := q.Via(o)
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
	if o.Task != "" || o.ReadOnly || o.Heavy {
		g.printf("contract  task %s%s%s\n", orDash(o.Task), map[bool]string{true: ", read-only"}[o.ReadOnly], map[bool]string{true: ", heavy"}[o.Heavy])
	}
	for _, p := range o.Pointers {
		g.printf("pointer   %s:%d-%d %d bytes %.19s", p.Path, p.FirstLine, p.LastLine, p.Size, p.SHA256)
		if p.Commit != "" {
			g.printf(" @%.12s", p.Commit)
		}
		g.printf("\n")
	}
	if o.Diff != nil {
		g.printf("diff      %s %d bytes %.19s\n", o.Diff.Path, o.Diff.Size, o.Diff.SHA256)
	}
	if len(o.Schema) > 0 {
		g.printf("schema    %d bytes; refused results so far: %d of %d\n", len(o.Schema), o.SchemaFailures, contract.SchemaAttempts)
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
		if p.Type == fold.TypeOrderExtend {
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
			if ct.Rival {
				// Two writers created this id; one is forged (`ferry doctor`).
				g.printf("rival create: %s's create lost to %s's; one of them is forged or replayed (`ferry doctor`)\n", who, ct.Winner.By)
				continue
			}
			if ct.Checkpoint > 0 {
				// Final at the owner's checkpoint (docs/format.md §20 "Folding with a checkpoint").
				g.printf("superseded %s's %s: the order was final at the owner's checkpoint of epoch %d\n", who, strings.TrimPrefix(l.Type, "order."), ct.Checkpoint)
				continue
			}
			g.printf("contested %s's %s lost to %s's %s (superseded)\n", who, strings.TrimPrefix(l.Type, "order."), ct.Winner.By, strings.TrimPrefix(ct.Winner.Type, "order."))
		}
	}
	return nil
}

// withSuperseded returns o with the entries above the owner's checkpoint that its
// state there supersedes among its contests (st.Contested holds them: the order itself
// was read from the checkpoint's state; docs/format.md §20 "Folding with a
// checkpoint"); o itself when there are none.
func withSuperseded(st *fold.State, o *fold.Order) *fold.Order {
	var extra []fold.Contest
	for _, c := range st.Contested {
		if c.Ref == o.ID && c.Checkpoint > 0 && !slices.ContainsFunc(o.Contests, func(k fold.Contest) bool { return k.Checkpoint == c.Checkpoint && slices.Equal(k.Losers, c.Losers) }) {
			extra = append(extra, c)
		}
	}
	if extra == nil {
		return o
	}
	cp := *o
	cp.Contests = append(slices.Clone(o.Contests), extra...)
	return &cp
}

// OrderClaimCmd is `ferry order claim ID`.
type OrderClaimCmd struct {
	ID string `arg:"" help:"Order id or unique prefix."`
	keyFlag
	workspaceFlag
}

// Help explains the pointer check.
func (c *OrderClaimCmd) Help() string {
	return "An order with file pointers is claimed only when this checkout's files match them (size and sha256, line endings aside); otherwise the claim is refused here (exit 7, stale) with the files and how to recover, and the order stays open."
}

// Run implements the command.
func (c *OrderClaimCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	c.apply(s)
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
	o, err := s.Progress(c.ID, fsbus.NoteOptions{Note: note, Key: c.Key})
	return printOrderResult(g, o, err, "progress recorded on")
}

// OrderSubmitCmd is `ferry order submit ID --ref REF`.
type OrderSubmitCmd struct {
	ID     string `arg:"" help:"Order id or unique prefix."`
	Ref    string `help:"Where the work is: a commit, branch or hand-in id." required:""`
	Note   string `help:"Short summary of the result."`
	Result string `help:"Structured result (JSON or @FILE), checked against the order's schema." placeholder:"JSON"`
	keyFlag
	workspaceFlag
}

// Help explains the contract checks.
func (c *OrderSubmitCmd) Help() string {
	return "When the order has file pointers they are checked again: the first mismatch answers retry_needed (exit 8) and keeps the claim; the second records the submission as pointer_stale with its result kept. A result the order's schema refuses answers retry_needed twice, one line per error; the third is recorded as validation_failed."
}

// Run implements the command.
func (c *OrderSubmitCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	c.apply(s)
	result, err := readArg(c.Result)
	if err != nil {
		return err
	}
	o, err := s.Submit(c.ID, fsbus.SubmitOptions{Reference: c.Ref, Note: c.Note, Output: json.RawMessage(result), Key: c.Key})
	return printOrderResult(g, o, err, "submitted")
}

// OrderReviewCmd is `ferry order review ID --accept|--changes`.
type OrderReviewCmd struct {
	ID      string `arg:"" help:"Order id or unique prefix."`
	Accept  bool   `help:"Accept the result." xor:"verdict" required:""`
	Changes bool   `help:"Ask for changes." xor:"verdict" required:""`
	Verdict string `help:"The verdict in the MCP tool's words: accept or changes." xor:"verdict" required:"" enum:"accept,changes" placeholder:"VERDICT"`
	Note    string `help:"Review note."`
	keyFlag
}

// Run implements the command.
func (c *OrderReviewCmd) Run(g *Globals) error {
	s, err := g.orderSession()
	if err != nil {
		return err
	}
	verdict := c.Verdict
	switch {
	case c.Accept:
		verdict = "accept"
	case c.Changes:
		verdict = "changes"
	}
	o, err := s.Review(c.ID, verdict, fsbus.NoteOptions{Note: c.Note, Key: c.Key})
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
	o, err := s.Release(c.ID, fsbus.NoteOptions{Note: c.Note, Key: c.Key})
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
	o, err := s.Cancel(c.ID, fsbus.NoteOptions{Note: c.Note, Key: c.Key})
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
	o, err := s.Offer(c.ID, fsbus.OfferOptions{To: c.To, Key: c.Key})
	return printOrderResult(g, o, err, "offered")
}

// OrderVerifyCmd is `ferry order verify ID`.
type OrderVerifyCmd struct {
	ID   string `arg:"" help:"Order id or unique prefix."`
	Mark bool   `help:"As the author, on the machine that dispatched it: record the order as pointer_stale when a pointed file changed."`
	keyFlag
	workspaceFlag
}

// Help explains the exit status.
func (c *OrderVerifyCmd) Help() string {
	return "Reads the pointed files and writes nothing (unless --mark). Each pointer is ok, changed, missing or refused; the exit status is 7 (stale) when any is not ok."
}

// Run implements the command.
func (c *OrderVerifyCmd) Run(g *Globals) error {
	var (
		r   *contract.PointerReport
		o   *fold.Order
		err error
	)
	if c.Mark {
		s, err := g.Session()
		if err != nil {
			return err
		}
		c.apply(s)
		if o, r, err = s.MarkStale(c.ID, c.Key); err != nil {
			return err
		}
	} else {
		ch, err := g.Open()
		if err != nil {
			return err
		}
		if r, err = ch.VerifyOrder(c.ID, c.Workspace); err != nil {
			return err
		}
	}
	if g.JSON {
		var v any = r
		if r == nil { // --mark on an order already pointer_stale: nothing was checked
			v = o.Row()
		}
		if err = g.printJSON(v); err != nil {
			return err
		}
	} else if r != nil {
		g.printf("order %s in %s", r.Order, r.Workspace)
		if r.Commit != "" {
			g.printf(" (commit %.12s)", r.Commit)
		}
		g.printf("\n")
		rows := r.Pointers
		if r.Diff != nil {
			rows = append(rows, *r.Diff)
		}
		tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
		for _, p := range rows {
			fprintf(tw, "%s\t%s\t%s\n", p.Status, p.Path, p.Reason)
		}
		tw.Flush()
		if r.DiffMode {
			g.printf("diff mode: review %s, not the files on disk\n", r.Diff.Path)
		}
	}
	if c.Mark {
		if !g.JSON {
			g.printf("✔ marked %s pointer_stale\n", o.ID)
		}
		return nil
	}
	if !r.OK {
		return errs.Errorf(errs.Stale, "see the rows above; `git stash` or `git checkout <commit>` restores a checkout", "%d of %d pointers do not match this checkout", len(r.Stale()), len(r.Pointers)+btoi(r.Diff != nil))
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func printOrderResult(g *Globals, o *fold.Order, err error, verb string) error {
	g.noteExpired()
	if err != nil {
		return err
	}
	for _, w := range o.Warnings {
		fmt.Fprintf(g.stderr, "ferry: warning: %s\n", w)
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
