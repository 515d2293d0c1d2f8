package fsbus

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
)

// Master key rotation (docs/adr/0008-master-rotation.md).
//
// A master.rotate entry is written by the master, signed by the key it rotates from,
// and names in data.key the new public key, in data.bounds the last seq the old key
// still covers for every master segment its writer had seen (its own segment: the
// rotation's own seq), and in data.basis the hash of the previous rotation on the
// chain ("" for the first, which rotates from channel.toml's key). A master entry at
// (device, seq) falls under the newest key of the chain whose rotation's bound for that
// device is below seq or that names no bound for it — the rule grants use (docs/design.md §2),
// so no clock decides which key an entry needs. Two rotations naming one basis (the
// owner rotated on two machines) are resolved like grant branches: the lower entry
// hash wins; the other, and anything chained after it, counts for nothing and is
// listed.

// masterKeys returns the key each master entry among entries must be signed with,
// resolving the rotation chain from them (for the signature pre-check, index.go).
func (c *Channel) masterKeys(entries []ledger.Entry) func(*ledger.Entry) ed25519.PublicKey {
	m := fold.ResolveMasters(nil, fold.FoldInput{Project: c.Project(), Master: c.MasterKey, Entries: entries}, func(*ledger.Entry, string) {})
	return func(e *ledger.Entry) ed25519.PublicKey { return m.KeyAt(e.Device, e.Seq) }
}

// pinPath is where this machine pins a project's master key.
func (h *Home) pinPath(project string) string {
	return filepath.Join(h.ConfigDir, "pins", project+".pub")
}

// pinned returns the master key pinned for project ("" when none).
func (h *Home) pinned(project string) (string, error) {
	b, err := os.ReadFile(h.pinPath(project))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading pinned master key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// repinHint is the deliberate command a refused pin names.
func repinHint(dir, key, pinFile string) string {
	return fmt.Sprintf("check with the owner, out of band, that they really replaced the master key; then run `ferry master repin --channel %s --key %s` (it prints the old and the new key; the pin is %s)", dir, key, pinFile)
}

// checkPin pins channel.toml's master key on first use, and afterwards accepts it when
// the pin is that key or a key its rotation chain reaches (the rotations are read from
// the master's segments: only when the pin differs from channel.toml's key). Anything
// else is a denied error naming the repin command (docs/design.md §2; ADR 0008).
func (c *Channel) checkPin() error {
	h, project, key := c.Home, c.Project(), c.Config.Master
	pin, err := h.pinned(project)
	if err != nil {
		return err
	}
	c.pin = pin
	switch pin {
	case "":
		c.pin = key
		return h.PinMaster(project, key)
	case key:
		return nil
	}
	if masterRotations(c).HasOrLost(pin) {
		return nil
	}
	return errs.Errorf(errs.Denied, repinHint(c.Root, key, h.pinPath(project)),
		"channel.toml names master key %s but this machine pinned %s for project %s, and no rotation signed by the channel's key leads to the pinned one; nothing was read or written",
		key, pin, project)
}

// masterRotations resolves the rotation chain from the master.rotate entries of the
// master's segment files (conflict copies included: any *.jsonl* file in its folder).
// Damaged lines are skipped: what they hold is read, and listed, by Load.
func masterRotations(c *Channel) *fold.MasterChain {
	dir := filepath.Join(c.Root, "ledger", fold.MasterWriter)
	ents, _ := os.ReadDir(dir)
	var rots []*ledger.Entry
	seen := map[string]bool{}
	for _, de := range ents {
		if de.IsDir() || !strings.Contains(de.Name(), ".jsonl") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, fold.TypeMasterRotate) {
				continue
			}
			e, err := ledger.ParseLine([]byte(line))
			if err != nil || e.Writer != fold.MasterWriter || e.Type != fold.TypeMasterRotate || seen[e.Hash()] {
				continue
			}
			seen[e.Hash()] = true
			rots = append(rots, &e)
		}
	}
	return fold.ResolveRotations(nil, c.MasterKey, c.Project(), rots, func(*ledger.Entry, string) {})
}

