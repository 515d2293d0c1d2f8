package fold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/internal/secretguard"
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
	k, known := policyKeys[key]
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

// policyKeyRe is what `ferry policy set` takes as a key: a TOML bare key in lower case.
var policyKeyRe = lazyre.New(`^[a-z][a-z0-9_]{0,63}$`)

// policyKeys are the keys of [policy] this binary knows (docs/format.md §8).
var policyKeys = map[string]policyKey{
	"quiet_after_s":   {func(p *Policy) *int64 { return &p.QuietAfterS }, 1, "seconds without a sighting before a writer shows as quiet", ""},
	"silent_after_s":  {func(p *Policy) *int64 { return &p.SilentAfterS }, 1, "seconds without a sighting before a writer is silent (primary take-over)", ""},
	"max_skew_s":      {func(p *Policy) *int64 { return &p.MaxSkewS }, 1, "how far a writer's HLC may run ahead of its clock (docs/format.md §6)", ""},
	"exec_window_s":   {func(p *Policy) *int64 { return &p.ExecWindowS }, 0, "an order's execution window; 0: 14400 (4 h)", "14400 s, 4 h"},
	"lifetime_s":      {func(p *Policy) *int64 { return &p.LifetimeS }, 0, "a claim's lifetime; 0: 86400 (24 h)", "86400 s, 24 h"},
	"queue_window_s":  {func(p *Policy) *int64 { return &p.QueueWindowS }, 0, "an order's queue window; 0: none", "no queue window"},
	"settle_s":        {func(p *Policy) *int64 { return &p.SettleS }, 0, "how long this machine must have seen an entry before the owner's checkpoint covers it; 0: 86400 (24 h)", "86400 s, 24 h"},
	"compact_after_s": {func(p *Policy) *int64 { return &p.CompactAfterS }, 0, "the compactor's `ferry daemon` compacts once the newest owner's checkpoint is this old; 0: never by age", "never by age"},
	"compact_entries": {func(p *Policy) *int64 { return &p.CompactEntries }, 0, "the compactor's `ferry daemon` compacts once this many entries are above the newest cut (a count, not seconds); 0: never by count", "never by count"},
	"archive_grace_s": {func(p *Policy) *int64 { return &p.ArchiveGraceS }, 0, "how long this machine must have seen an owner's checkpoint count before the frozen files at or below its cut move to archive/; 0: 1209600 (14 days)", "1209600 s, 14 days"},
}

// policyKey is a key of [policy] this binary knows: the Policy field it fills and the
// lowest value it takes (every known key is an integer of seconds, compact_entries a
// count, at most maxPolicyS).
type policyKey struct {
	Field func(p *Policy) *int64 `json:"-"`
	min   int64
	doc   string
	unset string // what the key is while the policy names it not ("": init writes it)
}

// PolicyUnset says what the known key k is while the policy in force names it not:
// its default ("86400 s, 24 h" for settle_s) or what its absence means; "" for a key
// init writes into channel.toml, and for a key this binary does not know.
func PolicyUnset(k string) string {
	if k == PolicyCompactor {
		return "the device the newest owner's checkpoint names; before the first, any owner device"
	}
	return policyKeys[k].unset
}

// maxPolicyS bounds every known policy value (seconds): ten years, far below 2^53
// (docs/format.md §3) and below what a time.Duration holds.
const maxPolicyS = 10 * 365 * 24 * 3600

// PolicyRef is the ref of every policy.set entry.
const PolicyRef = "policy"

// DefaultPolicy is what init writes: quiet after 5 min, silent after 30, max skew 1 h.
func DefaultPolicy() Policy { return Policy{QuietAfterS: 300, SilentAfterS: 1800, MaxSkewS: 3600} }

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
	// SettleS is how long an entry must have been seen on the compacting machine before
	// an owner's checkpoint covers it; absent or 0: DefaultSettleS.
	SettleS int64 `toml:"settle_s,omitzero" json:"settle_s,omitempty"`
	// CompactAfterS and CompactEntries start automatic compaction on the compactor
	// device (package fsbus/autocompact): by the newest checkpoint's age (seconds) and
	// by the entries above its cut (a count); absent or 0: never by that measure.
	CompactAfterS  int64 `toml:"compact_after_s,omitzero" json:"compact_after_s,omitempty"`
	CompactEntries int64 `toml:"compact_entries,omitzero" json:"compact_entries,omitempty"`
	// ArchiveGraceS is how long this machine must have seen an owner's checkpoint count
	// before the frozen chain files at or below its cut move to archive/ (docs/format.md
	// §21 "Moving frozen files"); absent or 0: DefaultArchiveGraceS.
	ArchiveGraceS int64 `toml:"archive_grace_s,omitzero" json:"archive_grace_s,omitempty"`
}

// OwnerDevice reports whether device may be named as policy.compactor on a machine
// whose device is self, under entries (a snapshot's) and cf (its owner's checkpoints,
// nil for none): self, or a device whose master segment the snapshot or the newest
// cut names — a device that never wrote as the owner cannot compact.
func OwnerDevice(device, self string, entries []ledger.Entry, cf *ChannelFold) bool {
	if device == self {
		return true
	}
	for i := range entries {
		if entries[i].Writer == MasterWriter && entries[i].Device == device {
			return true
		}
	}
	if cf != nil && len(cf.Chain) > 0 {
		_, ok := cf.Chain[len(cf.Chain)-1].Head.Cut.At(MasterWriter, device)
		return ok
	}
	return false
}

