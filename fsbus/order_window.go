package fsbus

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Window kinds of order.expire (data.window).
const (
	WindowExecution = "execution"
	WindowQueue     = "queue"
)

// Window is an order's running window as this machine measures it.
type Window struct {
	Kind string `json:"kind"` // execution|queue
	// Deadline is when the window closes on this machine's wall clock: now plus what
	// is left of it on the boot clock (ADR 0013), so a wall-clock step moves the
	// deadline with it and never closes the window.
	Deadline time.Time `json:"deadline"`
	// Cap is when the claim's lifetime ends (execution only).
	Cap time.Time `json:"cap,omitzero"`
}

// Window returns the window o is in, measured on this machine's clock from when this
// machine saw the entries that opened or renewed it, never from another machine's
// timestamps (docs/design.md §2 rule 7): an entry written on this device counts from its own
// HLC stamp (this machine's clock when it wrote it; the earlier of that and its
// arrival), any other from its first arrival in this machine's arrival log. An
// execution window runs from the current claim, renewed by each progress and extend
// on it (and by a review asking for changes), capped at the claim plus the lifetime; a
// queue window runs from the entry that made the order open or offered, when the
// order's queue window is set. ok is false when no window runs (other states, no queue
// window, or entries this machine has not seen). Time is measured from those sightings
// on the boot clock; a wall-clock step or a reboot since a sighting restarts the time
// from the first observation after it (ADR 0013).
func (c *Channel) Window(v *View, o *fold.Order) (w Window, ok bool) {
	return c.window(v, o, c.ownStamps(v), c.stamp())
}

// ownStamps maps the hash of every entry written on this device to its HLC's physical
// time (this machine's wall clock when it wrote it, unless a peer's clock pushed it
// later), on both clocks (Arrivals.stampOwn).
func (c *Channel) ownStamps(v *View) map[string]arrivals.Stamp {
	m := map[string]arrivals.Stamp{}
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if e.Device != c.Device {
			continue
		}
		if h, err := ledger.ParseHLC(e.HLC); err == nil {
			m[e.Hash()] = v.Arrivals.StampOwn(h.Ms)
		}
	}
	return m
}

// seenAt is when this machine saw the entry hash, as a time on now's wall clock (zero
// when never): the earlier of its arrival and, for an entry of this device, its
// writing (see Window).
func seenAt(v *View, own map[string]arrivals.Stamp, hash string, now arrivals.Stamp) time.Time {
	at, ok := v.Arrivals.SeenStamp(hash)
	if w, mine := own[hash]; mine && (!ok || at.Later(w)) {
		at, ok = w, true
	}
	if !ok {
		return time.Time{}
	}
	return now.At(at)
}

func (c *Channel) window(v *View, o *fold.Order, own map[string]arrivals.Stamp, now arrivals.Stamp) (w Window, ok bool) {
	ws := c.PolicyOf(v).Windows(o)
	switch o.State {
	case fold.StateClaimed, fold.StateChangesRequested:
		start := seenAt(v, own, o.Claim, now)
		if start.IsZero() {
			return w, false
		}
		last := start
		renew := []string{}
		for _, p := range o.Progress {
			renew = append(renew, p.Hash)
		}
		if o.State == fold.StateChangesRequested {
			renew = append(renew, o.Head)
		}
		for _, h := range renew {
			if t := seenAt(v, own, h, now); t.After(last) {
				last = t
			}
		}
		w = Window{Kind: WindowExecution, Deadline: last.Add(time.Duration(ws.ExecS) * time.Second),
			Cap: start.Add(time.Duration(ws.LifetimeS) * time.Second)}
		if w.Cap.Before(w.Deadline) {
			w.Deadline = w.Cap
		}
		return w, true
	case fold.StateOpen, fold.StateOffered:
		if ws.QueueS <= 0 {
			return w, false
		}
		start := seenAt(v, own, o.Head, now)
		if start.IsZero() {
			return w, false
		}
		return Window{Kind: WindowQueue, Deadline: start.Add(time.Duration(ws.QueueS) * time.Second)}, true
	}
	return w, false
}

// expiryDue reports the window s may expire on o at now: the execution window of a
// claim s made from this device, or the queue window of an order s wrote from this
// device (only the holder's own machine, or the author's, decides an expiry).
func (s *Session) expiryDue(v *View, o *fold.Order, own map[string]arrivals.Stamp, now arrivals.Stamp) (string, bool) {
	w, ok := s.window(v, o, own, now)
	if !ok || now.Time().Before(w.Deadline) {
		return "", false
	}
	switch w.Kind {
	case WindowExecution:
		if _, here := own[o.Claim]; here && o.Holder == s.Name {
			return w.Kind, true
		}
	case WindowQueue:
		if len(o.History) == 0 {
			return "", false
		}
		if _, here := own[o.History[0].Hash]; here && o.Author == s.Name {
			return w.Kind, true
		}
	}
	return "", false
}

