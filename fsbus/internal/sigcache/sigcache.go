// Package sigcache is the per-process cache of signature checks the fold and the local
// index share: an entry whose signature verified once against a key is not verified
// again in this process, and the good results the index saves are put back in the next
// one. It is internal to fsbus, so nothing outside the façade can vouch for an entry.
package sigcache

import (
	"crypto/ed25519"
	"sync"

	"github.com/ferryhq/ferry/ledger"
)

// cache remembers, for this process, which (entry hash, key) pairs verified, so a
// command that folds twice (before and after its write) checks each signature once.
// Entry hashes cover the signature, so a cached result can never vouch for other bytes.
// The local index (fsbus/index.go) saves the good results and fills the cache from them in
// the next process.
var cache sync.Map // sigKey → bool

// newSigs holds, per project, the good signatures checked in this process and not yet
// saved to a local index (Take).
var newSigs struct {
	sync.Mutex
	m map[string][]Rec
}

// sigKey is one signature check: the entry's hash, the key, the project.
type sigKey struct{ hash, pub, project string }

// Verify is e.VerifySig with the per-process cache.
func Verify(e *ledger.Entry, pub ed25519.PublicKey, project string) bool {
	k := sigKey{e.Hash(), string(pub), project}
	if ok, hit := cache.Load(k); hit {
		return ok.(bool)
	}
	ok := e.VerifySig(pub, project) == nil
	if _, loaded := cache.LoadOrStore(k, ok); ok && !loaded {
		newSigs.Lock()
		if newSigs.m == nil {
			newSigs.m = map[string][]Rec{}
		}
		newSigs.m[project] = append(newSigs.m[project], Rec{Hash: e.Hash(), Pub: pub})
		newSigs.Unlock()
	}
	return ok
}

// Remember puts a good signature read from the local index into the cache.
func Remember(hash string, pub ed25519.PublicKey, project string) {
	cache.Store(sigKey{hash, string(pub), project}, true)
}

// Take returns and forgets the good signatures of project checked since the last
// call.
func Take(project string) []Rec {
	newSigs.Lock()
	defer newSigs.Unlock()
	out := newSigs.m[project]
	delete(newSigs.m, project)
	return out
}

// All returns every good signature of project in the cache.
func All(project string) []Rec {
	var out []Rec
	cache.Range(func(k, v any) bool {
		if key := k.(sigKey); v.(bool) && key.project == project {
			out = append(out, Rec{Hash: key.hash, Pub: ed25519.PublicKey(key.pub)})
		}
		return true
	})
	return out
}

// SigRec is one good signature: the entry hash and the key it verified under.
type Rec struct {
	Hash string            `json:"-"`
	Pub  ed25519.PublicKey `json:"-"`
}

// Clear empties the cache, as a new process starts with it (tests and benchmarks).
func Clear() { cache.Clear() }
