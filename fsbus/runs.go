package fsbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/procgroup"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// The run registry of unattended runs (docs/runs.md, "Dead workers" among them):
// package fsbus/runner claims orders and runs a local executable on them; the
// registry, which the agent's presence file reads (docs/format.md §11), is kept here.
// It is machine-local, under the cache dir, per project and per agent:
//
//	<cache>/channels/<project>/runs/<agent>/<run>.json   RunRecord of a running run
//	<cache>/channels/<project>/runs/<agent>/<run>.lock   flock held by its supervisor
//	<cache>/channels/<project>/runs/<agent>/orders/<order>.lock
//	                                                     flock held by the run of that order
//
// Only the entries in the ledger are shared: a run's claim carries the idempotency key
// "run:<run id>".

// RunKeyPrefix starts the idempotency key of a claim made by a run: "run:<run id>".
// Recovery recognises its own machine's run claims by it (docs/runs.md).
const RunKeyPrefix = "run:"

// RunRecord is one run in this machine's run registry: written when the run starts,
// rewritten at every heartbeat, removed when the run is settled.
type RunRecord struct {
	V       int    `json:"v"`
	Run     string `json:"run"`   // run id: "run-" + 13 Crockford base32 characters
	Agent   string `json:"agent"` // the agent the run claims as
	Order   string `json:"order"`
	Claim   string `json:"claim,omitempty"` // entry hash of the run's claim ("" while claiming)
	PID     int    `json:"pid"`             // the supervising ferry process
	Child   int    `json:"child,omitempty"` // the process running the exec file
	Exec    string `json:"exec,omitempty"`
	Via     string `json:"via,omitempty"`
	Started string `json:"started"` // local clock, RFC 3339 with ms
	Beat    string `json:"beat"`    // last heartbeat, local clock
}

// RunBeat is a running run as a presence file names it (docs/format.md §11).
type RunBeat struct {
	Run   string `json:"run"`
	Order string `json:"order"`
	PID   int    `json:"pid"`
}

func (h *Home) runsDir(project, agent string) string {
	return filepath.Join(h.StateDir(project), "runs", agent)
}

const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// Run is a run this process supervises. Its run lock is held from BeginRun to End, so
// any other process can tell a live run from a dead one without trusting a pid alone
// (a pid can be reused; a flock dies with its process).
type Run struct {
	Rec   RunRecord
	s     *Session
	lock  *flock.Flock
	order *flock.Flock // the (agent, order) lock: one run of an order per machine
	path  string
}

// BeginRunOptions say what a run executes, as its record keeps them.
type BeginRunOptions struct {
	Exec string // the exec file
	Via  string // "direct", or the queue command that runs it
}

// BeginRun registers a run of order in the run registry: it takes the agent's lock on
// the order (cache/…/runs/<agent>/orders/<order>.lock, held for the run's life, so
// several runners of one agent on one machine never run the same order),
// then the run's lock, then writes its record.
//
// Errors: conflict when another run on this machine (any process, any Session) holds
// the order's lock; internal when the cache dir is not writable.
func (s *Session) BeginRun(order string, opt BeginRunOptions) (*Run, error) {
	dir := s.Home.runsDir(s.Project(), s.Name)
	if err := os.MkdirAll(filepath.Join(dir, "orders"), 0o755); err != nil {
		return nil, fmt.Errorf("creating run registry: %w", err)
	}
	// The order lock file is never removed: removing a lock file another process has
	// open would let a third lock a new file of the same name.
	olk := flock.New(filepath.Join(dir, "orders", order+".lock"))
	if ok, err := olk.TryLock(); err != nil {
		return nil, fmt.Errorf("locking order %s: %w", order, err)
	} else if !ok {
		return nil, errs.Errorf(errs.Conflict, "leave it to that run; `ferry inspect` shows it",
			"another run of %s on this machine is on order %s", s.Name, order)
	}
	id := "run-" + fold.RandomBase32(fold.IDLen)
	lk := flock.New(filepath.Join(dir, id+".lock"))
	if ok, err := lk.TryLock(); err != nil || !ok {
		olk.Unlock()
		if err == nil {
			err = errors.New("held by another process") // a fresh random id: never expected
		}
		return nil, fmt.Errorf("locking run %s: %w", id, err)
	}
	now := s.now().Format(stampLayout)
	r := &Run{s: s, lock: lk, order: olk, path: filepath.Join(dir, id+".json"),
		Rec: RunRecord{V: 1, Run: id, Agent: s.Name, Order: order, PID: os.Getpid(), Exec: opt.Exec, Via: opt.Via, Started: now, Beat: now}}
	if err := r.save(); err != nil {
		lk.Unlock()
		os.Remove(lk.Path())
		olk.Unlock()
		return nil, err
	}
	return r, nil
}

// Unlock lets go of the run's locks, keeping its record: a run whose settlement could
// not be written is then dead, and the next start-up recovers it.
func (r *Run) Unlock() {
	r.lock.Unlock()
	r.order.Unlock()
}

