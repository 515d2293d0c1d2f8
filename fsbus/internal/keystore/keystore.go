// Package keystore holds this machine's keys (docs/format.md §18; docs/design.md §2).
// A key of (project, name) is held in one of two forms, both under
// <config dir>/keys/<project>/:
//
//   - <name>.key: the plain key, "ed25519-seed:<base64url seed>\n", mode 0600;
//   - <name>.key.locked: a locked key: one line "ferry-locked-key-v1 <public key>\n"
//     (so the public half is known without the passphrase), then the plain key file
//     encrypted with age to a passphrase (scrypt recipient), ASCII-armored. Mode 0600.
//
// `ferry key unlock` decrypts a locked key into the runtime copy
// <config dir>/unlocked/<project>/<name>.key (directory 0700, file 0600; never in the
// channel and never in the cache dir): one line "expires <RFC 3339 UTC>\n" then the
// plain key. A copy whose expiry has passed is removed by the next read and the key
// is locked again. The expiry is judged on this machine's clock: it is machine-local
// state, never part of the fold.
package keystore

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

// maxUnlockFor is the longest a key stays unlocked (`ferry key unlock --for`): 720 h.
const maxUnlockFor = 30 * 24 * time.Hour

// State is how a key is held on this machine.
type State string

// Key states.
const (
	None     State = "none"     // no key of that name here
	Plain    State = "plain"    // a plain key file
	Locked   State = "locked"   // locked, no valid unlocked copy
	Unlocked State = "unlocked" // locked, with a runtime copy not yet expired
)

// Store is the keystore under one config dir.
type Store struct{ Dir string }

// KeyPath is the plain key file of (project, name).
func (s Store) KeyPath(project, name string) string {
	return filepath.Join(s.Dir, "keys", project, name+".key")
}

// LockedPath is the locked key file of (project, name).
func (s Store) LockedPath(project, name string) string {
	return filepath.Join(s.Dir, "keys", project, name+keyfile.LockedSuffix)
}

// UnlockedPath is where `ferry key unlock` puts the runtime copy of a locked key.
func (s Store) UnlockedPath(project, name string) string {
	return filepath.Join(s.Dir, keyfile.UnlockedDir, project, name+".key")
}

// lockedError is the answer of every write with a locked key: it names the command.
func lockedError(project, name string) error {
	return errs.Errorf(errs.Locked, fmt.Sprintf("run `ferry key unlock --as %s` in a terminal on this machine (the passphrase is never given to an MCP server)", name),
		"the key of %s in project %s is locked", name, project)
}

// Status reports how the key of (project, name) is held and, for an unlocked key,
// when its runtime copy expires. An expired copy is removed (the key is locked again).
func (s Store) Status(project, name string) (State, time.Time) {
	if keyfile.Exists(s.KeyPath(project, name)) {
		return Plain, time.Time{}
	}
	if !keyfile.Exists(s.LockedPath(project, name)) {
		return None, time.Time{}
	}
	_, exp, err := s.readUnlocked(project, name)
	if err != nil {
		return Locked, time.Time{}
	}
	return Unlocked, exp
}

// HasKey reports whether a key for (project, name) exists on this machine, plain or
// locked.
func (s Store) HasKey(project, name string) bool {
	_, err := os.Stat(s.KeyPath(project, name))
	return err == nil || keyfile.Exists(s.LockedPath(project, name))
}

// Load reads the key of (project, name): the plain key, or the runtime copy of a
// locked key. It returns a not_found error naming the command to run when there is
// none, and a locked error naming `ferry key unlock` for a locked key without a valid
// runtime copy.
func (s Store) Load(project, name string) (ledger.KeySigner, error) {
	p := s.KeyPath(project, name)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) && keyfile.Exists(s.LockedPath(project, name)) {
		k, _, err := s.readUnlocked(project, name)
		return k, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		if name == fold.MasterWriter {
			return nil, errs.Errorf(errs.NotFound, "run owner commands on the machine where `ferry init` made the channel",
				"this machine holds no master key for project %s", project)
		}
		return nil, errs.Errorf(errs.NotFound, fmt.Sprintf("run `ferry join --as %s --project %s` first", name, project),
			"no key for %s in project %s on this machine", name, project)
	}
	if err != nil {
		return nil, fmt.Errorf("reading key: %w", err)
	}
	k, ok := ParseSeedFile(string(b))
	if !ok {
		return nil, fmt.Errorf("key file %s is damaged", p)
	}
	return k, nil
}

