package fsbus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ferryhq/ferry/ledger"
)

// Object kinds and their directories (DESIGN §2 layout).
var objectDirs = map[string]string{
	PrefixOrder:   "orders",
	PrefixMessage: "messages",
	PrefixAsk:     "asks",
	PrefixResult:  "results",
}

// ObjectPath returns the file of object id in the channel rooted at root. Hand-ins live
// under handins/<writer>/.
func ObjectPath(root, writer, id string) string {
	if len(id) > 2 && id[:2] == PrefixHandin {
		return filepath.Join(root, "handins", writer, id+".json")
	}
	return filepath.Join(root, objectDirs[id[:2]], id+".json")
}

// Envelope is the common head of every object: v, id, author, device, sig
// (DESIGN §2 "Objects"). Kind-specific fields sit beside them.
type Envelope struct {
	V      int    `json:"v"`
	ID     string `json:"id"`
	Author string `json:"author"`
	Device string `json:"device"`
	Sig    string `json:"sig,omitempty"`
}

// OrderObject is orders/<id>.json: an order's immutable body, signed by its author.
type OrderObject struct {
	Envelope
	Title    string   `json:"title"`
	Body     string   `json:"body,omitempty"`
	Labels   []string `json:"labels,omitempty"`
	Priority string   `json:"priority,omitempty"`
	Deps     []string `json:"deps,omitempty"`
	// Contract members (issue 6) sit beside the others, each optional.
	Contract
}

// ResultObject is results/<id>.json: a submitted result — a reference to the work
// (commit, branch, hand-in id) and a short summary; never the work itself.
type ResultObject struct {
	Envelope
	Order     string `json:"order"`
	Reference string `json:"reference"`
	Summary   string `json:"summary,omitempty"`
	// Output is the structured result (issue 6 "Result schema"): one JSON value of at
	// most MaxOutput bytes, validated against the order's schema when it has one.
	Output json.RawMessage `json:"output,omitempty"`
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

// ErrObjectMissing is returned by readObject when the file has not arrived (yet).
var ErrObjectMissing = errors.New("fsbus: object not arrived")

// readObject reads an object file and returns its canonical form and hash. A BOM,
// CRLF or re-indentation changes neither (DESIGN §2 rule 9). It returns
// ErrObjectMissing when the file does not exist and an error for unparseable JSON.
func readObject(path string) (canonical []byte, hash string, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", ErrObjectMissing
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", path, err)
	}
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	c, err := ledger.CanonicalJSON(bytes.TrimSpace(raw))
	if err != nil {
		return nil, "", fmt.Errorf("parsing %s: %w", path, err)
	}
	return c, ledger.HashBytes(c), nil
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