// followPin moves this machine's pin to the newest key of the rotation chain st
// resolved, when the pin is on that chain (a pinned machine follows a rotation). The
// pin is this machine's root of trust (docs/format.md §13): a pin that cannot be moved
// is an error naming the file, never a silent stay on the old key.
func (c *Channel) followPin(st *fold.State) error {
	cur := st.MasterKey()
	if cur == nil || c.pin == "" {
		return nil
	}
	if k := ledger.FormatKey(cur); k != c.pin && st.Masters.HasOrLost(c.pin) {
		if err := fsutil.WriteFile(c.Home.pinPath(c.Project()), []byte(k+"\n"), 0o644); err != nil {
			return &errs.Error{Category: errs.Internal, Err: err,
				Message: fmt.Sprintf("moving this machine's pin of the master key to the rotated key %s: %v", k, err),
				Hint:    "free space or fix permissions in this machine's ferry config dir (" + c.Home.ConfigDir + "), then retry"}
		}
		c.pin = k
	}
	return nil
}

// Repin deliberately pins the master key channel.toml in dir names (after the owner
// made a new master key, or a channel under this project id was remade): key must be
// that key, typed by the user as the refusal showed it, so it never happens by
// accident. It returns the key pinned before ("" for none) and the new one. Errors:
// the errors of reading channel.toml (not_found, invalid); invalid when key is not the
// key channel.toml names (nothing written).
func Repin(h *Home, dir, key string) (old, pinned string, err error) {
	cfg, _, root, err := readConfig(dir)
	if err != nil {
		return "", "", err
	}
	if strings.TrimSpace(key) != cfg.Master {
		return "", "", errs.Errorf(errs.Invalid, "copy the key from the refusal, or from `channel.toml` (its master line)",
			"%q is not the master key channel.toml in %s names (%s); nothing was written", key, root, cfg.Master)
	}
	if old, err = h.pinned(cfg.Project); err != nil {
		return "", "", err
	}
	if old == cfg.Master {
		return old, old, nil
	}
	if err := fsutil.WriteFile(h.pinPath(cfg.Project), []byte(cfg.Master+"\n"), 0o644); err != nil {
		return "", "", err
	}
	return old, cfg.Master, nil
}

// RotateResult is what RotateMaster did.
type RotateResult struct {
	Old    string `json:"old"`
	New    string `json:"new"`
	Entry  string `json:"entry"`  // hash of the master.rotate entry
	Backup string `json:"backup"` // where the old private key was kept on this machine
}

