package doctor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/internal/keyfile"
)

func init() { keyfile.ScryptWorkFactor = 10 } // copyKey exports and imports: a cheap scrypt, the same format

// world is a channel "acme" on one machine with the owner's key, and the members
// named seated.
func world(t *testing.T, members ...string) *fsbus.Channel {
	t.Helper()
	levels := map[string]string{}
	for _, m := range members {
		levels[m] = "member"
	}
	c, _ := fsbustest.Channel(t, fsbustest.Options{Levels: levels})
	return c
}

// copyKey gives home to the key of (project, name) from home from, as `ferry key
// export` and `ferry key import` would.
func copyKey(t *testing.T, from, to *fsbus.Home, project, name string) {
	t.Helper()
	pass := []byte("test passphrase")
	b, err := from.ExportKey(project, name, pass)
	if err != nil {
		t.Fatal(err)
	}
	ik, err := fsbus.ReadExport(b, pass)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := to.StoreImported(ik); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies src into dst as a sync tool would: a file is never replaced by a
// shorter copy (segments only grow).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(target); err == nil && len(old) >= len(b) {
			return nil
		}
		return os.WriteFile(target, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}
