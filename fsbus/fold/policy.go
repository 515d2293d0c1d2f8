package fold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Windows returns the windows that apply to o under policy p, seconds: the order's
// own values where set, else the channel's, else the defaults (queue 0 = none).
func (p Policy) Windows(o *Order) Windows {
	w := Windows{ExecS: p.ExecWindowS, LifetimeS: p.LifetimeS, QueueS: p.QueueWindowS}
	if w.ExecS <= 0 {
		w.ExecS = DefaultExecWindowS
	}
	if w.LifetimeS <= 0 {
		w.LifetimeS = DefaultLifetimeS
	}
	if w.QueueS < 0 {
		w.QueueS = 0
	}
	if ow := o.Windows; ow != nil {
		if ow.ExecS > 0 {
			w.ExecS = ow.ExecS
		}
		if ow.LifetimeS > 0 {
			w.LifetimeS = ow.LifetimeS
		}
		if ow.QueueS > 0 {
			w.QueueS = ow.QueueS
		}
	}
	return w
}

// Order life-cycle limits and window defaults (docs/format.md §14 "Windows").
const (
	// MaxReleases is how many times the holders of an order may release it in all; the
	// next release is refused (submit or fail instead). A retirement's release and a
	// decline do not count.
	MaxReleases = 3
	// DefaultExecWindowS is the execution window, in seconds: from the claim, renewed
	// by every progress and extend.
	DefaultExecWindowS = 4 * 3600
	// DefaultLifetimeS caps a claim's execution window, in seconds from the claim,
	// however often it is renewed.
	DefaultLifetimeS = 24 * 3600
)

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
		if e.Ref != PolicyRef {
			ignore(e, "policy.set whose ref is not "+PolicyRef)
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
			var d PolicyData
			if err := json.Unmarshal(n.e.Data, &d); err != nil || d.Policy == nil {
				return nil, errs.Errorf(errs.Invalid, "", "policy.set without a policy table")
			}
			if err := CheckPolicyTable(d.Policy); err != nil {
				return nil, err
			}
			return d.Policy, nil
		},
		rank: func(map[string]json.RawMessage) int { return 0 }, // no stage ranks: the lower hash wins
	}
	path, contests := resolveChain(PolicyRef, root, rules, []string{MasterWriter}, ignore)
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

// ClipText shortens s to at most n bytes for an error message.
func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CheckPolicyTable judges a whole table: every known key's value (checkPolicyValue).
func CheckPolicyTable(t map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if _, err := CheckPolicyValue(k, t[k]); err != nil {
			return err
		}
	}
	return nil
}

// CheckPolicyValue judges a value of a known key: an integer from the key's minimum to
// maxPolicyS. Unknown keys take any JSON value.
func CheckPolicyValue(key string, raw json.RawMessage) (int64, error) {
	k, known := PolicyKeys[key]
	if !known {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || n < k.min || n > maxPolicyS {
		return 0, errs.Errorf(errs.Invalid, fmt.Sprintf("give %s an integer of seconds from %d to %d (%s)", key, k.min, maxPolicyS, k.doc),
			"policy key %s must be an integer from %d to %d, not %s", key, k.min, maxPolicyS, ClipText(string(raw), 40))
	}
	return n, nil
}

// PolicyData is the data of a policy.set entry.
type PolicyData struct {
	Basis  string                     `json:"basis,omitempty"`
	Policy map[string]json.RawMessage `json:"policy"`
}

// PolicySet is the head of the policy.set chain as folded.
type PolicySet struct {
	Hash string `json:"hash"`
	HLC  string `json:"hlc"`
	// Table is the entry's data.policy: every key, unknown ones too, as canonical JSON.
	Table map[string]json.RawMessage `json:"policy"`
}

// PolicyKeyRe is what `ferry policy set` takes as a key: a TOML bare key in lower case.
var PolicyKeyRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// PolicyKeys are the keys of [policy] this binary knows (docs/format.md §8).
var PolicyKeys = map[string]policyKey{
	"quiet_after_s":  {func(p *Policy) *int64 { return &p.QuietAfterS }, 1, "seconds without a sighting before a writer shows as quiet"},
	"silent_after_s": {func(p *Policy) *int64 { return &p.SilentAfterS }, 1, "seconds without a sighting before a writer is silent (primary take-over)"},
	"max_skew_s":     {func(p *Policy) *int64 { return &p.MaxSkewS }, 1, "how far a writer's HLC may run ahead of its clock (docs/format.md §6)"},
	"exec_window_s":  {func(p *Policy) *int64 { return &p.ExecWindowS }, 0, "an order's execution window; 0: 14400 (4 h)"},
	"lifetime_s":     {func(p *Policy) *int64 { return &p.LifetimeS }, 0, "a claim's lifetime; 0: 86400 (24 h)"},
	"queue_window_s": {func(p *Policy) *int64 { return &p.QueueWindowS }, 0, "an order's queue window; 0: none"},
}

// policyKey is a key of [policy] this binary knows: the Policy field it fills and the
// lowest value it takes (every known key is an integer of seconds, at most maxPolicyS).
type policyKey struct {
	Field func(p *Policy) *int64 `json:"-"`
	min   int64
	doc   string
}

// maxPolicyS bounds every known policy value (seconds): ten years, far below 2^53
// (docs/format.md §3) and below what a time.Duration holds.
const maxPolicyS = 10 * 365 * 24 * 3600

// PolicyRef is the ref of every policy.set entry.
const PolicyRef = "policy"

// DefaultPolicy is what init writes: quiet after 5 min, silent after 30, max skew 1 h.
var DefaultPolicy = Policy{QuietAfterS: 300, SilentAfterS: 1800, MaxSkewS: 3600}

// Policy holds the signed policy defaults of channel.toml (seconds).
type Policy struct {
	QuietAfterS  int64 `toml:"quiet_after_s" json:"quiet_after_s"`
	SilentAfterS int64 `toml:"silent_after_s" json:"silent_after_s"`
	MaxSkewS     int64 `toml:"max_skew_s" json:"max_skew_s"`
	// Order windows, seconds; absent or 0 means the default: an execution
	// window of 4 h (DefaultExecWindowS) renewed by progress and extend, capped by a
	// claim lifetime of 24 h (DefaultLifetimeS), and no queue window. Optional keys:
	// a channel.toml written without them verifies and reads as before (its signature
	// covers the keys it has).
	ExecWindowS  int64 `toml:"exec_window_s,omitzero" json:"exec_window_s,omitempty"`
	LifetimeS    int64 `toml:"lifetime_s,omitzero" json:"lifetime_s,omitempty"`
	QueueWindowS int64 `toml:"queue_window_s,omitzero" json:"queue_window_s,omitempty"`
}
