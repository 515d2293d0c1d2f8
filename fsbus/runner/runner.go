package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/internal/procgroup"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/internal/textsafe"
)

// Limits of an unattended run's output (bytes).
const (
	// MaxStdout is how much of a run's stdout is kept; the result is read from it.
	MaxStdout = 64 << 10
	// StderrTail is how much of the end of a failed run's stderr its note carries.
	StderrTail = 2 << 10
)

// Handler is what runs an order: an executable file (absolute path, run without a
// shell) and the names of the environment variables passed to it.
type Handler struct {
	Exec string
	Env  []string
	Task string // the task type it serves ("" or "*": any), for display
}

// Runner takes orders for one agent and runs them unattended (docs/runs.md): it
// claims a ready order under a run key, runs the handler's file with the
// order as JSON on stdin, heartbeats while it runs, and submits the file's stdout as
// the result — or, when the file fails, gives the order back with its stderr tail.
type Runner struct {
	S *fsbus.Session
	// Pick returns the handler for an order, nil to leave the order alone.
	Pick    func(o *fold.Order, spec Spec) *Handler
	Labels  []string      // only orders carrying every one of these labels
	Queue   Queue         // job queue for heavy orders (ResolveQueue)
	Workdir string        // the exec's working directory: the workspace
	Beat    time.Duration // heartbeat period while running (default 60 s)
	Grace   time.Duration // from interrupt to kill when stopped (default 10 s)
	Log     io.Writer     // one line per event, for humans (nil: none)

	skip        map[string]string // order → the chain head at which this runner left it alone
	ws          string            // the Workdir the session's Workspace was set from
	pauseLogged bool              // the pause was logged (pausedWait)
}

// Result is the outcome of one run.
type Result struct {
	Run   string `json:"run"`
	Order string `json:"order"`
	Title string `json:"title"`
	Via   string `json:"via"`
	// Outcome: submitted; validation_failed or pointer_stale (submitted at the end of
	// the contract's retry ladder, the result kept); failed; interrupted; taken_away
	// (the order was reassigned or cancelled during the run: nothing written).
	Outcome string `json:"outcome"`
	Exit    int    `json:"exit"` // the file's exit code (-1: did not start or was killed)
	Note    string `json:"note,omitempty"`
	Ref     string `json:"reference,omitempty"`

	head string // the order's chain head after the run gave it back
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format+"\n", args...)
	}
}

// Start settles what this agent left behind on this machine (Recover) and reads
// the journal: an order whose last run here failed is not retried by this runner.
//
// Errors: denied when the agent may not claim orders (below member level, or not
// seated), before anything is written.
func (r *Runner) Start() ([]Recovery, error) {
	r.skip = map[string]string{}
	v, err := r.S.Load()
	if err != nil {
		return nil, err
	}
	if err := r.S.CheckWrite(v, fold.TypeOrderClaim); err != nil {
		return nil, err
	}
	recs, err := Recover(r.S)
	for _, rv := range recs {
		r.logf("recovered %s: %s", rv.Order, rv.Note)
	}
	if err != nil {
		return recs, err
	}
	if jh, err := ReadJournal(r.S.Home, r.S.Project(), r.S.Name); err == nil {
		for o, head := range jh.Failed {
			r.skip[o] = head // its last run on this machine failed; retried once it moves on
		}
	}
	Journal(r.S, JournalEvent{Event: "start", Note: fmt.Sprintf("recovered %d", len(recs))})
	return recs, nil
}

