package fsbus

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"filippo.io/age"
	"filippo.io/age/agessh"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
	"golang.org/x/crypto/ssh"
)

// The vault (docs/adr/0009-vault.md): a value encrypted with age to
// the seated ed25519 keys of named agents (agessh recipients: the roster's keys, so no
// second key exists) and always to its author. Layout:
//
//	vault/<name>/<s-id>.age   the age file, written once (docs/design.md §2 rule 2)
//	secret.put                entry: ref = name, data {object, id, recipients}
//
// data.object is "sha256:" + hex of the file's bytes; data.args (with an idempotency
// key only) is keyed with the author's private key (secretArgsMAC), so nothing in the
// ledger lets a reader test a guess of the value. The newest put of a name that
// counts (verified, member level or more) and is written by the name's owner (the
// writer of its first counted put) or by master is the name's value; another writer's
// put is refused when written (denied) and ignored when folded. Older puts stay on
// disk and in the ledger. No MCP tool reads or writes the vault.

// MaxSecretValue is the largest value the vault keeps, in bytes (64 KiB).
const MaxSecretValue = 64 << 10

// vaultPath is the file of a vault object.
func vaultPath(root, name, id string) string {
	return filepath.Join(root, "vault", name, id+".age")
}

// SecretList lists the vault's names, sorted, without values.
func (v *View) SecretList() []*fold.Secret {
	m := v.State.Secrets(v.Snapshot)
	out := make([]*fold.Secret, 0, len(m))
	for _, n := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[n])
	}
	return out
}

// secretArgs is what data.args authenticates for SecretPut: the value's hash, never the value.
type secretArgs struct {
	Name       string   `json:"name"`
	Recipients []string `json:"recipients"`
	Value      string   `json:"value_sha256"`
}

// secretArgsMAC is data.args of an idempotent secret.put: "hmac-sha256:" + hex of
// HMAC-SHA256 over the RFC 8785 form of a, keyed with SHA-256("ferry secret.put args
// v1" || the author's ed25519 seed). An unkeyed hash of the value would let anyone who
// reads the ledger test guesses (10,000 tries recover a 4-digit PIN); only the author's
// own key can recompute this one, which is all a replay check needs (idempotency keys
// are per writer). ADR 0009 §2. Errors: locked when the author's key cannot be read.
func (s *Session) secretArgsMAC(a secretArgs) (string, error) {
	priv, err := s.privateKey()
	if err != nil {
		return "", err
	}
	c, err := ledger.Canonical(a)
	if err != nil {
		return "", fmt.Errorf("encoding the secret's arguments: %w", err)
	}
	k := sha256.Sum256(append([]byte("ferry secret.put args v1\x00"), priv.Seed()...))
	m := hmac.New(sha256.New, k[:])
	m.Write(c)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil)), nil
}

