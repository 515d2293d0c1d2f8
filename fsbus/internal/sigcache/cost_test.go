package sigcache

import (
	"crypto/ed25519"
	"fmt"
	"testing"
)

// The two costs fsbus weighs when it decides whether to load the local index's saved
// signatures before checking a few entries (fsbus/session.go verifyPerSaved): one
// ed25519 verification of a ledger line, and putting one saved signature in the cache.

func BenchmarkVerifyLine(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 300) // a typical canonical entry
	sig := ed25519.Sign(priv, msg)
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("signature does not verify")
		}
	}
}

func BenchmarkRemember(b *testing.B) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	hashes := make([]string, 4096)
	for i := range hashes {
		hashes[i] = fmt.Sprintf("sha256:%064x", i)
	}
	i := 0
	for b.Loop() {
		Remember(hashes[i%len(hashes)], pub, "p")
		i++
	}
}