func (r *Run) save() error {
	b, err := json.Marshal(r.Rec)
	if err != nil {
		return err
	}
	return fsutil.WriteFile(r.path, append(b, '\n'), 0o644)
}

// Key is the idempotency key of the run's claim.
func (r *Run) Key() string { return RunKeyPrefix + r.Rec.Run }

// Claim claims the run's order with the run's key and records the claim's hash.
//
// Errors: those of Session.Claim, and conflict when the order is held by the agent
// under a claim this run did not write — a claim of the same agent succeeds without
// writing, so another process (another runner, a claim by hand) got there first and
// the order is not this run's.
func (r *Run) Claim() (*fold.Order, error) {
	o, err := r.s.Claim(r.Rec.Order, r.Key())
	if err != nil {
		return nil, err
	}
	if o.Holder != r.s.Name || o.State != fold.StateClaimed {
		return nil, errs.Errorf(errs.Conflict, "pick another order", "order %s is %s (holder %s)", o.ID, o.State, fold.OrNone(o.Holder))
	}
	v, err := r.s.Load()
	if err != nil {
		return nil, err
	}
	if e := v.Entry(o.Claim); e == nil || e.Idem != r.Key() {
		return nil, errs.Errorf(errs.Conflict, "pick another order", "order %s is already held by %s under another claim (another run or a claim by hand)", o.ID, r.s.Name)
	}
	r.Rec.Claim = o.Claim
	return o, r.save()
}

// Adopt makes the run the continuation of the agent's current claim on o (a rework
// after a review asked for changes): the record names that claim, so a crash is
// recovered like any run's.
func (r *Run) Adopt(o *fold.Order) error {
	r.Rec.Claim = o.Claim
	return r.save()
}

// SetChild records the pid of the process running the exec file.
func (r *Run) SetChild(pid int) error { r.Rec.Child = pid; return r.save() }

// Beat is a heartbeat: it rewrites the run's record and the agent's presence file
// (which names every live run of the agent on this machine).
func (r *Run) Beat(doing string) error {
	r.Rec.Beat = r.s.now().Format(stampLayout)
	if err := r.save(); err != nil {
		return err
	}
	return r.s.WritePresence(doing, nil)
}

// End settles the run locally: the record removed, the lock released. The ledger
// entry (submit, release) is the caller's, written before End so a crash in between
// is recovered from the record.
func (r *Run) End() {
	os.Remove(r.path)
	r.lock.Unlock()
	os.Remove(r.lock.Path())
	r.order.Unlock()
	_ = r.s.WritePresence("", nil) // the run no longer shows in presence
}

// RunRecords reads every run record of the agent on this machine, live or dead,
// oldest first.
func (h *Home) RunRecords(project, agent string) []RunRecord {
	dir := h.runsDir(project, agent)
	ents, _ := os.ReadDir(dir)
	var out []RunRecord
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		var rec RunRecord
		if json.Unmarshal(b, &rec) != nil || rec.Run+".json" != name {
			continue
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b RunRecord) int { return strings.Compare(a.Started, b.Started) })
	return out
}

// HasRunRecord reports whether the run registry of rec.Agent on this machine holds a
// record of rec.Run (a run begun writes its record before its claim).
func (h *Home) HasRunRecord(project string, rec RunRecord) bool {
	_, err := os.Stat(filepath.Join(h.runsDir(project, rec.Agent), rec.Run+".json"))
	return err == nil
}

// ForgetRun removes a dead run's record and lock file from the registry.
func (h *Home) ForgetRun(project string, rec RunRecord) {
	os.Remove(filepath.Join(h.runsDir(project, rec.Agent), rec.Run+".json"))
	os.Remove(filepath.Join(h.runsDir(project, rec.Agent), rec.Run+".lock"))
}

// RunAlive reports whether the run's supervisor is alive: its run lock is held and its
// pid exists. A free lock means the supervisor died (a flock dies with its process),
// even when its pid now names another process.
func (h *Home) RunAlive(project string, rec RunRecord) bool {
	lk := flock.New(filepath.Join(h.runsDir(project, rec.Agent), rec.Run+".lock"))
	ok, err := lk.TryLock()
	if err != nil {
		return procgroup.Alive(rec.PID)
	}
	if ok {
		lk.Unlock()
		return false
	}
	return procgroup.Alive(rec.PID)
}

// LiveRuns returns the runs of agent on this machine whose supervisor is alive.
func (h *Home) LiveRuns(project, agent string) []RunRecord {
	var out []RunRecord
	for _, rec := range h.RunRecords(project, agent) {
		if h.RunAlive(project, rec) {
			out = append(out, rec)
		}
	}
	return out
}

// Entry returns the entry of the view's snapshot whose hash is hash, nil when none
// (or hash is "").
func (v *View) Entry(hash string) *ledger.Entry {
	if hash == "" {
		return nil
	}
	for i := range v.Snapshot.Entries {
		if v.Snapshot.Entries[i].Hash() == hash {
			return &v.Snapshot.Entries[i]
		}
	}
	return nil
}
