// Package fsutil holds ferry's durable file writes: publishing a file by rename
// ([WriteFile], docs/design.md §2 rule 3), appending to a machine-local log ([Append]),
// fsync of a directory ([SyncDir]), and the one step that differs per OS, [Rename];
// and which names are such writes in progress, its own or a sync tool's ([IsTempName]).
// Every such write runs the fault hook [SetFault] installs, the one seam through which
// tests inject ENOSPC or EIO into every machine-local write path.
//
// Every rename in ferry goes through [Rename]. On Windows a rename fails while another
// process holds the source or the target open without FILE_SHARE_DELETE — antivirus
// scanners, the search indexer and sync clients (OneDrive, Dropbox) do so briefly — so
// there it is retried with a bounded backoff. Elsewhere it is a plain os.Rename.
//
// ferry never locks a data file: its flocks are taken only on dedicated lock files in
// the machine-local cache dir (the channel lock, each segment's lock, the arrival
// log's lock; docs/design.md §2 rule 5) and, for the MCP session lease, the config
// dir. A rename that keeps failing is therefore someone else's handle, and the error
// is returned once the retry budget is spent.
package fsutil

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// Retry budget of Rename on Windows.
const (
	// FirstDelay is the wait after the first failure; each next wait doubles, up to
	// MaxDelay.
	FirstDelay = 5 * time.Millisecond
	MaxDelay   = 250 * time.Millisecond
	// Budget bounds the total time spent waiting between attempts (about 1 s).
	Budget = time.Second
)

// Windows error codes a rename is retried on (winerror.h). They are numbers here, not
// syscall constants, so the check compiles and is tested on every OS.
const (
	errorAccessDenied     = 5  // ERROR_ACCESS_DENIED: the target is open, or pending delete
	errorSharingViolation = 32 // ERROR_SHARING_VIOLATION: opened without FILE_SHARE_DELETE
	errorLockViolation    = 33 // ERROR_LOCK_VIOLATION: a byte range of it is locked
)

// Rename renames from to to, replacing to (os.Rename). On Windows it retries while the
// error is access-denied, a sharing violation or a lock violation, waiting FirstDelay,
// then twice as long each time (at most MaxDelay), until Budget is spent; it returns
// the last error (an *os.LinkError) when the rename never succeeded. Any other error
// is returned at once. On other OSes it is os.Rename.
func Rename(from, to string) error {
	return retry(os.Rename, time.Sleep, transient, from, to)
}

// retry is Rename with its rename function, its sleep and its test of a transient
// error injected (tests drive the loop on every OS).
func retry(rename func(string, string) error, sleep func(time.Duration), transient func(error) bool, from, to string) error {
	delay, waited := FirstDelay, time.Duration(0)
	for {
		err := rename(from, to)
		if err == nil || !transient(err) || waited+delay > Budget {
			return err
		}
		sleep(delay)
		waited += delay
		delay = min(2*delay, MaxDelay)
	}
}

// isWindowsTransient reports whether err carries a Windows error code a rename is
// retried on. It means something only for errors of Windows system calls (on other
// OSes these numbers are other errors: EIO, EPIPE, EDOM).
func isWindowsTransient(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch uintptr(errno) {
	case errorAccessDenied, errorSharingViolation, errorLockViolation:
		return true
	}
	return false
}
