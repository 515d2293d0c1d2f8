package fsbus

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
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

// masterChain is the resolved chain of master keys: keys[0] is channel.toml's key,
// keys[i] the key rotation i moved trust to, bounds[i] that rotation's bounds.
type masterChain struct {
	keys   []ed25519.PublicKey
	bounds []map[string]uint64
	on     map[string]bool // hashes of the rotations on the chain
	head   string          // hash of the newest rotation on the chain ("" when none)
	// lost holds the new keys of valid rotations that lost to a competing one (signed
	// by a key of the chain, so by the same owner): a machine pinned to one follows
	// the chain instead of being locked out.
	lost map[string]bool
}

// keyAt is the master key an entry of the master's segment device at seq must be
// signed with.
func (m *masterChain) keyAt(device string, seq uint64) ed25519.PublicKey {
	if m == nil || len(m.keys) == 0 {
		return nil
	}
	for k := len(m.keys) - 1; k > 0; k-- {
		if b, named := m.bounds[k][device]; !named || seq > b {
			return m.keys[k]
		}
	}
	return m.keys[0]
}

// current is the newest master key.
func (m *masterChain) current() ed25519.PublicKey {
	if m == nil || len(m.keys) == 0 {
		return nil
	}
	return m.keys[len(m.keys)-1]
}

// has reports whether key (in FormatKey form) is on the chain.
// hasOrLost reports whether key is on the chain or was brought in by a rotation that
// lost to a competing one.
func (m *masterChain) hasOrLost(key string) bool {
	return m.has(key) || (m != nil && m.lost[key])
}

func (m *masterChain) has(key string) bool {
	if m == nil {
		return false
	}
	for _, k := range m.keys {
		if ledger.FormatKey(k) == key {
			return true
		}
	}
	return false
}

// skip reports whether pass 1 of the fold leaves e alone: a rotation that is not on
// the chain (resolveMasters listed it).
func (m *masterChain) skip(e *ledger.Entry) bool {
	return e.Type == TypeMasterRotate && !m.on[e.Hash()]
}

// badSig is the reason a master entry that failed verification is ignored.
func (m *masterChain) badSig(e *ledger.Entry, project string) string {
	for i, k := range m.keys {
		if i < len(m.keys)-1 && !k.Equal(m.keyAt(e.Device, e.Seq)) && verifyEntry(e, k, project) {
			return fmt.Sprintf("signed by master key %s after a rotation moved trust from it (seq %d of device %s is past the rotation's bound)",
				ledger.FormatKey(k), e.Seq, e.Device)
		}
	}
	return "signature does not verify against the master key"
}

// resolveMasters resolves the rotation chain from in.Master over the master.rotate
// entries among in.Entries, listing every rotation left out (with ignore) and adding a
// contest for competing rotations.
func resolveMasters(st *State, in FoldInput, ignore func(*ledger.Entry, string)) *masterChain {
	var rots []*ledger.Entry
	for i := range in.Entries {
		if e := &in.Entries[i]; e.Writer == MasterWriter && e.Type == TypeMasterRotate {
			rots = append(rots, e)
		}
	}
	return resolveRotations(st, in.Master, in.Project, rots, ignore)
}

