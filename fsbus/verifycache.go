package fsbus

import (
	"crypto/ed25519"
	"sync"

	"github.com/ferryhq/ferry/ledger"
)

// sigCache remembers, for this process, which (entry hash, key) pairs verified, so a
// command that folds twice (before and after its write) checks each signature once.
// Entry hashes cover the signature, so a cached result can never vouch for other bytes.
var sigCache sync.Map // string(hash + key) → bool

// verifyEntry is e.VerifySig with the per-process cache.
func verifyEntry(e *ledger.Entry, pub ed25519.PublicKey, project string) bool {
	k := e.Hash() + "\x00" + string(pub) + "\x00" + project
	if ok, hit := sigCache.Load(k); hit {
		return ok.(bool)
	}
	ok := e.VerifySig(pub, project) == nil
	sigCache.Store(k, ok)
	return ok
}
