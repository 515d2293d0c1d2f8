package fsbus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// Unattended runs (docs/runs.md, "Dead workers" among them): `ferry run` and
// `ferry daemon` claim orders and run a local executable on them. Everything here is
// machine-local, under the cache dir, per project and per agent (docs/runs.md):
//
//	<cache>/channels/<project>/runs/<agent>/<run>.json   RunRecord of a running run
//	<cache>/channels/<project>/runs/<agent>/<run>.lock   flock held by its supervisor
//	<cache>/channels/<project>/runs/<agent>/orders/<order>.lock
//	                                                     flock held by the run of that order
//	<cache>/channels/<project>/runs/<agent>.journal      JSONL of run events
//	<cache>/locks/<project>/daemon-<agent>.lock          the daemon lease (flock)
//	<cache>/locks/<project>/daemon-<agent>.owner         JSON naming the lease owner
//
// Only the entries in the ledger are shared: a run's claim carries the idempotency key
// "run:<run id>", and every release recovery makes is a signed order.release whose note
// names the run and why.

// RunKeyPrefix starts the idempotency key of a claim made by a run: "run:<run id>".
// Recovery recognises its own machine's run claims by it (docs/runs.md).
const RunKeyPrefix = "run:"

// RunHints are an order's resource hints: the contract's Hints
// (docs/runs.md "Heavy orders").
type RunHints = Hints

// RunSpec is what a runner needs from an order beyond its state: the contract fields
// `heavy`, `hints` and `task`, checked at dispatch (contract.go).
type RunSpec struct {
	Heavy bool      `json:"heavy,omitempty"`
	Hints *RunHints `json:"hints,omitempty"`
	Task  string    `json:"task,omitempty"`
}

// RunSpecOf returns o's run fields from its folded contract; nil or an order whose
// object has not arrived gives a zero spec.
func (c *Channel) RunSpecOf(o *Order) RunSpec {
	if o == nil || o.Missing {
		return RunSpec{}
	}
	return RunSpec{Heavy: o.Heavy, Hints: o.Hints, Task: o.Task}
}

// EnvQueueCmd names this machine's local job-queue command for heavy orders.
const EnvQueueCmd = "FERRY_QUEUE_CMD"

// DefaultQueue is the queue used when snifrig is on PATH and nothing else is set; the
// placeholder {order} becomes the order id.
var DefaultQueue = []string{"snifrig", "run", "--name", "{order}", "--"}

// Queue is a resolved job-queue command: Argv (with the {order} placeholder) and where
// it came from ("flag", "config", "env", "default"); Argv is nil when heavy orders run
// directly.
type Queue struct {
	Argv   []string `json:"argv,omitempty"`
	Source string   `json:"source"`
}

// ResolveQueue returns this machine's job-queue command (docs/runs.md "Heavy orders"). The
// first of these that is set wins: setting (a --queue flag or a daemon config's
// `queue`), then the FERRY_QUEUE_CMD environment variable, then `snifrig run --name
// {order} --` when snifrig is on PATH (exec.LookPath). The value "off" (or "none")
// turns the queue off; otherwise the text is split on white space (no quoting) and
// {order} is replaced by the order id when run. It returns invalid for a command whose
// program is not found.
func ResolveQueue(setting, source string) (Queue, error) {
	parse := func(text, src string) (Queue, error) {
		text = strings.TrimSpace(text)
		if text == "off" || text == "none" {
			return Queue{Source: src}, nil
		}
		argv := strings.Fields(text)
		if hasControl(text, false) {
			return Queue{}, errs.Errorf(errs.Invalid, "write the queue command on one line", "%s queue command holds control characters", src)
		}
		if _, err := exec.LookPath(argv[0]); err != nil {
			return Queue{}, errs.Errorf(errs.Invalid, "install it, give its full path, or set the queue to off",
				"%s queue command %q: program not found", src, argv[0])
		}
		return Queue{Argv: argv, Source: src}, nil
	}
	if strings.TrimSpace(setting) != "" {
		return parse(setting, source)
	}
	if env := os.Getenv(EnvQueueCmd); strings.TrimSpace(env) != "" {
		return parse(env, "env "+EnvQueueCmd)
	}
	if p, err := exec.LookPath(DefaultQueue[0]); err == nil {
		argv := append([]string{p}, DefaultQueue[1:]...)
		return Queue{Argv: argv, Source: "default"}, nil
	}
	return Queue{Source: "none"}, nil
}

