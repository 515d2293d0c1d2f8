package fsbus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// Object kinds and their directories (docs/design.md §2 layout).
var objectDirs = map[string]string{
	fold.PrefixOrder:   "orders",
	fold.PrefixMessage: "messages",
	fold.PrefixAsk:     "asks",
	fold.PrefixResult:  "results",
}

// ObjectPath returns the file of object id in the channel rooted at root. Hand-ins live
// under handins/<writer>/.
func ObjectPath(root, writer, id string) string {
	if len(id) > 2 && id[:2] == fold.PrefixHandin {
		return filepath.Join(root, "handins", writer, id+".json")
	}
	return filepath.Join(root, objectDirs[id[:2]], id+".json")
}

// sealObject signs obj (a struct embedding Envelope, passed as a pointer whose Sig is
// empty) and returns its file bytes (canonical JSON + "\n") and object hash
// ("sha256:" of the canonical form including sig).
func sealObject(obj any, setSig func(string), s ledger.Signer, project string) (data []byte, hash string, err error) {
	body, err := ledger.Canonical(obj)
	if err != nil {
		return nil, "", err
	}
	sig, err := ledger.SignDomain(s, ledger.ObjectDomain, project, body)
	if err != nil {
		return nil, "", err
	}
	setSig(sig)
	full, err := ledger.Canonical(obj)
	if err != nil {
		return nil, "", err
	}
	return append(full, '\n'), ledger.HashBytes(full), nil
}

// readObject reads an object file and returns its canonical form and hash. A BOM,
// CRLF or re-indentation changes neither (docs/design.md §2 rule 9). It returns
// ErrObjectMissing when the file does not exist, ErrObjectTorn (wrapped, naming the
// file) when it has not fully arrived, and an error for other unparseable JSON.
func readObject(path string) (canonical []byte, hash string, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fold.ErrObjectMissing
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", path, err)
	}
	return parseObject(path, raw)
}

// parseObject is readObject on the bytes of the file at path (named in errors only).
func parseObject(path string, raw []byte) (canonical []byte, hash string, err error) {
	raw = bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")))
	if objectTorn(raw) {
		return nil, "", fmt.Errorf("reading %s: %w", path, fold.ErrObjectTorn)
	}
	c, err := ledger.CanonicalJSON(raw)
	if err != nil {
		return nil, "", fmt.Errorf("parsing %s: %w", path, err)
	}
	return c, ledger.HashBytes(c), nil
}

// objectTorn reports whether raw (an object file without BOM and surrounding space)
// has only partly arrived: empty, holding a NUL byte, or a JSON text cut short. A
// complete but wrong file (a syntax error before the end, trailing garbage) is not torn.
func objectTorn(raw []byte) bool {
	if len(raw) == 0 || bytes.IndexByte(raw, 0) >= 0 {
		return true
	}
	if json.Valid(raw) {
		return false
	}
	var v any
	err := json.NewDecoder(bytes.NewReader(raw)).Decode(&v)
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// verifyObjectSig checks the object's own signature against pub.
func verifyObjectSig(canonical []byte, pub ed25519.PublicKey, project string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &m); err != nil {
		return err
	}
	var sig string
	if err := json.Unmarshal(m["sig"], &sig); err != nil {
		return ledger.ErrBadSignature
	}
	delete(m, "sig")
	body, err := ledger.Canonical(m)
	if err != nil {
		return err
	}
	return ledger.VerifyDomain(pub, ledger.ObjectDomain, project, body, sig)
}
