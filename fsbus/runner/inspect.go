package runner

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// InspectRow is one order as `ferry inspect` shows it (docs/runs.md "`ferry inspect`").
type InspectRow struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	State  string `json:"state"`
	Holder string `json:"holder,omitempty"`
	Author string `json:"author"`
	// AgeS is how long ago this machine first saw the order's creation (its arrival
	// log, this machine's clock; docs/design.md §2 rule 7; an entry written here counts from
	// its writing), in seconds; -1 when unknown.
	AgeS int64 `json:"age_s"`
	// IdleS is how long ago this machine's arrival log first saw the newest-arrived
	// entry about the order (any order.* entry naming it), in seconds; -1 when unknown.
	IdleS int64 `json:"idle_s"`
	// Retries counts the times the order went back: releases, fails and expiries.
	Retries int `json:"retries"`
	// LastError is the note of the newest release, fail or expiry ("" when none).
	LastError string `json:"last_error,omitempty"`
	// Run names the live unattended run on this machine holding the order, if any.
	Run *fsbus.RunBeat `json:"run,omitempty"`
}

// Inspect lists orders for `ferry inspect`: every order that is not accepted or
// cancelled (all when all is set), only those agent wrote or holds when agent is set,
// oldest first. Ages are this machine's: from when it saw the entries arrive.
func Inspect(c *fsbus.Channel, v *fsbus.View, agent string, all bool) []InspectRow {
	now := now(c)
	// The idle time runs from the newest arrival on this machine of any entry about the
	// order — lifecycle, progress, extend, a losing branch alike (not
	// the newest entry by its writer's clock).
	// An entry written on this machine arrived when it was written: a writer ingests
	// its own entries only at its next read (a `ferry order claim` process never
	// reads again), so its HLC — this machine's own clock, unless a peer's clock
	// pushed it later — is used when it is earlier than the arrival log's sighting.
	lastSeen, created := map[string]int64{}, map[string]int64{}
	entries := v.Snapshot.Entries
	if b := v.State.Base(); b != nil {
		// Folded from an owner's checkpoint: a live order's entries at or below the cut
		// are the state's lines, not in a reading from the cut.
		entries = append(slices.Clone(b.Lines), entries...)
	}
	for i := range entries {
		e := &entries[i]
		if !strings.HasPrefix(e.Type, "order.") || v.State.Order(e.Ref) == nil {
			continue
		}
		t := v.Arrivals.Seen(e.Hash())
		if t.IsZero() {
			continue
		}
		ms := t.UnixMilli()
		if e.Device == c.Device {
			if h, err := ledger.ParseHLC(e.HLC); err == nil && h.Ms < ms {
				ms = h.Ms
			}
		}
		if ms > lastSeen[e.Ref] {
			lastSeen[e.Ref] = ms
		}
		if e.Type == fold.TypeOrderCreate {
			created[e.Ref] = ms
		}
	}
	runs := map[string]*fsbus.RunBeat{}
	agents := map[string]bool{}
	for _, o := range v.State.Orders {
		if o.Holder != "" {
			agents[o.Holder] = true
		}
	}
	for a := range agents {
		for _, r := range c.Home.LiveRuns(c.Project(), a) {
			runs[r.Order] = &fsbus.RunBeat{Run: r.Run, Order: r.Order, PID: r.PID}
		}
	}
	orders := v.State.Orders
	if all {
		orders = v.State.AllOrders() // those terminal at the owner's checkpoint too
	}
	var out []InspectRow
	for _, id := range slices.Sorted(maps.Keys(orders)) {
		o := orders[id]
		if (!all && fold.Terminal(o.State)) || (agent != "" && o.Author != agent && o.Holder != agent) {
			continue
		}
		row := InspectRow{ID: o.ID, Title: o.Title, State: string(o.State), Holder: o.Holder, Author: o.Author, AgeS: -1, IdleS: -1}
		if t, ok := created[o.ID]; ok {
			row.AgeS = max(0, int64(now.Sub(time.UnixMilli(t))/time.Second))
		}
		if t, ok := lastSeen[o.ID]; ok {
			row.IdleS = max(0, int64(now.Sub(time.UnixMilli(t))/time.Second))
		}
		for _, h := range o.History {
			switch h.Type {
			case fold.TypeOrderRelease, fold.TypeOrderFail, fold.TypeOrderExpire:
				row.Retries++
				if h.Note != "" {
					row.LastError = h.Note
				}
			}
		}
		if o.Holder != "" {
			row.Run = runs[o.ID]
		}
		out = append(out, row)
	}
	slices.SortStableFunc(out, func(a, b InspectRow) int {
		return strings.Compare(orders[a.ID].Created, orders[b.ID].Created)
	})
	return out
}