func resolveRotations(st *State, root ed25519.PublicKey, project string, rots []*ledger.Entry, ignore func(*ledger.Entry, string)) *masterChain {
	m := &masterChain{keys: []ed25519.PublicKey{root}, bounds: []map[string]uint64{nil}, on: map[string]bool{}, lost: map[string]bool{}}
	if len(rots) == 0 {
		return m
	}
	type rot struct {
		e   *ledger.Entry
		d   entryData
		key ed25519.PublicKey
	}
	listed := map[string]bool{}
	list := func(e *ledger.Entry, why string) {
		if !listed[e.Hash()] {
			listed[e.Hash()] = true
			ignore(e, why)
		}
	}
	byBasis := map[string][]rot{}
	for _, e := range rots {
		d, ok := decodeData(e)
		key, kerr := ledger.ParseKey(d.Key)
		if !ok || kerr != nil {
			list(e, "master.rotate with data that does not decode or a bad key")
			continue
		}
		byBasis[d.Basis] = append(byBasis[d.Basis], rot{e: e, d: d, key: key})
	}
	level := byBasis[""]
	for len(level) > 0 {
		cur := m.current()
		var valid []rot
		for _, r := range level {
			switch {
			case !verifyEntry(r.e, cur, project):
				list(r.e, "master.rotate not signed by the master key it rotates from ("+ledger.FormatKey(cur)+")")
			case !m.keyAt(r.e.Device, r.e.Seq).Equal(cur):
				list(r.e, "master.rotate within the bounds of an earlier rotation")
			case m.has(ledger.FormatKey(r.key)):
				list(r.e, "master.rotate to a key already on the rotation chain")
			case r.d.Bounds[r.e.Device] != r.e.Seq:
				list(r.e, "master.rotate that does not bound its own segment at its own seq")
			default:
				valid = append(valid, r)
			}
		}
		if len(valid) == 0 {
			break
		}
		sort.Slice(valid, func(i, j int) bool { return valid[i].e.Hash() < valid[j].e.Hash() })
		win := valid[0]
		for _, l := range valid[1:] {
			m.lost[ledger.FormatKey(l.key)] = true
		}
		if len(valid) > 1 && st != nil {
			c := Contest{Ref: MasterWriter, Basis: m.head, Involved: []string{MasterWriter},
				Winner: Step{Type: win.e.Type, By: win.e.Writer, HLC: win.e.HLC, Hash: win.e.Hash()}}
			for _, l := range valid[1:] {
				c.Losers = append(c.Losers, Step{Type: l.e.Type, By: l.e.Writer, HLC: l.e.HLC, Hash: l.e.Hash()})
				list(l.e, "master.rotate on a superseded branch: a competing rotation with a lower hash won")
			}
			st.Contested = append(st.Contested, c)
		}
		m.keys = append(m.keys, win.key)
		m.bounds = append(m.bounds, win.d.Bounds)
		m.on[win.e.Hash()] = true
		m.head = win.e.Hash()
		level = byBasis[win.e.Hash()]
	}
	for _, e := range rots {
		if !m.on[e.Hash()] {
			list(e, "master.rotate off the rotation chain (its basis lost, was left out, or has not arrived)")
		}
	}
	return m
}

// MasterKey returns the master's current public key: channel.toml's key moved along
// the rotation chain. Entries the master writes now must be signed with it.
func (st *State) MasterKey() ed25519.PublicKey { return st.masters.current() }

// MasterKeys returns the rotation chain's keys, channel.toml's first (FormatKey form).
func (st *State) MasterKeys() []string {
	if st.masters == nil {
		return nil
	}
	out := make([]string, len(st.masters.keys))
	for i, k := range st.masters.keys {
		out[i] = ledger.FormatKey(k)
	}
	return out
}

// masterKeyAt is the key the master's entry e must be signed with.
func (st *State) masterKeyAt(e *ledger.Entry) ed25519.PublicKey {
	return st.masters.keyAt(e.Device, e.Seq)
}

// masterKeys returns the key each master entry among entries must be signed with,
// resolving the rotation chain from them (for the signature pre-check, index.go).
func (c *Channel) masterKeys(entries []ledger.Entry) func(*ledger.Entry) ed25519.PublicKey {
	m := resolveMasters(nil, FoldInput{Project: c.Project(), Master: c.MasterKey, Entries: entries}, func(*ledger.Entry, string) {})
	return func(e *ledger.Entry) ed25519.PublicKey { return m.keyAt(e.Device, e.Seq) }
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
	if masterRotations(c).hasOrLost(pin) {
		return nil
	}
	return errs.Errorf(errs.Denied, repinHint(c.Root, key, h.pinPath(project)),
		"channel.toml names master key %s but this machine pinned %s for project %s, and no rotation signed by the channel's key leads to the pinned one; nothing was read or written",
		key, pin, project)
}

