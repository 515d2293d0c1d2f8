package fsbus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/guard"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// PresenceObject is presence/<writer>.<device>.json: the writer's latest heartbeat,
// rewritten in place only by that writer on that device (docs/design.md §2 "Orders, asks,
// presence"). Its id is "<writer>.<device>". At is the writer's own clock, for display
// only: liveness is measured by when this machine saw the file change.
type PresenceObject struct {
	fold.Envelope
	At    string   `json:"at"`              // RFC 3339 UTC with milliseconds
	Doing string   `json:"doing,omitempty"` // one line, ≤ 200 bytes
	Runs  []string `json:"runs,omitempty"`  // order ids the writer holds
	// Running names the unattended runs of the writer on this device (docs/runs.md
	// "Dead workers"): run id, order, supervising pid. Optional; older readers ignore it.
	Running []RunBeat `json:"running,omitempty"`
}

// maxDoing is the longest presence "doing" line, in bytes.
const maxDoing = 200

// Presence is a writer's heartbeat as this machine saw it.
type Presence struct {
	Writer string   `json:"writer"`
	Device string   `json:"device"`
	Doing  string   `json:"doing,omitempty"`
	At     string   `json:"at"`
	Runs   []string `json:"runs,omitempty"`
	// Running is the writer's unattended runs on that device (see PresenceObject).
	Running []RunBeat `json:"running,omitempty"`
	// SeenMs is when this machine first saw this version of the file (Unix ms), on its
	// wall clock then: for display.
	SeenMs int64          `json:"seen_ms"`
	seen   arrivals.Stamp // the same on both clocks (ADR 0013)
}

func presencePath(root, writer, device string) string {
	return filepath.Join(root, "presence", writer+"."+device+".json")
}

// WritePresence rewrites this writer's presence file on this device: a signed object
// naming what it is doing and the orders it holds. `ferry mcp serve` calls it every
// 60 s and after every write, so a working agent never looks silent. It
// returns invalid for a doing line that is too long or holds control characters.
// Every live unattended run of the writer on this machine (the run registry)
// is named in `running`, and its order added to runs, whoever rewrites the file.
func (s *Session) WritePresence(doing string, runs []string) error {
	doing = strings.TrimSpace(doing)
	if len(doing) > maxDoing || contract.HasControl(doing, false) {
		return errs.Errorf(errs.Invalid, "one short line", "presence doing line too long or holds control characters")
	}
	if err := secretguard.Check("presence doing line", doing); err != nil {
		return err
	}
	if err := s.checkPresent(); err != nil {
		return err // never recreate a vanished channel folder by writing a heartbeat
	}
	obj := &PresenceObject{Envelope: fold.Envelope{V: 1, ID: s.Name + "." + s.Device, Author: s.Name, Device: s.Device},
		At: s.now().UTC().Format("2006-01-02T15:04:05.000Z"), Doing: doing, Runs: slices.Clone(runs)}
	for _, r := range s.Home.LiveRuns(s.Project(), s.Name) {
		obj.Running = append(obj.Running, RunBeat{Run: r.Run, Order: r.Order, PID: r.PID})
		if !slices.Contains(obj.Runs, r.Order) {
			obj.Runs = append(obj.Runs, r.Order)
		}
	}
	data, _, err := sealObject(obj, func(sig string) { obj.Sig = sig }, s.Signer, s.Project())
	if err != nil {
		return err
	}
	if err := guard.Object(s.Name, "presence", data); err != nil {
		return err
	}
	return fsutil.WriteFile(presencePath(s.Root, s.Name, s.Device), data, 0o644)
}

// observePresence reads every presence file, keeps those signed by their writer's
// seated key, and records in this machine's state dir when it first saw each version.
// A presence that changed since the last look counts as a sighting of its writer now
// (docs/design.md §2 rule 7: liveness from what this machine saw, never from others' clocks).
//
// The sightings are kept in the state dir's presence.seen (arrivals.ReadSeen).
func (c *Channel) observePresence(st *fold.State, arr *arrivals.Log) map[string]*Presence {
	out := map[string]*Presence{}
	ents, err := os.ReadDir(filepath.Join(c.Root, "presence"))
	if err != nil {
		return out
	}
	dir := c.Home.StateDir(c.Project())
	seenPath := filepath.Join(dir, "presence.seen")
	lk := flock.New(filepath.Join(c.Home.LockDir(c.Project()), "arrivals.lock"))
	if err := lk.Lock(); err != nil {
		return out
	}
	defer lk.Unlock()
	now := c.stamp()
	seen, changed := arrivals.ReadSeen(seenPath, now)
	for _, de := range ents {
		name := de.Name()
		base, ok := strings.CutSuffix(name, ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		writer, device, ok := strings.Cut(base, ".")
		if !ok || !fold.ValidName(writer) || !fold.ValidName(device) {
			continue
		}
		canon, hash, err := verify.ReadObject(filepath.Join(c.Root, "presence", name))
		if err != nil {
			continue
		}
		var obj PresenceObject
		if json.Unmarshal(canon, &obj) != nil || obj.Author != writer || obj.Device != device || obj.ID != base {
			continue
		}
		pub, ok := c.presenceKey(st, writer)
		if !ok || verifyObjectSig(canon, pub, c.Project()) != nil {
			continue
		}
		rec, had := seen[name]
		if !had || rec.Hash != hash {
			rec = arrivals.Seen{Hash: hash, At: now}
			seen[name] = rec
			changed = true
		}
		if cur, ok := arr.Sighting[writer]; !ok || rec.At.Later(cur) {
			arr.Sighting[writer] = rec.At
		}
		out[writer+"."+device] = &Presence{Writer: writer, Device: device, Doing: obj.Doing, At: obj.At, Runs: obj.Runs, Running: obj.Running,
			SeenMs: rec.At.Wall, seen: rec.At}
	}
	if changed {
		if err := arrivals.WriteSeen(seenPath, seen); err != nil {
			// A lost record only makes a later sighting: a holder looks alive longer.
			c.Home.CacheNotSaved(seenPath, err)
		}
	}
	return out
}

// presenceKey is the key a writer's presence must be signed with: the master key or
// the agent's seated key.
func (c *Channel) presenceKey(st *fold.State, writer string) (pub []byte, ok bool) {
	if writer == fold.MasterWriter {
		return st.MasterKey(), true // the current key of the rotation chain
	}
	a := st.Agents[writer]
	if a == nil || !a.Seated {
		return nil, false
	}
	k, err := ledger.ParseKey(a.Key)
	if err != nil {
		return nil, false
	}
	return k, true
}

// PresenceOf returns the newest presence of writer on any device (nil when none).
func (v *View) PresenceOf(writer string) *Presence {
	var best *Presence
	for _, p := range v.Presence {
		if p.Writer == writer && (best == nil || p.seen.Later(best.seen)) {
			best = p
		}
	}
	return best
}
