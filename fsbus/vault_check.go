package fsbus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/ledger"
)

// vaultFiles checks the file of every counted secret.put against the hash its entry
// names (ADR 0009 §2), for `ferry ledger verify` and `ferry doctor`: a file whose bytes
// differ is a problem ("edited or damaged": secret get refuses to decrypt it); an empty
// one is still arriving (a sync tool creates the file before it fills it); a missing
// one is not listed (it has not arrived: secret get answers retry_needed). Paths are
// relative to the channel root.
func (c *Channel) vaultFiles(snap *ledger.Snapshot, st *fold.State) (problems, arriving []string) {
	for i := range snap.Entries {
		e := &snap.Entries[i]
		if e.Type != fold.TypeSecretPut || !st.Counts(e.Hash()) || !fold.ValidSecretName(e.Ref) {
			continue
		}
		var d fold.SecretData
		if json.Unmarshal(e.Data, &d) != nil || !fold.SecretIDRe.MatchString(d.ID) || d.Object == "" {
			continue
		}
		p := vaultPath(c.Root, e.Ref, d.ID)
		b, err := os.ReadFile(p)
		switch {
		case err != nil:
			continue
		case len(b) == 0:
			arriving = append(arriving, verify.Rel(c.Root, p))
		default:
			if h := sha256.Sum256(b); "sha256:"+hex.EncodeToString(h[:]) != d.Object {
				problems = append(problems, verify.Rel(c.Root, p)+": differs from the hash its secret.put names (edited or damaged): secret get will not decrypt it")
			}
		}
	}
	return problems, arriving
}
