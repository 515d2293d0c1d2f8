package ckfile

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// RewriteFormat refuses, writing nothing, a file that names another master key or
// does not hold one format line and one sig line before its tables.
func TestRewriteFormatRefusals(t *testing.T) {
	t.Parallel()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, 32))
	good := "format = 1\nproject = \"acme\"\nmaster = \"" + ledger.FormatKey(key.Public().(ed25519.PublicKey)) + "\"\nsig = \"ed25519:x\"\n\n[policy]\n  max_skew_s = 3600\n"
	sign := func([]byte) (string, error) { return "ed25519:new", nil }
	for _, tc := range []struct {
		name, file string
		master     ed25519.PublicKey
		want       errs.Category
	}{
		{"another master key", good, other.Public().(ed25519.PublicKey), errs.Conflict},
		{"two format lines", strings.Replace(good, "project", "format = 1\nproject", 1), key.Public().(ed25519.PublicKey), errs.Invalid},
		{"no sig line", strings.Replace(good, "sig = \"ed25519:x\"\n", "", 1), key.Public().(ed25519.PublicKey), errs.Invalid},
		{"not TOML", "format = \n", key.Public().(ed25519.PublicKey), errs.Invalid},
	} {
		root := t.TempDir()
		p := filepath.Join(root, "channel.toml")
		if err := os.WriteFile(p, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := RewriteFormat(root, []byte(tc.file), 2, tc.master, sign); !errs.Is(err, tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
		if b, _ := os.ReadFile(p); string(b) != tc.file {
			t.Errorf("%s: the file changed", tc.name)
		}
	}
	root := t.TempDir()
	out, err := RewriteFormat(root, []byte(good), 2, key.Public().(ed25519.PublicKey), sign)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(strings.Replace(good, "format = 1", "format = 2", 1), `sig = "ed25519:x"`, `sig = "ed25519:new"`, 1); string(out) != want {
		t.Errorf("rewritten:\n%s\nwant\n%s", out, want)
	}
}
