package fsbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/textsafe"
)

// findOrder reads the channel (no lock) and resolves q.
func (s *Session) findOrder(q string) (*fold.Order, *View, error) {
	v, err := s.Load()
	if err != nil {
		return nil, nil, err
	}
	o, err := v.State.FindOrder(q)
	return o, v, err
}

// refusedPointers returns invalid when the contract names a path this machine refuses
// to read: nothing is read. A path the contract itself gets wrong (not a safe
// workspace-relative path) is the author's to fix; anything else — a symlink leading
// outside the workspace or to a sensitive file, a FIFO, device or directory, a file
// over the size limit — is this checkout's copy, fixed here.
func refusedPointers(r *contract.PointerReport) error {
	var bad []string
	authorsFault := false
	for _, p := range r.Stale() {
		if p.Status == contract.PointerRefused {
			bad = append(bad, p.Path+" ("+p.Reason+")")
			authorsFault = authorsFault || p.Reason == contract.ReasonUnsafePath
		}
	}
	if len(bad) == 0 {
		return nil
	}
	hint := "this checkout's copy is the problem, not the order: replace it with the regular file itself (no symlink out of the workspace or to a secret, no FIFO or device), then try again"
	if authorsFault {
		hint = "ask the author to dispatch the order again with pointers inside the workspace"
	}
	return errs.Errorf(errs.Invalid, hint, "order %s points at files this machine refuses to read: %s", r.Order, strings.Join(bad, ", "))
}

// diffWarning is the warning of a claim or submit made on a read-only order's diff.
func diffWarning(r *contract.PointerReport) string {
	var files []string
	for _, p := range r.Stale() {
		files = append(files, p.Path)
	}
	return fmt.Sprintf("this checkout differs from the dispatch (%s): review the diff %s, not the files on disk", strings.Join(files, ", "), r.Diff.Path)
}

// withWarnings returns a copy of o carrying warnings.
func withWarnings(o *fold.Order, warn []string) *fold.Order {
	if o == nil || len(warn) == 0 {
		return o
	}
	cp := *o
	cp.Warnings = append(append([]string(nil), o.Warnings...), warn...)
	return &cp
}

// Claim takes an open order (or one offered to s). Errors: conflict naming the holder
// when it is claimed; denied below member level; not_found / invalid for the id.
// Claiming an order s already holds writes nothing.
//
// An order whose contract has pointers is claimed only when this machine's files
// match them (existence, then size, then sha256; checked again after 150 ms): else the
// claim is refused locally with stale, naming the files and why (another commit, or
// local edits) and how to recover, and nothing is written — the order stays open for
// machines whose checkout matches (ADR 0003 §2). A read-only order whose verified
// diff covers every pointer is claimed anyway, with a warning to review the diff. A
// contract naming a path this machine refuses to read answers invalid.
func (s *Session) Claim(q, key string) (*fold.Order, error) {
	for attempt := 0; ; attempt++ {
		var warn []string
		// The files are checked under the channel lock, on the very view the claim is
		// decided on (one reading of the channel per claim); a first mismatch is
		// checked again after claimRetry with the lock released (an editor's save may
		// still be landing).
		check := func(o *fold.Order, _ *fold.EntryData) (pendingObject, error) {
			if !o.HasPointers() {
				return pendingObject{}, nil
			}
			ws, err := s.workspace()
			if err != nil {
				return pendingObject{}, err
			}
			r := contract.CheckPointers(ws, o.ID, &o.Contract)
			if err := refusedPointers(r); err != nil {
				return pendingObject{}, err
			}
			switch {
			case r.DiffMode:
				warn = append(warn, diffWarning(r))
			case !r.OK && attempt == 0:
				return pendingObject{}, errSettle
			case !r.OK:
				return pendingObject{}, contract.StaleError(errs.Stale, r, "not claimed, nothing written (the order stays open)")
			}
			return pendingObject{}, nil
		}
		o, err := s.claim(q, key, check)
		if errors.Is(err, errSettle) {
			contract.SettleWait()
			continue
		}
		return withWarnings(o, warn), err
	}
}

// errSettle is Claim's signal, from inside the write, that the pointed files differed
// once: nothing was written, and the check is made again after claimRetry.
var errSettle = errors.New("fsbus: pointed files differ; checking again")