// SettleWindows writes order.expire for every window this session is entitled to
// close that has passed by this machine's clock: the execution window of each claim
// it made from this device (→ timed_out) and the queue window of each open or offered
// order it wrote from this device. Windows are measured by Channel.Window. It runs
// under the channel lock from one reading of the channel, so it is idempotent: an
// order already expired (or renewed meanwhile) is left alone. It returns the orders it
// expired, in id order, as folded afterwards; errors are those of Load and of the
// append (the orders expired before the error stay expired).
func (s *Session) SettleWindows() ([]*fold.Order, error) {
	var ids []string
	var v *View
	err := s.withChannelLock(func() error {
		var err error
		if v, err = s.Load(); err != nil {
			return err
		}
		ids, err = s.settleLocked(v)
		if len(ids) > 0 {
			var lerr error
			if v, lerr = s.Load(); err == nil {
				err = lerr
			}
		}
		return err
	})
	if len(ids) == 0 || v == nil {
		return nil, err
	}
	out := make([]*fold.Order, 0, len(ids))
	for _, id := range ids {
		if o := v.State.Order(id); o != nil {
			out = append(out, o)
		}
	}
	return out, err
}

// settleLocked appends, holding the channel lock, one order.expire per window due in v
// (see SettleWindows) and returns the expired order ids.
func (s *Session) settleLocked(v *View) ([]string, error) {
	var own map[string]arrivals.Stamp
	now := s.stamp()
	var ids []string
	var drafts []ledger.Draft
	for _, id := range v.State.OrderIDs() {
		o := v.State.Orders[id]
		if o.Holder != s.Name && o.Author != s.Name {
			continue
		}
		if own == nil {
			own = s.ownStamps(v)
		}
		kind, ok := s.expiryDue(v, o, own, now)
		if !ok {
			continue
		}
		d := fold.EntryData{Window: kind, Basis: o.Head, Note: kind + " window closed by the clock of the machine that wrote this"}
		if _, err := o.C.Step(fold.TypeOrderExpire, s.Name, "", v.State.LevelOf(s.Name), d); err != nil {
			continue // not this writer's to close after all (e.g. a level it lost): leave it
		}
		ids = append(ids, id)
		drafts = append(drafts, ledger.Draft{Type: fold.TypeOrderExpire, Ref: id, Data: mustJSON(d)})
	}
	if len(drafts) == 0 {
		return nil, nil
	}
	if err := s.checkIdentity(v.State, fold.TypeOrderExpire); err != nil {
		return nil, err
	}
	// Writes will happen: make this writer's chain whole first, and decide
	// again when that brought records back.
	nv, err := s.ensureChain(v)
	if err != nil {
		return nil, err
	}
	if nv != v {
		return s.settleLocked(nv)
	}
	if err := s.checkLost(v); err != nil {
		return nil, err
	}
	hlc := s.observedHLC(v)
	for i, d := range drafts {
		if _, err := s.appendMarked(v, d, hlc); err != nil {
			return ids[:i], err
		}
	}
	return ids, nil
}

