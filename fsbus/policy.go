package fsbus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

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

// policyRef is the ref of every policy.set entry.
const policyRef = "policy"

// maxPolicyS bounds every known policy value (seconds): ten years, far below 2^53
// (docs/format.md §3) and below what a time.Duration holds.
const maxPolicyS = 10 * 365 * 24 * 3600

// policyKey is a key of [policy] this binary knows: the Policy field it fills and the
// lowest value it takes (every known key is an integer of seconds, at most maxPolicyS).
type policyKey struct {
	field func(p *Policy) *int64
	min   int64
	doc   string
}

// policyKeys are the keys of [policy] this binary knows (docs/format.md §8).
var policyKeys = map[string]policyKey{
	"quiet_after_s":  {func(p *Policy) *int64 { return &p.QuietAfterS }, 1, "seconds without a sighting before a writer shows as quiet"},
	"silent_after_s": {func(p *Policy) *int64 { return &p.SilentAfterS }, 1, "seconds without a sighting before a writer is silent (primary take-over)"},
	"max_skew_s":     {func(p *Policy) *int64 { return &p.MaxSkewS }, 1, "how far a writer's HLC may run ahead of its clock (docs/format.md §6)"},
	"exec_window_s":  {func(p *Policy) *int64 { return &p.ExecWindowS }, 0, "an order's execution window; 0: 14400 (4 h)"},
	"lifetime_s":     {func(p *Policy) *int64 { return &p.LifetimeS }, 0, "a claim's lifetime; 0: 86400 (24 h)"},
	"queue_window_s": {func(p *Policy) *int64 { return &p.QueueWindowS }, 0, "an order's queue window; 0: none"},
}

// PolicyKeys lists the keys of [policy] this binary knows, sorted.
func PolicyKeys() []string { return slices.Sorted(maps.Keys(policyKeys)) }

// policyKeyRe is what `ferry policy set` takes as a key: a TOML bare key in lower case.
var policyKeyRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// PolicySet is the head of the policy.set chain as folded.
type PolicySet struct {
	Hash string `json:"hash"`
	HLC  string `json:"hlc"`
	// Table is the entry's data.policy: every key, unknown ones too, as canonical JSON.
	Table map[string]json.RawMessage `json:"policy"`
}

// policyData is the data of a policy.set entry.
type policyData struct {
	Basis  string                     `json:"basis,omitempty"`
	Policy map[string]json.RawMessage `json:"policy"`
}

// checkPolicyValue judges a value of a known key: an integer from the key's minimum to
// maxPolicyS. Unknown keys take any JSON value.
func checkPolicyValue(key string, raw json.RawMessage) (int64, error) {
	k, known := policyKeys[key]
	if !known {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || n < k.min || n > maxPolicyS {
		return 0, errs.Errorf(errs.Invalid, fmt.Sprintf("give %s an integer of seconds from %d to %d (%s)", key, k.min, maxPolicyS, k.doc),
			"policy key %s must be an integer from %d to %d, not %s", key, k.min, maxPolicyS, clipText(string(raw), 40))
	}
	return n, nil
}

// checkPolicyTable judges a whole table: every known key's value (checkPolicyValue).
func checkPolicyTable(t map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if _, err := checkPolicyValue(k, t[k]); err != nil {
			return err
		}
	}
	return nil
}

// clipText shortens s to at most n bytes for an error message.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// resolvePolicy folds the policy.set entries (master, verified, in merged order) into
// the head of their chain, listing every one that counts for nothing with ignore and
// adding a contest where the chain branched. nil when none counts.
func resolvePolicy(st *State, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) *PolicySet {
	if len(entries) == 0 {
		return nil
	}
	root := &chainNode[map[string]json.RawMessage]{valid: true}
	byHash := map[string]*chainNode[map[string]json.RawMessage]{"": root}
	var nodes []*chainNode[map[string]json.RawMessage]
	for _, e := range entries {
		if e.Ref != policyRef {
			ignore(e, "policy.set whose ref is not "+policyRef)
			continue
		}
		n := &chainNode[map[string]json.RawMessage]{e: e, d: st.dataOf(e)}
		byHash[e.Hash()] = n
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		parent := byHash[n.d.Basis]
		if parent == nil {
			ignore(n.e, "policy.set names a previous policy.set that has not arrived (pending sync)")
			continue
		}
		parent.children = append(parent.children, n)
	}
	rules := chainRules[map[string]json.RawMessage]{
		step: func(_ map[string]json.RawMessage, n *chainNode[map[string]json.RawMessage]) (map[string]json.RawMessage, error) {
			var d policyData
			if err := json.Unmarshal(n.e.Data, &d); err != nil || d.Policy == nil {
				return nil, errs.Errorf(errs.Invalid, "", "policy.set without a policy table")
			}
			if err := checkPolicyTable(d.Policy); err != nil {
				return nil, err
			}
			return d.Policy, nil
		},
		rank: func(map[string]json.RawMessage) int { return 0 }, // no stage ranks: the lower hash wins
	}
	path, contests := resolveChain(policyRef, root, rules, []string{MasterWriter}, ignore)
	st.Contested = append(st.Contested, contests...)
	on := map[*chainNode[map[string]json.RawMessage]]bool{}
	for _, n := range path {
		on[n] = true
	}
	for _, n := range nodes {
		if n.valid && !on[n] {
			ignore(n.e, "policy.set on a superseded branch of the policy chain")
		}
	}
	if len(path) < 2 {
		return nil
	}
	head := path[len(path)-1]
	return &PolicySet{Hash: head.e.Hash(), HLC: head.e.HLC, Table: head.state}
}