// RunOne makes one pass: it takes the first order it has a handler for — an order
// the agent holds in changes_requested under one of this machine's run claims (a
// reviewer asked for changes: the file runs again under the same claim), else a ready
// order it claims — and runs it to the end. It returns (nil, nil) when no order is
// ready. ctx cancelled while the file runs stops the file (interrupt, then kill after
// Grace) and releases the order; the result then says "interrupted".
//
// The file runs in Workdir, and the order's file pointers are checked there (the
// session's Workspace is set to its git top-level, else to it): at the claim and again
// at the submit.
func (r *Runner) RunOne(ctx context.Context) (*Result, error) {
	if err := r.S.Home.CheckPaused(r.S.Project(), "taking a new order"); err != nil {
		return nil, err // a paused machine claims nothing new
	}
	if r.skip == nil {
		r.skip = map[string]string{}
	}
	if r.Workdir != "" && r.ws != r.Workdir {
		r.S.Workspace, r.ws = contract.WorkspaceRoot(r.Workdir), r.Workdir // pointers are checked where the file runs
	}
	v, err := r.S.Load()
	if err != nil {
		return nil, err
	}
	cands := append(reworkCandidates(r.S, v, r.Labels), v.State.RunCandidates(r.S.Name, r.Labels)...)
	for _, o := range cands {
		if ctx.Err() != nil {
			return nil, nil
		}
		if head, ok := r.skip[o.ID]; ok && head == o.Head {
			continue // failed or refused here, and nothing happened to it since
		}
		spec := SpecOf(o)
		h := r.Pick(o, spec)
		if h == nil {
			continue
		}
		argv, via := r.Queue.Wrap(o.ID, spec.Heavy, h.Exec)
		run, err := r.S.BeginRun(o.ID, fsbus.BeginRunOptions{Exec: h.Exec, Via: via})
		if errs.Is(err, errs.Conflict) {
			continue // another runner of this agent on this machine is on it
		}
		if err != nil {
			return nil, err
		}
		var claimed *fold.Order
		if o.State == fold.StateChangesRequested {
			claimed, err = r.adopt(run, o)
		} else {
			claimed, err = run.Claim()
		}
		if err != nil {
			r.end(run, JournalEvent{Event: "done", Outcome: "not_claimed", Note: err.Error()})
			if errs.Is(err, errs.Conflict) || errs.Is(err, errs.RetryNeeded) {
				continue // someone else was faster, or it has not fully arrived
			}
			if errs.Is(err, errs.Stale) || errs.Is(err, errs.Invalid) {
				r.skip[o.ID] = o.Head
				r.logf("skipping %s: %v", o.ID, err)
				continue
			}
			return nil, err
		}
		if o.State == fold.StateChangesRequested {
			Journal(r.S, JournalEvent{Event: "claim", Run: run.Rec.Run, Order: o.ID, Note: "rework under claim " + claimed.Claim})
			r.logf("changes requested on %s %q: running it again as %s (run %s, via %s)", o.ID, o.Title, r.S.Name, run.Rec.Run, via)
		} else {
			Journal(r.S, JournalEvent{Event: "claim", Run: run.Rec.Run, Order: o.ID, Note: via})
			r.logf("claimed %s %q as %s (run %s, via %s)", o.ID, o.Title, r.S.Name, run.Rec.Run, via)
		}
		res := r.execute(ctx, run, claimed, spec, h, argv)
		res.Title = o.Title
		if res.Outcome == "failed" && res.head != "" {
			r.skip[o.ID] = res.head
		}
		return res, nil
	}
	return nil, nil
}

// adopt takes over the agent's claim on an order in changes_requested for run, after
// the run holds the order's lock: the order is read again, and unless it is still in
// changes_requested under the same claim (another runner may have reworked it in the
// meantime) the answer is conflict.
func (r *Runner) adopt(run *fsbus.Run, o *fold.Order) (*fold.Order, error) {
	v, err := r.S.Load()
	if err != nil {
		return nil, err
	}
	now := v.State.Order(o.ID)
	if now == nil || now.State != fold.StateChangesRequested || now.Holder != r.S.Name || now.Claim != o.Claim || now.Head != o.Head {
		return nil, errs.Errorf(errs.Conflict, "pick another order", "order %s moved on while this run started", o.ID)
	}
	return now, run.Adopt(now)
}

