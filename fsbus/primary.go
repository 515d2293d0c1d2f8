package fsbus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// PrimaryStatus is the primary role as this machine sees it (`ferry primary status`,
// the MCP tool ferry_primary): the folded role plus liveness from this machine's
// sightings (docs/design.md §2 rule 7) and the take rule that applies now.
type PrimaryStatus struct {
	State  string `json:"state"`  // none|held|released
	Holder string `json:"holder"` // "" unless held
	Since  string `json:"since,omitempty"`
	// Previous is the last holder before the current state (who released it, or whose
	// hold the current take ended).
	Previous string `json:"previous,omitempty"`
	// Liveness of the holder on this machine's clock: alive|quiet|silent|unknown
	// (unknown also when nobody holds the role); AgeS is seconds since this machine
	// last saw the holder write, -1 when never or nobody holds it.
	Liveness string       `json:"liveness"`
	AgeS     int64        `json:"age_s"`
	Standbys []StandbyRow `json:"standbys"`
	// Brief is the current brief; its By differs from Holder when it was written by an
	// earlier holder (it survives a release until a new holder briefs).
	Brief *fold.Brief `json:"brief,omitempty"`
	// Rule is one sentence saying which take rule applies now.
	Rule     string         `json:"rule"`
	Contests []fold.Contest `json:"contests"`
	Pending  int            `json:"pending,omitempty"`
	// Sync is delivery as Syncthing reports it, set by WithSync for
	// `ferry primary status` and ferry_primary status only.
	Sync *synchealth.Line `json:"sync,omitempty"`
}

// WithSync adds sync health to the status: the delivery line, and, while Syncthing
// carries the channel with no peer connected, the rule says a take on grounds of
// silence is refused (docs/design.md §2 rule 7: "silent" is not asserted then). It returns p.
func (p *PrimaryStatus) WithSync(h *synchealth.Health) *PrimaryStatus {
	l := h.Line()
	p.Sync = &l
	if p.State == fold.PrimaryHeld && p.Liveness == Silent && h.NoPeer() {
		p.Rule = fmt.Sprintf("holder not heard from for %s, but Syncthing reports no connected peer: take refused until a peer connects", Span(p.AgeS))
	}
	return p
}

// StandbyRow is a standby with this machine's view of its liveness.
type StandbyRow struct {
	Name     string `json:"name"`
	Liveness string `json:"liveness"`
	AgeS     int64  `json:"age_s"`
}

// PrimaryStatus builds the primary role's view from v: holder, since, liveness of the
// holder and of every standby on this machine's clock, the current brief, the rule
// that applies and the contests of the primary chain. Empty lists are [].
func (c *Channel) PrimaryStatus(v *View) *PrimaryStatus {
	p := v.State.Primary
	out := &PrimaryStatus{State: p.State, Holder: p.Holder, Since: p.Since, Previous: p.Previous,
		Liveness: Unknown, AgeS: -1, Standbys: []StandbyRow{}, Contests: append([]fold.Contest{}, p.Contests...), Pending: p.Pending}
	if p.Holder != "" {
		out.Liveness, out.AgeS = c.Liveness(v, p.Holder)
	}
	for _, sb := range p.Standbys {
		l, age := c.Liveness(v, sb.Name)
		out.Standbys = append(out.Standbys, StandbyRow{Name: sb.Name, Liveness: l, AgeS: age})
	}
	if p.Brief != nil {
		b := *p.Brief
		b.Take = ""
		out.Brief = &b
	}
	out.Rule = c.primaryRule(c.PolicyOf(v), p, out.Liveness, out.AgeS)
	return out
}

// primaryRule says in one sentence which take rule applies now.
func (c *Channel) primaryRule(pol fold.Policy, p *fold.Primary, liveness string, ageS int64) string {
	silent := Span(pol.SilentAfterS)
	switch {
	case p.State == fold.PrimaryNone:
		return "no holder: an orchestrator may take it"
	case p.State == fold.PrimaryReleased:
		return "released by " + p.Previous + ": an orchestrator may take it"
	case liveness == Silent:
		return fmt.Sprintf("holder silent (heard from %s ago): an orchestrator may take over", Span(ageS))
	case liveness == Unknown:
		return "holder not yet seen on this machine: take refused until silent (" + silent + ") or released"
	case liveness == Quiet:
		return fmt.Sprintf("holder quiet (heard from %s ago): take refused until silent (%s) or released", Span(ageS), silent)
	}
	return "holder alive: take refused until silent (" + silent + ") or released"
}