// String is the queue command as one line ("" when off).
func (q Queue) String() string { return strings.Join(q.Argv, " ") }

// Wrap returns the argv that runs file for order: through the queue when the order is
// heavy and a queue is set, else file alone. via is "direct" or the queue command with
// the order id filled in.
func (q Queue) Wrap(order string, heavy bool, file string) (argv []string, via string) {
	if !heavy || len(q.Argv) == 0 {
		return []string{file}, "direct"
	}
	for _, a := range q.Argv {
		argv = append(argv, strings.ReplaceAll(a, "{order}", order))
	}
	via = strings.Join(argv, " ")
	return append(argv, file), via
}

// RunVia says how this machine would run o unattended: "direct", or the queue command
// (`ferry order show` and `ferry_orders show` report it).
func (c *Channel) RunVia(o *Order, q Queue) string {
	_, via := q.Wrap(o.ID, c.RunSpecOf(o).Heavy, "")
	return via
}

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

func (h *Home) journalPath(project, agent string) string {
	return filepath.Join(h.StateDir(project), "runs", agent+".journal")
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

// BeginRun registers a run of order in the run registry: it takes the agent's lock on
// the order (cache/…/runs/<agent>/orders/<order>.lock, held for the run's life, so
// several runners of one agent on one machine never run the same order),
// then the run's lock, then writes its record.
//
// Errors: conflict when another run on this machine (any process, any Session) holds
// the order's lock; internal when the cache dir is not writable.
func (s *Session) BeginRun(order, execFile, via string) (*Run, error) {
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
	id := "run-" + randomBase32(IDLen)
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
		Rec: RunRecord{V: 1, Run: id, Agent: s.Name, Order: order, PID: os.Getpid(), Exec: execFile, Via: via, Started: now, Beat: now}}
	if err := r.save(); err != nil {
		lk.Unlock()
		os.Remove(lk.Path())
		olk.Unlock()
		return nil, err
	}
	return r, nil
}

