package fsbus

import (
	"crypto/ed25519"
	"time"

	"github.com/ferryhq/ferry/fsbus/internal/keystore"
	"github.com/ferryhq/ferry/ledger"
)

// The keystore (docs/format.md §18; docs/design.md §2) is fsbus/internal/keystore:
// plain and locked keys under ConfigDir/keys/<project>/, and the runtime copy of an
// unlocked key under ConfigDir/unlocked/<project>/.

// KeyState is how a key is held on this machine.
type KeyState string

// Key states.
const (
	KeyNone     = KeyState(keystore.None)     // no key of that name here
	KeyPlain    = KeyState(keystore.Plain)    // a plain key file
	KeyLocked   = KeyState(keystore.Locked)   // locked, no valid unlocked copy
	KeyUnlocked = KeyState(keystore.Unlocked) // locked, with a runtime copy not yet expired
)

// ImportedKey is a key read from an export.
type ImportedKey struct {
	Project string
	Name    string
	Key     ledger.KeySigner
}

func (h *Home) keys() keystore.Store { return keystore.Store{Dir: h.ConfigDir} }

func (h *Home) keyPath(project, name string) string    { return h.keys().KeyPath(project, name) }
func (h *Home) lockedPath(project, name string) string { return h.keys().LockedPath(project, name) }

// UnlockedPath is where `ferry key unlock` puts the runtime copy of a locked key.
func (h *Home) UnlockedPath(project, name string) string {
	return h.keys().UnlockedPath(project, name)
}

// KeyStatus reports how the key of (project, name) is held and, for an unlocked key,
// when its runtime copy expires. An expired copy is removed (the key is locked again).
func (h *Home) KeyStatus(project, name string) (KeyState, time.Time) {
	st, exp := h.keys().Status(project, name)
	return KeyState(st), exp
}

// HasKey reports whether a key for (project, name) exists on this machine, plain or
// locked.
func (h *Home) HasKey(project, name string) bool { return h.keys().HasKey(project, name) }

// LoadKey reads the key of (project, name): the plain key, or the runtime copy of a
// locked key. It returns a not_found error naming the command to run when there is
// none, and a locked error naming `ferry key unlock` for a locked key without a valid
// runtime copy.
func (h *Home) LoadKey(project, name string) (ledger.KeySigner, error) {
	return h.keys().Load(project, name)
}

// PublicKey returns the public key of (project, name) on this machine, locked or not.
// Errors: not_found when there is no key.
func (h *Home) PublicKey(project, name string) (ed25519.PublicKey, error) {
	return h.keys().PublicKey(project, name)
}

// Signer returns the signer of (project, name): the plain key, or for a locked key a
// signer that answers locked on every signature until `ferry key unlock` (so reads
// work with a locked key and writes answer locked). Errors as LoadKey.
func (h *Home) Signer(project, name string) (ledger.Signer, error) {
	return h.keys().Signer(project, name)
}

// checkUnlocked returns the locked error when s signs with a locked key that has no
// valid runtime copy: a write checks it before anything is written.
func (s *Session) checkUnlocked() error { return keystore.CheckUnlocked(s.Signer) }

// LockKey encrypts the plain key of (project, name) with pass (age, scrypt) into
// <name>.key.locked and removes the plain file. Locking a locked key removes
// its runtime copy (re-locks; pass is not used). It returns the state before the call.
// Errors: not_found when there is no key; invalid for an empty passphrase; the plain
// key stays whenever the locked file could not be written whole.
func (h *Home) LockKey(project, name string, pass []byte) (KeyState, error) {
	st, err := h.keys().Lock(project, name, pass)
	return KeyState(st), err
}

// UnlockKey decrypts the locked key of (project, name) with pass into its runtime copy
// (UnlockedPath), valid for d from now (0 < d ≤ 720 h). It returns the expiry.
// Errors: not_found when there is no key; invalid when the key is not locked or d is
// out of range; denied for a wrong passphrase (nothing written).
func (h *Home) UnlockKey(project, name string, pass []byte, d time.Duration) (time.Time, error) {
	return h.keys().Unlock(project, name, pass, d)
}

// ExportKey returns the key of (project, name) encrypted to pass (age, scrypt,
// armored): the plain text inside is "ferry-key-export-v1", "project <id>", "name
// <name>" and the key file's line. Errors: not_found, locked (unlock it first),
// invalid for an empty passphrase.
func (h *Home) ExportKey(project, name string, pass []byte) ([]byte, error) {
	return h.keys().Export(project, name, pass)
}

// StoreImported stores an imported key as the plain key of (project, name). It returns
// false (and writes nothing) when this machine already holds the same key, and a
// conflict error when it holds another key under that name: keys are never overwritten.
func (h *Home) StoreImported(ik *ImportedKey) (bool, error) {
	return h.keys().StoreImported((*keystore.ImportedKey)(ik))
}

// ReadExport decrypts an export made by ExportKey. Errors: denied for a wrong
// passphrase, invalid for a file that is not an export. It writes nothing.
func ReadExport(data, pass []byte) (*ImportedKey, error) {
	ik, err := keystore.ReadExport(data, pass)
	return (*ImportedKey)(ik), err
}

// parseSeedFile parses a plain key file's text into a signer.
func parseSeedFile(text string) (ledger.KeySigner, bool) { return keystore.ParseSeedFile(text) }

// seedText is a plain key file's text for k.
func seedText(k ledger.KeySigner) string { return keystore.SeedText(k) }