// DefaultSettleS is the settle time of an owner's checkpoint when the policy names
// none: 24 h.
const DefaultSettleS = 86400

// SettleSeconds is the settle time of an owner's checkpoint under p, in seconds:
// settle_s, or DefaultSettleS when absent or 0.
func (p Policy) SettleSeconds() int64 {
	if p.SettleS == 0 {
		return DefaultSettleS
	}
	return p.SettleS
}

// DefaultArchiveGraceS is the archive grace time when the policy names none: 14 days.
const DefaultArchiveGraceS = 1209600

// ArchiveGraceSeconds is the archive grace time under p, in seconds: archive_grace_s,
// or DefaultArchiveGraceS when absent or 0.
func (p Policy) ArchiveGraceSeconds() int64 {
	if p.ArchiveGraceS == 0 {
		return DefaultArchiveGraceS
	}
	return p.ArchiveGraceS
}

// jsonEqual reports whether two JSON values are the same value (canonical forms).
func JSONEqual(a, b json.RawMessage) bool {
	ca, err1 := ledger.CanonicalJSON(a)
	cb, err2 := ledger.CanonicalJSON(b)
	if err1 != nil || err2 != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca, cb)
}

// PolicyJSON is VALUE as a JSON value: a known key's integer, compactor's device id
// as a string; for an unknown key an integer, true or false, else the text as a JSON
// string.
func PolicyJSON(a PolicyAssign) (json.RawMessage, error) {
	if a.Key == PolicyCompactor {
		if !ValidName(a.Value) || len(a.Value) > 64 {
			return nil, errs.Errorf(errs.Invalid, "give the device id of the machine that is to compact (its `ferry compact` names it: \"this device (ID)\")",
				"policy compactor %q is not a device id", a.Value)
		}
		return json.Marshal(a.Value)
	}
	if _, known := policyKeys[a.Key]; known {
		raw := json.RawMessage(a.Value)
		if _, err := CheckPolicyValue(a.Key, raw); err != nil {
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
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "write KEY=VALUE, e.g. `ferry policy set silent_after_s=3600` (keys: "+strings.Join(PolicyKeyNames(), ", ")+")",
			"%q is not KEY=VALUE", ClipText(s, 80))
	case !policyKeyRe.MatchString(k):
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "a key is lower-case letters, digits and _ (keys this binary knows: "+strings.Join(PolicyKeyNames(), ", ")+")",
			"%q is not a policy key", ClipText(k, 80))
	case v == "":
		return PolicyAssign{}, errs.Errorf(errs.Invalid, "give a value after =; a key cannot be removed from the policy", "no value for policy key %s", k)
	}
	return PolicyAssign{Key: k, Value: v}, nil
}

// PolicyAssign is one KEY=VALUE of `ferry policy set`, as given.
type PolicyAssign struct {
	Key, Value string
}

// effectivePolicy overlays channel.toml's [policy] (the decoded policy and the table
// as read) with head's table.
func Effective(policy Policy, table map[string]json.RawMessage, head *PolicySet) EffectivePolicy {
	ep := EffectivePolicy{Policy: policy, Table: map[string]json.RawMessage{}, Source: map[string]string{}, Head: head}
	for k, v := range table {
		ep.Table[k], ep.Source[k] = v, policyFromChannel
	}
	if table == nil { // a Config not read from a file (tests): its known keys
		for k, pk := range policyKeys {
			if v := *pk.Field(&ep.Policy); v != 0 || k == "quiet_after_s" || k == "silent_after_s" || k == "max_skew_s" {
				ep.Table[k], ep.Source[k] = json.RawMessage(strconv.FormatInt(v, 10)), policyFromChannel
			}
		}
	}
	if head != nil {
		for k, v := range head.Table {
			ep.Table[k], ep.Source[k] = v, PolicyFromSet
			if pk, known := policyKeys[k]; known {
				if n, err := CheckPolicyValue(k, v); err == nil {
					*pk.Field(&ep.Policy) = n
				}
			}
		}
	}
	for k := range ep.Table {
		if !knownPolicyKey(k) {
			ep.Unknown = append(ep.Unknown, k)
		}
	}
	slices.Sort(ep.Unknown)
	return ep
}

// Sources of EffectivePolicy.Source.
const (
	policyFromChannel = "channel.toml"
	PolicyFromSet     = "policy.set"
)

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

// policyKeys lists the keys of [policy] this binary knows, sorted.
func PolicyKeyNames() []string {
	return slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(policyKeys)), PolicyCompactor)))
}

// knownPolicyKey reports whether this binary uses policy key k: an integer key of
// policyKeys, or compactor (a device id, docs/format.md §20 "Moving the compactor").
func knownPolicyKey(k string) bool {
	_, known := policyKeys[k]
	return known || k == PolicyCompactor
}