// unlock lets go of the run's locks, keeping its record: a run whose settlement could
// not be written is then dead, and the next start-up recovers it.
func (r *Run) unlock() {
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
func (r *Run) Claim() (*Order, error) {
	o, err := r.s.Claim(r.Rec.Order, r.Key())
	if err != nil {
		return nil, err
	}
	if o.Holder != r.s.Name || o.State != StateClaimed {
		return nil, errs.Errorf(errs.Conflict, "pick another order", "order %s is %s (holder %s)", o.ID, o.State, orNone(o.Holder))
	}
	v, err := r.s.Load()
	if err != nil {
		return nil, err
	}
	if e := entryByHash(v, o.Claim); e == nil || e.Idem != r.Key() {
		return nil, errs.Errorf(errs.Conflict, "pick another order", "order %s is already held by %s under another claim (another run or a claim by hand)", o.ID, r.s.Name)
	}
	r.Rec.Claim = o.Claim
	return o, r.save()
}

// adopt makes the run the continuation of the agent's current claim on o (a rework
// after a review asked for changes): the record names that claim, so a crash is
// recovered like any run's.
func (r *Run) adopt(o *Order) error {
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

// End settles the run locally: a journal event with the outcome, the record removed,
// the lock released. The ledger entry (submit, release) is the caller's, written
// before End so a crash in between is recovered from the record.
func (r *Run) End(ev JournalEvent) {
	ev.Run, ev.Order = r.Rec.Run, r.Rec.Order
	r.s.Journal(ev)
	os.Remove(r.path)
	r.lock.Unlock()
	os.Remove(r.lock.Path())
	r.order.Unlock()
	_ = r.s.WritePresence("", nil) // the run no longer shows in presence
}

// runRecords reads every run record of the agent on this machine.
func (h *Home) runRecords(project, agent string) []RunRecord {
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
	sort.Slice(out, func(i, j int) bool { return out[i].Started < out[j].Started })
	return out
}

// runAlive reports whether the run's supervisor is alive: its run lock is held and its
// pid exists. A free lock means the supervisor died (a flock dies with its process),
// even when its pid now names another process.
func (h *Home) runAlive(project string, rec RunRecord) bool {
	lk := flock.New(filepath.Join(h.runsDir(project, rec.Agent), rec.Run+".lock"))
	ok, err := lk.TryLock()
	if err != nil {
		return pidAlive(rec.PID)
	}
	if ok {
		lk.Unlock()
		return false
	}
	return pidAlive(rec.PID)
}

// LiveRuns returns the runs of agent on this machine whose supervisor is alive.
func (h *Home) LiveRuns(project, agent string) []RunRecord {
	var out []RunRecord
	for _, rec := range h.runRecords(project, agent) {
		if h.runAlive(project, rec) {
			out = append(out, rec)
		}
	}
	return out
}

// Recovery is one settlement made by RecoverRuns.
type Recovery struct {
	Run    string `json:"run,omitempty"`
	Order  string `json:"order"`
	PID    int    `json:"pid,omitempty"`
	Action string `json:"action"` // released | forgotten (nothing held any more)
	Note   string `json:"note"`
}

// RecoverRuns settles this agent's dead runs and orphans on this machine
// (docs/runs.md "Dead workers"); `ferry run` and `ferry daemon` call it at start-up.
//
//   - A dead run is a registry record whose supervisor is gone (its run lock is free
//     or its pid no longer exists). If the agent still holds the order under that
//     run's claim, it is released with a signed order.release whose note names the run,
//     its pid and its last heartbeat; the order is open again and the next poll may
//     claim it afresh. If the claim is gone (submitted, released) the record is only
//     forgotten.
//   - An orphan is a current claim of the agent written from this device with a run
//     key ("run:<id>") whose run has no record here (a crash between the claim and the
//     record, a purged cache). It is released the same way.
//
// Recovery never reclaims in place: a release followed by a fresh claim shows in the
// ledger for every machine, where a silent re-run would not (docs/runs.md). A release
// refused because the order moved on meanwhile (conflict, denied) is not an error.
func (s *Session) RecoverRuns() ([]Recovery, error) {
	var out []Recovery
	known := map[string]bool{}
	for _, rec := range s.Home.runRecords(s.Project(), s.Name) {
		known[rec.Run] = true
		if s.Home.runAlive(s.Project(), rec) {
			continue
		}
		v, err := s.Load()
		if err != nil {
			return out, err
		}
		rv := Recovery{Run: rec.Run, Order: rec.Order, PID: rec.PID, Action: "forgotten"}
		o := v.State.Orders[rec.Order]
		claim := rec.Claim
		if claim == "" && o != nil {
			claim = s.runClaim(v, o, rec.Run)
		}
		if o != nil && claim != "" && o.Holder == s.Name && o.Claim == claim {
			act, note, err := s.giveBack(o, fmt.Sprintf("run %s (pid %d) died on this machine; last heartbeat %s", rec.Run, rec.PID, rec.Beat))
			rv.Note = note
			if err == nil {
				rv.Action = act
			} else if !errs.Is(err, errs.Conflict) && !errs.Is(err, errs.Denied) {
				return out, err
			}
		} else {
			rv.Note = fmt.Sprintf("run %s (pid %d) died on this machine; it no longer held the order", rec.Run, rec.PID)
		}
		s.Journal(JournalEvent{Event: "recover", Run: rec.Run, Order: rec.Order, Outcome: rv.Action, Note: rv.Note})
		os.Remove(filepath.Join(s.Home.runsDir(s.Project(), s.Name), rec.Run+".json"))
		os.Remove(filepath.Join(s.Home.runsDir(s.Project(), s.Name), rec.Run+".lock"))
		out = append(out, rv)
	}
	v, err := s.Load()
	if err != nil {
		return out, err
	}
	for _, id := range v.State.OrderIDs() {
		o := v.State.Orders[id]
		if o.Holder != s.Name || o.State != StateClaimed {
			continue
		}
		e := entryByHash(v, o.Claim)
		if e == nil || e.Device != s.Device || !strings.HasPrefix(e.Idem, RunKeyPrefix) {
			continue
		}
		run := strings.TrimPrefix(e.Idem, RunKeyPrefix)
		if known[run] {
			continue
		}
		// A run begun since the registry was read writes its record before its claim:
		// a record there now means the claim is not an orphan.
		if _, err := os.Stat(filepath.Join(s.Home.runsDir(s.Project(), s.Name), run+".json")); err == nil {
			continue
		}
		rv := Recovery{Run: run, Order: id, Action: "forgotten"}
		act, note, err := s.giveBack(o, fmt.Sprintf("orphan claim of run %s: no run on this machine holds it", run))
		rv.Note = note
		if err == nil {
			rv.Action = act
		} else if !errs.Is(err, errs.Conflict) && !errs.Is(err, errs.Denied) {
			return out, err
		}
		s.Journal(JournalEvent{Event: "recover", Run: run, Order: id, Outcome: rv.Action, Note: rv.Note})
		out = append(out, rv)
	}
	return out, nil
}

// giveBack settles a dead run's claim on o: a release, or — once o was released
// MaxReleases times, when a release would be refused — an order.fail with the same
// note, so a runner that keeps crashing never leaves the order held. It
// returns the action taken, "released" or "failed", the note written (why, then what
// was done: the ledger note says which) and the write's error.
func (s *Session) giveBack(o *Order, why string) (action, note string, err error) {
	if o.Releases >= MaxReleases {
		note = fmt.Sprintf("%s; failed instead of released: the order was released %d times already (at most %d)", why, o.Releases, MaxReleases)
		_, err = s.Fail(o.ID, note, "")
		return "failed", note, err
	}
	note = why + "; released for a new attempt"
	_, err = s.Release(o.ID, note, "")
	return "released", note, err
}

// runClaim finds the claim entry of order o written with run's key, "" if none.
func (s *Session) runClaim(v *View, o *Order, run string) string {
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if e.Type == TypeOrderClaim && e.Ref == o.ID && e.Writer == s.Name && e.Idem == RunKeyPrefix+run {
			return e.Hash()
		}
	}
	return ""
}

func entryByHash(v *View, hash string) *ledger.Entry {
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

// Ready reports whether agent may take o unattended now, and why not: o is open or
// offered to agent, its object has arrived, every dependency is accepted, and it
// carries every label in labels.
func (st *State) runReady(o *Order, agent string, labels []string) (bool, string) {
	switch {
	case o.Missing:
		return false, "pending sync"
	case o.State == StateOffered && o.OfferedTo != agent:
		return false, "offered to " + o.OfferedTo
	case o.State != StateOpen && o.State != StateOffered:
		return false, o.State
	case !InScope(st.scopesNow(agent), o.Labels):
		return false, "outside " + agent + "'s scopes" // scoped grants
	}
	if b := st.Blocking(o); len(b) > 0 {
		return false, "waits for " + strings.Join(b, ", ")
	}
	for _, l := range labels {
		found := false
		for _, have := range o.Labels {
			found = found || have == l
		}
		if !found {
			return false, "no label " + l
		}
	}
	return true, ""
}

// RunCandidates lists the orders agent may take unattended now, offered-to-agent
// first, then by priority (high, normal, low) and age (oldest first).
func (st *State) RunCandidates(agent string, labels []string) []*Order {
	var out []*Order
	for _, id := range st.OrderIDs() {
		if ok, _ := st.runReady(st.Orders[id], agent, labels); ok {
			out = append(out, st.Orders[id])
		}
	}
	prio := map[string]int{"high": 0, "": 1, "normal": 1, "low": 2}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.OfferedTo == agent) != (b.OfferedTo == agent) {
			return a.OfferedTo == agent
		}
		if prio[a.Priority] != prio[b.Priority] {
			return prio[a.Priority] < prio[b.Priority]
		}
		return a.Created < b.Created
	})
	return out
}

