// Package runner runs orders unattended (docs/runs.md): `ferry run` and `ferry daemon`
// claim ready orders and run a local executable on each. It sits on top of the fsbus
// façade and uses its exported API only. What it keeps is machine-local, under the
// cache dir, per project and per agent, beside fsbus's run registry (fsbus/runs.go):
//
//	<cache>/channels/<project>/runs/<agent>.journal      JSONL of run events
//	<cache>/locks/<project>/daemon-<agent>.lock          the daemon lease (flock)
//	<cache>/locks/<project>/daemon-<agent>.owner         JSON naming the lease owner
//
// Only the entries in the ledger are shared: a run's claim carries the idempotency key
// "run:<run id>" (fsbus.RunKeyPrefix), and every release recovery makes is a signed
// order.release whose note names the run and why.
package runner

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
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/textsafe"
	"github.com/gofrs/flock"
)

// Spec is what a runner needs from an order beyond its state: the contract fields
// `heavy`, `hints` and `task`, checked at dispatch (fsbus/contract.go); Hints are the contract's resource hints
// (docs/runs.md "Heavy orders").
type Spec struct {
	Heavy bool        `json:"heavy,omitempty"`
	Hints *fold.Hints `json:"hints,omitempty"`
	Task  string      `json:"task,omitempty"`
}

