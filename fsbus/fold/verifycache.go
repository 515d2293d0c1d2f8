package fold

import (
	"crypto/ed25519"
	"sync"

	"github.com/ferryhq/ferry/ledger"
)

// SigCache remembers, for this process, which (entry hash, key) pairs verified, so a
// command that folds twice (before and after its write) checks each signature once.
// Entry hashes cover the signature, so a cached result can never vouch for other bytes.
// The local index (index.go) saves the good results and fills the cache from them in
// the next process.
var SigCache sync.Map // sigKey → bool

// newSigs holds, per project, the good signatures checked in this process and not yet
// saved to a local index (takeSigs).
var newSigs struct {
	sync.Mutex
	m map[string][]SigRec
}

// sigKey is one signature check: the entry's hash, the key, the project.
type sigKey struct{ hash, pub, project string }

// VerifyEntry is e.VerifySig with the per-process cache.
func VerifyEntry(e *ledger.Entry, pub ed25519.PublicKey, project string) bool {
	k := sigKey{e.Hash(), string(pub), project}
	if ok, hit := SigCache.Load(k); hit {
		return ok.(bool)
	}
	ok := e.VerifySig(pub, project) == nil
	if _, loaded := SigCache.LoadOrStore(k, ok); ok && !loaded {
		newSigs.Lock()
		if newSigs.m == nil {
			newSigs.m = map[string][]SigRec{}
		}
		newSigs.m[project] = append(newSigs.m[project], SigRec{Hash: e.Hash(), Pub: pub})
		newSigs.Unlock()
	}
	return ok
}

// RememberSig puts a good signature read from the local index into the cache.
func RememberSig(hash string, pub ed25519.PublicKey, project string) {
	SigCache.Store(sigKey{hash, string(pub), project}, true)
}

// TakeSigs returns and forgets the good signatures of project checked since the last
// call.
func TakeSigs(project string) []SigRec {
	newSigs.Lock()
	defer newSigs.Unlock()
	out := newSigs.m[project]
	delete(newSigs.m, project)
	return out
}

// AllSigs returns every good signature of project in the cache.
func AllSigs(project string) []SigRec {
	var out []SigRec
	SigCache.Range(func(k, v any) bool {
		if key := k.(sigKey); v.(bool) && key.project == project {
			out = append(out, SigRec{Hash: key.hash, Pub: ed25519.PublicKey(key.pub)})
		}
		return true
	})
	return out
}

// SigRec is one good signature: the entry hash and the key it verified under.
type SigRec struct {
	Hash string            `json:"-"`
	Pub  ed25519.PublicKey `json:"-"`
}