// readUnlocked reads the runtime copy of a locked key. An expired copy is removed and
// reported as locked; so is a missing or damaged one.
func (s Store) readUnlocked(project, name string) (ledger.KeySigner, time.Time, error) {
	p := s.UnlockedPath(project, name)
	b, err := keyfile.ReadSmall(p)
	if err != nil {
		return nil, time.Time{}, lockedError(project, name)
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	ts, ok := strings.CutPrefix(first, "expires ")
	exp, terr := time.Parse(time.RFC3339, ts)
	k, kok := ParseSeedFile(rest)
	if !ok || terr != nil || !kok || !time.Now().Before(exp) {
		os.Remove(p)
		return nil, time.Time{}, lockedError(project, name)
	}
	// The copy must be the locked key's: a copy left over from a key since replaced
	// (rotation, re-import) does not sign.
	if pub, err := s.lockedPublic(project, name); err != nil || !pub.Equal(k.Public()) {
		os.Remove(p)
		return nil, time.Time{}, lockedError(project, name)
	}
	return k, exp, nil
}

// lockedPublic reads the public key in a locked key file's first line.
func (s Store) lockedPublic(project, name string) (ed25519.PublicKey, error) {
	p := s.LockedPath(project, name)
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
func (s Store) PublicKey(project, name string) (ed25519.PublicKey, error) {
	if keyfile.Exists(s.LockedPath(project, name)) && !keyfile.Exists(s.KeyPath(project, name)) {
		return s.lockedPublic(project, name)
	}
	k, err := s.Load(project, name)
	if err != nil {
		return nil, err
	}
	return k.Public(), nil
}

// lockedSigner signs with a locked key: every Sign reads the runtime copy, so a key
// locked again (or expired) while a process runs stops signing at once. Sign returns
// a locked error when there is no valid copy.
type lockedSigner struct {
	store         Store
	project, name string
	pub           ed25519.PublicKey
}

// Sign implements ledger.Signer.
func (k *lockedSigner) Sign(msg []byte) ([]byte, error) {
	key, _, err := k.store.readUnlocked(k.project, k.name)
	if err != nil {
		return nil, err
	}
	return key.Sign(msg)
}

// Public implements ledger.Signer.
func (k *lockedSigner) Public() ed25519.PublicKey { return k.pub }

// Signer returns the signer of (project, name): the plain key, or for a locked key a
// signer that answers locked on every signature until `ferry key unlock` (so reads
// work with a locked key and writes answer locked). Errors as Load.
func (s Store) Signer(project, name string) (ledger.Signer, error) {
	if !keyfile.Exists(s.KeyPath(project, name)) && keyfile.Exists(s.LockedPath(project, name)) {
		pub, err := s.lockedPublic(project, name)
		if err != nil {
			return nil, err
		}
		return &lockedSigner{store: s, project: project, name: name, pub: pub}, nil
	}
	return s.Load(project, name)
}

// CheckUnlocked returns the locked error when sg signs with a locked key that has no
// valid runtime copy: a write checks it before anything is written.
func CheckUnlocked(sg ledger.Signer) error {
	if k, ok := sg.(*lockedSigner); ok {
		_, _, err := k.store.readUnlocked(k.project, k.name)
		return err
	}
	return nil
}

// Lock encrypts the plain key of (project, name) with pass (age, scrypt) into
// <name>.key.locked and removes the plain file. Locking a locked key removes
// its runtime copy (re-locks; pass is not used). It returns the state before the call.
// Errors: not_found when there is no key; invalid for an empty passphrase; the plain
// key stays whenever the locked file could not be written whole.
func (s Store) Lock(project, name string, pass []byte) (State, error) {
	before, _ := s.Status(project, name)
	switch before {
	case None:
		return before, noKeyError(project, name)
	case Locked, Unlocked:
		if err := os.Remove(s.UnlockedPath(project, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return before, fmt.Errorf("removing the unlocked copy: %w", err)
		}
		return before, nil
	}
	if err := keyfile.CheckPassphrase(pass); err != nil {
		return before, err
	}
	k, err := s.Load(project, name)
	if err != nil {
		return before, err
	}
	sealed, err := keyfile.Seal([]byte(SeedText(k)), pass)
	if err != nil {
		return before, err
	}
	body := append([]byte(keyfile.LockedHeader+ledger.FormatKey(k.Public())+"\n"), sealed...)
	lp := s.LockedPath(project, name)
	if err := fsutil.WriteFile(lp, body, 0o600); err != nil {
		return before, err
	}
	if err := os.Remove(s.KeyPath(project, name)); err != nil {
		os.Remove(lp)
		return before, fmt.Errorf("removing the plain key: %w", err)
	}
	return before, nil
}

// Unlock decrypts the locked key of (project, name) with pass into its runtime copy
// (UnlockedPath), valid for d from now (0 < d ≤ 720 h). It returns the expiry.
// Errors: not_found when there is no key; invalid when the key is not locked or d is
// out of range; denied for a wrong passphrase (nothing written).
func (s Store) Unlock(project, name string, pass []byte, d time.Duration) (time.Time, error) {
	switch st, _ := s.Status(project, name); st {
	case None:
		return time.Time{}, noKeyError(project, name)
	case Plain:
		return time.Time{}, errs.Errorf(errs.Invalid, fmt.Sprintf("lock it first with `ferry key lock --as %s`", name), "the key of %s is not locked", name)
	}
	if d <= 0 || d > maxUnlockFor {
		return time.Time{}, errs.Errorf(errs.Invalid, "pass a positive --for of at most 720h, e.g. --for 8h", "--for %s is out of range", d)
	}
	pub, err := s.lockedPublic(project, name)
	if err != nil {
		return time.Time{}, err
	}
	b, err := keyfile.ReadSmall(s.LockedPath(project, name))
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the locked key: %w", err)
	}
	_, sealed, _ := bytes.Cut(b, []byte("\n"))
	plain, err := keyfile.Unseal(sealed, pass, "the key of "+name)
	if err != nil {
		return time.Time{}, err
	}
	k, ok := ParseSeedFile(string(plain))
	if !ok || !pub.Equal(k.Public()) {
		return time.Time{}, errs.Errorf(errs.Invalid, "restore it from a `ferry key export` copy", "the locked key of %s is damaged (its content does not match its public key)", name)
	}
	exp := time.Now().Add(d).UTC().Truncate(time.Second)
	p := s.UnlockedPath(project, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return time.Time{}, fmt.Errorf("creating %s: %w", filepath.Dir(p), err)
	}
	if err := fsutil.WriteFile(p, []byte("expires "+exp.Format(time.RFC3339)+"\n"+SeedText(k)), 0o600); err != nil {
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
func (s Store) signerKey(project, name string) (ledger.KeySigner, error) {
	switch st, _ := s.Status(project, name); st {
	case None:
		return nil, noKeyError(project, name)
	case Locked, Unlocked:
		k, _, err := s.readUnlocked(project, name)
		return k, err
	}
	return s.Load(project, name)
}

// Export returns the key of (project, name) encrypted to pass (age, scrypt,
// armored): the plain text inside is "ferry-key-export-v1", "project <id>", "name
// <name>" and the key file's line. Errors: not_found, locked (unlock it first),
// invalid for an empty passphrase.
func (s Store) Export(project, name string, pass []byte) ([]byte, error) {
	if err := keyfile.CheckPassphrase(pass); err != nil {
		return nil, err
	}
	k, err := s.signerKey(project, name)
	if err != nil {
		return nil, err
	}
	plain := keyfile.ExportHeader + "\nproject " + project + "\nname " + name + "\n" + SeedText(k)
	return keyfile.Seal([]byte(plain), pass)
}

// StoreImported stores an imported key as the plain key of (project, name). It returns
// false (and writes nothing) when this machine already holds the same key, and a
// conflict error when it holds another key under that name: keys are never overwritten.
func (s Store) StoreImported(ik *ImportedKey) (bool, error) {
	if st, _ := s.Status(ik.Project, ik.Name); st != None {
		pub, err := s.PublicKey(ik.Project, ik.Name)
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
	if err := fsutil.WriteFile(s.KeyPath(ik.Project, ik.Name), []byte(SeedText(ik.Key)), 0o600); err != nil {
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

// ReadExport decrypts an export made by Export. Errors: denied for a wrong
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
	k, ok3 := ParseSeedFile(lines[3])
	if !ok1 || !ok2 || !ok3 || !fold.ValidName(project) || (name != fold.MasterWriter && !fold.ValidName(name)) {
		return nil, bad
	}
	return &ImportedKey{Project: project, Name: name, Key: k}, nil
}

// ParseSeedFile parses a plain key file's text (keyfile.ParseSeed) into a signer.
func ParseSeedFile(text string) (ledger.KeySigner, bool) {
	k, ok := keyfile.ParseSeed(text)
	return ledger.KeySigner(k), ok
}

// SeedText is a plain key file's text for k (keyfile.SeedText).
func SeedText(k ledger.KeySigner) string { return keyfile.SeedText(ed25519.PrivateKey(k)) }

// OldKey returns the plain key kept as <name>.key.old-<n> (a master rotation keeps the
// key it replaced so) whose public key is pub; false when there is none.
func (s Store) OldKey(project, name string, pub ed25519.PublicKey) (ledger.KeySigner, bool) {
	for n := 1; ; n++ {
		b, err := keyfile.ReadSmall(fmt.Sprintf("%s.old-%d", s.KeyPath(project, name), n))
		if err != nil {
			return nil, false
		}
		if k, ok := ParseSeedFile(string(b)); ok && pub.Equal(k.Public()) {
			return k, true
		}
	}
}