// reworkCandidates lists the orders agent holds in changes_requested under a claim a
// run of this machine made (run key, this device) and carrying every label in labels:
// a reviewer asked for changes, and the runner runs the file again on them under the
// same claim (changes_requested is still held). Claims made by hand, or on
// another machine, are left to whoever made them.
func (s *Session) reworkCandidates(v *View, labels []string) []*Order {
	var out []*Order
	for _, id := range v.State.OrderIDs() {
		o := v.State.Orders[id]
		if o.State != StateChangesRequested || o.Holder != s.Name || o.Missing {
			continue
		}
		e := entryByHash(v, o.Claim)
		if e == nil || e.Device != s.Device || !strings.HasPrefix(e.Idem, RunKeyPrefix) {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && slices.Contains(o.Labels, l)
		}
		if ok {
			out = append(out, o)
		}
	}
	return out
}

// JournalEvent is one line of an agent's run journal on this machine.
type JournalEvent struct {
	At    string `json:"at"` // local clock, RFC 3339 with ms
	PID   int    `json:"pid"`
	Event string `json:"event"` // start | claim | exec | done | recover | stop | error
	Run   string `json:"run,omitempty"`
	Order string `json:"order,omitempty"`
	// Outcome: submitted | validation_failed | pointer_stale | failed | interrupted |
	// taken_away | refused (one attempt's result refused with retry_needed) | released |
	// forgotten | not_claimed.
	Outcome string `json:"outcome,omitempty"`
	Note    string `json:"note,omitempty"`
	// Head is the order's chain head after a failed run gave it back: the runner leaves
	// the order alone while its head is still this entry.
	Head string `json:"head,omitempty"`
}