// Span formats a number of seconds for people, to the minute from 2 min on (seconds
// past the minute are dropped, never hours past the hour): "45 s", "7 min", "2 h",
// "2 h 59 min".
func Span(s int64) string {
	switch {
	case s < 0:
		return "never"
	case s < 120:
		return fmt.Sprintf("%d s", s)
	case s < 3600:
		return fmt.Sprintf("%d min", s/60)
	case s%3600 < 60:
		return fmt.Sprintf("%d h", s/3600)
	}
	return fmt.Sprintf("%d h %d min", s/3600, s%3600/60)
}

// primaryCall is what data.args hashes for a primary or standby call: the entry type
// and the call's data members (docs/format.md §15).
type primaryCall struct {
	Call string           `json:"call"`
	Data fold.PrimaryData `json:"data"`
}

// primaryWrite writes one entry of the primary role under the channel lock: it checks
// the idempotency key and the writer's level, lets plan refuse the call or find it
// already done (noop: nothing is written), checks a take or release with the fold's
// own state machine and names the chain's head as basis.
func (s *Session) primaryWrite(typ, ref string, d fold.PrimaryData, key string, plan func(v *View, p *fold.Primary, d *fold.PrimaryData) (noop bool, err error)) (*PrimaryStatus, error) {
	args := argsHash(primaryCall{Call: typ, Data: d})
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if _, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			return nil, nil, err
		}
		lvl := v.State.LevelOf(s.Name)
		if err := fold.CheckLevel(s.Name, lvl, typ); err != nil {
			return nil, nil, err
		}
		p := v.State.Primary
		if noop, err := plan(v, p, &d); err != nil || noop {
			return nil, nil, err
		}
		if typ == fold.TypePrimaryTake || typ == fold.TypePrimaryRelease {
			if _, err := p.C.Step(typ, s.Name, "", "", lvl); err != nil {
				return nil, nil, err
			}
			d.Basis = p.Head
		}
		if key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: typ, Ref: ref, Data: mustJSON(d), Idem: key}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return s.PrimaryStatus(s.viewWithEntry(v, e)), nil
}

// PrimaryTake makes s the primary (primary.take, orchestrator level; the CLI and MCP
// also call it "takeover"). The rule (docs/design.md §2 rule 7): a take is allowed
// when nobody holds the role, when it was released, or when the holder is silent on
// this machine's clock — this machine has seen neither a new entry nor a changed
// presence file of it for the policy's silent_after_s (30 min by default; Liveness).
// While the holder is alive or quiet (or not yet
// seen here) the take is refused with conflict naming the holder and when it was last
// heard from. A take on grounds of silence is also refused (conflict) while Syncthing
// carries the channel and reports no connected peer (synchealth.Health.NoPeer): the
// holder's entries may simply not have arrived; without Syncthing nothing changes.
// The holder taking again writes nothing. The take names the chain's head
// as basis; a race across machines resolves by the branch rule (one holder everywhere,
// a contest naming the winner). Errors: denied below orchestrator; conflict as above
// or for a key used with other arguments. It returns the role after the call.
func (s *Session) PrimaryTake(key string) (*PrimaryStatus, error) {
	if err := s.Home.CheckPaused(s.Project(), "primary take"); err != nil {
		return nil, err // a paused machine takes no role
	}
	return s.primaryWrite(fold.TypePrimaryTake, fold.PrimaryRef, fold.PrimaryData{}, key, func(v *View, p *fold.Primary, d *fold.PrimaryData) (bool, error) {
		if p.State != fold.PrimaryHeld {
			return false, nil
		}
		if p.Holder == s.Name {
			return true, nil
		}
		// The owner's explicit act, or a holder whose grant no longer allows the role
		// (revoked, lowered), never blocks a take: no one could otherwise release it.
		if s.Name == fold.MasterWriter || v.State.LevelOf(p.Holder) < fold.LevelOrchestrator {
			return false, nil
		}
		l, age := s.Liveness(v, p.Holder)
		if l == Silent {
			// Silence proves nothing while the sync tool delivers nothing.
			if h := synchealth.Probe(context.Background(), s.Root); h.NoPeer() {
				return false, errs.Errorf(errs.Conflict, "reconnect Syncthing to the other machines (`ferry doctor` shows the state); the owner can still take the role",
					"primary is held by %s, not heard from for %s, but Syncthing reports no connected peer (%s): its entries may not have arrived",
					p.Holder, Span(age), h.Syncthing)
			}
			return false, nil
		}
		heard := "not yet seen on this machine"
		if l != Unknown {
			heard = l + ", heard from " + Span(age) + " ago"
		}
		return false, errs.Errorf(errs.Conflict, "run `ferry primary standby` to be next in line; `ferry primary status` shows the rule",
			"primary is held by %s (%s); take is allowed once silent after %s, or when it releases",
			p.Holder, heard, Span(s.PolicyOf(v).SilentAfterS))
	})
}