// Input is the JSON a run's file reads on stdin: the order as `ferry order show
// --json` prints it, its contract fields, and the run id. Review is the reviewer's
// request when the run reworks an order in changes_requested; Refused is why the
// previous attempt's result was refused (retry_needed: a schema or pointer check)
// when the file runs again within the same run.
type Input struct {
	*fold.Order
	Heavy   bool         `json:"heavy,omitempty"`
	Hints   *fold.Hints  `json:"hints,omitempty"`
	Task    string       `json:"task,omitempty"`
	Run     string       `json:"run"`
	Review  *fold.Review `json:"review,omitempty"`
	Refused string       `json:"refused,omitempty"`
}

// baseEnv are the variables every run gets when set (PATH and HOME and their
// equivalents); anything else only when named.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LC_ALL", "TZ",
	"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP", "USERPROFILE",
	"HOMEDRIVE", "HOMEPATH", "APPDATA", "LOCALAPPDATA"}

// runEnv is the environment of a run: baseEnv, the names given, and FERRY_ORDER_ID,
// FERRY_RUN_ID. Names are looked up case-insensitively on Windows.
func runEnv(names []string, order, run string) []string {
	var env []string
	seen := map[string]bool{}
	for _, n := range append(append([]string{}, baseEnv...), names...) {
		key := n
		if runtime.GOOS == "windows" {
			key = strings.ToUpper(n)
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		if val, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+val)
		}
	}
	return append(env, "FERRY_ORDER_ID="+order, "FERRY_RUN_ID="+run)
}

var envNameRe = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnvNames returns invalid for a name that is not an environment variable name
// (NAME=VALUE included: values are never written in a command line or config).
func CheckEnvNames(names []string) error {
	for _, n := range names {
		if !envNameRe.MatchString(n) {
			return errs.Errorf(errs.Invalid, "pass variables by name only (--env NAME); set their values in the environment", "%q is not an environment variable name", n)
		}
	}
	return nil
}

// WaitDelay is how long a run waits, once its file has exited (or was killed), for
// the processes it left behind to close its stdout and stderr; then the pipes are
// closed and the rest of its process group is killed (exec.Cmd.WaitDelay). A
// background child never holds a runner.
const WaitDelay = 2 * time.Second

// maxAttempts bounds how often one run runs its file on a result refused with
// retry_needed: the pointer ladder (1 retry) plus the schema ladder (SchemaAttempts-1
// retries), plus the final attempt.
const maxAttempts = contract.SchemaAttempts + 1

// fileRun is the outcome of one execution of a run's file.
type fileRun struct {
	stdout      string
	cut         bool
	stderr      string
	exit        int
	werr        error // Wait's error other than an exit status
	startErr    error
	interrupted bool
}

// runFile runs the file once with in on stdin and waits for it: heartbeats and window
// renewals while it runs; on ctx cancelled, interrupt to its process group, Grace,
// then kill. Whatever is left of its process group when it ends is killed.
func (r *Runner) runFile(ctx context.Context, run *fsbus.Run, o *fold.Order, h *Handler, argv []string, in []byte) fileRun {
	fr := fileRun{exit: -1}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = r.Workdir
	cmd.Env = runEnv(h.Env, o.ID, run.Rec.Run)
	cmd.Stdin = bytes.NewReader(append(in, '\n'))
	stdout := &headBuffer{max: MaxStdout}
	stderr := &procgroup.TailBuffer{Max: StderrTail}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = WaitDelay
	procgroup.Set(cmd)
	Journal(r.S, JournalEvent{Event: "exec", Run: run.Rec.Run, Order: o.ID, Note: strings.Join(argv, " ")})
	if err := cmd.Start(); err != nil {
		fr.startErr = err
		return fr
	}
	_ = run.SetChild(cmd.Process.Pid)
	_ = run.Beat("running " + o.ID)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	beat := r.Beat
	if beat <= 0 {
		beat = 60 * time.Second
	}
	grace := r.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	tick := time.NewTicker(beat)
	defer tick.Stop()
	// The run renews its own execution window (docs/format.md §14 "Windows") once half of it has
	// passed on this machine's clock, so a long run never expires its own claim and
	// the ledger gets one extend per half window, not one per heartbeat.
	renewEvery := time.Duration(r.S.Policy().Windows(o).ExecS) * time.Second / 2
	renewed := time.Now()
	var werr error
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case <-tick.C:
			if err := run.Beat("running " + o.ID); err != nil {
				r.logf("heartbeat: %v", err)
			}
			if renewEvery > 0 && time.Since(renewed) >= renewEvery {
				if _, err := r.S.Extend(o.ID, fsbus.NoteOptions{Note: "run " + run.Rec.Run + " is still running"}); err != nil {
					r.logf("extending %s: %v", o.ID, err)
				} else {
					renewed = time.Now()
				}
			}
		case <-ctx.Done():
			fr.interrupted = true
			_ = procgroup.Interrupt(cmd.Process)
			select {
			case werr = <-done:
			case <-time.After(grace):
				_ = procgroup.Kill(cmd.Process)
				werr = <-done
			}
			break wait
		}
	}
	// Whatever the file left running in its group ends with it (an orphaned
	// `sleep` would hold the runner).
	_ = procgroup.Kill(cmd.Process)
	fr.exit = cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
		fr.werr = werr
	}
	fr.stdout, fr.cut, fr.stderr = stdout.String(), stdout.cut, stderr.String()
	// Ctrl-C in a terminal may also reach the file, which may exit before the runner
	// sees its own signal: a stop is an interruption whichever came first.
	fr.interrupted = fr.interrupted || ctx.Err() != nil
	return fr
}

