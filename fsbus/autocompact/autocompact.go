// Package autocompact is automatic compaction (docs/format.md §20 "Automatic
// compaction", ADR 0019 §7): `ferry daemon` on the compactor device writes the owner's
// next checkpoint once the policy says it is due. It never runs inside `ferry mcp
// serve` (MCP never writes master entries), never with the master key locked or absent,
// never while Syncthing reports the channel's folder with no connected peer, and never
// before the first checkpoint: that one, which moves the channel to format 2 and names
// the compactor, is the owner's own `ferry compact`.
package autocompact

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/ledger"
)

// Decision is whether a compaction is due on this machine and why (or why not).
type Decision struct {
	Due    bool
	Reason string
}

// Decide says whether the channel of v, as ch's last Load folded it, is due for an
// automatic compaction on this machine at now. sync is Syncthing's view of the folder
// (synchealth.Probe; nil: not asked).
func Decide(ch *fsbus.Channel, v *fsbus.View, sync *synchealth.Health, now time.Time) Decision {
	p := ch.PolicyOf(v)
	if p.CompactAfterS == 0 && p.CompactEntries == 0 {
		return Decision{Reason: "the policy sets neither compact_after_s nor compact_entries"}
	}
	cf := ch.OwnerCheckpoint()
	if cf == nil || len(cf.Chain) == 0 {
		return Decision{Reason: "no owner's checkpoint yet: the first is the owner's own `ferry compact`"}
	}
	if cf.ReadOnly {
		return Decision{Reason: "the checkpoint was folded under other fold rules: this build writes nothing"}
	}
	settle := time.Duration(p.SettleSeconds()) * time.Second
	seen := func(hash string) int64 {
		if t := v.Arrivals.Seen(hash); !t.IsZero() {
			return t.UnixMilli()
		}
		return 0
	}
	// A checkpoint that has not counted here for the settle time the compaction
	// replaces (docs/format.md §20 "Replacing a checkpoint that does not count").
	if _, b := cf.Replacement(seen, now.Add(-settle).UnixMilli()); b != nil {
		return Decision{Reason: fmt.Sprintf("the owner's checkpoint of epoch %d does not count here yet (%s): %s", b.Epoch, b.Kind, b.Detail)}
	}
	top := cf.Chain[len(cf.Chain)-1]
	if top.Head.Compactor != ch.Device {
		return Decision{Reason: fmt.Sprintf("this device (%s) is not the compactor (%s)", ch.Device, top.Head.Compactor)}
	}
	switch st, _ := ch.Home.KeyStatus(ch.Project(), fold.MasterWriter); st {
	case fsbus.KeyPlain, fsbus.KeyUnlocked:
	case fsbus.KeyLocked:
		return Decision{Reason: "the master key is locked (`ferry key unlock`)"}
	default:
		return Decision{Reason: "the master key is not on this machine"}
	}
	if sync != nil && sync.InUse && sync.Connected == 0 {
		return Decision{Reason: "Syncthing reports no connected peer for the channel's folder"}
	}
	// Only entries the next cut may cover count: above the newest cut, and first seen
	// here at least the settle time ago (docs/format.md §20 "The cut").
	above := 0
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if seen := v.Arrivals.Seen(e.Hash()); !top.Head.Cut.Below(e.Writer, e.Device, e.Seq) && !seen.IsZero() && now.Sub(seen) >= settle {
			above++
		}
	}
	if p.CompactEntries > 0 && int64(above) >= p.CompactEntries {
		return Decision{Due: true, Reason: fmt.Sprintf("%d settled entries above the cut of epoch %d (compact_entries %d)", above, top.Data.Epoch, p.CompactEntries)}
	}
	if h, err := ledger.ParseHLC(top.Entry.HLC); err == nil && p.CompactAfterS > 0 && above > 0 {
		if age := now.Sub(time.UnixMilli(h.Ms)); age >= time.Duration(p.CompactAfterS)*time.Second {
			return Decision{Due: true, Reason: fmt.Sprintf("the checkpoint of epoch %d is %s old (compact_after_s %d)", top.Data.Epoch, age.Round(time.Second), p.CompactAfterS)}
		}
	}
	return Decision{Reason: fmt.Sprintf("not due: %d settled entries above the cut of epoch %d", above, top.Data.Epoch)}
}

// Run decides on ch (a channel the caller keeps for its own use, so each Load folds
// only what is new; Decide, asking Syncthing within synchealth.Deadline only once the
// rest says due) and, when due, compacts as the master with the policy's settle time.
// Seated writers not seen to advance within it do not stop it (the policy keys are the
// owner's standing consent, as --force is; a fleet always has an idle agent): the
// result names them (Unsettled). A refusal (a standing dispute, a checkpoint that
// does not count here) is the error. A folder holding no checkpoint head costs no fold. It returns the decision
// and the compaction's result (nil when none was tried).
func Run(ctx context.Context, ch *fsbus.Channel, now time.Time) (Decision, *fold.CompactResult, error) {
	if heads, _ := filepath.Glob(filepath.Join(ch.Root, "checkpoints", "*", "head.json")); len(heads) == 0 {
		return Decision{Reason: "no owner's checkpoint yet: the first is the owner's own `ferry compact`"}, nil, nil
	}
	v, err := ch.Load()
	if err != nil {
		return Decision{}, nil, err
	}
	if d := Decide(ch, v, nil, now); !d.Due {
		return d, nil, nil
	}
	d := Decide(ch, v, synchealth.Probe(ctx, ch.Root), now)
	if !d.Due {
		return d, nil, nil
	}
	// The compaction reads the ledger whole: on a channel of its own, so ch keeps
	// reading from the cut.
	fresh, err := fsbus.Open(ch.Home, ch.Root)
	if err != nil {
		return d, nil, err
	}
	fresh.Now, fresh.Boot = ch.Now, ch.Boot
	m, err := fresh.As(fold.MasterWriter)
	if err != nil {
		return d, nil, err
	}
	r, err := m.Compact(fsbus.CompactOptions{Force: true})
	return d, r, err
}