// Extend renews the holder's execution window on its current claim: an
// order.extend naming the claim (like progress, docs/design.md §2), with an optional note. The
// window runs again from now on this machine, never past the claim's lifetime: when
// the lifetime cut it, the order comes back with a warning saying "capped at lifetime"
// and the deadline. Errors: denied for a non-holder or below member level; conflict when the order is
// not claimed, or when its window already closed by this machine's clock (the holder's
// SettleWindows then expires it: extend cannot revive a closed window); invalid for a
// note with control characters or over MaxNote bytes; not_found for the id.
func (s *Session) Extend(q string, opt NoteOptions) (*fold.Order, error) {
	note := strings.TrimSpace(opt.Note)
	if contract.HasControl(note, true) {
		return nil, errs.Errorf(errs.Invalid, "remove terminal escapes and other control characters", "note holds control characters")
	}
	if err := checkCap("extend note", note, MaxNote, unitBytes, ""); err != nil {
		return nil, err
	}
	v, e, o, err := s.holderEntry(q, fold.TypeOrderExtend, note, "", opt.Key,
		"only the holder extends its window", "only a running claim is extended", "only a running claim is extended",
		func(v *View, o *fold.Order) error {
			now := s.stamp()
			if w, ok := s.window(v, o, s.ownStamps(v), now); ok && !now.Time().Before(w.Deadline) {
				return errs.Errorf(errs.Conflict, "claim it again if it is still open after the expiry (`ferry order claim "+o.ID+"`)",
					"the execution window of order %s closed at %s (this machine's clock)", o.ID, w.Deadline.UTC().Format(time.RFC3339))
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if w, ok := s.Window(s.viewWithEntry(v, e), o); ok && !w.Cap.IsZero() && !w.Deadline.Before(w.Cap) {
		// An extend that reached the lifetime says so.
		o = withWarnings(o, []string{fmt.Sprintf("capped at lifetime: the execution window ends at %s (this machine's clock), the claim's lifetime; extend cannot go past it (submit, or release for another attempt)",
			w.Deadline.UTC().Format(time.RFC3339))})
	}
	return o, nil
}

// Fail ends the holder's attempt: the order becomes failed, with the reason (opt.Note)
// recorded for whoever claims it next (a failed order may be claimed again). Errors:
// invalid when the reason is empty, over MaxNote bytes or holds control characters;
// denied for a non-holder; conflict when the order is not claimed; not_found for the id.
func (s *Session) Fail(q string, opt NoteOptions) (*fold.Order, error) {
	reason := strings.TrimSpace(opt.Note)
	if reason == "" {
		return nil, errs.Errorf(errs.Invalid, "pass --reason TEXT: what went wrong, for whoever takes it next", "a fail needs a reason")
	}
	if err := checkCap("fail reason", reason, MaxNote, unitBytes, ""); err != nil {
		return nil, err
	}
	return s.lifecycle(q, fold.TypeOrderFail, fold.EntryData{Note: reason}, opt.Key, nil)
}

// Decline hands back an order offered to s: it is open again for anyone.
// It is an order.release while the order is offered. Errors: conflict when the order
// is not offered; denied when it is offered to another agent; invalid for a note with
// control characters; not_found for the id.
func (s *Session) Decline(q string, opt NoteOptions) (*fold.Order, error) {
	note := strings.TrimSpace(opt.Note)
	if err := checkCap("decline note", note, MaxNote, unitBytes, ""); err != nil {
		return nil, err
	}
	var refused error
	o, err := s.lifecycle(q, fold.TypeOrderRelease, fold.EntryData{Note: note}, opt.Key, func(o *fold.Order) bool {
		if o.State != fold.StateOffered { // a claim is given back by Release
			refused = errs.Errorf(errs.Conflict, "`ferry order release "+o.ID+"` gives a claim back",
				"order %s is %s, not offered; nothing to decline", o.ID, o.State)
		}
		return refused != nil
	})
	if refused != nil {
		return nil, refused
	}
	return o, err
}

// Retire retires agent name and gives back everything it held (docs/design.md §2
// level table): the agent itself, or the master, writes agent.retire, then one
// signed order.release (data.agent = name) per order it holds or is offered, so every
// release is in the ledger. It returns the ids of the orders released, sorted; a
// second call writes only what is still held (idempotent). Errors: denied when s is
// neither name nor the master; invalid for a bad name or for retiring the master;
// not_found when no agent of that name has joined or been seated. After the retire,
// every write by the retired agent is refused (denied) but these releases, and the
// fold counts none of its later entries.
func (s *Session) Retire(name string) ([]string, error) {
	if name == fold.MasterWriter {
		return nil, errs.Errorf(errs.Invalid, "", "the master is not retired")
	}
	if err := fold.CheckName("agent name", name); err != nil {
		return nil, err
	}
	if s.Name != name && s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "the agent retires itself (`--as "+name+"`), or the owner retires it", "%s cannot retire %s", s.Name, name)
	}
	_, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		a := v.State.Agents[name]
		if a == nil || (a.JoinKey == "" && !a.Seated) {
			return nil, nil, errs.Errorf(errs.NotFound, "list agents with `ferry agents`", "no agent %q in this channel", name)
		}
		if a.Retired {
			return nil, nil, nil
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeAgentRetire); err != nil {
			return nil, nil, err
		}
		d := fold.EntryData{}
		if s.Name != name {
			// The master's retire bounds the agent's segments as it has seen them, as a
			// revocation does: later entries count for nothing (an agent's own retire
			// bounds its segment at the retire's seq).
			d.Bounds, d.BoundHashes = a.Bounds(), boundHashes(v, a) // attested bounds (attest.go)
		}
		return &ledger.Draft{Type: fold.TypeAgentRetire, Ref: name, Data: mustJSON(d)}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range v.State.OrderIDs() {
		o := v.State.Orders[id]
		if o.Holder != name && !(o.State == fold.StateOffered && o.OfferedTo == name) {
			continue
		}
		if _, err := s.lifecycle(id, fold.TypeOrderRelease, fold.EntryData{Agent: name, Note: "agent " + name + " retired"}, "", nil); err != nil {
			if errs.Is(err, errs.Conflict) || errs.Is(err, errs.Denied) {
				// Moved on meanwhile (submitted, reassigned), or an offer to a worker,
				// whose level writes no release (the master's retire declines it).
				continue
			}
			return out, fmt.Errorf("releasing %s: %w", id, err)
		}
		out = append(out, id)
	}
	return out, nil
}
