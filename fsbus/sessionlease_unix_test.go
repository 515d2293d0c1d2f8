//go:build unix

package fsbus

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gofrs/flock"
)

// TestSessionLeaseRenew: the lease lives under the config dir; a second take is
// refused naming this process; Renew takes it again when its file was removed, names
// the other holder when the file was replaced by one another process holds, and takes
// it back once that one lets go. Unix only: removing or renaming over a file that is
// held open is what it does (Windows refuses both).
func TestSessionLeaseRenew(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	h := &Home{ConfigDir: filepath.Join(d, "config"), CacheDir: filepath.Join(d, "cache")}
	me := "process " + strconv.Itoa(os.Getpid())
	if _, held := h.SessionLeaseHolder("p", "bob"); held {
		t.Fatal("held before anyone took it")
	}
	if _, err := os.Stat(h.SessionLeasePath("p", "bob")); err == nil {
		t.Fatal("SessionLeaseHolder created the lock file")
	}
	l, holder, err := h.TakeSessionLease("p", "bob")
	if err != nil || l == nil || holder != "" {
		t.Fatalf("take: %v, %q, %v", l, holder, err)
	}
	defer l.Release()
	if filepath.Dir(filepath.Dir(filepath.Dir(l.Path()))) != h.ConfigDir {
		t.Errorf("lease at %s, want under the config dir %s", l.Path(), h.ConfigDir)
	}
	if who, held := h.SessionLeaseHolder("p", "bob"); !held || who != me {
		t.Errorf("holder = %q, %v; want %q", who, held, me)
	}
	if l2, who, err := h.TakeSessionLease("p", "bob"); l2 != nil || who != me || err != nil {
		t.Errorf("second take = %v, %q, %v; want refused naming %q", l2, who, err, me)
	}
	if retaken, who, err := l.Renew(); retaken || who != "" || err != nil {
		t.Errorf("renew of an untouched lease = %v, %q, %v", retaken, who, err)
	}

	if err := os.RemoveAll(h.ConfigDir); err != nil {
		t.Fatal(err)
	}
	if retaken, who, err := l.Renew(); !retaken || who != "" || err != nil {
		t.Errorf("renew after removal = %v, %q, %v; want retaken", retaken, who, err)
	}
	if who, held := h.SessionLeaseHolder("p", "bob"); !held || who != me {
		t.Errorf("after renewal: holder = %q, %v; want %q", who, held, me)
	}

	tmp := l.Path() + ".tmp"
	other := flock.New(tmp)
	if ok, err := other.TryLock(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := os.Rename(tmp, l.Path()); err != nil {
		t.Fatal(err)
	}
	if retaken, who, err := l.Renew(); retaken || who != "another process" || err != nil {
		t.Errorf("renew with the file held by another = %v, %q, %v; want its holder, not this process", retaken, who, err)
	}
	other.Unlock()
	if retaken, who, err := l.Renew(); !retaken || who != "" || err != nil {
		t.Errorf("renew once the other let go = %v, %q, %v; want retaken", retaken, who, err)
	}
	l.Release()
	if _, held := h.SessionLeaseHolder("p", "bob"); held {
		t.Error("held after Release")
	}
}
