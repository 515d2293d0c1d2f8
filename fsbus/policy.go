package fsbus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Policy changes (docs/format.md §8 "Policy changes", §12 `policy.set`).
//
// channel.toml is written once and signed; its [policy] table is changed afterwards by
// master `policy.set` entries. Each carries in data.policy the WHOLE table as the owner
// meant it — every key, those this binary does not know kept as given, so a later
// binary can add keys — and in data.basis the entry hash of the policy.set it follows
// (omitted on the first). The entries chain by basis like grants (§13): where two name
// one basis (the owner on two machines), the lower entry hash wins and the other branch
// counts for nothing (listed, and reported as a contest whose ref is "policy"). The
// effective policy is channel.toml's [policy] overlaid, key by key, by the table of the
// winning chain's head. Nothing here reads a clock.

// EffectivePolicy is the policy in force in v (channel.toml's [policy] overlaid by the
// policy.set chain's head).
func (c *Channel) EffectivePolicy(v *View) fold.EffectivePolicy {
	var head *fold.PolicySet
	if v != nil && v.State != nil {
		head = v.State.Policy
	}
	return fold.Effective(c.Config.Policy, c.Config.PolicyTable, head)
}

// PolicyOf is the policy in force in v: what every decision that reads the policy
// uses (liveness, take-over, max skew, order windows).
func (c *Channel) PolicyOf(v *View) fold.Policy {
	if v == nil || v.State == nil || v.State.Policy == nil {
		return c.Config.Policy
	}
	return fold.Effective(c.Config.Policy, c.Config.PolicyTable, v.State.Policy).Policy
}

// Policy is the policy in force as of this Channel's last Load (channel.toml's before
// the first), for what runs without a View at hand (a run's renewal period).
func (c *Channel) Policy() fold.Policy {
	head := c.policyHead.Load()
	if head == nil {
		return c.Config.Policy
	}
	return fold.Effective(c.Config.Policy, c.Config.PolicyTable, head).Policy
}

// noteLoaded records the policy in force after a Load: Policy() answers it, and the
// ledger's max skew follows it (docs/format.md §6 reads max_skew_s).
func (c *Channel) noteLoaded(v *View) {
	c.policyHead.Store(v.State.Policy)
	p := c.PolicyOf(v)
	if c.Ledger != nil {
		c.Ledger.SetMaxSkew(time.Duration(p.MaxSkewS) * time.Second)
	}
}

// PolicySetResult is what SetPolicy did.
type PolicySetResult struct {
	fold.EffectivePolicy
	// Changed lists the keys whose value the write changed; empty when the policy
	// already said so (nothing written).
	Changed []string `json:"changed"`
	// Written is the hash of the policy.set written ("" when nothing changed).
	Written string `json:"written,omitempty"`
}

// SetPolicy writes a policy.set (master only) carrying the whole effective table with
// the assignments applied, chained on the current head. Every value is checked first:
// a bad one is invalid and nothing is written; silent_after_s must stay above
// quiet_after_s. Setting what the policy already says writes nothing.
func (s *Session) SetPolicy(assigns []fold.PolicyAssign) (*PolicySetResult, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner on the machine that holds the master key", "only the master changes the policy")
	}
	if len(assigns) == 0 {
		return nil, errs.Errorf(errs.Invalid, "name at least one KEY=VALUE (keys: "+strings.Join(fold.PolicyKeyNames(), ", ")+")", "no policy change given")
	}
	vals := map[string]json.RawMessage{}
	for _, a := range assigns {
		raw, err := fold.PolicyJSON(a)
		if err != nil {
			return nil, err
		}
		if prev, dup := vals[a.Key]; dup && !bytes.Equal(prev, raw) {
			return nil, errs.Errorf(errs.Invalid, "name each key once", "policy key %s given twice with different values", a.Key)
		}
		vals[a.Key] = raw
	}
	var changed []string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if d, ok := vals[fold.PolicyCompactor]; ok && !fold.OwnerDevice(strings.Trim(string(d), `"`), s.Device, v.Snapshot.Entries, s.ownerCheckpoint) {
			return nil, nil, errs.Errorf(errs.Invalid, "name this device ("+s.Device+") or one whose owner has written here (`ferry ledger tail` shows master/DEVICE); on a new owner machine, run any owner command there first (`ferry policy set compactor=DEVICE` there names itself)", "policy compactor %s is no owner device of this channel", d)
		}
		ep := s.EffectivePolicy(v)
		table := maps.Clone(ep.Table)
		changed = nil
		for _, k := range slices.Sorted(maps.Keys(vals)) {
			if cur, ok := table[k]; !ok || !fold.JSONEqual(cur, vals[k]) {
				changed = append(changed, k)
			}
			table[k] = vals[k]
		}
		if err := fold.CheckPolicyTable(table); err != nil {
			return nil, nil, err
		}
		next := fold.Effective(s.Config.Policy, s.Config.PolicyTable, &fold.PolicySet{Table: table}).Policy
		if next.SilentAfterS <= next.QuietAfterS {
			return nil, nil, errs.Errorf(errs.Invalid, fmt.Sprintf("keep silent_after_s above quiet_after_s (now %d and %d)", next.SilentAfterS, next.QuietAfterS),
				"silent_after_s (%d) must be greater than quiet_after_s (%d)", next.SilentAfterS, next.QuietAfterS)
		}
		if len(changed) == 0 {
			return nil, nil, nil
		}
		d := fold.PolicyData{Policy: table}
		if ep.Head != nil {
			d.Basis = ep.Head.Hash
		}
		return &ledger.Draft{Type: fold.TypePolicySet, Ref: fold.PolicyRef, Data: mustJSON(d)}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	v = s.viewWithEntry(v, e) // write hands back the view the entry was decided on
	out := &PolicySetResult{EffectivePolicy: s.EffectivePolicy(v), Changed: changed}
	if e.Seq != 0 {
		out.Written = e.Hash()
	} else {
		out.Changed = []string{}
	}
	return out, nil
}
