package fold

import (
	"crypto/ed25519"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/ledger"
)

// SigCache remembers, for this process, which (entry hash, key) pairs verified, so a
// command that folds twice (before and after its write) checks each signature once.
// Entry hashes cover the signature, so a cached result can never vouch for other bytes.
// The local index (index.go) saves the good results and fills the cache from them in
// the next process.
var SigCache sync.Map // string(hash + key) → bool

// newSigs holds, per project, the good signatures checked in this process and not yet
// saved to a local index (takeSigs).
var newSigs struct {
	sync.Mutex
	m map[string][]SigRec
}

func sigKey(hash string, pub ed25519.PublicKey, project string) string {
	return hash + "\x00" + string(pub) + "\x00" + project
}

// VerifyEntry is e.VerifySig with the per-process cache.
func VerifyEntry(e *ledger.Entry, pub ed25519.PublicKey, project string) bool {
	k := sigKey(e.Hash(), pub, project)
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
	SigCache.Store(sigKey(hash, pub, project), true)
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
	suffix := "\x00" + project
	SigCache.Range(func(k, v any) bool {
		s := k.(string)
		if ok := v.(bool); !ok || !strings.HasSuffix(s, suffix) {
			return true
		}
		s = strings.TrimSuffix(s, suffix)
		if len(s) < ed25519.PublicKeySize+1 || s[len(s)-ed25519.PublicKeySize-1] != 0 {
			return true
		}
		out = append(out, SigRec{Hash: s[:len(s)-ed25519.PublicKeySize-1], Pub: ed25519.PublicKey(s[len(s)-ed25519.PublicKeySize:])})
		return true
	})
	return out
}

// SigRec is one good signature: the entry hash and the key it verified under.
type SigRec struct {
	Hash string            `json:"-"`
	Pub  ed25519.PublicKey `json:"-"`
}
