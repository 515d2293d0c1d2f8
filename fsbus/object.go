package fsbus

import (
	"crypto/ed25519"
	"encoding/json"

	"github.com/ferryhq/ferry/ledger"
)

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
