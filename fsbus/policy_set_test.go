package fsbus

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestPolicySetKeepsUnknownKeys: a key this binary does not know is kept in the table,
// shown by the effective policy and carried by the next set, whose table is the whole
// table; a bad value of a known key is invalid and writes nothing.
func TestPolicySetKeepsUnknownKeys(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	first := appendPolicySet(t, w.master, "", map[string]any{"quiet_after_s": 300, "silent_after_s": 1800, "max_skew_s": 3600, "review_quorum": map[string]any{"min": 2}})
	r, err := w.master.SetPolicy([]fold.PolicyAssign{{Key: "silent_after_s", Value: "3600"}, {Key: "future_mode", Value: "strict"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Written == "" || strings.Join(r.Changed, ",") != "future_mode,silent_after_s" {
		t.Fatalf("set: written %q changed %v", r.Written, r.Changed)
	}
	v := must[*View](t)(w.c.Load())
	head := v.State.Policy
	if head == nil || head.Hash != r.Written {
		t.Fatalf("head %+v, want %s", head, r.Written)
	}
	var d fold.PolicyData
	for i := range v.Snapshot.Entries {
		if e := &v.Snapshot.Entries[i]; e.Hash() == r.Written {
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.Basis != first.Hash() {
		t.Errorf("basis %q, want the previous set %s", d.Basis, first.Hash())
	}
	for k, want := range map[string]string{"review_quorum": `{"min":2}`, "future_mode": `"strict"`, "silent_after_s": "3600", "quiet_after_s": "300", "max_skew_s": "3600"} {
		if got := string(d.Policy[k]); got != want {
			t.Errorf("written table %s = %s, want %s", k, got, want)
		}
	}
	ep := w.c.EffectivePolicy(v)
	if strings.Join(ep.Unknown, ",") != "future_mode,review_quorum" || ep.Source["silent_after_s"] != fold.PolicyFromSet || ep.Policy.SilentAfterS != 3600 {
		t.Errorf("effective: unknown %v, source %v, silent %d", ep.Unknown, ep.Source, ep.Policy.SilentAfterS)
	}
	n := len(v.Snapshot.Entries)
	for _, bad := range [][]fold.PolicyAssign{
		{{Key: "max_skew_s", Value: "-1"}},
		{{Key: "max_skew_s", Value: "1h"}},
		{{Key: "quiet_after_s", Value: "4000"}}, // not below silent_after_s (3600)
		{{Key: "exec_window_s", Value: "999999999999"}},
	} {
		if _, err := w.master.SetPolicy(bad); !errs.Is(err, errs.Invalid) {
			t.Errorf("SetPolicy(%v): %v, want invalid", bad, err)
		}
	}
	if _, err := w.alice.SetPolicy([]fold.PolicyAssign{{Key: "max_skew_s", Value: "60"}}); !errs.Is(err, errs.Denied) {
		t.Errorf("alice's SetPolicy: %v, want denied", err)
	}
	// The same values again: nothing to write.
	if r, err := w.master.SetPolicy([]fold.PolicyAssign{{Key: "silent_after_s", Value: "3600"}}); err != nil || r.Written != "" {
		t.Errorf("unchanged set: %+v, %v", r, err)
	}
	if got := len(must[*View](t)(w.c.Load()).Snapshot.Entries); got != n {
		t.Errorf("refused or unchanged sets wrote %d entries", got-n)
	}
	// A policy.set with a bad value of a known key counts for nothing.
	bad := appendPolicySet(t, w.master, r.Written, map[string]any{"quiet_after_s": 300, "silent_after_s": 1800, "max_skew_s": "soon"})
	v = must[*View](t)(w.c.Load())
	if v.State.Policy.Hash != r.Written || w.c.PolicyOf(v).MaxSkewS != 3600 {
		t.Errorf("a policy.set with max_skew_s \"soon\" moved the head: %+v", v.State.Policy)
	}
	listed := false
	for _, ig := range v.State.Ignored {
		listed = listed || ig.Hash == bad.Hash()
	}
	if !listed {
		t.Errorf("the bad policy.set is not listed as ignored")
	}
}