// execute runs the file for a claimed order and settles the run. A result the channel
// refuses with retry_needed (the schema or pointer ladder of ADR 0003 §4: the
// claim is kept) runs the file again at once, the refusal in its input, until the ladder's end
// records the submission (validation_failed, pointer_stale) or the result passes.
func (r *Runner) execute(ctx context.Context, run *fsbus.Run, o *fold.Order, spec Spec, h *Handler, argv []string) *Result {
	res := &Result{Run: run.Rec.Run, Order: o.ID, Via: run.Rec.Via, Exit: -1}
	var review *fold.Review
	if o.State == fold.StateChangesRequested {
		for i := len(o.Reviews) - 1; i >= 0; i-- {
			if o.Reviews[i].Verdict == "changes" {
				rv := o.Reviews[i]
				review = &rv
				break
			}
		}
	}
	refused := ""
	for attempt := 1; ; attempt++ {
		in, _ := json.Marshal(Input{Order: o, Heavy: spec.Heavy, Hints: spec.Hints, Task: spec.Task, Run: run.Rec.Run, Review: review, Refused: refused})
		fr := r.runFile(ctx, run, o, h, argv, in)
		res.Exit = fr.exit
		switch {
		case fr.startErr != nil:
			return r.settle(run, res, "failed", fmt.Sprintf("run %s could not start %s: %v", run.Rec.Run, argv[0], cleanText(fr.startErr.Error(), false)))
		case fr.interrupted:
			return r.settle(run, res, "interrupted", fmt.Sprintf("run %s interrupted: the runner was stopped; released for a new attempt", run.Rec.Run))
		case fr.werr != nil:
			return r.settle(run, res, "failed", fmt.Sprintf("run %s: waiting for %s: %v", run.Rec.Run, argv[0], fr.werr))
		case fr.exit != 0:
			return r.settle(run, res, "failed", failNote(run.Rec.Run, fr.exit, fr.stderr))
		}
		opt, why := runSubmission(run.Rec.Run, o, fr.stdout, fr.cut)
		if why != "" {
			return r.settle(run, res, "failed", withStderr(why, fr.stderr))
		}
		done, err := r.S.Submit(o.ID, opt)
		if errs.Is(err, errs.RetryNeeded) && attempt < maxAttempts && ctx.Err() == nil {
			refused = cleanText(err.Error(), true)
			Journal(r.S, JournalEvent{Event: "done", Run: run.Rec.Run, Order: o.ID, Outcome: "refused", Note: refused})
			r.logf("result of run %s on %s refused, the claim is kept; running the file again: %s", run.Rec.Run, o.ID, firstLine(refused))
			if v, lerr := r.S.Load(); lerr == nil && v.State.Order(o.ID) != nil {
				o = v.State.Order(o.ID)
			}
			continue
		}
		if errs.Is(err, errs.RetryNeeded) && ctx.Err() != nil {
			return r.settle(run, res, "interrupted", fmt.Sprintf("run %s interrupted: the runner was stopped after its result was refused (%s); released for a new attempt",
				run.Rec.Run, firstLine(cleanText(err.Error(), false))))
		}
		if err != nil {
			if errs.Is(err, errs.Conflict) || errs.Is(err, errs.Denied) {
				if moved := r.movedOn(run, "its result was not submitted"); moved != "" {
					return r.takenAway(run, res, moved)
				}
			}
			return r.settle(run, res, "failed", fmt.Sprintf("run %s: its result was refused: %v", run.Rec.Run, cleanText(err.Error(), false)))
		}
		res.Outcome, res.Ref, res.Note = "submitted", opt.Reference, opt.Note
		if done.State == fold.StateValidationFailed || done.State == fold.StatePointerStale {
			res.Outcome = string(done.State) // the ladder's end: recorded, its result kept
			res.Note = strings.Join(done.Warnings, "; ")
		}
		r.end(run, JournalEvent{Event: "done", Outcome: res.Outcome, Note: opt.Reference})
		r.logf("%s %s: %s", res.Outcome, o.ID, opt.Reference)
		return res
	}
}

