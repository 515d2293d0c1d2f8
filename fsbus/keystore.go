package fsbus

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
)

// The keystore (docs/format.md §18; docs/design.md §2). A key of (project,
// name) is held on this machine in one of two forms, both under ConfigDir/keys/<project>/:
//
//   - <name>.key: the plain key, "ed25519-seed:<base64url seed>\n", mode 0600;
//   - <name>.key.locked: a locked key: one line "ferry-locked-key-v1 <public key>\n"
//     (so the public half is known without the passphrase), then the plain key file
//     encrypted with age to a passphrase (scrypt recipient), ASCII-armored. Mode 0600.
//
// `ferry key unlock` decrypts a locked key into the runtime copy
// ConfigDir/unlocked/<project>/<name>.key (directory 0700, file 0600; never in the
// channel and never in the cache dir): one line "expires <RFC 3339 UTC>\n" then the
// plain key. A copy whose expiry has passed is removed by the next read and the key
// is locked again. The expiry is judged on this machine's clock: it is machine-local
// state, never part of the fold.

// maxUnlockFor is the longest a key stays unlocked (`ferry key unlock --for`): 720 h.
const maxUnlockFor = 30 * 24 * time.Hour

// KeyState is how a key is held on this machine.
type KeyState string

// Key states.
const (
	KeyNone     KeyState = "none"     // no key of that name here
	KeyPlain    KeyState = "plain"    // a plain key file
	KeyLocked   KeyState = "locked"   // locked, no valid unlocked copy
	KeyUnlocked KeyState = "unlocked" // locked, with a runtime copy not yet expired
)

func (h *Home) lockedPath(project, name string) string {
	return filepath.Join(h.ConfigDir, "keys", project, name+keyfile.LockedSuffix)
}

// UnlockedPath is where `ferry key unlock` puts the runtime copy of a locked key.
func (h *Home) UnlockedPath(project, name string) string {
	return filepath.Join(h.ConfigDir, keyfile.UnlockedDir, project, name+".key")
}

// lockedError is the answer of every write with a locked key: it names the command.
func lockedError(project, name string) error {
	return errs.Errorf(errs.Locked, fmt.Sprintf("run `ferry key unlock --as %s` in a terminal on this machine (the passphrase is never given to an MCP server)", name),
		"the key of %s in project %s is locked", name, project)
}

// KeyStatus reports how the key of (project, name) is held and, for an unlocked key,
// when its runtime copy expires. An expired copy is removed (the key is locked again).
func (h *Home) KeyStatus(project, name string) (KeyState, time.Time) {
	if keyfile.Exists(h.keyPath(project, name)) {
		return KeyPlain, time.Time{}
	}
	if !keyfile.Exists(h.lockedPath(project, name)) {
		return KeyNone, time.Time{}
	}
	_, exp, err := h.readUnlocked(project, name)
	if err != nil {
		return KeyLocked, time.Time{}
	}
	return KeyUnlocked, exp
}