// VerifyOrder reports the health of an order's pointers in workspace ("" means the
// git top-level of the current directory, else the current directory): ok, changed,
// missing or refused per pointer (ADR 0003 §2). It reads the files and the channel
// and writes nothing, so it needs no key. An order without pointers reports ok with
// none.
func (c *Channel) VerifyOrder(q, workspace string) (*contract.PointerReport, error) {
	v, err := c.Load()
	if err != nil {
		return nil, err
	}
	o, err := v.State.FindOrder(q)
	if err != nil {
		return nil, err
	}
	ws, err := contract.ResolveWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	return contract.CheckPointers(ws, o.ID, &o.Contract), nil
}

// MarkStale is `ferry order verify --mark`: the author, on the machine that dispatched
// the order, records with order.stale that a pointed file changed after dispatch; the
// order becomes pointer_stale (ADR 0003). Errors: denied for anyone but the
// author or on another machine; conflict when every pointer still matches, or when
// the order is held (the holder's submit re-verifies) or past the point of marking;
// invalid for an order without pointers. Marking an order already pointer_stale
// writes nothing.
func (s *Session) MarkStale(q, key string) (*fold.Order, *contract.PointerReport, error) {
	o, v, err := s.findOrder(q)
	if err != nil {
		return nil, nil, err
	}
	if !o.HasPointers() {
		return nil, nil, errs.Errorf(errs.Invalid, "only an order with pointers can go stale", "order %s has no file pointers", o.ID)
	}
	if o.State == fold.StatePointerStale {
		return o, nil, nil
	}
	if o.Author != s.Name {
		return nil, nil, errs.Errorf(errs.Denied, "the author marks an order stale; tell the author (`ferry talk send --to "+o.Author+" 'order "+o.ID+": a pointed file changed'`)", "%s is not the author of order %s (author: %s)", s.Name, o.ID, o.Author)
	}
	if o.Device != s.Device {
		return nil, nil, errs.Errorf(errs.Denied, "run `ferry order verify "+o.ID+" --mark` on the machine that dispatched it: only its checkout is the one the pointers were taken from",
			"order %s was dispatched from device %s; this machine is %s", o.ID, o.Device, s.Device)
	}
	if err := o.C.CheckStale(s.Name); err != nil {
		return nil, nil, err
	}
	if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeOrderStale); err != nil {
		return nil, nil, err
	}
	ws, err := s.workspace()
	if err != nil {
		return nil, nil, err
	}
	r := contract.CheckPointersSettled(ws, o.ID, &o.Contract)
	if r.OK {
		return nil, r, errs.Errorf(errs.Conflict, "nothing to mark; `ferry order verify "+o.ID+"` shows each pointer", "every pointer of order %s still matches this checkout", o.ID)
	}
	var list []string
	for _, p := range r.Stale() {
		list = append(list, p.Path+" "+p.Status)
	}
	note := cutNote("pointed files changed after dispatch: " + strings.Join(list, ", "))
	o, err = s.lifecycle(o.ID, fold.TypeOrderStale, fold.EntryData{Note: note}, key, func(o *fold.Order) bool { return o.State == fold.StatePointerStale })
	return o, r, err
}

// cutNote keeps a generated note within MaxNote bytes (on a rune boundary).
func cutNote(s string) string {
	s, _ = textsafe.CutBytes(s, MaxNote)
	return s
}

// SubmitOptions are the arguments of Submit.
type SubmitOptions struct {
	Reference string          // commit, branch or hand-in id (required)
	Note      string          // short summary
	Output    json.RawMessage // structured result (JSON), validated against the order's schema
	Key       string          // idempotency key
}