// runSubmission reads a run's result from its stdout (docs/runs.md "Settle"). For an
// order without a result schema: the first non-empty line is the reference, the rest
// the note. For an order with a schema, stdout is the structured result: either one
// JSON value (the reference is then "run:<run id>"), or a reference line followed by
// one JSON value. why says, when stdout holds no result, why not.
func runSubmission(run string, o *fold.Order, stdout string, cut bool) (opt fsbus.SubmitOptions, why string) {
	opt.Key = "submit:" + run
	if len(o.Schema) == 0 {
		opt.Reference, opt.Note = parseResult(stdout, cut)
		if opt.Reference == "" {
			return opt, fmt.Sprintf("run %s: no result: the file printed nothing on stdout", run)
		}
		return opt, ""
	}
	out := strings.TrimSpace(stdout)
	switch {
	case out == "":
		return opt, fmt.Sprintf("run %s: no result: the file printed nothing on stdout (order %s has a result schema: print the JSON result)", run, o.ID)
	case cut:
		return opt, fmt.Sprintf("run %s: no result: stdout is longer than %d KiB; a structured result must fit", run, MaxStdout>>10)
	case json.Valid([]byte(out)):
		opt.Reference, opt.Output = fsbus.RunKeyPrefix+run, json.RawMessage(out)
		opt.Note = "structured result of run " + run
		return opt, ""
	}
	if ref, rest, ok := strings.Cut(out, "\n"); ok && json.Valid([]byte(strings.TrimSpace(rest))) {
		opt.Reference = textsafe.Head(strings.TrimSpace(cleanText(ref, false)), fsbus.MaxReference)
		opt.Output = json.RawMessage(strings.TrimSpace(rest))
		opt.Note = "structured result of run " + run
		if opt.Reference != "" {
			return opt, ""
		}
	}
	return opt, fmt.Sprintf("run %s: no result: order %s has a result schema, and stdout is not a JSON value (nor a reference line then one): %q",
		run, o.ID, textsafe.Head(firstLine(cleanText(out, false)), 120))
}

// withStderr adds the cleaned tail of a run's stderr to a note, when there is one.
func withStderr(note, stderr string) string {
	if tail := strings.TrimSpace(cleanText(stderr, true)); tail != "" {
		return note + "; stderr tail:\n" + tail
	}
	return note
}

