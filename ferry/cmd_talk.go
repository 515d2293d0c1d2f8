package main

import (
	"encoding/json"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/watch"
	"github.com/ferryhq/ferry/internal/errs"
)

// TalkCmd groups the talk verbs (docs/design.md §3): messages between agents and the
// owner, with read receipts.
type TalkCmd struct {
	Send TalkSendCmd `cmd:"" aliases:"post" help:"Send a message to an agent, the owner (master) or all."`
	Read TalkReadCmd `cmd:"" help:"Read the messages new to you; records that you read them."`
	Sent TalkSentCmd `cmd:"" help:"List the messages you sent and who has read them."`
	Show TalkShowCmd `cmd:"" help:"Show one message in full."`
	Ack  TalkAckCmd  `cmd:"" help:"Mark messages to you as read without listing them."`
}

// TalkSendCmd is `ferry talk send --to NAME|all|master TEXT`.
type TalkSendCmd struct {
	Text string `arg:"" optional:"" help:"The message (or use --body)."`
	To   string `help:"Recipient: an agent name, master (the owner) or all." required:"" placeholder:"NAME"`
	Body string `help:"The message text, or @FILE to read it from a file." placeholder:"TEXT"`
	keyFlag
}

// Help explains where messages go and what the sender sees.
func (c *TalkSendCmd) Help() string {
	return `The message is a signed file in messages/ named by a msg.post entry. Sending needs
member level. The sender sees who has read it with ` + "`ferry talk sent`" + `.`
}

// Run implements the command.
func (c *TalkSendCmd) Run(g *Globals) error {
	if c.Text != "" && c.Body != "" {
		return errs.Errorf(errs.Invalid, "give the text as an argument or with --body, not both", "two message texts")
	}
	body, err := readArg(c.Body)
	if err != nil {
		return err
	}
	if c.Text != "" {
		body = c.Text
	}
	s, err := g.Session()
	if err != nil {
		return err
	}
	m, err := s.TalkSend(fsbus.TalkSendOptions{To: c.To, Body: body, Key: c.Key})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(m)
	}
	g.printf("✔ sent %s to %s (%d bytes)\n", m.ID, m.To, m.Bytes)
	return nil
}

// TalkReadCmd is `ferry talk read [--since C] [--peek|--ack] [--limit N] [--follow]`.
type TalkReadCmd struct {
	Since  string `help:"Only messages to you that arrived after this cursor (from an earlier read), read or not." placeholder:"CURSOR"`
	Peek   bool   `help:"Read without recording that you read them."`
	Ack    bool   `help:"Record the read even while a live MCP session on this machine holds the name (without it such a read only peeks)."`
	Limit  int    `help:"At most this many messages (1-20)." default:"20"`
	Follow bool   `short:"f" help:"Keep running: print new messages as they arrive, until interrupted."`
	followStop
}

// Help explains receipts and cursors.
func (c *TalkReadCmd) Help() string {
	return `Lists the messages addressed to you (or to all) that you have not read, oldest first,
as 300-character previews; ` + "`ferry talk show ID`" + ` prints a whole message. Unless --peek,
one msg.ack entry records what was shown, so the sender sees it read and the next read
shows only what is new. While a live ` + "`ferry mcp serve`" + ` on this machine holds the name (its
session lease), the read is a peek unless --ack is given: the messages are that
session's to mark read. The owner reads with no --as on the machine holding the master
key (or with --as master). With --follow it keeps
watching the folder and prints (and, unless --peek, marks read) each new message as it
arrives, until Ctrl-C (exit 0), --for or, with --until-eof, the end of standard input;
--json then prints one message per line.`
}