// Submit hands in the holder's result: a reference (commit, branch, hand-in id), a
// short note and an optional structured output, published as results/<r-id>.json and
// named by order.submit. It enforces the order's contract on the holder's machine:
//
//   - pointers are re-verified (with one retry after 150 ms). The first mismatch on a
//     claim answers retry_needed listing the files and the recovery commands, keeps
//     the claim and records an order.progress (data.failure "pointers") that renews
//     the window; the second records the submission as pointer_stale, its result kept.
//   - the output is validated against the order's schema. The first two failures
//     answer retry_needed with one line per error and record an order.progress (data
//     failure "schema"), so the count survives restarts and other machines see it;
//     the third records the submission as validation_failed, its result kept.
//
// Errors: invalid for an empty or over-long reference or note, output that is not
// JSON or larger than MaxOutput, or a missing output when the order has a schema;
// denied for a non-holder; superseded, naming the winner, for one whose claim lost a
// race across machines (Order.lostClaim); conflict when the order is not in hand.
func (s *Session) Submit(q string, opt SubmitOptions) (*fold.Order, error) {
	ref, note := strings.TrimSpace(opt.Reference), strings.TrimSpace(opt.Note)
	if ref == "" {
		return nil, errs.Errorf(errs.Invalid, "pass --ref COMMIT|BRANCH|h-ID", "a submit needs a reference to the work")
	}
	if err := checkCap("result reference", ref, MaxReference, unitBytes, "a commit, branch or hand-in id; the work stays in the work repo"); err != nil {
		return nil, err
	}
	if err := checkCap("result summary", note, MaxNote, unitBytes, "summarise; the work stays in the work repo"); err != nil {
		return nil, err
	}
	var output json.RawMessage
	if len(opt.Output) > 0 {
		var err error
		if output, err = contract.CompactJSON(opt.Output, contract.MaxOutput, "result"); err != nil {
			return nil, err
		}
	}
	// A hand-in id (or unique prefix of one) names that hand-in: resolved to its full id.
	ref, err := s.resolveHandinRef(ref)
	if err != nil {
		return nil, err
	}
	o, v, err := s.findOrder(q)
	if err != nil {
		return nil, err
	}
	if o.ContractOrNil() == nil {
		return s.submit(o.ID, ref, note, output, "", opt.Key)
	}
	if _, err := o.C.Step(fold.TypeOrderSubmit, s.Name, "", v.State.LevelOf(s.Name), fold.EntryData{Reference: ref}); err != nil {
		return nil, o.LostClaim(fold.TypeOrderSubmit, s.Name, err)
	}
	if len(o.Schema) > 0 && len(output) == 0 {
		return nil, errs.Errorf(errs.Invalid, "pass the structured result with --result JSON|@FILE (MCP: result)", "order %s has a result schema; the submit carries no result", o.ID)
	}
	outcome := ""
	var warn []string
	if o.HasPointers() {
		ws, err := s.workspace()
		if err != nil {
			return nil, err
		}
		r := contract.CheckPointersSettled(ws, o.ID, &o.Contract)
		switch {
		case r.OK:
		case r.DiffMode:
			warn = append(warn, diffWarning(r))
		case o.PointerFailures == 0:
			e := contract.StaleError(errs.RetryNeeded, r, "submit refused (the claim is kept and its window renewed; a second mismatch records the submission as pointer_stale)")
			if _, perr := s.progress(o.ID, cutNote("submit refused: "+e.Message), "pointers", ""); perr != nil {
				return nil, perr
			}
			return nil, e
		default:
			outcome = string(fold.StatePointerStale)
			warn = append(warn, "the pointed files changed again: the submission is recorded as pointer_stale, its result kept")
		}
	}
	if outcome == "" && len(o.Schema) > 0 {
		lines, err := contract.ValidateOutput(o.Schema, output)
		if err != nil {
			return nil, err
		}
		if lines != nil {
			n := o.SchemaFailures + 1
			if n < contract.SchemaAttempts {
				msg := fmt.Sprintf("result does not match the schema of order %s (failure %d of %d):\n  %s", o.ID, n, contract.SchemaAttempts, strings.Join(lines, "\n  "))
				if _, perr := s.progress(o.ID, cutNote(fmt.Sprintf("result refused by the schema (%d of %d): %s", n, contract.SchemaAttempts, strings.Join(lines, "; "))), "schema", ""); perr != nil {
					return nil, perr
				}
				return nil, errs.Errorf(errs.RetryNeeded, fmt.Sprintf("fix the result and submit again; failure %d records the submission as validation_failed", contract.SchemaAttempts), "%s", msg)
			}
			outcome = string(fold.StateValidationFailed)
			warn = append(warn, fmt.Sprintf("the schema refused the result %d times: the submission is recorded as validation_failed, its result kept: %s", n, strings.Join(lines, "; ")))
		}
	}
	o, err = s.submit(o.ID, ref, note, output, outcome, opt.Key)
	return withWarnings(o, warn), err
}