// PrimaryRelease hands the primary role back (primary.release, orchestrator level,
// only the holder). The brief stays shown until a new holder briefs. Releasing again
// right after one's own release writes nothing. Errors: denied for a non-holder or
// below orchestrator; conflict when nobody holds the role.
func (s *Session) PrimaryRelease(key string) (*PrimaryStatus, error) {
	return s.primaryWrite(fold.TypePrimaryRelease, fold.PrimaryRef, fold.PrimaryData{}, key, func(v *View, p *fold.Primary, d *fold.PrimaryData) (bool, error) {
		return p.State == fold.PrimaryReleased && p.Previous == s.Name, nil
	})
}

// PrimaryBrief records the holder's brief (primary.brief, orchestrator level, only the
// current holder): an objective of one line and at most 5 constraints of one line
// each, every line trimmed, 1–200 bytes (empty constraints are dropped). It names the
// holder's take in data.take. The same brief again writes nothing. Errors: invalid
// for bad lines; denied below orchestrator or when s is not the holder.
func (s *Session) PrimaryBrief(objective string, constraints []string, key string) (*PrimaryStatus, error) {
	objective = strings.TrimSpace(objective)
	if err := checkShortLine("objective", objective, fold.MaxBriefLine); err != nil {
		return nil, err
	}
	cs := []string{}
	for _, c := range constraints {
		c = strings.TrimSpace(c)
		if err := checkShortLine("constraint", c, fold.MaxBriefLine); err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if len(cs) > fold.MaxBriefConstraint {
		return nil, errs.Errorf(errs.Invalid, fmt.Sprintf("keep the %d that matter most", fold.MaxBriefConstraint),
			"a brief is at most 5 lines: the objective and %d constraints; got %d constraints", fold.MaxBriefConstraint, len(cs))
	}
	brief := fold.PrimaryData{Objective: objective, Constraints: cs}
	if len(cs) == 0 {
		brief.Constraints = nil
	}
	return s.primaryWrite(fold.TypePrimaryBrief, fold.PrimaryRef, brief, key, func(v *View, p *fold.Primary, d *fold.PrimaryData) (bool, error) {
		if p.State != fold.PrimaryHeld || p.Holder != s.Name {
			hint := "take the role first: `ferry primary take`"
			if p.Holder != "" {
				hint = "only the primary briefs; ask " + p.Holder + ", or `ferry primary standby`"
			}
			return false, errs.Errorf(errs.Denied, hint, "%s is not the primary (holder: %s)", s.Name, fold.OrNone(p.Holder))
		}
		if b := p.Brief; b != nil && b.Take == p.Take && b.By == s.Name && b.Objective == objective && slices.Equal(b.Constraints, cs) {
			return true, nil
		}
		d.Take = p.Take
		return false, nil
	})
}

// checkShortLine checks one line of text a person reads: non-empty, one line, UTF-8, at
// most max bytes (invalid otherwise).
func checkShortLine(what, s string, max int) error {
	switch {
	case s == "":
		return errs.Errorf(errs.Invalid, "write one short line", "empty %s", what)
	case strings.ContainsAny(s, "\r\n"):
		return errs.Errorf(errs.Invalid, "write one line; put detail in the work repo", "%s must be one line", what)
	case !utf8.ValidString(s):
		return errs.Errorf(errs.Invalid, "write UTF-8 text", "%s must be UTF-8", what)
	case utf8.RuneCountInString(s) > max:
		return errs.Errorf(errs.Invalid, fmt.Sprintf("keep it to one line of at most %d characters", max), "%s is %d characters; the limit is %d", what, utf8.RuneCountInString(s), max)
	case contract.HasControl(s, false):
		return errs.Errorf(errs.Invalid, "remove terminal escapes and other control characters", "%s holds control characters", what)
	}
	return nil
}

// PrimaryStandby records that s is available to take over (presence.standby, worker
// level; ref = s, data {}). Being a standby already writes nothing. Errors: denied
// below worker; conflict when s holds the role.
func (s *Session) PrimaryStandby(key string) (*PrimaryStatus, error) {
	return s.primaryWrite(fold.TypePresenceStandby, s.Name, fold.PrimaryData{}, key, func(v *View, p *fold.Primary, d *fold.PrimaryData) (bool, error) {
		if p.State == fold.PrimaryHeld && p.Holder == s.Name {
			return false, errs.Errorf(errs.Conflict, "`ferry primary release` hands the role back", "%s holds the primary role; standby is for taking over", s.Name)
		}
		for _, sb := range p.Standbys {
			if sb.Name == s.Name {
				return true, nil
			}
		}
		return false, nil
	})
}
