package fsbus

import (
	"crypto/ed25519"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/ledger"
)

// sigCache remembers, for this process, which (entry hash, key) pairs verified, so a
// command that folds twice (before and after its write) checks each signature once.
// Entry hashes cover the signature, so a cached result can never vouch for other bytes.
// The local index (index.go) saves the good results and fills the cache from them in
// the next process.
var sigCache sync.Map // string(hash + key) → bool

// newSigs holds, per project, the good signatures checked in this process and not yet
// saved to a local index (takeSigs).
var newSigs struct {
	sync.Mutex
	m map[string][]sigRec
}

func sigKey(hash string, pub ed25519.PublicKey, project string) string {
	return hash + "\x00" + string(pub) + "\x00" + project
}

// verifyEntry is e.VerifySig with the per-process cache.
func verifyEntry(e *ledger.Entry, pub ed25519.PublicKey, project string) bool {
	k := sigKey(e.Hash(), pub, project)
	if ok, hit := sigCache.Load(k); hit {
		return ok.(bool)
	}
	ok := e.VerifySig(pub, project) == nil
	if _, loaded := sigCache.LoadOrStore(k, ok); ok && !loaded {
		newSigs.Lock()
		if newSigs.m == nil {
			newSigs.m = map[string][]sigRec{}
		}
		newSigs.m[project] = append(newSigs.m[project], sigRec{hash: e.Hash(), pub: pub})
		newSigs.Unlock()
	}
	return ok
}

// rememberSig puts a good signature read from the local index into the cache.
func rememberSig(hash string, pub ed25519.PublicKey, project string) {
	sigCache.Store(sigKey(hash, pub, project), true)
}

// takeSigs returns and forgets the good signatures of project checked since the last
// call.
func takeSigs(project string) []sigRec {
	newSigs.Lock()
	defer newSigs.Unlock()
	out := newSigs.m[project]
	delete(newSigs.m, project)
	return out
}

// allSigs returns every good signature of project in the cache.
func allSigs(project string) []sigRec {
	var out []sigRec
	suffix := "\x00" + project
	sigCache.Range(func(k, v any) bool {
		s := k.(string)
		if ok := v.(bool); !ok || !strings.HasSuffix(s, suffix) {
			return true
		}
		s = strings.TrimSuffix(s, suffix)
		if len(s) < ed25519.PublicKeySize+1 || s[len(s)-ed25519.PublicKeySize-1] != 0 {
			return true
		}
		out = append(out, sigRec{hash: s[:len(s)-ed25519.PublicKeySize-1], pub: ed25519.PublicKey(s[len(s)-ed25519.PublicKeySize:])})
		return true
	})
	return out
}