// MaxJournalLine bounds one journal line, in bytes (notes are cut to fit).
const MaxJournalLine = 4096

// MaxJournal is the size (bytes) past which the journal is moved to <agent>.journal.old
// (replacing the previous one) and a new one begun, so a daemon running for months
// keeps a bounded journal.
const MaxJournal = 1 << 20

// Journal appends ev to the agent's run journal: one write of one line, under a
// machine-local flock. A journal that cannot be written is not an error of the run
// (the ledger holds what counts); `ferry daemon --status` reports it.
func (s *Session) Journal(ev JournalEvent) {
	if ev.At == "" {
		ev.At = s.now().Format(stampLayout)
	}
	if ev.PID == 0 {
		ev.PID = os.Getpid()
	}
	if len(ev.Note) > MaxJournalLine/2 {
		ev.Note = ev.Note[:MaxJournalLine/2]
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	p := s.Home.journalPath(s.Project(), s.Name)
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	lk := flock.New(p + ".lock")
	if lk.Lock() != nil {
		return
	}
	defer lk.Unlock()
	if fi, err := os.Stat(p); err == nil && fi.Size() > MaxJournal {
		_ = fsutil.Rename(p, p+".old")
	}
	if _, err := fsutil.Append(p, append(b, '\n'), fsutil.AppendOptions{Create: true, Perm: 0o644}); err != nil {
		// The journal is a record for `ferry daemon --status`: its loss costs a retry of
		// a failing order, never a write of the channel.
		s.Home.cacheNotSaved(p, err)
	}
}

// JournalHealth is the summary `ferry daemon --status` prints of an agent's journal.
type JournalHealth struct {
	Path     string        `json:"path"`
	Exists   bool          `json:"exists"`
	Events   int           `json:"events"`
	Bad      int           `json:"bad_lines"` // lines that do not parse (a torn tail, an edit)
	Last     *JournalEvent `json:"last,omitempty"`
	LastFail *JournalEvent `json:"last_failure,omitempty"`
	Failures int           `json:"failures"` // runs that ended failed or interrupted
	Done     int           `json:"done"`     // runs that ended submitted
	// Failed maps each order whose last run here failed to its chain head then.
	Failed map[string]string `json:"-"`
}

// ReadJournal summarises the agent's run journal on this machine. A missing journal is
// healthy and empty (Exists false); unreadable lines are counted, never fatal.
func (h *Home) ReadJournal(project, agent string) (*JournalHealth, error) {
	p := h.journalPath(project, agent)
	jh := &JournalHealth{Path: p}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return jh, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading run journal: %w", err)
	}
	jh.Exists = true
	last := map[string]JournalEvent{}
	lastBad := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev JournalEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event == "" {
			jh.Bad++
			lastBad = true
			continue
		}
		lastBad = false
		jh.Events++
		e := ev
		jh.Last = &e
		if ev.Event == "done" || ev.Event == "recover" {
			if ev.Order != "" && ev.Outcome != "not_claimed" {
				last[ev.Order] = ev
			}
			switch ev.Outcome {
			case "submitted":
				jh.Done++
			case "failed", "interrupted":
				jh.Failures++
				jh.LastFail = &e
			}
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' && !lastBad {
		jh.Bad++ // a torn tail is counted even when it happens to parse
	}
	jh.Failed = map[string]string{}
	for o, ev := range last {
		if ev.Outcome == "failed" && ev.Head != "" {
			jh.Failed[o] = ev.Head
		}
	}
	return jh, nil
}

