// Package secrettest makes credential-shaped text for tests: realistic token bodies,
// deterministic per seed, without committing anything that looks like a live
// credential.
package secrettest

import "math/rand/v2"

// Alphabets of the token bodies providers use.
const (
	Alnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	Upnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	B64URL = Alnum + "-_"
	Hex    = "0123456789abcdef"
)

// Token returns n deterministic pseudo-random characters of alphabet.
func Token(seed uint64, n int, alphabet string) string {
	r := rand.New(rand.NewPCG(seed, seed*7+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}
