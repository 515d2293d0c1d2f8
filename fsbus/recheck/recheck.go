// Package recheck folds the owner's newest counting checkpoint again, once per
// checkpoint and machine, off the request path of a long-running process (`ferry mcp
// serve`, `ferry run`, `ferry daemon`), and writes the signed dispute when the state
// differs (docs/format.md §20 "Checking", ADR 0019 §7).
//
// The result is kept in the machine's cache as
//
//	<cache>/channels/<project>/recheck/<checkpoint entry hash>.json
//
// A match, or a machine that lacks the history below the cut ("absent"), is final for
// that checkpoint and fold rules. A dispute is folded again at each long-running
// process's start, so that a machine whose build or files were repaired withdraws it.
// A checkpoint whose files have not all arrived keeps no result and is tried at the
// next start. Only one process of the machine rechecks at a time (recheck.lock).
package recheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/gofrs/flock"
)

// Outcomes of a recheck.
const (
	Match   = "match"   // the state folded here is the checkpoint's
	Dispute = "dispute" // it differs: a checkpoint.dispute was written (or Detail says why not)
	Absent  = "absent"  // records at or below the cut are not in this folder
	Pending = "pending" // files the recheck needs have not all arrived; never kept
)

// Result is what this machine found when it folded a counting checkpoint again.
type Result struct {
	Checkpoint string `json:"checkpoint"` // the checkpoint entry's hash
	Epoch      int    `json:"epoch"`
	Rules      int    `json:"rules"` // the fold rules of the build that rechecked
	Outcome    string `json:"outcome"`
	First      string `json:"first,omitempty"`  // the lowest differing thing id of a dispute
	Entry      string `json:"entry,omitempty"`  // the dispute or withdrawal entry written
	Detail     string `json:"detail,omitempty"` // why Absent, or why no entry was written
	At         string `json:"at"`               // RFC 3339, this machine's clock
}

// Path is where the result for the checkpoint entry hash is kept.
func Path(ch *fsbus.Channel, hash string) string {
	// The hex alone: "sha256:…" is an alternate data stream's name on NTFS.
	return filepath.Join(ch.Home.StateDir(ch.Project()), "recheck", strings.TrimPrefix(hash, "sha256:")+".json")
}

// Kept returns the result kept for the newest counting checkpoint of ch's last Load,
// or nil when there is none or no result is kept.
func Kept(ch *fsbus.Channel) *Result {
	cf := ch.OwnerCheckpoint()
	if cf == nil || len(cf.Chain) == 0 {
		return nil
	}
	return read(Path(ch, cf.Chain[len(cf.Chain)-1].Entry.Hash()))
}

func read(p string) *Result {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var r Result
	if json.Unmarshal(b, &r) != nil || r.Checkpoint == "" {
		return nil // damaged: rechecked again
	}
	return &r
}

// final reports whether r settles its checkpoint for this build.
func final(r *Result) bool {
	return r != nil && r.Rules == fold.RulesVersion && r.Outcome != Dispute
}

