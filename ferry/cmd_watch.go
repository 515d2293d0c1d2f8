package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ferryhq/ferry/fsbus/watch"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// WatchCmd is `ferry watch [--as NAME] [--json] [--interval D] [--since C] [--for D]`.
type WatchCmd struct {
	Since    string        `help:"Report first what arrived after this cursor (<log id>.<number>, from an earlier --json line or catchup; anything else is refused); default: only what arrives from now on." placeholder:"CURSOR"`
	Interval time.Duration `help:"Rescan the folder this often (the poll interval with FERRY_WATCH=poll or where change events do not arrive)." default:"2s"`
	followStop
}

// Help is the long help.
func (c *WatchCmd) Help() string {
	return `Prints one line per new thing as it arrives on this machine, until interrupted
(Ctrl-C: exit 0): every ledger entry, in arrival order; every contested order, role or
ask, naming the winner; and with --as NAME the orders that concern NAME (open, offered
to it, its own) and messages to it (no read receipt is written). --json prints one JSON
object per line. Set FERRY_WATCH=poll where change notifications do not arrive (network
drives); the folder is rescanned every --interval in any case.`
}

// followStop are the ways a long-running command ends besides a signal.
type followStop struct {
	For      *time.Duration `help:"Stop after this long (for scripts; a positive duration, such as 10m; without it, run until stopped)." placeholder:"DURATION"`
	UntilEOF bool           `name:"until-eof" help:"Stop when standard input closes (for scripts, and on Windows, where a child gets no Ctrl-C)."`
}

// checkFor refuses a --for that is zero or negative ("--for 0s" would otherwise
// run forever): leave the flag out to run until stopped.
func (s *followStop) checkFor() error {
	if s.For != nil && *s.For <= 0 {
		return errs.Errorf(errs.Invalid, "pass a positive duration, such as --for 10m, or leave --for out to run until stopped", "--for %s is not positive", *s.For)
	}
	return nil
}

// context returns the context a long-running command runs under: it ends on SIGINT or
// SIGTERM, after --for, or when stdin closes with --until-eof.
func (s *followStop) context(g *Globals) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cancel := stop
	if s.For != nil && *s.For > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, *s.For)
		cancel = func() { c2(); stop() }
	}
	if s.UntilEOF {
		var c3 context.CancelFunc
		ctx, c3 = context.WithCancel(ctx)
		prev := cancel
		cancel = func() { c3(); prev() }
		in := g.stdin
		go func() {
			_, _ = io.Copy(io.Discard, in) // returns at EOF (or a read error): either way, stop
			c3()
		}()
	}
	return ctx, cancel
}

// Run implements the command.
func (c *WatchCmd) Run(g *Globals) error {
	if c.Interval <= 0 {
		return errs.Errorf(errs.Invalid, "pass a positive duration, such as --interval 2s", "--interval %s is not positive", c.Interval)
	}
	if err := c.checkFor(); err != nil {
		return err
	}
	if c.Since != "" && !watch.ValidCursor(c.Since) {
		return errs.Errorf(errs.Invalid, "pass a cursor printed by `ferry watch --json` (cursor) or `ferry catchup` (next), "+watch.CursorShape+", or leave --since out to start from now",
			"--since %q is not a cursor", c.Since)
	}
	ch, err := g.Open()
	if err != nil {
		return err
	}
	if g.As != "" && !ledger.ValidName(g.As) {
		return errs.Errorf(errs.Invalid, "pass an agent name (see `ferry agents`) or master", "%q is not an agent name", g.As)
	}
	if c.Since != "" && watch.ValidCursor(c.Since) {
		// A cursor from elsewhere cannot say what came after it: say so, as catchup
		// does, rather than start from now without a word.
		if v, err := ch.Load(); err == nil && !v.Arrivals.FromHere(c.Since) {
			fprintf(g.stderr, "ferry: cursor %s is not from this machine's log (another machine, another copy of the channel, or a rebuilt log): reporting from now; `ferry catchup` shows what is open\n", shown(c.Since))
		}
	}
	ctx, cancel := c.context(g)
	defer cancel()
	enc := json.NewEncoder(g.stdout)
	return watch.Follow(ctx, ch, watch.FollowOptions{
		As: g.As, Since: c.Since, Watch: watch.WatchOptions{Rescan: c.Interval},
		OnReady: func(polling bool) {
			how := "change events"
			if polling {
				how = "polling"
			}
			fprintf(g.stderr, "ferry: watching %s (%s, rescan every %s); Ctrl-C to stop\n", ch.Root, how, c.Interval)
		},
	}, func(e watch.FollowEvent) error {
		if g.JSON {
			return enc.Encode(e)
		}
		g.printf("%s\n", watchLine(&e))
		return nil
	})
}

// watchLine is the text line of one event.
func watchLine(e *watch.FollowEvent) string {
	switch e.Kind {
	case watch.FollowEntry:
		return strings.TrimRight("entry    "+e.HLC+"  "+e.Writer+"  "+e.Type+"  "+e.Ref, " ")
	case watch.FollowOrder:
		line := "order    " + e.ID + "  " + e.State + "  " + quote(e.Title) + "  by " + e.Author
		if e.Holder != "" {
			line += ", held by " + e.Holder
		}
		if e.OfferedTo != "" {
			line += ", offered to " + e.OfferedTo
		}
		return line
	case watch.FollowMessage:
		return "message  " + e.ID + "  " + e.From + " → " + e.To + ": " + strings.ReplaceAll(e.Preview, "\n", " ")
	case watch.FollowContest:
		lost := "-"
		if len(e.Lost) > 0 {
			lost = strings.Join(e.Lost, ", ")
		}
		return "contest  " + e.Ref + "  won by " + e.Winner + "; superseded: " + lost
	default:
		return "problem  " + e.Error + " (retrying on the next change)"
	}
}

func quote(s string) string { return `"` + s + `"` }
