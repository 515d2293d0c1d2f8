package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/fsbus/internal/fakesyncthing"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/fsbus/verify"
)

// Doctor checks a unit test reaches better than a journey: HLC skew
// measured against this machine's clock at arrival, contests naming the winner, and
// Syncthing's folder settings read from its REST API.

// findingsOf returns the findings of one check.
func findingsOf(r *Report, check string) []verify.Finding {
	var out []verify.Finding
	for _, f := range r.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// twoMasters is a channel on machine A and a copy on machine B holding the owner's key
// (its own device), B's wall clock shifted by skew, with alice seated.
func twoMasters(t *testing.T, skew time.Duration) (cA, cB *fsbus.Channel, mA, mB *fsbus.Session) {
	t.Helper()
	fakesyncthing.Isolate(t)
	hA, hB := fsbustest.Home(t), fsbustest.Home(t)
	dirA := filepath.Join(t.TempDir(), "acme")
	cA, err := fsbus.Init(hA, fsbus.InitOptions{Dir: dirA, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsbus.Join(cA, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	mA, _ = cA.As(fold.MasterWriter)
	if _, err := mA.Grant(fsbus.GrantOptions{Agent: "alice", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	dirB := filepath.Join(t.TempDir(), "acme")
	copyTree(t, dirA, dirB)
	copyKey(t, hA, hB, "acme", fold.MasterWriter)
	if cB, err = fsbus.Open(hB, dirB); err != nil {
		t.Fatal(err)
	}
	cB.Now = func() time.Time { return time.Now().Add(skew) }
	mB, _ = cB.As(fold.MasterWriter)
	return cA, cB, mA, mB
}

func doctor(t *testing.T, c *fsbus.Channel) *Report {
	t.Helper()
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Examine(context.Background(), c, v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDoctorSkewAndContests: machine B's clock runs 2 h ahead (the policy allows 1 h)
// and, partitioned, the owner changes alice's grant on both machines. Once the
// folders meet, A's doctor reports B's stamps as ahead of its own clock (an error past
// max_skew) and the contest with its winner; a clock within a minute is not reported.
func TestDoctorSkewAndContests(t *testing.T) {
	cA, cB, mA, mB := twoMasters(t, 2*time.Hour)
	if r := doctor(t, cA); len(r.Skew) != 0 || len(findingsOf(r, CheckSkew)) != 0 || !r.OK() {
		t.Fatalf("skew before B wrote anything: %+v", r.Findings)
	}
	if _, err := mA.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := mB.Grant(fsbus.GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(cB.Root, "ledger"), filepath.Join(cA.Root, "ledger"))
	r := doctor(t, cA)
	if len(r.Skew) != 1 || r.Skew[0].Writer != fold.MasterWriter || r.Skew[0].AheadS < 7100 || r.Skew[0].AheadS > 7300 {
		t.Fatalf("skew rows: %+v", r.Skew)
	}
	sk := findingsOf(r, CheckSkew)
	if len(sk) != 1 || sk[0].Level != verify.LevelError || !strings.Contains(sk[0].Detail, "ahead of this machine's clock") || !strings.Contains(sk[0].Fix, "NTP") {
		t.Fatalf("skew findings: %+v", sk)
	}
	if r.OK() {
		t.Fatal("a clock past max_skew is an error")
	}
	ct := findingsOf(r, CheckContested)
	if len(ct) != 1 || ct[0].Path != "alice" || !strings.Contains(ct[0].Detail, "master: grant.revoke won over master: grant.set") {
		t.Fatalf("contest findings: %+v", ct)
	}
}

// TestDoctorSkewMinutes: a clock 2 h 59 min 30 s ahead is reported to the minute, not
// rounded down to whole hours.
func TestDoctorSkewMinutes(t *testing.T) {
	cA, cB, _, mB := twoMasters(t, 2*time.Hour+59*time.Minute+30*time.Second)
	if _, err := mB.Grant(fsbus.GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(cB.Root, "ledger"), filepath.Join(cA.Root, "ledger"))
	sk := findingsOf(doctor(t, cA), CheckSkew)
	if len(sk) != 1 || !strings.Contains(sk[0].Detail, "stamped up to 2 h 59 min ahead") {
		t.Fatalf("skew findings: %+v", sk)
	}
}

// TestDoctorSmallSkewIgnored: a clock less than SkewWarnS ahead is not reported.
func TestDoctorSmallSkewIgnored(t *testing.T) {
	cA, cB, _, mB := twoMasters(t, 20*time.Second)
	if _, err := mB.Grant(fsbus.GrantOptions{Agent: "alice", Level: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(cB.Root, "ledger"), filepath.Join(cA.Root, "ledger"))
	if r := doctor(t, cA); len(r.Skew) != 0 || !r.OK() {
		t.Fatalf("20 s of skew reported: %+v", r.Findings)
	}
}

// TestDoctorSyncthingSettings: with the channel in a Syncthing folder that keeps too
// few conflict copies, waits 10 s to send, has no peer connected and no .stignore
// here, doctor names each with its fix; a healthy folder gives one info line.
func TestDoctorSyncthingSettings(t *testing.T) {
	c := world(t)
	f, srv := fakesyncthing.Serve(t, c.Root)
	f.MaxConflicts, f.Connected = 5, false
	if err := os.Remove(filepath.Join(c.Root, ".stignore")); err != nil {
		t.Fatal(err)
	}
	r := doctor(t, c)
	if r.Sync == nil || r.Sync.Syncthing != synchealth.StateOK || !r.Sync.NoPeer() {
		t.Fatalf("sync: %+v", r.Sync)
	}
	want := map[string]string{
		"maxConflicts to -1":     verify.LevelWarning,
		"fsWatcherDelayS to 1–2": verify.LevelInfo,
		"it writes .stignore":    verify.LevelWarning,
	}
	for _, fd := range findingsOf(r, CheckSettings) {
		for k, lvl := range want {
			if strings.Contains(fd.Fix, k) && fd.Level == lvl {
				delete(want, k)
			}
		}
	}
	if len(want) != 0 {
		t.Fatalf("missing settings findings %v in %+v", want, r.Findings)
	}
	if s := findingsOf(r, CheckSync); len(s) != 1 || s[0].Level != verify.LevelWarning || !strings.Contains(s[0].Detail, "no peer connected") {
		t.Fatalf("sync finding: %+v", s)
	}
	if !r.OK() {
		t.Fatalf("settings are warnings, not errors: %+v", r.Findings)
	}

	// Syncthing stops: the channel is in a Syncthing folder (config.xml says so) and
	// nobody answers — an error.
	f.Lock()
	f.MaxConflicts, f.Connected, f.WatcherDelayS = -1, true, 1
	f.Unlock()
	if _, err := fsbus.Join(c, "zed", "test"); err != nil { // writes .stignore again
		t.Fatal(err)
	}
	r = doctor(t, c)
	if len(findingsOf(r, CheckSettings)) != 0 || !r.OK() || r.Sync.Delivery != synchealth.Delivered {
		t.Fatalf("healthy folder: %+v", r.Findings)
	}
	srv.Close()
	r = doctor(t, c)
	if s := findingsOf(r, CheckSync); len(s) != 1 || s[0].Level != verify.LevelInfo || r.Sync.Syncthing != synchealth.StateUnreachable {
		t.Fatalf("env-only API gone (nothing says the channel is in Syncthing): %+v", s)
	}
}

// TestDoctorMaxConflictsZero: a Syncthing folder that keeps no
// conflict copies discards one side of every conflict: an error.
func TestDoctorMaxConflictsZero(t *testing.T) {
	c := world(t)
	f, _ := fakesyncthing.Serve(t, c.Root)
	f.Lock()
	f.MaxConflicts = 0
	f.Unlock()
	r := doctor(t, c)
	s := findingsOf(r, CheckSettings)
	if len(s) == 0 || s[0].Level != verify.LevelError || !strings.Contains(s[0].Detail, "maxConflicts 0") || !strings.Contains(s[0].Fix, "maxConflicts to -1") || r.OK() {
		t.Fatalf("maxConflicts 0: %+v", r.Findings)
	}
}

// TestDoctorStignoreSubfolder: Syncthing reads .stignore only at
// a folder root. With the channel a subfolder of the Syncthing folder — found by the
// .stfolder marker Syncthing puts at every folder root, or by the folder path its API
// reports — doctor says what the root's .stignore needs; once it holds those lines (or
// the channel is the folder root) nothing is reported.
func TestDoctorStignoreSubfolder(t *testing.T) {
	c := world(t)
	fakesyncthing.Isolate(t)
	parent := filepath.Dir(c.Root)
	if r := doctor(t, c); len(findingsOf(r, CheckStignore)) != 0 {
		t.Fatalf("no Syncthing folder, yet: %+v", r.Findings)
	}
	if err := os.Mkdir(filepath.Join(parent, ".stfolder"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := doctor(t, c)
	f := findingsOf(r, CheckStignore)
	want := "(?d)/acme/**.ferry-*.tmp  (?d)/acme/**.torn-*"
	if len(f) != 1 || f[0].Level != verify.LevelWarning || !strings.Contains(f[0].Detail, "subfolder acme of the Syncthing folder") ||
		!strings.Contains(f[0].Detail, "a .stfolder marker") || !strings.Contains(f[0].Fix, want) || !strings.Contains(f[0].Fix, "share the channel folder itself") {
		t.Fatalf("stignore findings: %+v", r.Findings)
	}
	if err := os.WriteFile(filepath.Join(parent, ".stignore"), []byte("// mine\n*.bak\n"+strings.Join(StignoreLines("acme"), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := doctor(t, c); len(findingsOf(r, CheckStignore)) != 0 {
		t.Fatalf("the root's .stignore holds the lines: %+v", r.Findings)
	}
	// The channel is a folder root itself: its own .stignore applies.
	if err := os.Remove(filepath.Join(parent, ".stignore")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.Root, ".stfolder"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := doctor(t, c); len(findingsOf(r, CheckStignore)) != 0 {
		t.Fatalf("channel at the folder root: %+v", r.Findings)
	}

	// Syncthing's API reports the parent as the folder (no marker needed).
	if err := os.Remove(filepath.Join(c.Root, ".stfolder")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(parent, ".stfolder")); err != nil {
		t.Fatal(err)
	}
	_, _ = fakesyncthing.Serve(t, parent)
	r = doctor(t, c)
	if f := findingsOf(r, CheckStignore); len(f) != 1 || !strings.Contains(f[0].Detail, "Syncthing's API") || !strings.Contains(f[0].Fix, want) {
		t.Fatalf("stignore findings from the API: %+v", r.Findings)
	}
	for _, s := range findingsOf(r, CheckSettings) {
		if strings.Contains(s.Fix, "it writes .stignore") {
			t.Fatalf("the channel's own .stignore is named although the root's is the one read: %+v", s)
		}
	}
}

// TestDoctorVaultNames: secret names that look like object ids (a--b, o-x) are not
// taken for objects: a clean vault gives doctor no finding above info (no permanent
// pending_sync asks/a--b.json).
func TestDoctorVaultNames(t *testing.T) {
	fakesyncthing.Isolate(t)
	c := world(t, "alice", "bob")
	alice, err := c.As("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a--b", "a-x", "o-x", "m-x"} {
		if _, err := alice.SecretPut(n, []string{"bob"}, []byte("s3cret-value"), ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range doctor(t, c).Findings {
		if f.Level != verify.LevelInfo {
			t.Errorf("a clean vault: doctor finding %+v", f)
		}
	}
}

// TestDoctorLinksNotRead (docs/threat-model.md "Paths and links"): object files
// replaced by links to a key file — one an entry names, one no entry names — are
// listed as links, and none of the target's bytes appear in doctor's report.
func TestDoctorLinksNotRead(t *testing.T) {
	fakesyncthing.Isolate(t)
	c := world(t, "alice")
	alice, err := c.As("alice")
	if err != nil {
		t.Fatal(err)
	}
	o, err := alice.NewOrder(fsbus.NewOrderOptions{Title: "linked"})
	if err != nil {
		t.Fatal(err)
	}
	secret := "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"
	target := filepath.Join(t.TempDir(), "master.key")
	if err := os.WriteFile(target, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{o.ID, "o-0000000000000"} {
		p := verify.ObjectPath(c.Root, "alice", id)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatalf("making a symbolic link: %v", err)
		}
	}
	r := doctor(t, c)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(secret[:12])) || bytes.Contains(b, []byte("QQQQ")) {
		t.Errorf("doctor's report shows the link's target: %s", b)
	}
	if links := findingsOf(r, verify.CheckLink); len(links) != 2 {
		t.Errorf("doctor reports %d links, want 2: %+v", len(links), r.Findings)
	}
}
