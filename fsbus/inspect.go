package fsbus

import (
	"sort"
	"time"
)

// InspectRow is one order as `ferry inspect` shows it (issue 6 "Unattended runs").
type InspectRow struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	State  string `json:"state"`
	Holder string `json:"holder,omitempty"`
	Author string `json:"author"`
	// AgeS is how long ago this machine first saw the order's creation (its arrival
	// log, this machine's clock; DESIGN §2 rule 7), in seconds; -1 when unknown.
	AgeS int64 `json:"age_s"`
	// IdleS is how long ago this machine saw the order's last entry, in seconds.
	IdleS int64 `json:"idle_s"`
	// Retries counts the times the order went back: releases, fails and expiries.
	Retries int `json:"retries"`
	// LastError is the note of the newest release, fail or expiry ("" when none).
	LastError string `json:"last_error,omitempty"`
	// Run names the live unattended run on this machine holding the order, if any.
	Run *RunBeat `json:"run,omitempty"`
}

// Inspect lists orders for `ferry inspect`: every order that is not accepted or
// cancelled (all when all is set), only those agent wrote or holds when agent is set,
// oldest first. Ages are this machine's: from when it saw the entries arrive.
func (c *Channel) Inspect(v *View, agent string, all bool) []InspectRow {
	now := c.now()
	since := func(hash string) int64 {
		t := v.Arrivals.Seen(hash)
		if t.IsZero() {
			return -1
		}
		return int64(now.Sub(t) / time.Second)
	}
	runs := map[string]*RunBeat{}
	agents := map[string]bool{}
	for _, o := range v.State.Orders {
		if o.Holder != "" {
			agents[o.Holder] = true
		}
	}
	for a := range agents {
		for _, r := range c.Home.LiveRuns(c.Project(), a) {
			runs[r.Order] = &RunBeat{Run: r.Run, Order: r.Order, PID: r.PID}
		}
	}
	var out []InspectRow
	for _, id := range v.State.OrderIDs() {
		o := v.State.Orders[id]
		if (!all && Terminal(o.State)) || (agent != "" && o.Author != agent && o.Holder != agent) {
			continue
		}
		row := InspectRow{ID: o.ID, Title: o.Title, State: o.State, Holder: o.Holder, Author: o.Author, AgeS: -1, IdleS: -1}
		if len(o.History) > 0 {
			row.AgeS = since(o.History[0].Hash)
			last := o.History[len(o.History)-1].Hash
			if n := len(o.Progress); n > 0 && o.Progress[n-1].HLC > o.History[len(o.History)-1].HLC {
				last = o.Progress[n-1].Hash
			}
			row.IdleS = since(last)
		}
		for _, h := range o.History {
			switch h.Type {
			case TypeOrderRelease, TypeOrderFail, TypeOrderExpire:
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
	sort.SliceStable(out, func(i, j int) bool { return v.State.Orders[out[i].ID].Created < v.State.Orders[out[j].ID].Created })
	return out
}