// SecretPut encrypts value to the named agents and the author, and records it
// (secret.put, member level). to names seated agents or "master"; the author is added
// when missing. Errors: invalid for a bad name (portable, ≤ MaxSecretName characters),
// an empty value or one over MaxSecretValue bytes, no recipient, or a recipient that is
// not seated or was retired; not_found for a name that never joined; denied below
// member level, or when name belongs to another writer (its first author; master may
// replace any name); conflict for a key used with other arguments. A replayed key writes
// nothing and returns the first put.
func (s *Session) SecretPut(name string, to []string, value []byte, key string) (*fold.Secret, error) {
	switch {
	case !fold.ValidSecretName(name):
		return nil, errs.Errorf(errs.Invalid, "name it with a-z, 0-9 and '-', at most 63 characters (e.g. db-password)", "bad secret name %s", secretguard.Quote(name))
	case len(value) == 0:
		return nil, errs.Errorf(errs.Invalid, "pass the value on stdin or with --from-file PATH", "empty secret value")
	case len(value) > MaxSecretValue:
		return nil, capError("secret value", len(value), MaxSecretValue, unitBytes, "the vault keeps credentials, not files")
	case len(to) == 0:
		return nil, errs.Errorf(errs.Invalid, "pass --to AGENT (repeatable) naming who may read it", "a secret needs at least one recipient")
	}
	recips := []string{s.Name}
	for _, n := range to {
		if !slices.Contains(recips, n) {
			recips = append(recips, n)
		}
	}
	slices.Sort(recips)
	var args string
	if key != "" {
		sum := sha256.Sum256(value)
		a, err := s.secretArgsMAC(secretArgs{Name: name, Recipients: recips, Value: hex.EncodeToString(sum[:])})
		if err != nil {
			return nil, err
		}
		args = a
	}
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if _, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			return nil, nil, err // a replay: the first put's ref is name
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeSecretPut); err != nil {
			return nil, nil, err
		}
		if cur := v.State.Secrets(v.Snapshot)[name]; cur != nil && cur.Owner != s.Name && s.Name != fold.MasterWriter {
			return nil, nil, errs.Errorf(errs.Denied, "pick another name, or ask "+cur.Owner+" (or the owner, as master) to put it again",
				"secret %s belongs to %s, who put it first: only %s or master may replace it", name, cur.Owner, cur.Owner)
		}
		var rs []age.Recipient
		for _, n := range recips {
			pub, err := s.recipientKey(v.State, n)
			if err != nil {
				return nil, nil, err
			}
			r, err := ageRecipient(pub)
			if err != nil {
				return nil, nil, err
			}
			rs = append(rs, r)
		}
		var buf bytes.Buffer
		w, err := age.Encrypt(&buf, rs...)
		if err != nil {
			return nil, nil, fmt.Errorf("encrypting: %w", err)
		}
		if _, err := w.Write(value); err != nil {
			return nil, nil, fmt.Errorf("encrypting: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, nil, fmt.Errorf("encrypting: %w", err)
		}
		id = fold.NewID(fold.PrefixSecret)
		h := sha256.Sum256(buf.Bytes())
		d := fold.SecretData{Object: "sha256:" + hex.EncodeToString(h[:]), ID: id, Recipients: recips}
		if key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: fold.TypeSecretPut, Ref: name, Data: mustJSON(d), Idem: key},
			[]pendingObject{{path: vaultPath(s.Root, name, id), data: buf.Bytes(), sealed: true}}, nil
	})
	if err != nil {
		return nil, err
	}
	if e.Type == "" { // a replay: the first put
		v2, err := s.Load()
		if err != nil {
			return nil, err
		}
		v = v2
	} else {
		v = s.viewWithEntry(v, e)
	}
	sec := v.State.Secrets(v.Snapshot)[name]
	if sec == nil || (e.Type != "" && sec.ID != id) {
		return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify`", "secret %s is not in the state after writing it", name)
	}
	return sec, nil
}

// recipientKey is the ed25519 key the roster binds to name: the master key for
// "master", else the seated key of an agent that is seated and not retired.
func (s *Session) recipientKey(st *fold.State, name string) (ed25519.PublicKey, error) {
	if name == fold.MasterWriter {
		return s.MasterKey, nil
	}
	a := st.Agents[name]
	switch {
	case !fold.ValidName(name):
		return nil, errs.Errorf(errs.Invalid, "name agents as `ferry agents` lists them", "bad recipient %s", secretguard.Quote(name))
	case a == nil || (a.JoinKey == "" && !a.Seated && !a.Retired):
		return nil, errs.Errorf(errs.NotFound, "see `ferry agents` for the agents of this channel", "no agent %s has joined this channel", name)
	case a.Retired:
		return nil, errs.Errorf(errs.Invalid, "leave it out: a retired agent must not receive new secrets", "%s is retired", name)
	case !a.Seated || a.Key == "":
		return nil, errs.Errorf(errs.Invalid, "ask the owner to seat it first (`ferry grant "+name+"`)", "%s is not seated (or was revoked): it has no key the owner vouches for", name)
	}
	return ledger.ParseKey(a.Key)
}

func ageRecipient(pub ed25519.PublicKey) (age.Recipient, error) {
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("building the recipient: %w", err)
	}
	return agessh.NewEd25519Recipient(sp)
}

// privateKeyer is a Signer that can hand over its private key (ledger.KeySigner can).
type privateKeyer interface{ PrivateKey() ed25519.PrivateKey }

func (s *Session) privateKey() (ed25519.PrivateKey, error) {
	switch k := s.Signer.(type) {
	case ledger.KeySigner:
		return ed25519.PrivateKey(k), nil
	case privateKeyer:
		return k.PrivateKey(), nil
	}
	return nil, errs.Errorf(errs.Locked, "unlock the key first", "%s's key cannot decrypt here", s.Name)
}

// SecretGet decrypts the newest value of name for s, with s's own key only. Errors:
// not_found for a name never put; denied when s is not a recipient, or when its key
// no longer opens the value (it was encrypted to a key since replaced); retry_needed
// while the object has not arrived or is still empty; invalid when the object's bytes differ from the
// hash its entry names (edited or damaged: never decrypted).
func (s *Session) SecretGet(name string) ([]byte, *fold.Secret, error) {
	v, err := s.Load()
	if err != nil {
		return nil, nil, err
	}
	sec := v.State.Secrets(v.Snapshot)[name]
	if sec == nil {
		return nil, nil, errs.Errorf(errs.NotFound, "`ferry secret list` shows the names", "no secret %s in the vault", secretguard.Quote(name))
	}
	if !slices.Contains(sec.Recipients, s.Name) {
		return nil, nil, errs.Errorf(errs.Denied, "ask "+sec.Author+" to put it again with --to "+s.Name,
			"secret %s is not encrypted to %s (recipients: %v)", name, s.Name, sec.Recipients)
	}
	path := vaultPath(s.Root, name, sec.ID)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, errs.Errorf(errs.RetryNeeded, "wait for the sync tool to deliver it, then run the command again",
			"secret %s (%s) has not arrived on this machine yet", name, sec.ID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) == 0 { // a sync tool creates the file before it fills it (ADR 0009 §2)
		return nil, nil, errs.Errorf(errs.RetryNeeded, "wait for the sync tool to finish the file, then run the command again",
			"secret %s (%s) has only partly arrived on this machine", name, sec.ID)
	}
	if h := sha256.Sum256(b); "sha256:"+hex.EncodeToString(h[:]) != sec.Object {
		return nil, nil, errs.Errorf(errs.Invalid, "run `ferry doctor`; ask "+sec.Author+" to put it again",
			"vault object %s differs from the hash its secret.put names (edited or damaged): not decrypted", sec.ID)
	}
	priv, err := s.privateKey()
	if err != nil {
		return nil, nil, err
	}
	id, err := agessh.NewEd25519Identity(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("building the identity: %w", err)
	}
	r, err := age.Decrypt(bytes.NewReader(b), id)
	if err != nil {
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, nil, errs.Errorf(errs.Denied, "ask "+sec.Author+" to put it again: it was encrypted to a key of "+s.Name+" since replaced",
				"this machine's key of %s does not open secret %s", s.Name, name)
		}
		return nil, nil, errs.Errorf(errs.Invalid, "run `ferry doctor`; ask "+sec.Author+" to put it again", "secret %s does not decrypt: %v", name, err)
	}
	out, err := io.ReadAll(io.LimitReader(r, MaxSecretValue+1))
	if err != nil {
		return nil, nil, errs.Errorf(errs.Invalid, "ask "+sec.Author+" to put it again", "secret %s does not decrypt: %v", name, err)
	}
	if len(out) > MaxSecretValue {
		return nil, nil, errs.Errorf(errs.Invalid, "ask "+sec.Author+" to put it again", "secret %s is larger than %d bytes", name, MaxSecretValue)
	}
	return out, sec, nil
}