// movedOn reports, when the run's order is no longer held by the agent under the
// run's claim (reassigned by an offer, cancelled, expired, taken by recovery on
// another start-up), a note saying so and what did not happen; "" while the run still
// holds it.
func (r *Runner) movedOn(run *fsbus.Run, what string) string {
	v, err := r.S.Load()
	if err != nil {
		return ""
	}
	o := v.State.Order(run.Rec.Order)
	if o != nil && o.Holder == r.S.Name && (run.Rec.Claim == "" || o.Claim == run.Rec.Claim) {
		return ""
	}
	state, holder := "gone", ""
	if o != nil {
		state, holder = string(o.State), o.Holder
	}
	return fmt.Sprintf("run %s: order %s was reassigned or taken away during the run (now %s, holder %s): %s",
		run.Rec.Run, run.Rec.Order, state, orNone(holder), what)
}

// end settles run locally: ev goes to the journal with the run and its order, then
// the run's record and locks go (fsbus.Run.End).
func (r *Runner) end(run *fsbus.Run, ev JournalEvent) {
	ev.Run, ev.Order = run.Rec.Run, run.Rec.Order
	Journal(r.S, ev)
	run.End()
}

// takenAway ends a run whose order moved on under it: nothing is written to the ledger
// (the order is not the agent's to give back), the journal records it.
func (r *Runner) takenAway(run *fsbus.Run, res *Result, note string) *Result {
	res.Outcome, res.Note = "taken_away", note
	r.end(run, JournalEvent{Event: "done", Outcome: "taken_away", Note: note})
	r.logf("%s", note)
	return res
}

// settle ends a run that did not submit: a failed run fails its order with the note as
// the reason (order.fail: the order becomes failed, claimable again, and the
// reason tells whoever takes it next what went wrong); an interrupted run releases it.
// Either entry is signed and keyed by the run id, so a retry writes it once.
func (r *Runner) settle(run *fsbus.Run, res *Result, outcome, note string) *Result {
	res.Outcome, res.Note = outcome, fitNote(note)
	var o *fold.Order
	var err error
	if outcome == "failed" {
		o, err = r.S.Fail(run.Rec.Order, fsbus.NoteOptions{Note: res.Note, Key: "fail:" + run.Rec.Run})
	} else {
		o, err = r.S.Release(run.Rec.Order, fsbus.NoteOptions{Note: res.Note, Key: "release:" + run.Rec.Run})
	}
	if err != nil {
		if errs.Is(err, errs.Conflict) || errs.Is(err, errs.Denied) {
			if moved := r.movedOn(run, "nothing given back"); moved != "" {
				return r.takenAway(run, res, moved)
			}
		}
		// The record stays: the next start-up recovers the claim.
		r.logf("settling %s: %v (a restart recovers it)", run.Rec.Order, err)
		Journal(r.S, JournalEvent{Event: "error", Run: run.Rec.Run, Order: run.Rec.Order, Note: err.Error()})
		run.Unlock()
		return res
	}
	res.head = o.Head
	r.end(run, JournalEvent{Event: "done", Outcome: outcome, Note: res.Note, Head: o.Head})
	r.logf("%s %s: %s", outcome, run.Rec.Order, firstLine(res.Note))
	return res
}

// failNote is a failed run's note: exit code and the cleaned tail of its stderr.
func failNote(run string, exit int, stderr string) string {
	head := fmt.Sprintf("run %s failed (exit %d)", run, exit)
	tail := strings.TrimSpace(cleanText(stderr, true))
	if tail == "" {
		return head + "; no stderr"
	}
	return head + "; stderr tail:\n" + tail
}

// fitNote keeps a note within MaxNote bytes, cutting the middle (head and stderr
// tail both matter) on rune boundaries.
func fitNote(s string) string {
	if len(s) <= fsbus.MaxNote {
		return s
	}
	const mark = "\n…\n"
	keepHead := 200
	keepTail := fsbus.MaxNote - keepHead - len(mark)
	h, t := s[:keepHead], s[len(s)-keepTail:]
	for !utf8.ValidString(h) {
		h = h[:len(h)-1]
	}
	for !utf8.ValidString(t) {
		t = t[1:]
	}
	return h + mark + t
}

