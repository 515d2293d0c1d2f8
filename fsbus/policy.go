package fsbus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
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

// PolicyKeys lists the keys of [policy] this binary knows, sorted.
func PolicyKeys() []string { return slices.Sorted(maps.Keys(fold.PolicyKeys)) }

// EffectivePolicy is the policy in force: channel.toml's [policy] overlaid, key by key,
// by the table of the policy.set chain's head.
type EffectivePolicy struct {
	Policy fold.Policy `json:"-"`
	// Table holds every key, as JSON values; Source names where each came from:
	// "channel.toml" or "policy.set".
	Table  map[string]json.RawMessage `json:"policy"`
	Source map[string]string          `json:"source"`
	// Head is the policy.set in force (nil: channel.toml alone).
	Head *fold.PolicySet `json:"head,omitempty"`
	// Unknown lists the keys this binary does not know: kept, shown, not used.
	Unknown []string `json:"unknown,omitempty"`
}

// Sources of EffectivePolicy.Source.
const (
	policyFromChannel = "channel.toml"
	PolicyFromSet     = "policy.set"
)

// effectivePolicy overlays cfg's [policy] with head's table.
func effectivePolicy(cfg Config, head *fold.PolicySet) EffectivePolicy {
	ep := EffectivePolicy{Policy: cfg.Policy, Table: map[string]json.RawMessage{}, Source: map[string]string{}, Head: head}
	for k, v := range cfg.PolicyTable {
		ep.Table[k], ep.Source[k] = v, policyFromChannel
	}
	if cfg.PolicyTable == nil { // a Config not read from a file (tests): its known keys
		for k, pk := range fold.PolicyKeys {
			if v := *pk.Field(&ep.Policy); v != 0 || k == "quiet_after_s" || k == "silent_after_s" || k == "max_skew_s" {
				ep.Table[k], ep.Source[k] = json.RawMessage(strconv.FormatInt(v, 10)), policyFromChannel
			}
		}
	}
	if head != nil {
		for k, v := range head.Table {
			ep.Table[k], ep.Source[k] = v, PolicyFromSet
			if pk, known := fold.PolicyKeys[k]; known {
				if n, err := fold.CheckPolicyValue(k, v); err == nil {
					*pk.Field(&ep.Policy) = n
				}
			}
		}
	}
	for k := range ep.Table {
		if _, known := fold.PolicyKeys[k]; !known {
			ep.Unknown = append(ep.Unknown, k)
		}
	}
	slices.Sort(ep.Unknown)
	return ep
}

// EffectivePolicy is the policy in force in v (channel.toml's [policy] overlaid by the
// policy.set chain's head).
func (c *Channel) EffectivePolicy(v *View) EffectivePolicy {
	var head *fold.PolicySet
	if v != nil && v.State != nil {
		head = v.State.Policy
	}
	return effectivePolicy(c.Config, head)
}

// PolicyOf is the policy in force in v: what every decision that reads the policy
// uses (liveness, take-over, max skew, order windows).
func (c *Channel) PolicyOf(v *View) fold.Policy {
	if v == nil || v.State == nil || v.State.Policy == nil {
		return c.Config.Policy
	}
	return effectivePolicy(c.Config, v.State.Policy).Policy
}

// Policy is the policy in force as of this Channel's last Load (channel.toml's before
// the first), for what runs without a View at hand (a run's renewal period).
func (c *Channel) Policy() fold.Policy {
	head := c.policyHead.Load()
	if head == nil {
		return c.Config.Policy
	}
	return effectivePolicy(c.Config, head).Policy
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

// PolicyAssign is one KEY=VALUE of `ferry policy set`, as given.
type PolicyAssign struct {
	Key, Value string
}

// ParsePolicyAssign parses "KEY=VALUE". The text passes the secret guard first, so a
// refusal never echoes a token-shaped value.
func ParsePolicyAssign(s string) (PolicyAssign, error) {
	if err := secretguard.Check("policy assignment", s); err != nil {
		return PolicyAssign{}, err
	}
	k, v, ok := strings.Cut(s, "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	switch {
	case !ok:
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "write KEY=VALUE, e.g. `ferry policy set silent_after_s=3600` (keys: "+strings.Join(PolicyKeys(), ", ")+")",
			"%q is not KEY=VALUE", fold.ClipText(s, 80))
	case !fold.PolicyKeyRe.MatchString(k):
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "a key is lower-case letters, digits and _ (keys this binary knows: "+strings.Join(PolicyKeys(), ", ")+")",
			"%q is not a policy key", fold.ClipText(k, 80))
	case v == "":
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "give a value after =; a key cannot be removed from the policy", "no value for policy key %s", k)
	}
	return PolicyAssign{Key: k, Value: v}, nil
}

// policyJSON is VALUE as a JSON value: a known key's integer; for an unknown key an
// integer, true or false, else the text as a JSON string.
func policyJSON(a PolicyAssign) (json.RawMessage, error) {
	if _, known := fold.PolicyKeys[a.Key]; known {
		raw := json.RawMessage(a.Value)
		if _, err := fold.CheckPolicyValue(a.Key, raw); err != nil {
			return nil, err
		}
		return raw, nil
	}
	if _, err := strconv.ParseInt(a.Value, 10, 64); err == nil && len(a.Value) < 16 {
		return json.RawMessage(a.Value), nil
	}
	if a.Value == "true" || a.Value == "false" {
		return json.RawMessage(a.Value), nil
	}
	return json.Marshal(a.Value)
}

// PolicySetResult is what SetPolicy did.
type PolicySetResult struct {
	EffectivePolicy
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
func (s *Session) SetPolicy(assigns []PolicyAssign) (*PolicySetResult, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner on the machine that holds the master key", "only the master changes the policy")
	}
	if len(assigns) == 0 {
		return nil, errs.Errorf(errs.Invalid, "name at least one KEY=VALUE (keys: "+strings.Join(PolicyKeys(), ", ")+")", "no policy change given")
	}
	vals := map[string]json.RawMessage{}
	for _, a := range assigns {
		raw, err := policyJSON(a)
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
		ep := s.EffectivePolicy(v)
		table := maps.Clone(ep.Table)
		changed = nil
		for _, k := range slices.Sorted(maps.Keys(vals)) {
			if cur, ok := table[k]; !ok || !jsonEqual(cur, vals[k]) {
				changed = append(changed, k)
			}
			table[k] = vals[k]
		}
		if err := fold.CheckPolicyTable(table); err != nil {
			return nil, nil, err
		}
		next := effectivePolicy(s.Config, &fold.PolicySet{Table: table}).Policy
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

// jsonEqual reports whether two JSON values are the same value (canonical forms).
func jsonEqual(a, b json.RawMessage) bool {
	ca, err1 := ledger.CanonicalJSON(a)
	cb, err2 := ledger.CanonicalJSON(b)
	if err1 != nil || err2 != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca, cb)
}
