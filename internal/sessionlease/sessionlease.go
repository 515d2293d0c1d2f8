// Package sessionlease is the machine-local lease one `ferry mcp serve` process holds
// on (project, agent), so two live MCP sessions never act as one agent (docs/mcp.md
// "One session per agent", docs/format.md §18): a flock on a lock file, with the
// holder's pid beside it to name it in another's refusal.
package sessionlease

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/gofrs/flock"
)

// Lease is a session lease: a flock on its lock file, held for the life of the
// process. Its holder calls Renew on every heartbeat, so even a removed or replaced
// file (the config dir deleted by hand) is taken again.
type Lease struct {
	path string
	lock *flock.Flock
	warn func(msg string) // told when the holder's pid cannot be recorded
}

// Take takes the lease on the lock file path without waiting. When another live
// process holds it, it returns a nil lease, a nil error and holder naming that process
// ("process 1234", or "another process" when its pid file cannot be read); the caller
// words the refusal. An error is a lock file that cannot be created or locked. warn
// (nil: nobody) is told when the pid beside the lock cannot be recorded (the lease is
// held all the same).
func Take(path string, warn func(msg string)) (l *Lease, holder string, err error) {
	l = &Lease{path: path, warn: warn}
	lk, holder, err := l.take()
	if lk == nil {
		return nil, holder, err
	}
	l.lock = lk
	return l, "", nil
}

// take creates and flocks the lease file, then records this process's pid beside it.
// A nil lock with a nil error means another process holds the file (holder).
func (l *Lease) take() (lk *flock.Flock, holder string, err error) {
	p := l.path
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, "", fmt.Errorf("creating the session lease's directory: %w", err)
	}
	lk = flock.New(p)
	ok, err := lk.TryLock()
	if err != nil {
		return nil, "", fmt.Errorf("locking the session lease %s: %w", p, err)
	}
	if !ok {
		return nil, holderOf(p), nil
	}
	if err := fsutil.WriteFile(p+".pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		// The lease is the flock; the pid only names its holder in another's refusal,
		// so a session that cannot record it still holds the lease.
		if l.warn != nil {
			l.warn(fmt.Sprintf("recording the session lease's holder: %v (another session's refusal will not name this process)", err))
		}
	}
	return lk, "", nil
}

// holderOf names the process whose pid the lease's pid file records.
func holderOf(p string) string {
	if b, err := os.ReadFile(p + ".pid"); err == nil {
		if pid := strings.TrimSpace(string(b)); pid != "" {
			return "process " + pid
		}
	}
	return "another process"
}

// Renew checks that the file this lease holds locked is still the file at its path
// (os.SameFile of the open file and the path). When it is not — removed, or replaced
// by another file — it takes the lease again on the file at the path: retaken is then
// true. When another process holds that new file, Renew keeps the old lock (which no
// longer guards anything) and returns holder naming that process; the caller reports
// the conflict and calls Renew again later, which takes the lease once that process
// lets go. An error is a lock file that cannot be created or locked.
func (l *Lease) Renew() (retaken bool, holder string, err error) {
	held, err := l.lock.Stat()
	if err != nil {
		return false, "", fmt.Errorf("checking the session lease %s: %w", l.path, err)
	}
	now, err := os.Stat(l.path)
	if err == nil && os.SameFile(held, now) {
		return false, "", nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, "", fmt.Errorf("checking the session lease %s: %w", l.path, err)
	}
	lk, holder, err := l.take()
	if lk == nil {
		if holder == "process "+strconv.Itoa(os.Getpid()) {
			// The pid file is still this process's: the new holder has not written its own.
			holder = "another process"
		}
		return false, holder, err
	}
	l.lock.Unlock()
	l.lock = lk
	return true, "", nil
}

// Path is the lease's lock file.
func (l *Lease) Path() string { return l.path }

// Release gives the lease up. The lock file stays (locks are never deleted, docs/format.md
// §18).
func (l *Lease) Release() { l.lock.Unlock() }

// Holder reports whether a live process on this machine holds the lease on the lock
// file path, and names it (see Take). It never creates the lock file: no file, no
// holder.
func Holder(path string) (holder string, held bool) {
	p := path
	if _, err := os.Stat(p); err != nil {
		return "", false
	}
	// A shared lock is refused while the holder's exclusive one lives, and given at
	// once (and let go) when nobody holds the lease.
	lk := flock.New(p)
	ok, err := lk.TryRLock()
	if err != nil {
		return "", false
	}
	if ok {
		lk.Unlock()
		return "", false
	}
	return holderOf(p), true
}