// Run rechecks the newest counting checkpoint as the agent name, on a channel open
// returns (one of its own, sharing no state with the caller's), unless a final result
// is kept or another process of the machine is rechecking. It returns the result
// (Pending, never kept, when files it needs have not all arrived), nil when there was
// nothing to do: no checkpoint head in the folder (nothing is folded then), no
// counting checkpoint, one folded under other fold rules (this build neither starts
// from it nor disputes it), a kept final result, or another process at it.
func Run(open func() (*fsbus.Channel, error), name string) (*Result, error) {
	ch, err := open()
	if err != nil {
		return nil, err
	}
	if heads, _ := filepath.Glob(filepath.Join(ch.Root, "checkpoints", "*", "head.json")); len(heads) == 0 {
		return nil, nil
	}
	v, err := ch.Load()
	if err != nil {
		return nil, err
	}
	cf := ch.OwnerCheckpoint()
	if cf == nil || len(cf.Chain) == 0 || cf.ReadOnly {
		return nil, nil
	}
	top := cf.Chain[len(cf.Chain)-1]
	p := Path(ch, top.Entry.Hash())
	if final(read(p)) {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	lk := flock.New(filepath.Join(filepath.Dir(p), "recheck.lock"))
	if ok, err := lk.TryLock(); err != nil || !ok {
		return nil, err // another process of this machine is rechecking
	}
	defer func() { _ = lk.Unlock() }()
	if final(read(p)) {
		return nil, nil
	}
	probs, d, err := ch.Recheck(v)
	if err != nil {
		return nil, err
	}
	r := &Result{Checkpoint: top.Entry.Hash(), Epoch: top.Data.Epoch, Rules: fold.RulesVersion, Outcome: Match, At: now(ch).UTC().Format(time.RFC3339)}
	for _, pr := range probs {
		switch pr.Kind {
		case "pending":
			r.Outcome, r.Detail = Pending, pr.Detail
			return r, nil // the checkpoint's files are not all here: kept for no one, tried again
		case "cut", "absent":
			r.Outcome, r.Detail = Absent, pr.Detail
		}
	}
	if r.Outcome == Match {
		settle(ch, v, name, cf, d, r)
		if r.Outcome == Match && r.Detail != "" {
			return r, nil // a withdrawal not written: kept for no one, tried at the next start
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := fsutil.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("keeping the recheck of checkpoint %s: %w", r.Checkpoint, err)
	}
	return r, nil
}

// settle writes name's dispute of the newest counting checkpoint of cf when d (the
// first checkpoint that differs, nil when the states matched) is not nil; otherwise it
// withdraws every dispute of it standing in v that was written on this device, whoever
// wrote it, so that no agent's dispute outlives the machine's match. It notes what it
// did in r. A write refused (a worker's level, a locked key, a key not on this
// machine) is noted in r.Detail: the recheck itself stands, and the write is tried
// again at the next recheck.
func settle(ch *fsbus.Channel, v *fsbus.View, name string, cf *fold.ChannelFold, d *fold.Dispute, r *Result) {
	top := cf.Chain[len(cf.Chain)-1]
	td := fold.Dispute{Epoch: top.Data.Epoch, Hash: top.Entry.Hash(), Rules: fold.RulesVersion}
	if d != nil {
		td.First = d.First
		r.Outcome, r.First = Dispute, d.First
		if err := write(ch, name, td, false, r); err != nil {
			r.Detail = "the dispute was not written: " + err.Error()
		}
		return
	}
	for _, sd := range fold.StandingDisputes(v.Snapshot.Entries, v.State, cf.Chain) {
		if sd.Device != ch.Device {
			continue
		}
		if err := write(ch, sd.Writer, td, true, r); err != nil {
			r.Detail = "the withdrawal of " + sd.Writer + "'s dispute was not written: " + err.Error()
		}
	}
}

// write writes name's dispute d, or its withdrawal, and notes the entry in r.
func write(ch *fsbus.Channel, name string, d fold.Dispute, withdrawn bool, r *Result) error {
	s, err := ch.As(name)
	if err != nil {
		return err
	}
	e, err := s.Dispute(d, withdrawn)
	if err == nil && e.Seq != 0 {
		r.Entry = e.Hash()
	}
	return err
}

// Poll is how often Start looks for a checkpoint head it has not rechecked; a recheck
// that found files not yet arrived, or failed, is tried again at the next poll, then
// after twice as many polls each time, up to an hour's.
const Poll = time.Minute

// Start runs Run in the background, and again whenever the set of checkpoint heads in
// the folder changes (looked at every Poll) until ctx is done, so a long-running
// process rechecks a checkpoint that arrives while it runs. It writes what it found,
// or why it failed, to log: a dispute loudly, a match or an absent history in one line.
func Start(ctx context.Context, open func() (*fsbus.Channel, error), name string, log io.Writer) {
	root := ""
	p := &poller{
		heads: func() (string, error) { return headNames(open, &root) },
		run:   func() (*Result, error) { return Run(open, name) },
		log:   log,
	}
	t := time.NewTicker(Poll)
	go func() {
		defer t.Stop()
		p.loop(ctx, t.C)
	}()
}

// poller is Start's loop, its heads and recheck given as functions. Its waits are
// counted in polls, not on the clock: a recheck takes time, and a retry due a Poll
// after it ended would miss the tick a Poll after it began.
type poller struct {
	heads func() (string, error) // the set of checkpoint heads in the folder
	run   func() (*Result, error)
	log   io.Writer

	seen string // the heads at the last recheck
	wait int    // polls from the last recheck to its retry; 0: no retry
	left int    // polls until the retry
}

// loop takes a step at once and at every tick, until ctx is done.
func (p *poller) loop(ctx context.Context, tick <-chan time.Time) {
	for {
		p.step()
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// step is one poll: it looks at the heads and rechecks when they changed since the
// last recheck or a retry is due.
func (p *poller) step() {
	if p.left > 0 {
		p.left--
	}
	heads, err := p.heads()
	switch {
	case err != nil:
	case heads != p.seen:
		p.seen, p.wait = heads, 0
		p.try()
	case p.wait > 0 && p.left == 0:
		p.try()
	}
}

// try rechecks, and when the recheck is to be tried again sets the retry: a poll
// after the first try, then twice as many polls after each further one, up to an
// hour's.
func (p *poller) try() {
	if !p.report() {
		p.wait = 0
		return
	}
	p.wait = max(1, min(2*p.wait, int(time.Hour/Poll)))
	p.left = p.wait
}

// headNames lists the channel's checkpoint heads; *root is the channel folder, found
// by opening the channel once (a look every Poll reads no channel.toml).
func headNames(open func() (*fsbus.Channel, error), root *string) (string, error) {
	if *root == "" {
		ch, err := open()
		if err != nil {
			return "", err
		}
		*root = ch.Root
	}
	heads, err := filepath.Glob(filepath.Join(*root, "checkpoints", "*", "head.json"))
	return strings.Join(heads, "\n"), err
}

// report runs the recheck and logs it; it reports whether to try again: when the
// recheck failed or its files had not all arrived.
func (p *poller) report() bool {
	r, err := p.run()
	switch {
	case err != nil:
		fmt.Fprintf(p.log, "ferry: rechecking the owner's checkpoint: %v\n", err)
		return true
	case r == nil:
	case r.Outcome == Pending:
		return true
	case r.Outcome == Dispute:
		fmt.Fprintf(p.log, "ferry: the owner's checkpoint of epoch %d (%s) holds another state than this machine folds from the entries at or below its cut, first at %s: disputed%s\n",
			r.Epoch, r.Checkpoint, r.First, detail(r))
	default:
		fmt.Fprintf(p.log, "ferry: rechecked the owner's checkpoint of epoch %d: %s%s\n", r.Epoch, r.Outcome, detail(r))
	}
	return false
}

func now(ch *fsbus.Channel) time.Time {
	if ch.Now != nil {
		return ch.Now()
	}
	return time.Now()
}

func detail(r *Result) string {
	if r.Detail == "" {
		return ""
	}
	return " (" + r.Detail + ")"
}
