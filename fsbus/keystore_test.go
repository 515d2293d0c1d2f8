package fsbus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
)

func init() { keyfile.ScryptWorkFactor = 10 } // tests: a cheap scrypt; the format is the same

// seatedAgent makes a channel with a master and a seated member agent "bot".
func seatedAgent(t *testing.T) (*Channel, *Session, *Session) {
	t.Helper()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(c, "bot", "test"); err != nil {
		t.Fatal(err)
	}
	m, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Grant(GrantOptions{Agent: "bot", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	bot, err := c.As("bot")
	if err != nil {
		t.Fatal(err)
	}
	return c, m, bot
}

// segmentLines counts the lines of (writer, device)'s segment.
func segmentLines(t *testing.T, c *Channel, writer string) int {
	t.Helper()
	b, err := os.ReadFile(ledger.SegmentPath(c.Root, writer, c.Device))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestKeyLockUnlock: a locked key makes every write answer locked
// naming `ferry key unlock`, writes nothing, and leaves no plain key on disk; a wrong
// passphrase unlocks nothing; unlock opens a 0600 runtime copy with an expiry; lock
// again (or expiry) locks it again.
func TestKeyLockUnlock(t *testing.T) {
	t.Parallel()
	c, _, bot := seatedAgent(t)
	h, p := c.Home, c.Project()
	pub := ledger.FormatKey(bot.Signer.Public())
	if _, err := bot.TalkSend(TalkSendOptions{To: "master", Body: "before the lock"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LockKey(p, "bot", []byte("  ")); !errs.Is(err, errs.Invalid) {
		t.Fatalf("lock with an empty passphrase: %v, want invalid", err)
	}
	if st, err := h.LockKey(p, "bot", []byte("correct horse")); err != nil || st != KeyPlain {
		t.Fatalf("lock: %v %v", st, err)
	}
	if keyfile.Exists(h.keyPath(p, "bot")) {
		t.Fatal("the plain key is still on disk after lock")
	}
	raw, _ := os.ReadFile(h.lockedPath(p, "bot"))
	if strings.Contains(string(raw), keyfile.SeedPrefix) {
		t.Fatal("the locked file holds the plain seed")
	}
	if got, _ := h.PublicKey(p, "bot"); ledger.FormatKey(got) != pub {
		t.Fatalf("public key of the locked key = %s, want %s", ledger.FormatKey(got), pub)
	}
	if !h.HasKey(p, "bot") || !strings.Contains(strings.Join(h.Keys(p), " "), "bot") {
		t.Fatal("a locked key is not listed as held")
	}

	// A session opens (reads work) but every write answers locked and writes nothing.
	s, err := c.As("bot")
	if err != nil {
		t.Fatalf("As with a locked key: %v", err)
	}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	n := segmentLines(t, c, "bot")
	_, err = s.TalkSend(TalkSendOptions{To: "master", Body: "while locked"})
	if !errs.Is(err, errs.Locked) || !strings.Contains(err.Error(), "ferry key unlock --as bot") {
		t.Fatalf("write with a locked key: %v, want locked naming the unlock command", err)
	}
	if segmentLines(t, c, "bot") != n {
		t.Fatal("a refused write appended to the segment")
	}
	if _, err := h.LoadKey(p, "bot"); !errs.Is(err, errs.Locked) {
		t.Fatalf("LoadKey of a locked key: %v, want locked", err)
	}

	// A wrong passphrase: denied, no runtime copy.
	if _, err := h.UnlockKey(p, "bot", []byte("wrong"), time.Hour); !errs.Is(err, errs.Denied) {
		t.Fatalf("unlock with a wrong passphrase: %v, want denied", err)
	}
	if keyfile.Exists(h.UnlockedPath(p, "bot")) {
		t.Fatal("a wrong passphrase left a runtime copy")
	}
	if _, err := h.UnlockKey(p, "bot", []byte("correct horse"), 0); !errs.Is(err, errs.Invalid) {
		t.Fatalf("unlock --for 0: %v, want invalid", err)
	}
	exp, err := h.UnlockKey(p, "bot", []byte("correct horse"), 8*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 7*time.Hour || d > 9*time.Hour {
		t.Fatalf("expiry %v is not about 8h away", exp)
	}
	if fi, err := os.Stat(h.UnlockedPath(p, "bot")); err != nil || (fi.Mode().Perm()&0o077 != 0 && os.PathSeparator == '/') {
		t.Fatalf("runtime copy: %v %v, want mode 0600", fi, err)
	}
	if rel, err := filepath.Rel(c.Root, h.UnlockedPath(p, "bot")); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatal("the runtime copy is inside the channel")
	}
	if st, _ := h.KeyStatus(p, "bot"); st != KeyUnlocked {
		t.Fatalf("status after unlock = %s", st)
	}
	// The session opened while locked signs now: each signature reads the copy.
	if _, err := s.TalkSend(TalkSendOptions{To: "master", Body: "unlocked"}); err != nil {
		t.Fatalf("write after unlock: %v", err)
	}
	if segmentLines(t, c, "bot") != n+1 {
		t.Fatal("the write after unlock did not append")
	}

	// Lock again: the runtime copy goes, writes answer locked again.
	if st, err := h.LockKey(p, "bot", nil); err != nil || st != KeyUnlocked {
		t.Fatalf("re-lock: %v %v", st, err)
	}
	if keyfile.Exists(h.UnlockedPath(p, "bot")) {
		t.Fatal("re-lock left the runtime copy")
	}
	if _, err := s.TalkSend(TalkSendOptions{To: "master", Body: "relocked"}); !errs.Is(err, errs.Locked) {
		t.Fatalf("write after re-lock: %v, want locked", err)
	}

	// An expired copy is removed on the next read.
	if _, err := h.UnlockKey(p, "bot", []byte("correct horse"), time.Hour); err != nil {
		t.Fatal(err)
	}
	up := h.UnlockedPath(p, "bot")
	b, _ := os.ReadFile(up)
	_, rest, _ := strings.Cut(string(b), "\n")
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if err := os.WriteFile(up, []byte("expires "+past+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TalkSend(TalkSendOptions{To: "master", Body: "expired"}); !errs.Is(err, errs.Locked) {
		t.Fatalf("write with an expired copy: %v, want locked", err)
	}
	if keyfile.Exists(up) {
		t.Fatal("the expired copy was not removed")
	}
	// A copy of another key (left from a replaced key) never signs.
	other, _ := testHome(t).NewKey(p, "bot")
	if err := os.WriteFile(up, []byte("expires "+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+"\n"+seedText(other)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LoadKey(p, "bot"); !errs.Is(err, errs.Locked) {
		t.Fatalf("a runtime copy of another key: %v, want locked", err)
	}
	if _, err := h.LockKey(p, "nobody", []byte("x")); !errs.Is(err, errs.NotFound) {
		t.Fatalf("lock of a missing key: %v, want not_found", err)
	}
}

// TestKeyExportImport: the owner's key life cycle (ADR 0008): the master key exported
// with a passphrase and imported into a second home writes there in its own segment;
// both machines' master entries verify and fold. A wrong passphrase and a different
// key under the same name are refused and write nothing.
func TestKeyExportImport(t *testing.T) {
	t.Parallel()
	c, m, _ := seatedAgent(t)
	p := c.Project()
	exp, err := c.Home.ExportKey(p, fold.MasterWriter, []byte("two machines"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(exp), keyfile.SeedPrefix) || !strings.HasPrefix(string(exp), "-----BEGIN AGE ENCRYPTED FILE-----") {
		t.Fatalf("export is not an armored age file:\n%s", exp)
	}
	if _, err := c.Home.ExportKey(p, fold.MasterWriter, nil); !errs.Is(err, errs.Invalid) {
		t.Fatalf("export with an empty passphrase: %v, want invalid", err)
	}

	h2 := testHome(t)
	if _, err := ReadExport(exp, []byte("wrong")); !errs.Is(err, errs.Denied) {
		t.Fatalf("import with a wrong passphrase: %v, want denied", err)
	}
	if _, err := ReadExport([]byte("not an age file"), []byte("two machines")); !errs.Is(err, errs.Invalid) {
		t.Fatalf("import of garbage: %v, want invalid", err)
	}
	if _, err := ReadExport(append(exp, make([]byte, keyfile.MaxKeyFile)...), []byte("two machines")); !errs.Is(err, errs.Invalid) {
		t.Fatalf("import of an oversized file: %v, want invalid", err)
	}
	if h2.HasKey(p, fold.MasterWriter) {
		t.Fatal("a refused import wrote a key")
	}
	ik, err := ReadExport(exp, []byte("two machines"))
	if err != nil {
		t.Fatal(err)
	}
	if ik.Project != p || ik.Name != fold.MasterWriter || !ik.Key.Public().Equal(m.Signer.Public()) {
		t.Fatalf("import read %s/%s", ik.Project, ik.Name)
	}
	// Another key under the name: conflict, nothing overwritten.
	h3 := testHome(t)
	if _, err := h3.NewKey(p, fold.MasterWriter); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(h3.keyPath(p, fold.MasterWriter))
	if _, err := h3.StoreImported(ik); !errs.Is(err, errs.Conflict) {
		t.Fatalf("import over another key: %v, want conflict", err)
	}
	if after, _ := os.ReadFile(h3.keyPath(p, fold.MasterWriter)); string(after) != string(before) {
		t.Fatal("a refused import changed the existing key")
	}
	if wrote, err := h2.StoreImported(ik); err != nil || !wrote {
		t.Fatalf("import: %v %v", wrote, err)
	}
	if wrote, err := h2.StoreImported(ik); err != nil || wrote {
		t.Fatalf("second import of the same key: wrote=%v %v, want a no-op", wrote, err)
	}

	// The second home writes as master in its own segment; both machines fold both.
	c2, err := Open(h2, c.Root)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Device == c.Device {
		t.Fatal("the two homes share a device id")
	}
	m2, err := c2.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(c2, "helper", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Grant(GrantOptions{Agent: "helper", Level: "worker"}); err != nil {
		t.Fatalf("grant from the second master machine: %v", err)
	}
	if _, err := m.DecisionRecord("from the first machine", ""); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []*Channel{c, c2} {
		v := mustLoad(t, ch)
		if a := v.State.Agents["helper"]; a == nil || !a.Seated {
			t.Fatalf("home %s: the second machine's grant does not count", ch.Home.ConfigDir)
		}
		if len(v.State.Decisions) != 1 {
			t.Fatalf("home %s: the first machine's decision does not count", ch.Home.ConfigDir)
		}
		if len(v.State.Ignored) != 0 {
			t.Fatalf("home %s: ignored %+v", ch.Home.ConfigDir, v.State.Ignored)
		}
	}
	for _, dev := range []string{c.Device, c2.Device} {
		if !keyfile.Exists(ledger.SegmentPath(c.Root, fold.MasterWriter, dev)) {
			t.Fatalf("no master segment for device %s", dev)
		}
	}
}