// readUnlocked reads the runtime copy of a locked key. An expired copy is removed and
// reported as locked; so is a missing or damaged one.
func (h *Home) readUnlocked(project, name string) (ledger.KeySigner, time.Time, error) {
	p := h.UnlockedPath(project, name)
	b, err := keyfile.ReadSmall(p)
	if err != nil {
		return nil, time.Time{}, lockedError(project, name)
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	ts, ok := strings.CutPrefix(first, "expires ")
	exp, terr := time.Parse(time.RFC3339, ts)
	k, kok := parseSeedFile(rest)
	if !ok || terr != nil || !kok || !time.Now().Before(exp) {
		os.Remove(p)
		return nil, time.Time{}, lockedError(project, name)
	}
	// The copy must be the locked key's: a copy left over from a key since replaced
	// (rotation, re-import) does not sign.
	if pub, err := h.lockedPublic(project, name); err != nil || !pub.Equal(k.Public()) {
		os.Remove(p)
		return nil, time.Time{}, lockedError(project, name)
	}
	return k, exp, nil
}

// lockedPublic reads the public key in a locked key file's first line.
func (h *Home) lockedPublic(project, name string) (ed25519.PublicKey, error) {
	p := h.lockedPath(project, name)
	b, err := keyfile.ReadSmall(p)
	if err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	txt, ok := strings.CutPrefix(first, keyfile.LockedHeader)
	pub, perr := ledger.ParseKey(strings.TrimSpace(txt))
	if !ok || perr != nil {
		return nil, errs.Errorf(errs.Invalid, "restore it from a `ferry key export` copy (`ferry key import FILE`)", "locked key file %s is damaged", p)
	}
	return pub, nil
}

// PublicKey returns the public key of (project, name) on this machine, locked or not.
// Errors: not_found when there is no key.
func (h *Home) PublicKey(project, name string) (ed25519.PublicKey, error) {
	if keyfile.Exists(h.lockedPath(project, name)) && !keyfile.Exists(h.keyPath(project, name)) {
		return h.lockedPublic(project, name)
	}
	k, err := h.LoadKey(project, name)
	if err != nil {
		return nil, err
	}
	return k.Public(), nil
}

// keystoreSigner signs with a locked key: every Sign reads the runtime copy, so a key
// locked again (or expired) while a process runs stops signing at once. Sign returns
// a locked error when there is no valid copy.
type keystoreSigner struct {
	home          *Home
	project, name string
	pub           ed25519.PublicKey
}

// Sign implements ledger.Signer.
func (k *keystoreSigner) Sign(msg []byte) ([]byte, error) {
	key, _, err := k.home.readUnlocked(k.project, k.name)
	if err != nil {
		return nil, err
	}
	return key.Sign(msg)
}

// Public implements ledger.Signer.
func (k *keystoreSigner) Public() ed25519.PublicKey { return k.pub }

// Signer returns the signer of (project, name): the plain key, or for a locked key a
// signer that answers locked on every signature until `ferry key unlock` (so reads
// work with a locked key and writes answer locked). Errors as LoadKey.
func (h *Home) Signer(project, name string) (ledger.Signer, error) {
	if !keyfile.Exists(h.keyPath(project, name)) && keyfile.Exists(h.lockedPath(project, name)) {
		pub, err := h.lockedPublic(project, name)
		if err != nil {
			return nil, err
		}
		return &keystoreSigner{home: h, project: project, name: name, pub: pub}, nil
	}
	return h.LoadKey(project, name)
}

// checkUnlocked returns the locked error when s signs with a locked key that has no
// valid runtime copy: a write checks it before anything is written.
func (s *Session) checkUnlocked() error {
	if k, ok := s.Signer.(*keystoreSigner); ok {
		_, _, err := k.home.readUnlocked(k.project, k.name)
		return err
	}
	return nil
}

// LockKey encrypts the plain key of (project, name) with pass (age, scrypt) into
// <name>.key.locked and removes the plain file. Locking a locked key removes
// its runtime copy (re-locks; pass is not used). It returns the state before the call.
// Errors: not_found when there is no key; invalid for an empty passphrase; the plain
// key stays whenever the locked file could not be written whole.
func (h *Home) LockKey(project, name string, pass []byte) (KeyState, error) {
	before, _ := h.KeyStatus(project, name)
	switch before {
	case KeyNone:
		return before, noKeyError(project, name)
	case KeyLocked, KeyUnlocked:
		if err := os.Remove(h.UnlockedPath(project, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return before, fmt.Errorf("removing the unlocked copy: %w", err)
		}
		return before, nil
	}
	if err := keyfile.CheckPassphrase(pass); err != nil {
		return before, err
	}
	k, err := h.LoadKey(project, name)
	if err != nil {
		return before, err
	}
	sealed, err := keyfile.Seal([]byte(seedText(k)), pass)
	if err != nil {
		return before, err
	}
	body := append([]byte(keyfile.LockedHeader+ledger.FormatKey(k.Public())+"\n"), sealed...)
	lp := h.lockedPath(project, name)
	if err := fsutil.WriteFile(lp, body, 0o600); err != nil {
		return before, err
	}
	if err := os.Remove(h.keyPath(project, name)); err != nil {
		os.Remove(lp)
		return before, fmt.Errorf("removing the plain key: %w", err)
	}
	return before, nil
}

// UnlockKey decrypts the locked key of (project, name) with pass into its runtime copy
// (UnlockedPath), valid for d from now (0 < d ≤ MaxUnlockFor). It returns the expiry.
// Errors: not_found when there is no key; invalid when the key is not locked or d is
// out of range; denied for a wrong passphrase (nothing written).
func (h *Home) UnlockKey(project, name string, pass []byte, d time.Duration) (time.Time, error) {
	switch st, _ := h.KeyStatus(project, name); st {
	case KeyNone:
		return time.Time{}, noKeyError(project, name)
	case KeyPlain:
		return time.Time{}, errs.Errorf(errs.Invalid, fmt.Sprintf("lock it first with `ferry key lock --as %s`", name), "the key of %s is not locked", name)
	}
	if d <= 0 || d > maxUnlockFor {
		return time.Time{}, errs.Errorf(errs.Invalid, "pass a positive --for of at most 720h, e.g. --for 8h", "--for %s is out of range", d)
	}
	pub, err := h.lockedPublic(project, name)
	if err != nil {
		return time.Time{}, err
	}
	b, err := keyfile.ReadSmall(h.lockedPath(project, name))
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the locked key: %w", err)
	}
	_, sealed, _ := bytes.Cut(b, []byte("\n"))
	plain, err := keyfile.Unseal(sealed, pass, "the key of "+name)
	if err != nil {
		return time.Time{}, err
	}
	k, ok := parseSeedFile(string(plain))
	if !ok || !pub.Equal(k.Public()) {
		return time.Time{}, errs.Errorf(errs.Invalid, "restore it from a `ferry key export` copy", "the locked key of %s is damaged (its content does not match its public key)", name)
	}
	exp := time.Now().Add(d).UTC().Truncate(time.Second)
	p := h.UnlockedPath(project, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return time.Time{}, fmt.Errorf("creating %s: %w", filepath.Dir(p), err)
	}
	if err := fsutil.WriteFile(p, []byte("expires "+exp.Format(time.RFC3339)+"\n"+seedText(k)), 0o600); err != nil {
		return time.Time{}, err
	}
	return exp, nil
}

func noKeyError(project, name string) error {
	return errs.Errorf(errs.NotFound, fmt.Sprintf("run `ferry key show --as %s` on the machine that holds it, or `ferry key import FILE`", name),
		"no key for %s in project %s on this machine", name, project)
}

// signerKey returns the private key of (project, name) for an export: the plain key or
// the runtime copy of an unlocked one. Errors: not_found, locked.
func (h *Home) signerKey(project, name string) (ledger.KeySigner, error) {
	switch st, _ := h.KeyStatus(project, name); st {
	case KeyNone:
		return nil, noKeyError(project, name)
	case KeyLocked, KeyUnlocked:
		k, _, err := h.readUnlocked(project, name)
		return k, err
	}
	return h.LoadKey(project, name)
}

// ExportKey returns the key of (project, name) encrypted to pass (age, scrypt,
// armored): the plain text inside is "ferry-key-export-v1", "project <id>", "name
// <name>" and the key file's line. Errors: not_found, locked (unlock it first),
// invalid for an empty passphrase.
func (h *Home) ExportKey(project, name string, pass []byte) ([]byte, error) {
	if err := keyfile.CheckPassphrase(pass); err != nil {
		return nil, err
	}
	k, err := h.signerKey(project, name)
	if err != nil {
		return nil, err
	}
	plain := keyfile.ExportHeader + "\nproject " + project + "\nname " + name + "\n" + seedText(k)
	return keyfile.Seal([]byte(plain), pass)
}

// StoreImported stores an imported key as the plain key of (project, name). It returns
// false (and writes nothing) when this machine already holds the same key, and a
// conflict error when it holds another key under that name: keys are never overwritten.
func (h *Home) StoreImported(ik *ImportedKey) (bool, error) {
	if st, _ := h.KeyStatus(ik.Project, ik.Name); st != KeyNone {
		pub, err := h.PublicKey(ik.Project, ik.Name)
		if err != nil {
			return false, err
		}
		if pub.Equal(ik.Key.Public()) {
			return false, nil
		}
		return false, errs.Errorf(errs.Conflict, "keys are never overwritten: import it on a machine (or FERRY_HOME) without a key of that name",
			"this machine already holds another key for %s in project %s (%s, the import is %s); nothing was written",
			ik.Name, ik.Project, ledger.FormatKey(pub), ledger.FormatKey(ik.Key.Public()))
	}
	if err := fsutil.WriteFile(h.keyPath(ik.Project, ik.Name), []byte(seedText(ik.Key)), 0o600); err != nil {
		return false, err
	}
	return true, nil
}

// ImportedKey is a key read from an export.
type ImportedKey struct {
	Project string
	Name    string
	Key     ledger.KeySigner
}

// ReadExport decrypts an export made by ExportKey. Errors: denied for a wrong
// passphrase, invalid for a file that is not an export. It writes nothing.
func ReadExport(data, pass []byte) (*ImportedKey, error) {
	if len(data) > keyfile.MaxKeyFile {
		return nil, errs.Errorf(errs.Invalid, "pass the file `ferry key export` wrote", "the file is larger than a key export (%d bytes at most)", keyfile.MaxKeyFile)
	}
	plain, err := keyfile.Unseal(data, pass, "the key export")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(plain)), "\n")
	bad := errs.Errorf(errs.Invalid, "pass the file `ferry key export` wrote", "the decrypted file is not a ferry key export; nothing was written")
	if len(lines) != 4 || lines[0] != keyfile.ExportHeader {
		return nil, bad
	}
	project, ok1 := strings.CutPrefix(lines[1], "project ")
	name, ok2 := strings.CutPrefix(lines[2], "name ")
	k, ok3 := parseSeedFile(lines[3])
	if !ok1 || !ok2 || !ok3 || !fold.ValidName(project) || (name != fold.MasterWriter && !fold.ValidName(name)) {
		return nil, bad
	}
	return &ImportedKey{Project: project, Name: name, Key: k}, nil
}

// parseSeedFile parses a plain key file's text (keyfile.ParseSeed) into a signer.
func parseSeedFile(text string) (ledger.KeySigner, bool) {
	k, ok := keyfile.ParseSeed(text)
	return ledger.KeySigner(k), ok
}

// seedText is a plain key file's text for k (keyfile.SeedText).
func seedText(k ledger.KeySigner) string { return keyfile.SeedText(ed25519.PrivateKey(k)) }
