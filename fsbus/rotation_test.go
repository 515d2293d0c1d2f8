package fsbus

import (
	"crypto/ed25519"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
)

// secondMaster imports the master key of c into a fresh home and opens c there.
func secondMaster(t *testing.T, c *Channel) (*Channel, *Session) {
	t.Helper()
	exp, err := c.Home.ExportKey(c.Project(), fold.MasterWriter, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	ik, err := ReadExport(exp, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	h := testHome(t)
	if _, err := h.StoreImported(ik); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(h, c.Root)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := c2.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	return c2, m2
}

// ignoredHas reports whether st lists the entry with hash h with a reason holding why.
func ignoredHas(st *fold.State, h, why string) bool {
	for _, ig := range st.Ignored {
		if ig.Hash == h && strings.Contains(ig.Reason, why) {
			return true
		}
	}
	return false
}

// rawRotate appends a master.rotate to (master, device) signed by signer, bypassing
// every check of the write path (what a hand-made or hostile line would be).
func rawRotate(t *testing.T, c *Channel, device string, signer ledger.Signer, newKey ed25519.PublicKey, basis string, bounds map[string]uint64) ledger.Entry {
	t.Helper()
	seq := tipSeq(mustLoad(t, c).chainTip(fold.MasterWriter, device)) + 1
	if bounds == nil {
		bounds = map[string]uint64{}
	}
	if _, ok := bounds[device]; !ok {
		bounds[device] = seq
	}
	d := fold.EntryData{Key: ledger.FormatKey(newKey), Bounds: bounds, Basis: basis}
	e, err := c.Ledger.Append(fold.MasterWriter, device, ledger.Draft{Type: fold.TypeMasterRotate, Ref: fold.MasterWriter, Data: mustJSON(d)}, signer, ledger.HLC{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestMasterRotation (ADR 0008): a rotation signed by the old key
// moves trust to the new one. The old key's entries after the rotation's bound (here
// from a second master machine that kept the old key) are ignored and listed; entries
// within the bound and the new key's entries count; the rotating machine's key files
// are swapped (the old one kept); a machine holding the old key is refused when it
// writes; a machine pinned to the old key follows the rotation and opens afterwards.
func TestMasterRotation(t *testing.T) {
	t.Parallel()
	c, m, bot := seatedAgent(t)
	p := c.Project()
	c2, m2 := secondMaster(t, c)
	before, err := m2.DecisionRecord("before the rotation, machine two", "")
	if err != nil {
		t.Fatal(err)
	}
	// An agent machine pinned to the channel's first key.
	hAgent := testHome(t)
	if _, err := Open(hAgent, c.Root); err != nil {
		t.Fatal(err)
	}
	oldKey := m.Signer.Public()

	res, err := m.RotateMaster()
	if err != nil {
		t.Fatal(err)
	}
	if res.Old != ledger.FormatKey(oldKey) || res.New == res.Old || ledger.FormatKey(m.Signer.Public()) != res.New {
		t.Fatalf("rotate result %+v", res)
	}
	if k, err := c.Home.LoadKey(p, fold.MasterWriter); err != nil || ledger.FormatKey(k.Public()) != res.New {
		t.Fatalf("this machine's master key after the rotation: %v", err)
	}
	if b, err := os.ReadFile(res.Backup); err != nil || !strings.Contains(string(b), keyfile.SeedPrefix) {
		t.Fatalf("old key not kept at %s: %v", res.Backup, err)
	}
	if n := c.Home.pendingMasters(p); len(n) > 0 {
		t.Fatalf("pending key files left behind: %v", n)
	}

	// The second master machine still holds the old key: its writes are refused.
	_, err = m2.DecisionRecord("after the rotation, old key", "")
	if !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "rotated out") {
		t.Fatalf("write with a rotated-out key: %v, want denied", err)
	}
	// Nor may it rotate: refused, and its pending key file is gone with the refusal.
	if _, err := m2.RotateMaster(); !errs.Is(err, errs.Denied) {
		t.Fatalf("rotation by a rotated-out key: %v, want denied", err)
	}
	if n := c2.Home.pendingMasters(p); len(n) > 0 {
		t.Fatalf("a refused rotation left %v", n)
	}
	// A line it appends anyway (bypassing the check) is ignored and listed.
	d := fold.EntryData{}
	late, err := c2.Ledger.Append(fold.MasterWriter, c2.Device, ledger.Draft{Type: fold.TypeDecisionRecord, Ref: "d-0000000000000", Data: mustJSON(d)}, m2.Signer, ledger.HLC{})
	if err != nil {
		t.Fatal(err)
	}
	// The new key's entries count: a decision and a grant.
	if _, err := m.DecisionRecord("after the rotation, new key", ""); err != nil {
		t.Fatalf("write with the new key: %v", err)
	}
	if _, err := Join(c, "helper", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Grant(GrantOptions{Agent: "helper", Level: "worker"}); err != nil {
		t.Fatal(err)
	}
	// An agent's entries are untouched by the rotation.
	if _, err := bot.TalkSend(TalkSendOptions{To: "master", Body: "still here"}); err != nil {
		t.Fatal(err)
	}

	v := mustLoad(t, c)
	st := v.State
	if ledger.FormatKey(st.MasterKey()) != res.New || len(st.MasterKeys()) != 2 {
		t.Fatalf("master keys %v, want the chain to %s", st.MasterKeys(), res.New)
	}
	if !ignoredHas(st, late.Hash(), "after a rotation moved trust") {
		t.Fatalf("the old key's late entry is not listed: %+v", st.Ignored)
	}
	if len(st.Decisions) != 2 || !st.Agents["helper"].Seated || !st.Agents["bot"].Seated {
		t.Fatalf("decisions %d, helper seated %v", len(st.Decisions), st.Agents["helper"].Seated)
	}
	found := false
	for _, d := range st.Decisions {
		found = found || d.ID == before.ID
	}
	if !found {
		t.Fatal("the old key's entry within the rotation's bound no longer counts")
	}
	if len(st.Ignored) != 1 {
		t.Fatalf("ignored %+v, want only the late entry", st.Ignored)
	}
	// ferry ledger verify: the late entry is authentic (the old key signed it on a
	// machine that had not seen the rotation), so it is no bad signature and leaves no
	// hole in machine two's chain — it is listed as ignored, saying why; and machine
	// two's next entry with the new key chains on cleanly.
	if _, err := c2.Ledger.Append(fold.MasterWriter, c2.Device, ledger.Draft{Type: fold.TypeDecisionRecord, Ref: "d-0000000000001", Data: mustJSON(d)}, m.Signer, ledger.HLC{}); err != nil {
		t.Fatal(err)
	}
	v = mustLoad(t, c)
	rep, err := c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Ledger.Problems) != 0 {
		t.Fatalf("verify problems %+v, want none: an honest late entry is no forgery", rep.Ledger.Problems)
	}
	if !slices.ContainsFunc(rep.Ignored, func(ig fold.Ignored) bool {
		return ig.Hash == late.Hash() && strings.Contains(ig.Reason, "after a rotation moved trust")
	}) {
		t.Fatalf("verify does not list the late entry as ignored: %+v", rep.Ignored)
	}

	// The agent machine pinned to the old key follows: its pin moves on Load, and it
	// opens afterwards although channel.toml still names the first key.
	ca, err := Open(hAgent, c.Root)
	if err != nil {
		t.Fatalf("open on a machine pinned to the old key: %v", err)
	}
	mustLoad(t, ca)
	if pin, _ := hAgent.pinned(p); pin != res.New {
		t.Fatalf("pin after Load = %s, want %s", pin, res.New)
	}
	if _, err := Open(hAgent, c.Root); err != nil {
		t.Fatalf("open with the pin on the rotated key: %v", err)
	}

	// Importing the new key on the second machine (its old file moved aside) lets it
	// write again, in its own segment.
	exp, err := c.Home.ExportKey(p, fold.MasterWriter, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	ik, _ := ReadExport(exp, []byte("pw"))
	if _, err := c2.Home.StoreImported(ik); !errs.Is(err, errs.Conflict) {
		t.Fatalf("import over the old key: %v, want conflict", err)
	}
	if err := os.Rename(c2.Home.keyPath(p, fold.MasterWriter), c2.Home.keyPath(p, fold.MasterWriter)+".old"); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Home.StoreImported(ik); err != nil {
		t.Fatal(err)
	}
	m2, err = c2.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.DecisionRecord("machine two, new key", ""); err != nil {
		t.Fatalf("second machine after importing the new key: %v", err)
	}
	if n := len(mustLoad(t, c).State.Decisions); n != 3 {
		t.Fatalf("decisions = %d, want 3", n)
	}
}

// TestRotationWrongKeyAndCompeting: adversarial rotations: a rotation signed by
// a key that is not the master's is ignored and listed, and trust stays; of two
// rotations naming the same basis (the owner rotating on two machines) the lower hash
// wins, the other is listed as superseded and reported as contested; a rotation
// chained after the loser counts for nothing.
func TestRotationWrongKeyAndCompeting(t *testing.T) {
	t.Parallel()
	c, m, _ := seatedAgent(t)
	c2, m2 := secondMaster(t, c)
	root := m.Signer.Public()

	_, mallory, _ := ed25519.GenerateKey(nil)
	forged := rawRotate(t, c, c.Device, ledger.KeySigner(mallory), mallory.Public().(ed25519.PublicKey), "", nil)
	st := mustLoad(t, c).State
	if !st.MasterKey().Equal(root) || !ignoredHas(st, forged.Hash(), "not signed by the master key it rotates from") {
		t.Fatalf("forged rotation: master %s, ignored %+v", ledger.FormatKey(st.MasterKey()), st.Ignored)
	}
	// The master's own writes still count under the first key.
	if _, err := m.DecisionRecord("after a forged rotation", ""); err != nil {
		t.Fatal(err)
	}
	if len(mustLoad(t, c).State.Decisions) != 1 {
		t.Fatal("a forged rotation stopped the master's entries counting")
	}

	// Two real rotations from the first key, one per machine, same basis.
	_, k1, _ := ed25519.GenerateKey(nil)
	_, k2, _ := ed25519.GenerateKey(nil)
	r1 := rawRotate(t, c, c.Device, m.Signer, k1.Public().(ed25519.PublicKey), "", nil)
	r2 := rawRotate(t, c2, c2.Device, m2.Signer, k2.Public().(ed25519.PublicKey), "", nil)
	win, lose, winKey, loseKey := r1, r2, k1, k2
	if r2.Hash() < r1.Hash() {
		win, lose, winKey, loseKey = r2, r1, k2, k1
	}
	// A rotation chained after the loser, signed by the loser's new key.
	_, k3, _ := ed25519.GenerateKey(nil)
	loseDev := lose.Device
	after := rawRotate(t, c, loseDev, ledger.KeySigner(loseKey), k3.Public().(ed25519.PublicKey), lose.Hash(), nil)

	for _, ch := range []*Channel{c, c2} {
		st := mustLoad(t, ch).State
		if !st.MasterKey().Equal(winKey.Public().(ed25519.PublicKey)) {
			t.Fatalf("master key %s, want the lower-hash rotation's", ledger.FormatKey(st.MasterKey()))
		}
		if !ignoredHas(st, lose.Hash(), "superseded") || !ignoredHas(st, after.Hash(), "off the rotation chain") {
			t.Fatalf("losing rotations not listed: %+v", st.Ignored)
		}
		contested := false
		for _, cs := range st.Contested {
			contested = contested || cs.Ref == fold.MasterWriter && cs.Winner.Hash == win.Hash()
		}
		if !contested {
			t.Fatalf("competing rotations not reported: %+v", st.Contested)
		}
	}

	// The machine whose own rotation lost had pinned its new key: it is not locked out
	// of the channel — it opens, and its pin follows the chain.
	losePub := ledger.FormatKey(loseKey.Public().(ed25519.PublicKey))
	if err := fsutil.WriteFile(c.Home.pinPath(c.Project()), []byte(losePub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Open(c.Home, c.Root)
	if err != nil {
		t.Fatalf("open with the pin on a losing rotation's key: %v", err)
	}
	mustLoad(t, again)
	if pin, _ := c.Home.pinned(c.Project()); pin != ledger.FormatKey(winKey.Public().(ed25519.PublicKey)) {
		t.Fatalf("pin %s, want the chain's key after the Load", pin)
	}
}

// TestPinRefusedAndRepin (ADR 0008): a channel.toml naming another master
// key than the pinned one (and no rotation leading to it) is refused with a message
// naming `ferry master repin`, and nothing is written; repin with a key that is not
// channel.toml's is refused; repin with it makes the channel open.
func TestPinRefusedAndRepin(t *testing.T) {
	t.Parallel()
	c, _, _ := seatedAgent(t)
	h := testHome(t)
	other := t.TempDir()
	if _, err := Init(h, InitOptions{Dir: other, Project: "acme"}); err != nil {
		t.Fatal(err)
	}
	pinBefore, _ := h.pinned("acme")
	_, err := Open(h, c.Root)
	if !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "ferry master repin --channel "+c.Root+" --key "+c.Config.Master) {
		t.Fatalf("open with another pinned key: %v, want denied naming the repin command", err)
	}
	if pin, _ := h.pinned("acme"); pin != pinBefore {
		t.Fatal("a refused open changed the pin")
	}
	if _, _, err := Repin(h, c.Root, pinBefore); !errs.Is(err, errs.Invalid) {
		t.Fatalf("repin with the old key: %v, want invalid", err)
	}
	old, pinned, err := Repin(h, c.Root, c.Config.Master)
	if err != nil || old != pinBefore || pinned != c.Config.Master {
		t.Fatalf("repin: %s → %s, %v", old, pinned, err)
	}
	if _, err := Open(h, c.Root); err != nil {
		t.Fatalf("open after repin: %v", err)
	}
	if _, err := Open(h, other); !errs.Is(err, errs.Denied) {
		t.Fatalf("the other channel after repin: %v, want denied", err)
	}
}

// TestRotationInterrupted (ADR 0008 §6): a rotation whose entry was written but
// whose key files were not swapped yet (a crash) is finished by the next master write:
// the pending key is the chain's current key, so it is installed and signs; nothing is
// lost and the old key is kept.
func TestRotationInterrupted(t *testing.T) {
	t.Parallel()
	c, m, _ := seatedAgent(t)
	p := c.Project()
	res, err := m.RotateMaster()
	if err != nil {
		t.Fatal(err)
	}
	// Put the files back as they were between the append and the swap.
	kp := c.Home.keyPath(p, fold.MasterWriter)
	pending := kp + ".next-" + strings.TrimPrefix(res.New, "ed25519:")[:12]
	if err := os.Rename(kp, pending); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(res.Backup, kp); err != nil {
		t.Fatal(err)
	}
	m2, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if ledger.FormatKey(m2.Signer.Public()) != res.Old {
		t.Fatal("the setup did not restore the old key")
	}
	// The first write signs an object too (an order): object and entry must be
	// signed by the same, newly installed key (an object signed by the old key
	// would be flagged by verify).
	o, err := m2.NewOrder(NewOrderOptions{Title: "after an interrupted rotation"})
	if err != nil {
		t.Fatalf("write after an interrupted rotation: %v", err)
	}
	if _, err := m2.DecisionRecord("after an interrupted rotation", ""); err != nil {
		t.Fatalf("second write after an interrupted rotation: %v", err)
	}
	v := mustLoad(t, c)
	rep, err := c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Objects) != 0 || v.State.Order(o.ID) == nil {
		t.Fatalf("after the interrupted rotation: object problems %v, order shown %v", rep.Objects, v.State.Order(o.ID) != nil)
	}
	if k, err := c.Home.LoadKey(p, fold.MasterWriter); err != nil || ledger.FormatKey(k.Public()) != res.New {
		t.Fatalf("the pending key was not installed: %v", err)
	}
	if keyfile.Exists(pending) || !keyfile.Exists(res.Backup) {
		t.Fatal("the pending file is still there or the old key was not kept")
	}
	st := mustLoad(t, c).State
	if len(st.Decisions) != 1 || len(st.Ignored) != 0 {
		t.Fatalf("decisions %d, ignored %+v", len(st.Decisions), st.Ignored)
	}
}