// SpecOf returns o's run fields from its folded contract; nil or an order whose
// object has not arrived gives a zero spec.
func SpecOf(o *fold.Order) Spec {
	if o == nil || o.Missing {
		return Spec{}
	}
	return Spec{Heavy: o.Heavy, Hints: o.Hints, Task: o.Task}
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
		if textsafe.Line.Index(text) >= 0 {
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

// Via says how this machine would run o unattended through q: "direct", or the queue
// command (`ferry order show` and `ferry_orders show` report it).
func (q Queue) Via(o *fold.Order) string {
	_, via := q.Wrap(o.ID, SpecOf(o).Heavy, "")
	return via
}

func journalPath(h *fsbus.Home, project, agent string) string {
	return filepath.Join(h.StateDir(project), "runs", agent+".journal")
}

const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// Recovery is one settlement made by Recover.
type Recovery struct {
	Run    string `json:"run,omitempty"`
	Order  string `json:"order"`
	PID    int    `json:"pid,omitempty"`
	Action string `json:"action"` // released | forgotten (nothing held any more)
	Note   string `json:"note"`
}

// Recover settles this agent's dead runs and orphans on this machine
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
func Recover(s *fsbus.Session) ([]Recovery, error) {
	var out []Recovery
	known := map[string]bool{}
	for _, rec := range s.Home.RunRecords(s.Project(), s.Name) {
		known[rec.Run] = true
		if s.Home.RunAlive(s.Project(), rec) {
			continue
		}
		v, err := s.Load()
		if err != nil {
			return out, err
		}
		rv := Recovery{Run: rec.Run, Order: rec.Order, PID: rec.PID, Action: "forgotten"}
		o := v.State.Order(rec.Order)
		claim := rec.Claim
		if claim == "" && o != nil {
			claim = runClaim(s, v, o, rec.Run)
		}
		if o != nil && claim != "" && o.Holder == s.Name && o.Claim == claim {
			act, note, err := giveBack(s, o, fmt.Sprintf("run %s (pid %d) died on this machine; last heartbeat %s", rec.Run, rec.PID, rec.Beat))
			rv.Note = note
			if err == nil {
				rv.Action = act
			} else if !errs.Is(err, errs.Conflict) && !errs.Is(err, errs.Denied) {
				return out, err
			}
		} else {
			rv.Note = fmt.Sprintf("run %s (pid %d) died on this machine; it no longer held the order", rec.Run, rec.PID)
		}
		Journal(s, JournalEvent{Event: "recover", Run: rec.Run, Order: rec.Order, Outcome: rv.Action, Note: rv.Note})
		s.Home.ForgetRun(s.Project(), rec)
		out = append(out, rv)
	}
	v, err := s.Load()
	if err != nil {
		return out, err
	}
	for _, id := range v.State.OrderIDs() {
		o := v.State.Orders[id]
		if o.Holder != s.Name || o.State != fold.StateClaimed {
			continue
		}
		e := v.Entry(o.Claim)
		if e == nil || e.Device != s.Device || !strings.HasPrefix(e.Idem, fsbus.RunKeyPrefix) {
			continue
		}
		run := strings.TrimPrefix(e.Idem, fsbus.RunKeyPrefix)
		if known[run] {
			continue
		}
		// A run begun since the registry was read writes its record before its claim:
		// a record there now means the claim is not an orphan.
		if s.Home.HasRunRecord(s.Project(), fsbus.RunRecord{Agent: s.Name, Run: run}) {
			continue
		}
		rv := Recovery{Run: run, Order: id, Action: "forgotten"}
		act, note, err := giveBack(s, o, fmt.Sprintf("orphan claim of run %s: no run on this machine holds it", run))
		rv.Note = note
		if err == nil {
			rv.Action = act
		} else if !errs.Is(err, errs.Conflict) && !errs.Is(err, errs.Denied) {
			return out, err
		}
		Journal(s, JournalEvent{Event: "recover", Run: run, Order: id, Outcome: rv.Action, Note: rv.Note})
		out = append(out, rv)
	}
	return out, nil
}

// giveBack settles a dead run's claim on o: a release, or — once o was released
// MaxReleases times, when a release would be refused — an order.fail with the same
// note, so a runner that keeps crashing never leaves the order held. It
// returns the action taken, "released" or "failed", the note written (why, then what
// was done: the ledger note says which) and the write's error.
func giveBack(s *fsbus.Session, o *fold.Order, why string) (action, note string, err error) {
	if o.Releases >= fold.MaxReleases {
		note = fmt.Sprintf("%s; failed instead of released: the order was released %d times already (at most %d)", why, o.Releases, fold.MaxReleases)
		_, err = s.Fail(o.ID, fsbus.NoteOptions{Note: note})
		return "failed", note, err
	}
	note = why + "; released for a new attempt"
	_, err = s.Release(o.ID, fsbus.NoteOptions{Note: note})
	return "released", note, err
}

// runClaim finds the claim entry of order o written with run's key, "" if none.
func runClaim(s *fsbus.Session, v *fsbus.View, o *fold.Order, run string) string {
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if e.Type == fold.TypeOrderClaim && e.Ref == o.ID && e.Writer == s.Name && e.Idem == fsbus.RunKeyPrefix+run {
			return e.Hash()
		}
	}
	return ""
}

// reworkCandidates lists the orders agent holds in changes_requested under a claim a
// run of this machine made (run key, this device) and carrying every label in labels:
// a reviewer asked for changes, and the runner runs the file again on them under the
// same claim (changes_requested is still held). Claims made by hand, or on
// another machine, are left to whoever made them.
func reworkCandidates(s *fsbus.Session, v *fsbus.View, labels []string) []*fold.Order {
	var out []*fold.Order
	for _, id := range v.State.OrderIDs() {
		o := v.State.Orders[id]
		if o.State != fold.StateChangesRequested || o.Holder != s.Name || o.Missing {
			continue
		}
		e := v.Entry(o.Claim)
		if e == nil || e.Device != s.Device || !strings.HasPrefix(e.Idem, fsbus.RunKeyPrefix) {
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
func Journal(s *fsbus.Session, ev JournalEvent) {
	if ev.At == "" {
		ev.At = now(s.Channel).Format(stampLayout)
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
	p := journalPath(s.Home, s.Project(), s.Name)
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
		s.Home.CacheNotSaved(p, err)
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
func ReadJournal(h *fsbus.Home, project, agent string) (*JournalHealth, error) {
	p := journalPath(h, project, agent)
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

func leasePaths(h *fsbus.Home, project, agent string) (lock, owner string) {
	d := h.LockDir(project)
	return filepath.Join(d, "daemon-"+agent+".lock"), filepath.Join(d, "daemon-"+agent+".owner")
}

// TakeLease takes agent's daemon lease on this machine without waiting. It returns a
// conflict naming the owner's pid (and when it started, and its config) when another
// process holds it. The lease dies with its process: a crashed daemon never blocks the
// next one.
func TakeLease(h *fsbus.Home, project, agent, config string) (*Lease, error) {
	lp, op := leasePaths(h, project, agent)
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
		if ow, _ := ReadLeaseOwner(h, project, agent); ow != nil {
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
func ReadLeaseOwner(h *fsbus.Home, project, agent string) (*LeaseOwner, bool) {
	lp, op := leasePaths(h, project, agent)
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

// now is c's wall clock (fsbus.Channel.Now, else time.Now).
func now(c *fsbus.Channel) time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