// EffectivePolicy is the policy in force: channel.toml's [policy] overlaid, key by key,
// by the table of the policy.set chain's head.
type EffectivePolicy struct {
	Policy Policy `json:"-"`
	// Table holds every key, as JSON values; Source names where each came from:
	// "channel.toml" or "policy.set".
	Table  map[string]json.RawMessage `json:"policy"`
	Source map[string]string          `json:"source"`
	// Head is the policy.set in force (nil: channel.toml alone).
	Head *PolicySet `json:"head,omitempty"`
	// Unknown lists the keys this binary does not know: kept, shown, not used.
	Unknown []string `json:"unknown,omitempty"`
}

// Sources of EffectivePolicy.Source.
const (
	policyFromChannel = "channel.toml"
	PolicyFromSet     = "policy.set"
)

// effectivePolicy overlays cfg's [policy] with head's table.
func effectivePolicy(cfg Config, head *PolicySet) EffectivePolicy {
	ep := EffectivePolicy{Policy: cfg.Policy, Table: map[string]json.RawMessage{}, Source: map[string]string{}, Head: head}
	for k, v := range cfg.PolicyTable {
		ep.Table[k], ep.Source[k] = v, policyFromChannel
	}
	if cfg.PolicyTable == nil { // a Config not read from a file (tests): its known keys
		for k, pk := range policyKeys {
			if v := *pk.field(&ep.Policy); v != 0 || k == "quiet_after_s" || k == "silent_after_s" || k == "max_skew_s" {
				ep.Table[k], ep.Source[k] = json.RawMessage(strconv.FormatInt(v, 10)), policyFromChannel
			}
		}
	}
	if head != nil {
		for k, v := range head.Table {
			ep.Table[k], ep.Source[k] = v, PolicyFromSet
			if pk, known := policyKeys[k]; known {
				if n, err := checkPolicyValue(k, v); err == nil {
					*pk.field(&ep.Policy) = n
				}
			}
		}
	}
	for k := range ep.Table {
		if _, known := policyKeys[k]; !known {
			ep.Unknown = append(ep.Unknown, k)
		}
	}
	sort.Strings(ep.Unknown)
	return ep
}

// EffectivePolicy is the policy in force in v (channel.toml's [policy] overlaid by the
// policy.set chain's head).
func (c *Channel) EffectivePolicy(v *View) EffectivePolicy {
	var head *PolicySet
	if v != nil && v.State != nil {
		head = v.State.Policy
	}
	return effectivePolicy(c.Config, head)
}

// PolicyOf is the policy in force in v: what every decision that reads the policy
// uses (liveness, take-over, max skew, order windows).
func (c *Channel) PolicyOf(v *View) Policy {
	if v == nil || v.State == nil || v.State.Policy == nil {
		return c.Config.Policy
	}
	return effectivePolicy(c.Config, v.State.Policy).Policy
}

// Policy is the policy in force as of this Channel's last Load (channel.toml's before
// the first), for what runs without a View at hand (a run's renewal period).
func (c *Channel) Policy() Policy {
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
			"%q is not KEY=VALUE", clipText(s, 80))
	case !policyKeyRe.MatchString(k):
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "a key is lower-case letters, digits and _ (keys this binary knows: "+strings.Join(PolicyKeys(), ", ")+")",
			"%q is not a policy key", clipText(k, 80))
	case v == "":
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "give a value after =; a key cannot be removed from the policy", "no value for policy key %s", k)
	}
	return PolicyAssign{Key: k, Value: v}, nil
}

// policyJSON is VALUE as a JSON value: a known key's integer; for an unknown key an
// integer, true or false, else the text as a JSON string.
func policyJSON(a PolicyAssign) (json.RawMessage, error) {
	if _, known := policyKeys[a.Key]; known {
		raw := json.RawMessage(a.Value)
		if _, err := checkPolicyValue(a.Key, raw); err != nil {
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
	if s.Name != MasterWriter {
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
		if err := checkPolicyTable(table); err != nil {
			return nil, nil, err
		}
		next := effectivePolicy(s.Config, &PolicySet{Table: table}).Policy
		if next.SilentAfterS <= next.QuietAfterS {
			return nil, nil, errs.Errorf(errs.Invalid, fmt.Sprintf("keep silent_after_s above quiet_after_s (now %d and %d)", next.SilentAfterS, next.QuietAfterS),
				"silent_after_s (%d) must be greater than quiet_after_s (%d)", next.SilentAfterS, next.QuietAfterS)
		}
		if len(changed) == 0 {
			return nil, nil, nil
		}
		d := policyData{Policy: table}
		if ep.Head != nil {
			d.Basis = ep.Head.Hash
		}
		return &ledger.Draft{Type: TypePolicySet, Ref: policyRef, Data: mustJSON(d)}, nil, nil
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