// Lease is the daemon lease of one agent on this machine (one daemon per
// agent per machine): a flock held for the daemon's life and an owner file naming it.
type Lease struct {
	lock  *flock.Flock
	owner string
}

// LeaseOwner is the owner file of a daemon lease.
type LeaseOwner struct {
	PID     int    `json:"pid"`
	Agent   string `json:"agent"`
	Config  string `json:"config,omitempty"`
	Started string `json:"started"` // local clock
}

func (h *Home) leasePaths(project, agent string) (lock, owner string) {
	d := h.LockDir(project)
	return filepath.Join(d, "daemon-"+agent+".lock"), filepath.Join(d, "daemon-"+agent+".owner")
}

// TakeLease takes agent's daemon lease on this machine without waiting. It returns a
// conflict naming the owner's pid (and when it started, and its config) when another
// process holds it. The lease dies with its process: a crashed daemon never blocks the
// next one.
func (h *Home) TakeLease(project, agent, config string) (*Lease, error) {
	lp, op := h.leasePaths(project, agent)
	if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
		return nil, fmt.Errorf("creating lock dir: %w", err)
	}
	lk := flock.New(lp)
	ok, err := lk.TryLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", lp, err)
	}
	if !ok {
		who := "another process"
		if ow, _ := h.ReadLeaseOwner(project, agent); ow != nil {
			who = fmt.Sprintf("pid %d (since %s, config %s)", ow.PID, ow.Started, orNone(ow.Config))
		}
		return nil, errs.Errorf(errs.Conflict, "stop that daemon first, or check it with `ferry daemon --status --config FILE`",
			"a daemon for agent %s already runs on this machine: %s; lease %s", agent, who, lp)
	}
	b, _ := json.Marshal(LeaseOwner{PID: os.Getpid(), Agent: agent, Config: config, Started: time.Now().Format(stampLayout)})
	if err := fsutil.WriteFile(op, append(b, '\n'), 0o644); err != nil {
		lk.Unlock()
		return nil, err
	}
	return &Lease{lock: lk, owner: op}, nil
}

// Release gives the lease up (the owner file stays as a record of the last owner).
func (l *Lease) Release() { l.lock.Unlock() }

// ReadLeaseOwner returns the last recorded owner of agent's daemon lease (nil when no
// daemon ever ran here) and whether the lease is held now.
func (h *Home) ReadLeaseOwner(project, agent string) (*LeaseOwner, bool) {
	lp, op := h.leasePaths(project, agent)
	var ow *LeaseOwner
	if b, err := os.ReadFile(op); err == nil {
		var o LeaseOwner
		if json.Unmarshal(b, &o) == nil {
			ow = &o
		}
	}
	held := false
	if _, err := os.Stat(lp); err == nil {
		lk := flock.New(lp)
		if ok, err := lk.TryLock(); err == nil {
			if ok {
				lk.Unlock()
			} else {
				held = true
			}
		}
	}
	return ow, held
}
