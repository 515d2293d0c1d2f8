package fsbus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/ledger"
)

// findingsOf returns the findings of one check.
func findingsOf(fs []verify.Finding, check string) []verify.Finding {
	var out []verify.Finding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// verified is Verify's report on c as it stands.
func verified(t *testing.T, c *Channel) *verify.Report {
	t.Helper()
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestVerifyObjectsAfterRekey: after the owner re-keys alice
// (`ferry grant alice --key …`), the messages she signed with her old key still verify
// against the key of the grant covering their entries, in Verify and its findings; a
// message written with the new key verifies too; an object whose text was changed
// after signing is still flagged.
func TestVerifyObjectsAfterRekey(t *testing.T) {
	t.Parallel()
	c, _, ss := primaryWorld(t, map[string]string{"alice": "member", "bob": "member"})
	old, err := ss["alice"].TalkSend(TalkSendOptions{To: "bob", Body: "signed with the old key"})
	if err != nil {
		t.Fatal(err)
	}
	other := testHome(t)
	k, err := other.NewKey("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss[fold.MasterWriter].Grant(GrantOptions{Agent: "alice", Level: "member", Key: ledger.FormatKey(k.Public())}); err != nil {
		t.Fatal(err)
	}
	kb, err := os.ReadFile(other.keyPath("acme", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Home.keyPath("acme", "alice"), kb, 0o600); err != nil {
		t.Fatal(err)
	}
	alice, err := c.As("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.TalkSend(TalkSendOptions{To: "bob", Body: "signed with the new key"}); err != nil {
		t.Fatal(err)
	}
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	vr, err := c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify after a re-key: objects %v, problems %+v, ignored %+v", vr.Objects, vr.Ledger.Problems, vr.Ignored)
	}
	if r := verified(t, c); !r.OK() || len(findingsOf(r.Findings, verify.CheckObject)) != 0 {
		t.Fatalf("findings after a re-key: %+v", r.Findings)
	}

	// Change the old message's text: its signature no longer verifies against the key
	// that covered its entry.
	p := verify.ObjectPath(c.Root, "alice", old.ID)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(b), "signed with the old key", "signed with the OLD key", 1)
	if forged == string(b) {
		t.Fatalf("message text not found in %s", b)
	}
	if err := os.WriteFile(p, []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if vr, err = c.Verify(v); err != nil {
		t.Fatal(err)
	}
	if len(vr.Objects) != 1 || !strings.Contains(vr.Objects[0], old.ID) || !strings.Contains(vr.Objects[0], "signature does not verify against the key its entry's grant bound") {
		t.Fatalf("forged object: %v", vr.Objects)
	}
	if r := verified(t, c); r.OK() {
		t.Fatalf("findings with a forged object: %+v", r.Findings)
	}
}

// TestFindingsShrunkSegment: another writer's segment is cut back to
// an older copy after this machine read it. The findings hold an error, naming
// the writer, its segment and the fix; with the segment restored the error goes.
func TestFindingsShrunkSegment(t *testing.T) {
	t.Parallel()
	c, _, ss := primaryWorld(t, map[string]string{"alice": "member", "bob": "member"})
	segs, _ := filepath.Glob(filepath.Join(c.Root, "ledger", "bob", "*.jsonl"))
	if len(segs) != 1 {
		t.Fatalf("bob's segments: %v", segs)
	}
	older, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"one", "two"} {
		if _, err := ss["bob"].TalkSend(TalkSendOptions{To: "alice", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	full, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if r := verified(t, c); len(findingsOf(r.Findings, verify.CheckVanished)) != 0 {
		t.Fatalf("shrunk before anything was cut: %+v", r.Findings)
	}
	// bob is another machine's writer from here on: no key of his on this one, so the
	// check of this machine's own segments (Lost) does not apply.
	c.Home.removeKey("acme", "bob")
	if err := os.WriteFile(segs[0], older, 0o644); err != nil {
		t.Fatal(err)
	}
	r := verified(t, c)
	f := findingsOf(r.Findings, verify.CheckVanished)
	if len(f) != 1 || f[0].Level != verify.LevelError || f[0].Path != "ledger/bob" ||
		!strings.Contains(f[0].Detail, "2 record(s) of bob this machine already read") ||
		!strings.Contains(f[0].Detail, verify.Rel(c.Root, segs[0])) || !strings.Contains(f[0].Fix, "restore bob's segment from another machine's copy") {
		t.Fatalf("shrunk findings: %+v", r.Findings)
	}
	if err := os.WriteFile(segs[0], full, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := verified(t, c); len(findingsOf(r.Findings, verify.CheckVanished)) != 0 {
		t.Fatalf("shrunk after the segment came back: %+v", r.Findings)
	}
}