// masterRotations resolves the rotation chain from the master.rotate entries of the
// master's segment files (conflict copies included: any *.jsonl* file in its folder).
// Damaged lines are skipped: what they hold is read, and listed, by Load.
func masterRotations(c *Channel) *masterChain {
	dir := filepath.Join(c.Root, "ledger", MasterWriter)
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
			if !strings.Contains(line, TypeMasterRotate) {
				continue
			}
			e, err := ledger.ParseLine([]byte(line))
			if err != nil || e.Writer != MasterWriter || e.Type != TypeMasterRotate || seen[e.Hash()] {
				continue
			}
			seen[e.Hash()] = true
			rots = append(rots, &e)
		}
	}
	return resolveRotations(nil, c.MasterKey, c.Project(), rots, func(*ledger.Entry, string) {})
}

// followPin moves this machine's pin to the newest key of the rotation chain st
// resolved, when the pin is on that chain (a pinned machine follows a rotation). The
// pin is this machine's root of trust (docs/format.md §13): a pin that cannot be moved
// is an error naming the file, never a silent stay on the old key.
func (c *Channel) followPin(st *State) error {
	cur := st.MasterKey()
	if cur == nil || c.pin == "" {
		return nil
	}
	if k := ledger.FormatKey(cur); k != c.pin && st.masters.hasOrLost(c.pin) {
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
	if s.Name != MasterWriter {
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
	nextPath := s.Home.keyPath(p, MasterWriter) + ".next-" + strings.TrimPrefix(ledger.FormatKey(next.Public()), "ed25519:")[:12]
	if err := fsutil.WriteFile(nextPath, []byte(seedText(next)), 0o600); err != nil {
		return nil, err
	}
	res := &RotateResult{Old: ledger.FormatKey(s.Signer.Public()), New: ledger.FormatKey(next.Public())}
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		bounds := map[string]uint64{}
		for i := range v.Snapshot.Entries {
			if x := &v.Snapshot.Entries[i]; x.Writer == MasterWriter && x.Seq > bounds[x.Device] {
				bounds[x.Device] = x.Seq
			}
		}
		bounds[s.Device] = tipSeq(v.chainTip(MasterWriter, s.Device)) + 1 // this entry
		d := entryData{Key: res.New, Bounds: bounds, Basis: v.State.masters.head}
		return &ledger.Draft{Type: TypeMasterRotate, Ref: MasterWriter, Data: mustJSON(d)}, nil, nil
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
	kp := h.keyPath(project, MasterWriter)
	old := kp
	if !fileExists(kp) {
		old = h.lockedPath(project, MasterWriter)
	}
	backup := ""
	for n := 1; ; n++ {
		backup = fmt.Sprintf("%s.old-%d", old, n)
		if !fileExists(backup) {
			break
		}
	}
	if err := os.Rename(old, backup); err != nil {
		return "", fmt.Errorf("keeping the old master key: %w", err)
	}
	if err := os.Rename(next, kp); err != nil {
		return "", fmt.Errorf("installing the new master key (it is in %s): %w", next, err)
	}
	os.Remove(h.UnlockedPath(project, MasterWriter))
	return backup, nil
}

// pendingMasters lists the master.key.next-* files of project (interrupted rotations).
func (h *Home) pendingMasters(project string) []string {
	kp := h.keyPath(project, MasterWriter)
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
func (s *Session) checkMasterKey(st *State) error {
	if s.Name != MasterWriter || st.masters == nil || s.Signer.Public().Equal(st.MasterKey()) {
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
		fmt.Sprintf("on the machine that rotated it run `ferry key export --out FILE`; here move this machine's old master key file %s aside, then run `ferry key import FILE --channel %s`", s.Home.keyPath(s.Project(), MasterWriter), s.Root),
		"this machine's master key %s was rotated out: the channel's master key is now %s; nothing was written",
		ledger.FormatKey(s.Signer.Public()), ledger.FormatKey(st.MasterKey()))
}
