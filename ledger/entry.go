package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gowebpki/jcs"
)

// Version is the entry format version written in every entry's "v" field.
const Version = 1

// Domain prefixes of signed messages (docs/format.md §5). The project id and
// a newline follow the prefix, then the canonical form without "sig".
const (
	EntryDomain  = "ferry-entry-v1"
	ObjectDomain = "ferry-object-v1"
)

// Entry is one line of a segment file ledger/<writer>/<device>.jsonl
// (docs/design.md §2 "Ledger entry"). Optional fields are omitted, never null.
type Entry struct {
	V      int             `json:"v"`
	Writer string          `json:"writer"`
	Device string          `json:"device"`
	Seq    uint64          `json:"seq"`
	HLC    string          `json:"hlc"`
	Prev   string          `json:"prev,omitempty"`
	Type   string          `json:"type"`
	Ref    string          `json:"ref,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	Idem   string          `json:"idem,omitempty"`
	Sig    string          `json:"sig,omitempty"`

	// raw is the RFC 8785 form of the line as read, unknown fields included, so hashes
	// and signatures of entries written by newer binaries still verify (docs/design.md §2 rule 9).
	raw []byte
	// hash caches Hash once computed from raw.
	hash string
	// known marks a raw that parseCanonical built from the known fields alone, every
	// string printable ASCII without '"' or '\\': the form without sig is then raw with
	// its sig member cut out (SigningMessage), no canonicalisation needed.
	known bool
}

// Errors returned by the encoding helpers.
var (
	// ErrBadSignature is returned by VerifySig when a signature does not verify.
	ErrBadSignature = errors.New("ledger: bad signature")
	// ErrMalformed is returned by ParseLine for a line that is not a valid entry.
	ErrMalformed = errors.New("ledger: malformed entry")
)

// Canonical returns the RFC 8785 canonical form of any JSON-marshalable value.
// It returns an error when v does not marshal or the JSON is not I-JSON (RFC 7493).
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshaling: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing: %w", err)
	}
	return out, nil
}

// CanonicalJSON is Canonical for raw JSON bytes.
func CanonicalJSON(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing: %w", err)
	}
	return out, nil
}

// HashBytes returns "sha256:" + lowercase hex of sha256(b).
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Canonical returns the entry's RFC 8785 form including sig (the form that is
// written as a line and hashed).
func (e *Entry) Canonical() ([]byte, error) {
	if e.raw != nil {
		return e.raw, nil
	}
	return Canonical(e)
}

// Hash returns the entry hash: "sha256:" + hex of the canonical form including sig
// (docs/design.md §2 "Ledger entry"). It is the value later entries name in prev and basis.
func (e *Entry) Hash() string {
	if e.hash != "" {
		return e.hash
	}
	b, err := e.Canonical()
	if err != nil {
		// An Entry built by this package always marshals; Data is validated on parse.
		return "sha256:invalid"
	}
	h := HashBytes(b)
	if e.raw != nil {
		e.hash = h
	}
	return h
}

// SigningMessage returns the bytes an entry's signature covers:
// "ferry-entry-v1\n" + project + "\n" + canonical form without sig.
func (e *Entry) SigningMessage(project string) ([]byte, error) {
	var body []byte
	if e.known && e.Sig != "" {
		// raw is {…,"seq":N,"sig":"…","type":…}: only type, v and writer follow sig,
		// and no string holds a quote, so the member is found exactly once.
		member := `,"sig":"` + e.Sig + `"`
		if i := bytes.Index(e.raw, []byte(member)); i > 0 {
			body = make([]byte, 0, len(e.raw)-len(member))
			body = append(append(body, e.raw[:i]...), e.raw[i+len(member):]...)
			return DomainMessage(EntryDomain, project, body), nil
		}
	}
	if e.raw != nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(e.raw, &m); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		delete(m, "sig")
		b, err := Canonical(m)
		if err != nil {
			return nil, err
		}
		body = b
	} else {
		c := *e
		c.Sig = ""
		b, err := Canonical(&c)
		if err != nil {
			return nil, err
		}
		body = b
	}
	return DomainMessage(EntryDomain, project, body), nil
}

// DomainMessage builds prefix + "\n" + project + "\n" + canonical.
func DomainMessage(domain, project string, canonical []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(domain) + len(project) + 2 + len(canonical))
	b.WriteString(domain)
	b.WriteByte('\n')
	b.WriteString(project)
	b.WriteByte('\n')
	b.Write(canonical)
	return b.Bytes()
}

// Signer signs a domain-prefixed message with one ed25519 key. The ledger never sees
// private keys: callers pass a Signer to Append.
type Signer interface {
	// Sign returns the 64-byte ed25519 signature (RFC 8032) of msg.
	Sign(msg []byte) ([]byte, error)
	// Public returns the key's public half.
	Public() ed25519.PublicKey
}

// KeySigner is a Signer over an in-memory ed25519 private key.
type KeySigner ed25519.PrivateKey

// Sign implements Signer.
func (k KeySigner) Sign(msg []byte) ([]byte, error) {
	return ed25519.Sign(ed25519.PrivateKey(k), msg), nil
}

// Public implements Signer.
func (k KeySigner) Public() ed25519.PublicKey {
	return ed25519.PrivateKey(k).Public().(ed25519.PublicKey)
}

// FormatSig renders a raw signature as "ed25519:" + base64url without padding.
func FormatSig(sig []byte) string {
	return "ed25519:" + base64.RawURLEncoding.EncodeToString(sig)
}

// ParseSig parses "ed25519:<base64url>" into 64 raw bytes.
func ParseSig(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, "ed25519:")
	if !ok {
		return nil, fmt.Errorf("%w: signature lacks the ed25519: prefix", ErrBadSignature)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: signature is not 64 bytes of base64url", ErrBadSignature)
	}
	return raw, nil
}

// FormatKey renders a public key as "ed25519:" + base64url without padding.
func FormatKey(pub ed25519.PublicKey) string {
	return "ed25519:" + base64.RawURLEncoding.EncodeToString(pub)
}

// ParseKey parses a key written by FormatKey.
func ParseKey(s string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(s, "ed25519:")
	if !ok {
		return nil, fmt.Errorf("ledger: public key %q lacks the ed25519: prefix", s)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("ledger: public key %q is not 32 bytes of base64url", s)
	}
	return ed25519.PublicKey(raw), nil
}

// SignDomain signs canonical with the domain prefix and project, returning the sig text.
func SignDomain(s Signer, domain, project string, canonical []byte) (string, error) {
	raw, err := s.Sign(DomainMessage(domain, project, canonical))
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	return FormatSig(raw), nil
}

// VerifyDomain checks sig over the domain-prefixed canonical bytes.
// It returns ErrBadSignature (wrapped) when the signature is malformed or wrong.
func VerifyDomain(pub ed25519.PublicKey, domain, project string, canonical []byte, sig string) error {
	raw, err := ParseSig(sig)
	if err != nil {
		return err
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, DomainMessage(domain, project, canonical), raw) {
		return ErrBadSignature
	}
	return nil
}

// Sign fills e.Sig with a signature by s over e's signing message for project.
func (e *Entry) Sign(s Signer, project string) error {
	msg, err := e.SigningMessage(project)
	if err != nil {
		return err
	}
	raw, err := s.Sign(msg)
	if err != nil {
		return fmt.Errorf("signing entry: %w", err)
	}
	e.Sig = FormatSig(raw)
	e.raw, e.hash = nil, ""
	return nil
}

// VerifySig checks e.Sig against pub for project. It returns ErrBadSignature
// (wrapped) when the signature is missing, malformed, or does not verify.
func (e *Entry) VerifySig(pub ed25519.PublicKey, project string) error {
	if e.Sig == "" {
		return fmt.Errorf("%w: unsigned", ErrBadSignature)
	}
	msg, err := e.SigningMessage(project)
	if err != nil {
		return err
	}
	raw, err := ParseSig(e.Sig)
	if err != nil {
		return err
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, msg, raw) {
		return ErrBadSignature
	}
	return nil
}

// ParseLine decodes one segment line (without its trailing newline). It accepts any
// JSON formatting (verification is over the canonical form, docs/design.md §2 rule 9), ignores
// unknown fields, and returns ErrMalformed (wrapped) when required fields are missing
// or of the wrong type.
func ParseLine(line []byte) (Entry, error) {
	line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")))
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := checkKeyCase(line); err != nil {
		return Entry{}, err
	}
	switch {
	case e.V < 1:
		return Entry{}, fmt.Errorf("%w: missing v", ErrMalformed)
	case e.Writer == "" || e.Device == "":
		return Entry{}, fmt.Errorf("%w: missing writer or device", ErrMalformed)
	case e.Seq == 0:
		return Entry{}, fmt.Errorf("%w: missing seq", ErrMalformed)
	case e.Type == "":
		return Entry{}, fmt.Errorf("%w: missing type", ErrMalformed)
	case !ValidHLC(e.HLC):
		return Entry{}, fmt.Errorf("%w: bad hlc %q", ErrMalformed, e.HLC)
	}
	if len(e.Data) > 0 {
		if bytes.Equal(bytes.TrimSpace(e.Data), []byte("null")) {
			e.Data = nil
		} else if c, err := CanonicalJSON(e.Data); err != nil {
			return Entry{}, fmt.Errorf("%w: data: %v", ErrMalformed, err)
		} else {
			e.Data = c
		}
	}
	raw, err := CanonicalJSON(line)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	e.raw = raw
	e.hash = HashBytes(raw)
	return e, nil
}

// entryKeys are the JSON names of Entry's fields.
var entryKeys = [...]string{"v", "writer", "device", "seq", "hlc", "prev", "type", "ref", "data", "idem", "sig"}

// checkKeyCase returns ErrMalformed (wrapped) when a top-level key of line equals a
// field name only when case is ignored ("Writer"). encoding/json fills the field from
// such a key too, last one wins, so the entry's meaning would hang on key order — which
// the canonical form, and so hash and signature, ignore (docs/design.md §2 rule 9).
func checkKeyCase(line []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	for k := range m {
		for _, f := range entryKeys {
			if k != f && strings.EqualFold(k, f) {
				return fmt.Errorf("%w: key %q differs from %q only in case", ErrMalformed, k, f)
			}
		}
	}
	return nil
}