// Run implements the command.
func (c *TalkReadCmd) Run(g *Globals) error {
	if !c.Follow && (c.For != nil || c.UntilEOF) {
		return errs.Errorf(errs.Invalid, "add --follow, or drop --for and --until-eof", "--for and --until-eof apply only with --follow")
	}
	if err := c.checkFor(); err != nil {
		return err
	}
	if c.Peek && c.Ack {
		return errs.Errorf(errs.Invalid, "pass --peek to read without a receipt, or --ack to record one", "--peek and --ack contradict each other")
	}
	s, err := g.ownerOrSession()
	if err != nil {
		return err
	}
	// An agent's own shell calls are that agent, so the CLI may write under a name a
	// live MCP session holds; marking its messages read is that session's to do
	// (docs/mcp.md "One session per agent").
	if !c.Peek && !c.Ack {
		if holder, held := s.Home.SessionLeaseHolder(s.Project(), s.Name); held {
			c.Peek = true
			fprintf(g.stderr, "ferry: note: peeked, nothing marked read: a live MCP session (%s) holds the name %s on this machine; pass --ack to mark read\n", holder, s.Name)
		}
	}
	opt := fsbus.TalkReadOptions{Since: c.Since, Peek: c.Peek, Limit: c.Limit}
	if !c.Follow {
		res, err := s.TalkRead(opt)
		if err != nil {
			return err
		}
		if g.JSON {
			return g.printJSON(res)
		}
		c.print(g, res, true)
		return nil
	}
	ctx, cancel := c.context(g)
	defer cancel()
	// The watcher starts before the first read, so a message landing between the read
	// and the wait is never missed.
	w := watch.Watch(s.Channel, watch.WatchOptions{})
	defer w.Close()
	enc := json.NewEncoder(g.stdout)
	show := func(res *fsbus.TalkReadResult, first bool) error {
		if !g.JSON {
			c.print(g, res, first)
			return nil
		}
		for _, m := range res.Messages {
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
		return nil
	}
	first := true
	shown := map[string]bool{} // with --peek: a read from a cursor may list some again
	for {
		res, err := s.TalkRead(opt)
		if err != nil {
			return err
		}
		if c.Peek {
			fresh := res.Messages[:0:0]
			for _, m := range res.Messages {
				if !shown[m.ID] {
					shown[m.ID] = true
					fresh = append(fresh, m)
				}
			}
			res.Messages = fresh
		}
		if err := show(res, first); err != nil {
			return err
		}
		if first {
			first = false
			fprintf(g.stderr, "ferry: following messages to %s; Ctrl-C to stop\n", s.Name)
		}
		// Next time: the unread ones (each read marks what it showed), or with --peek
		// what arrived after this read (nothing is marked, so unread would repeat).
		opt.Since = ""
		if c.Peek {
			opt.Since = res.Next
		}
		for !res.Truncated {
			select {
			case <-ctx.Done():
				return nil
			case <-w.C:
			}
			v, err := s.Load()
			if err != nil {
				fprintf(g.stderr, "ferry: warning: reading the channel: %v (retrying on the next change)\n", err)
				continue
			}
			if v.TalkWaiting(s.Name, opt.Since) > 0 {
				break
			}
		}
	}
}

// print writes one read's messages as text; the first read also says when nothing is
// new and gives the cursor.
func (c *TalkReadCmd) print(g *Globals, res *fsbus.TalkReadResult, first bool) {
	if c.Since != "" && !res.Since && first {
		g.printf("(cursor %s is not from this machine's log: showing the unread messages)\n", shown(c.Since))
	}
	if len(res.Messages) == 0 && first {
		g.printf("nothing new\n")
	}
	for _, m := range res.Messages {
		talkHead(g, &m)
		talkIndent(g, m.Preview)
		if m.Truncated {
			g.printf("  … (%d bytes: `ferry talk show %s`)\n", m.Bytes, m.ID)
		}
	}
	if res.Truncated && !c.Follow {
		g.printf("(%d more: run again)\n", res.Remaining)
	}
	if res.Pending > 0 && first {
		g.printf("(%d more not arrived on this machine yet: pending sync)\n", res.Pending)
	}
	if c.Peek && len(res.Messages) > 0 && first {
		g.printf("(peek: not marked read)\n")
	}
	if first {
		// The cursor as the command that reads on from it, as catchup prints its own.
		g.printf("next: ferry talk read --as %s --since %s\n", res.Agent, res.Next)
	}
}

// ownerOrSession is Session, except that with no --as (or FERRY_AGENT) on a machine
// holding the channel's master key it acts as the owner, whose view `ferry status`
// shows without --as too.
func (g *Globals) ownerOrSession() (*fsbus.Session, error) {
	if g.As == "" {
		c, err := g.Open()
		if err != nil {
			return nil, err
		}
		if c.Home.HasKey(c.Project(), fold.MasterWriter) {
			return c.As(fold.MasterWriter)
		}
	}
	return g.Session()
}

// TalkSentCmd is `ferry talk sent`.
type TalkSentCmd struct {
	Limit int `help:"At most this many messages (1-100)." default:"20"`
}

// Run implements the command.
func (c *TalkSentCmd) Run(g *Globals) error {
	if g.As == "" {
		return errs.Errorf(errs.Invalid, "pass --as NAME (the owner: --as master)", "talk sent needs the sender's name")
	}
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	res, err := v.State.TalkSent(g.As, c.Limit)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	if len(res.Messages) == 0 {
		g.printf("no messages sent\n")
	}
	for _, m := range res.Messages {
		talkHead(g, &m.Message)
		if m.Pending {
			g.printf("  (the text has not arrived on this machine yet: pending sync)\n")
		} else {
			talkIndent(g, m.Preview)
		}
		g.printf("  read by: %s · not yet: %s\n", talkList(m.ReadBy), talkList(m.Unread))
	}
	if res.Truncated {
		g.printf("(%d older not shown: --limit)\n", res.Remaining)
	}
	return nil
}

// TalkShowCmd is `ferry talk show ID`.
type TalkShowCmd struct {
	ID string `arg:"" help:"Message id or unique prefix."`
}

// Run implements the command.
func (c *TalkShowCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	m, err := v.State.TalkShow(c.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(m)
	}
	talkHead(g, m)
	if m.Pending {
		g.printf("  (the text has not arrived on this machine yet: pending sync)\n")
	} else {
		talkIndent(g, m.Body)
	}
	g.printf("  read by: %s\n", talkList(m.ReadBy))
	return nil
}

// TalkAckCmd is `ferry talk ack ID...`.
type TalkAckCmd struct {
	IDs []string `arg:"" name:"id" help:"Message ids or unique prefixes."`
}

// Run implements the command.
func (c *TalkAckCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	res, err := s.TalkAck(c.IDs)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	if len(res.Acked) == 0 {
		g.printf("already marked read\n")
		return nil
	}
	g.printf("✔ marked read: %s\n", strings.Join(res.Acked, ", "))
	return nil
}

func talkHead(g *Globals, m *fold.Message) {
	g.printf("%s  %s → %s  %s\n", m.ID, m.From, m.To, m.HLC)
}

func talkIndent(g *Globals, text string) {
	for _, l := range strings.Split(text, "\n") {
		g.printf("  %s\n", l)
	}
}

func talkList(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ", ")
}