// RotateMaster makes a new master key on this machine and writes a master.rotate entry
// signed by the current one, naming the new public key, the last seq of every master
// segment seen (this segment: the rotation's own seq) and the previous rotation. Once
// the entry is written and folds onto the chain, the new key becomes this machine's
// master key and the old file is kept beside it as master.key.old-<n> (or
// master.key.locked.old-<n>). Errors: denied unless s is the master with the current
// master key; locked for a locked key; internal when the entry does not fold onto the
// chain (the new key is then discarded and the old one stays). The new key is stored
// plain even when the old one was locked (`ferry key lock` locks it).
func (s *Session) RotateMaster() (*RotateResult, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner on a machine that holds the master key", "only the master rotates the master key")
	}
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	next := ledger.KeySigner(priv)
	p := s.Project()
	// A file of its own per rotation: a pending key of an interrupted rotation is never
	// overwritten (checkMasterKey installs it once its rotation is on the chain).
	nextPath := s.Home.keyPath(p, fold.MasterWriter) + ".next-" + strings.TrimPrefix(ledger.FormatKey(next.Public()), "ed25519:")[:12]
	if err := fsutil.WriteFile(nextPath, []byte(seedText(next)), 0o600); err != nil {
		return nil, err
	}
	res := &RotateResult{Old: ledger.FormatKey(s.Signer.Public()), New: ledger.FormatKey(next.Public())}
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		bounds := fold.MasterBounds(v.Snapshot.Entries, s.ownerCheckpoint)
		bounds[s.Device] = tipSeq(v.chainTip(fold.MasterWriter, s.Device)) + 1 // this entry
		if s.needsSupport(v) {
			bounds[s.Device]++ // after the agent.support written with it
		}
		d := fold.EntryData{Key: res.New, Bounds: bounds, Basis: v.State.Masters.Head}
		return &ledger.Draft{Type: fold.TypeMasterRotate, Ref: fold.MasterWriter, Data: mustJSON(d)}, nil, nil
	})
	if err != nil {
		if !errs.Is(err, errs.Internal) {
			os.Remove(nextPath) // refused: nothing was written
		} // else the entry may be on disk: keep the key for checkMasterKey
		return nil, err
	}
	res.Entry = e.Hash()
	if st := s.viewWithEntry(v, e).State; !st.MasterKey().Equal(next.Public()) {
		os.Remove(nextPath)
		return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify` and `ferry doctor`: the entry is listed with the reason; this machine keeps its master key",
			"the rotation entry %s was written but does not move trust (another rotation won or its bounds did not hold)", e.Hash())
	}
	if res.Backup, err = s.Home.installNextMaster(p, nextPath); err != nil {
		return nil, err
	}
	s.Signer = next
	if err := s.followPin(s.viewWithEntry(v, e).State); err != nil {
		// The rotation is written and counts: failing now would invite a second one.
		// The pin stays on the old key, which the chain still trusts; the next Load
		// moves it, or fails saying why.
		s.Home.warn("", fmt.Sprintf("the rotation is written, but %v", err))
	}
	return res, nil
}

// installNextMaster makes the pending key in next (written by RotateMaster) this
// machine's master key, keeping the old key file (plain or locked) as <file>.old-<n>,
// and removing the old key's unlocked copy. It returns the backup's path.
func (h *Home) installNextMaster(project, next string) (string, error) {
	kp := h.keyPath(project, fold.MasterWriter)
	old := kp
	if !keyfile.Exists(kp) {
		old = h.lockedPath(project, fold.MasterWriter)
	}
	backup := ""
	for n := 1; ; n++ {
		backup = fmt.Sprintf("%s.old-%d", old, n)
		if !keyfile.Exists(backup) {
			break
		}
	}
	if err := os.Rename(old, backup); err != nil {
		return "", fmt.Errorf("keeping the old master key: %w", err)
	}
	if err := os.Rename(next, kp); err != nil {
		return "", fmt.Errorf("installing the new master key (it is in %s): %w", next, err)
	}
	os.Remove(h.UnlockedPath(project, fold.MasterWriter))
	return backup, nil
}

// pendingMasters lists the master.key.next-* files of project (interrupted rotations).
func (h *Home) pendingMasters(project string) []string {
	kp := h.keyPath(project, fold.MasterWriter)
	ents, _ := os.ReadDir(filepath.Dir(kp))
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), filepath.Base(kp)+".next-") {
			out = append(out, filepath.Join(filepath.Dir(kp), e.Name()))
		}
	}
	return out
}

// checkMasterKey refuses a master write signed by a key that is not the channel's
// current master key (a machine holding a key rotated out). When this machine holds
// the current key in a pending master.key.next-<key prefix> (a rotation interrupted
// after its entry was written), it finishes installing it and signs with it.
func (s *Session) checkMasterKey(st *fold.State) error {
	if s.Name != fold.MasterWriter || st.Masters == nil || s.Signer.Public().Equal(st.MasterKey()) {
		return nil
	}
	for _, next := range s.Home.pendingMasters(s.Project()) {
		if b, err := os.ReadFile(next); err == nil {
			if k, ok := parseSeedFile(string(b)); ok && k.Public().Equal(st.MasterKey()) {
				if _, err := s.Home.installNextMaster(s.Project(), next); err == nil {
					s.Signer = k
					return nil
				}
			}
		}
	}
	return errs.Errorf(errs.Denied,
		fmt.Sprintf("on the machine that rotated it run `ferry key export --out FILE`; here move this machine's old master key file %s aside, then run `ferry key import FILE --channel %s`", s.Home.keyPath(s.Project(), fold.MasterWriter), s.Root),
		"this machine's master key %s was rotated out: the channel's master key is now %s; nothing was written",
		ledger.FormatKey(s.Signer.Public()), ledger.FormatKey(st.MasterKey()))
}
