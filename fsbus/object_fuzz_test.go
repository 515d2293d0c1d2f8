package fsbus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/ledger"
)

// objectSeeds are the signed object files of the golden vectors channel: the seeds of
// FuzzReadObject, verified against the vectors' keys for project "vectors".
const objectSeeds = "../fixtures/vectors/ferry/channel"

// vectorKeys returns the vectors' public keys by writer.
func vectorKeys(t testing.TB) map[string]ed25519.PublicKey {
	var f struct {
		Keys []struct {
			Writer string `json:"writer"`
			Public string `json:"public_key"`
		} `json:"keys"`
	}
	b, err := os.ReadFile("../fixtures/vectors/ferry/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]ed25519.PublicKey{}
	for _, k := range f.Keys {
		pub, err := ledger.ParseKey(k.Public)
		if err != nil {
			t.Fatal(err)
		}
		out[k.Writer] = pub
	}
	return out
}

// FuzzReadObject: any bytes as an object file. readObject (its parseObject
// half, without the disk) never panics; the
// canonical form it returns is idempotent and hashes to the hash it returns; a file that
// verifies against its author's key verifies again, with the same hash, re-indented,
// with CRLF line ends and with a BOM (docs/design.md §2 rule 9), and fails under another
// project id. Seeds: the object files of fixtures/vectors/ferry/channel.
func FuzzReadObject(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(objectSeeds, "*", "*.json"))
	if len(seeds) < 3 {
		f.Fatalf("want the vectors' object files as seeds, found %v", seeds)
	}
	verified := 0
	keys := vectorKeys(f)
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var env fold.Envelope
		if c, _, err := verify.ReadObject(p); err == nil && fold.JSONUnmarshal(c, &env) == nil && keys[env.Author] != nil && verifyObjectSig(c, keys[env.Author], "vectors") == nil {
			verified++
		}
		f.Add(b)
	}
	if verified != len(seeds) {
		f.Fatalf("%d of %d seeds verify against the vectors' keys", verified, len(seeds))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		read := func(b []byte) ([]byte, string, error) { return verify.ParseObject("o.json", b) }
		canon, hash, err := read(raw)
		if err != nil {
			return
		}
		if again, err := ledger.CanonicalJSON(canon); err != nil || !bytes.Equal(again, canon) || ledger.HashBytes(canon) != hash {
			t.Fatalf("canonical form of %q not idempotent or hash wrong: %q (%v)", raw, again, err)
		}
		var env fold.Envelope
		if fold.JSONUnmarshal(canon, &env) != nil {
			return
		}
		pub := keys[env.Author]
		if pub == nil || verifyObjectSig(canon, pub, "vectors") != nil {
			return
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, canon, "", "\t"); err != nil {
			t.Fatal(err)
		}
		for name, variant := range map[string][]byte{
			"re-indented": ind.Bytes(),
			"crlf":        bytes.ReplaceAll(ind.Bytes(), []byte("\n"), []byte("\r\n")),
			"bom":         append([]byte("\xef\xbb\xbf"), raw...),
		} {
			c, h, err := read(variant)
			if err != nil || h != hash || verifyObjectSig(c, pub, "vectors") != nil {
				t.Fatalf("%s copy of a verified object: %v, hash %s want %s", name, err, h, hash)
			}
		}
		if verifyObjectSig(canon, pub, "vectors-other") == nil {
			t.Fatal("an object verifies under another project id")
		}
	})
}
