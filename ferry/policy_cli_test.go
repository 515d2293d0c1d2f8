package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policyWorld is a channel made by `ferry init` on one FERRY_HOME, run in-process.
type policyWorld struct {
	t        *testing.T
	home, ch string
}

func newPolicyWorld(t *testing.T) *policyWorld {
	w := &policyWorld{t: t, home: filepath.Join(t.TempDir(), "home"), ch: filepath.Join(t.TempDir(), "acme")}
	t.Setenv("FERRY_AGENT", "")
	t.Setenv("FERRY_CHANNEL", "")
	w.must("init", w.ch, "--project", "acme")
	return w
}

// run runs ferry on the world's home (or on home when given) in-process.
func (w *policyWorld) runHome(home string, args ...string) (int, string, string) {
	w.t.Helper()
	w.t.Setenv("FERRY_HOME", home)
	var o, e bytes.Buffer
	code := runIO(args, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

func (w *policyWorld) run(args ...string) (int, string, string) {
	w.t.Helper()
	return w.runHome(w.home, args...)
}

func (w *policyWorld) must(args ...string) string {
	w.t.Helper()
	code, o, e := w.run(args...)
	if code != 0 {
		w.t.Fatalf("ferry %v: exit %d\n%s%s", args, code, o, e)
	}
	return o
}

func (w *policyWorld) segments() string {
	w.t.Helper()
	var b strings.Builder
	_ = filepath.Walk(filepath.Join(w.ch, "ledger"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			data, _ := os.ReadFile(p)
			b.WriteString(p + "\n" + string(data))
		}
		return nil
	})
	return b.String()
}

// TestPolicyShowSetCLI: `ferry policy set` writes a policy.set that `ferry policy show`
// (text and --json) reads back as the policy in force, unknown keys kept and warned
// about, and the text names the default of each known key neither sets; a bad value
// is invalid (exit 2) and writes nothing; an agent's name refuses.
func TestPolicyShowSetCLI(t *testing.T) {
	w := newPolicyWorld(t)
	if out := w.must("policy", "show", "--channel", w.ch); !strings.Contains(out, "silent_after_s   1800") || !strings.Contains(out, "(channel.toml)") ||
		!strings.Contains(out, "settle_s         -          (not set: 86400 s, 24 h)") || !strings.Contains(out, "compact_after_s  -          (not set: never by age)") {
		t.Fatalf("policy show before any set:\n%s", out)
	}
	code, o, e := w.run("policy", "set", "silent_after_s=7200", "exec_window_s=600", "review_quorum=2", "--channel", w.ch)
	if code != 0 {
		t.Fatalf("policy set: exit %d\n%s%s", code, o, e)
	}
	if !strings.Contains(e, "ferry: warning: policy key review_quorum is unknown to this binary") {
		t.Errorf("no warning about the unknown key:\n%s", e)
	}
	var ep struct {
		Policy  map[string]json.RawMessage `json:"policy"`
		Source  map[string]string          `json:"source"`
		Unknown []string                   `json:"unknown"`
		Head    *struct{ Hash string }     `json:"head"`
	}
	if err := json.Unmarshal([]byte(w.must("policy", "--json", "--channel", w.ch)), &ep); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"silent_after_s": "7200", "exec_window_s": "600", "review_quorum": "2", "quiet_after_s": "300", "max_skew_s": "3600"} {
		if got := string(ep.Policy[k]); got != want || ep.Source[k] != "policy.set" {
			t.Errorf("policy show --json: %s = %s from %q, want %s from policy.set", k, got, ep.Source[k], want)
		}
	}
	if ep.Head == nil || strings.Join(ep.Unknown, ",") != "review_quorum" {
		t.Errorf("policy show --json: head %+v unknown %v", ep.Head, ep.Unknown)
	}
	if out := w.must("policy", "show", "--channel", w.ch); !strings.Contains(out, "review_quorum    2          (policy.set, unknown to this binary: kept, not used)") ||
		!strings.Contains(out, "exec_window_s    600        (policy.set)") || !strings.Contains(out, "lifetime_s       -          (not set: 86400 s, 24 h)") {
		t.Errorf("policy show does not show the unknown key, a key set and one not set:\n%s", out)
	}
	before := w.segments()
	for _, bad := range [][]string{
		{"max_skew_s=0"}, {"max_skew_s=ten"}, {"quiet_after_s=9000"}, {"silent_after_s"}, {"Bad-Key=1"}, {"lifetime_s="},
	} {
		code, o, e := w.run(append(append([]string{"policy", "set"}, bad...), "--channel", w.ch)...)
		if code != 2 || !strings.HasPrefix(e, "ferry: error: invalid: ") || o != "" {
			t.Errorf("policy set %v: exit %d, want invalid (2)\n%s%s", bad, code, o, e)
		}
	}
	if w.segments() != before {
		t.Errorf("a refused policy set wrote to the ledger")
	}
	// A second set carries the whole table: the unknown key stays.
	w.must("policy", "set", "quiet_after_s=600", "--channel", w.ch)
	if err := json.Unmarshal([]byte(w.must("policy", "show", "--json", "--channel", w.ch)), &ep); err != nil {
		t.Fatal(err)
	}
	if string(ep.Policy["review_quorum"]) != "2" || string(ep.Policy["quiet_after_s"]) != "600" || string(ep.Policy["exec_window_s"]) != "600" {
		t.Errorf("after a second set: %v", ep.Policy)
	}
}

