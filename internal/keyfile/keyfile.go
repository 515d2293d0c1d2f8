// Package keyfile is the format of a key on disk (docs/format.md §5): a plain key
// file ("ed25519-seed:" and the base64url seed), a key locked with a passphrase (an
// ASCII-armored age file to an scrypt recipient, behind a header line carrying the
// public key) and a key export. It seals and unseals, and reads files of bounded size;
// where keys live, and when they are unlocked, is the façade's (fsbus/keystore.go).
package keyfile

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/ferryhq/ferry/internal/errs"
)

// Unseal decrypts an armored age file made by Seal. A wrong passphrase is a denied
// error; a file that is not an age file an invalid one. what names the file.
func Unseal(sealed, pass []byte, what string) ([]byte, error) {
	id, err := age.NewScryptIdentity(string(pass))
	if err != nil {
		return nil, fmt.Errorf("making the scrypt identity: %w", err)
	}
	r, err := age.Decrypt(armor.NewReader(bytes.NewReader(sealed)), id)
	if err != nil {
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, errs.Errorf(errs.Denied, "check the passphrase and try again", "wrong passphrase for %s; nothing was written", what)
		}
		return nil, errs.Errorf(errs.Invalid, "pass the file `ferry key export` or `ferry key lock` wrote", "%s is not a passphrase-encrypted ferry key: %v; nothing was written", what, err)
	}
	out, err := io.ReadAll(io.LimitReader(r, MaxKeyFile))
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "pass the file `ferry key export` or `ferry key lock` wrote", "%s does not decrypt whole: %v; nothing was written", what, err)
	}
	return out, nil
}

// Seal encrypts plain to a passphrase with age (scrypt), armored.
func Seal(plain, pass []byte) ([]byte, error) {
	r, err := age.NewScryptRecipient(string(pass))
	if err != nil {
		return nil, fmt.Errorf("making the scrypt recipient: %w", err)
	}
	r.SetWorkFactor(ScryptWorkFactor)
	var buf bytes.Buffer
	aw := armor.NewWriter(&buf)
	w, err := age.Encrypt(aw, r)
	if err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	if _, err := w.Write(plain); err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	if err := aw.Close(); err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	return buf.Bytes(), nil
}

// CheckPassphrase refuses an empty passphrase.
func CheckPassphrase(pass []byte) error {
	if len(bytes.TrimSpace(pass)) == 0 {
		return errs.Errorf(errs.Invalid, "give a passphrase of a few words", "the passphrase is empty")
	}
	return nil
}

// ReadSmall reads a file of at most maxKeyFile bytes.
func ReadSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxKeyFile {
		return nil, errs.Errorf(errs.Invalid, "pass the file `ferry key export` wrote", "%s is larger than a key file (%d bytes at most)", p, MaxKeyFile)
	}
	return b, nil
}

func SeedText(k ed25519.PrivateKey) string {
	return SeedPrefix + base64.RawURLEncoding.EncodeToString(k.Seed()) + "\n"
}

// ParseSeed parses a plain key file's text.
func ParseSeed(text string) (ed25519.PrivateKey, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), SeedPrefix)
	seed, err := base64.RawURLEncoding.DecodeString(rest)
	if !ok || err != nil || len(seed) != ed25519.SeedSize {
		return nil, false
	}
	return ed25519.NewKeyFromSeed(seed), true
}

func Exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// ScryptWorkFactor is log2 of the scrypt cost age uses for a passphrase (age's default,
// 18: about a second and 256 MiB). Tests lower it.
var ScryptWorkFactor = 18

const (
	LockedHeader = "ferry-locked-key-v1 "
	ExportHeader = "ferry-key-export-v1"
	LockedSuffix = ".key.locked"
	SeedPrefix   = "ed25519-seed:"
	MaxKeyFile   = 64 << 10 // bytes: a key file, locked file or export is far smaller
	UnlockedDir  = "unlocked"
)