var ansiRe = lazyre.New(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[\]P^_][^\x07\x1b]*(\x07|\x1b\\)?|\x1b.`)

// cleanText makes a process's output safe for a signed note: invalid UTF-8 becomes
// U+FFFD, terminal escape sequences are dropped, other control characters (besides
// newline and tab when multiline) become spaces, and credential-looking text is
// replaced by "[secret removed: KIND]" (RedactSecrets).
func cleanText(s string, multiline bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = ansiRe.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	mode := textsafe.Line
	if multiline {
		mode = textsafe.Lines
	}
	s = mode.Clean(s, func(rune) string { return " " })
	out, _ := secretguard.Redact(s) // the secret guard would refuse it
	return out
}

// parseResult reads a run's result from its stdout: the first non-empty line is the
// reference (≤ MaxReference bytes), the rest the note (≤ MaxNote bytes). cut says the
// stdout was longer than MaxStdout.
func parseResult(out string, cut bool) (ref, note string) {
	out = strings.TrimSpace(cleanText(out, true))
	ref, note, _ = strings.Cut(out, "\n")
	ref = textsafe.Head(strings.TrimSpace(strings.ReplaceAll(ref, "\t", " ")), fsbus.MaxReference)
	note = strings.TrimSpace(note)
	if cut {
		note += "\n… (stdout cut at 64 KiB)"
	}
	if len(note) > fsbus.MaxNote {
		note = textsafe.Head(note, fsbus.MaxNote-len("\n…")) + "\n…"
	}
	return ref, note
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// headBuffer keeps the first max bytes written.
type headBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
	cut bool
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	room := h.max - len(h.b)
	if len(p) > room {
		h.cut = true
	}
	if room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string { h.mu.Lock(); defer h.mu.Unlock(); return string(h.b) }

// Loop runs orders until ctx is cancelled, polling every poll when none is ready and
// rewriting the agent's presence every Beat while idle. With once it makes one pass
// and returns its result (nil: none was ready). Errors: those of Load (a vanished
// channel folder is not_found) and of the run registry.
func (r *Runner) Loop(ctx context.Context, poll time.Duration, once bool) (*Result, error) {
	if poll <= 0 {
		poll = 5 * time.Second
	}
	var lastBeat time.Time
	for {
		if waiting, err := r.pausedWait(ctx, once, poll, &lastBeat); err != nil || waiting {
			if err != nil || ctx.Err() != nil {
				return nil, err
			}
			continue
		}
		res, err := r.RunOne(ctx)
		if err != nil || once {
			return res, err
		}
		if ctx.Err() != nil {
			return res, nil
		}
		if res != nil {
			continue // look again at once: more may be ready
		}
		beat := r.Beat
		if beat <= 0 {
			beat = 60 * time.Second
		}
		if lastBeat.IsZero() || time.Since(lastBeat) >= beat {
			if err := r.S.WritePresence("ferry run: waiting for orders", nil); err != nil {
				return nil, err
			}
			if _, err := r.S.MoveFrozen(false); err != nil { // docs/format.md §21 "Moving frozen files"
				r.logf("moving frozen files: %v", err)
			}
			lastBeat = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(poll):
		}
	}
}

// pausedWait is Loop's pause step: when the machine or project is paused it returns
// (true, nil) after logging once, keeping the agent's presence fresh ("paused") and
// waiting one poll — or, with once, the paused error. (false, nil) when not paused.
func (r *Runner) pausedWait(ctx context.Context, once bool, poll time.Duration, lastBeat *time.Time) (bool, error) {
	err := r.S.Home.CheckPaused(r.S.Project(), "taking a new order")
	if err == nil {
		r.pauseLogged = false
		return false, nil
	}
	if once {
		return true, err
	}
	if !r.pauseLogged {
		r.logf("%v", err)
		r.pauseLogged = true
	}
	beat := r.Beat
	if beat <= 0 {
		beat = 60 * time.Second
	}
	if lastBeat.IsZero() || time.Since(*lastBeat) >= beat {
		if werr := r.S.WritePresence("ferry run: paused on this machine", nil); werr != nil {
			return true, werr
		}
		*lastBeat = time.Now()
	}
	select {
	case <-ctx.Done():
	case <-time.After(poll):
	}
	return true, nil
}