// TestDoctorHandEditedChannelToml: a channel.toml edited by hand (its signature no
// longer verifies) makes every other command refuse, pointing to `ferry doctor` and
// `ferry policy set`; doctor still runs: with the pin on this machine it names the
// changed keys and checks the rest (a bad segment record is still found); on a machine
// with no pin it says nothing can be verified and checks nothing else.
func TestDoctorHandEditedChannelToml(t *testing.T) {
	w := newPolicyWorld(t)
	w.must("join", "--as", "alice", "--channel", w.ch)
	w.must("grant", "alice", "--channel", w.ch)
	w.must("order", "new", "One", "--as", "alice", "--channel", w.ch)
	p := filepath.Join(w.ch, "channel.toml")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), "max_skew_s = 3600", "max_skew_s = 7200", 1)
	edited = strings.Replace(edited, `title = "acme"`, `title = "Acme, renamed"`, 1)
	if edited == string(raw) || !strings.Contains(edited, "7200") || !strings.Contains(edited, "renamed") {
		t.Fatalf("channel.toml not as expected:\n%s", raw)
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status"}, {"order", "list", "--as", "alice"}, {"policy", "show"}} {
		code, o, e := w.run(append(args, "--channel", w.ch)...)
		if code != 2 || !strings.Contains(e, "is not signed by its master key") || !strings.Contains(e, "`ferry doctor`") || !strings.Contains(e, "`ferry policy set") {
			t.Errorf("ferry %v on an edited channel.toml: exit %d, want invalid naming ferry doctor and ferry policy set\n%s%s", args, code, o, e)
		}
	}
	// An order object changed in place: doctor must still find it, checking with the pin.
	objs, _ := filepath.Glob(filepath.Join(w.ch, "orders", "*.json"))
	if len(objs) != 1 {
		t.Fatalf("order objects: %v", objs)
	}
	od, _ := os.ReadFile(objs[0])
	if err := os.WriteFile(objs[0], []byte(strings.Replace(string(od), `"One"`, `"Two"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	code, o, e := w.run("doctor", "--channel", w.ch, "--json")
	if code != 2 {
		t.Fatalf("doctor on an edited channel.toml: exit %d, want 2 (errors found)\n%s%s", code, o, e)
	}
	var r struct {
		Findings []struct{ Check, Level, Detail, Fix string }
	}
	if err := json.Unmarshal([]byte(o), &r); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, o)
	}
	var cfg *struct{ Check, Level, Detail, Fix string }
	for i := range r.Findings {
		if r.Findings[i].Check == "channel_config" {
			cfg = &r.Findings[i]
		}
	}
	if cfg == nil || cfg.Level != "error" || !strings.Contains(cfg.Detail, "policy.max_skew_s, title") || !strings.Contains(cfg.Detail, "pinned master key ed25519:") {
		t.Fatalf("doctor: no channel_config error naming policy.max_skew_s and title: %+v", r.Findings)
	}
	if !strings.Contains(cfg.Fix, "back to channel.toml") || !strings.Contains(cfg.Fix, "`ferry policy set KEY=VALUE`") {
		t.Errorf("channel_config fix: %q", cfg.Fix)
	}
	edit := false
	for _, f := range r.Findings {
		edit = edit || f.Check == "edited"
	}
	if !edit {
		t.Errorf("doctor did not check the rest with the pinned key: no finding of the edited order object: %+v", r.Findings)
	}

	// Only a policy key changed: the fix names the policy set that makes the change.
	if err := os.WriteFile(p, []byte(strings.Replace(string(raw), "max_skew_s = 3600", "max_skew_s = 7200", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, o, e = w.run("doctor", "--channel", w.ch)
	if code != 2 || !strings.Contains(o, "changed since this machine last verified it: policy.max_skew_s;") || !strings.Contains(o, "`ferry policy set max_skew_s=7200` (owner only)") {
		t.Errorf("doctor on a policy-only edit: exit %d\n%s%s", code, o, e)
	}

	// Another machine, which never verified this channel: no pin, nothing verifiable.
	code, o, e = w.runHome(filepath.Join(t.TempDir(), "other"), "doctor", "--channel", w.ch)
	if code != 2 || !strings.Contains(o, "has pinned no master key for project acme: nothing in the channel can be verified here, so nothing else was checked") {
		t.Errorf("doctor with no pin: exit %d\n%s%s", code, o, e)
	}
	if strings.Contains(o, "pending sync") || strings.Count(o, "fix: ") != 1 {
		t.Errorf("doctor with no pin checked more than channel.toml:\n%s", o)
	}
	// The restored file verifies again: every command works.
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	w.must("status", "--channel", w.ch)
}
