package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// fakeRename fails with errs in turn, then succeeds; it counts its calls.
type fakeRename struct {
	errs  []error
	calls int
}

func (f *fakeRename) rename(from, to string) error {
	f.calls++
	if f.calls <= len(f.errs) {
		return f.errs[f.calls-1]
	}
	return nil
}

func linkErr(code uintptr) error {
	return &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.Errno(code)}
}

// TestRetry drives the retry loop with an injected rename and sleep (docs/design.md §2
// rule 3: on Windows a rename is retried on access-denied and sharing violations), on
// every OS.
func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{"ok at once", nil, 1, false},
		{"sharing violation twice", []error{linkErr(errorSharingViolation), linkErr(errorSharingViolation)}, 3, false},
		{"access denied then lock violation", []error{linkErr(errorAccessDenied), linkErr(errorLockViolation)}, 3, false},
		{"another error is not retried", []error{linkErr(2 /* ERROR_FILE_NOT_FOUND */)}, 1, true},
		{"a plain error is not retried", []error{errors.New("disk on fire")}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRename{errs: tc.errs}
			var slept []time.Duration
			err := retry(f.rename, func(d time.Duration) { slept = append(slept, d) }, isWindowsTransient, "a", "b")
			if (err != nil) != tc.wantErr || f.calls != tc.wantCalls {
				t.Fatalf("retry = %v after %d calls, want error %v after %d", err, f.calls, tc.wantErr, tc.wantCalls)
			}
			if len(slept) != f.calls-1 {
				t.Fatalf("slept %d times for %d calls", len(slept), f.calls)
			}
		})
	}
}

// TestRetryBudget: a file held open for good ends the retries within Budget, with
// doubling waits capped at MaxDelay, and returns the last error unchanged.
func TestRetryBudget(t *testing.T) {
	held := linkErr(errorSharingViolation)
	calls := 0
	var slept []time.Duration
	err := retry(func(string, string) error { calls++; return held }, func(d time.Duration) { slept = append(slept, d) }, isWindowsTransient, "a", "b")
	if err != held {
		t.Fatalf("retry = %v, want the last error %v", err, held)
	}
	var total time.Duration
	for i, d := range slept {
		total += d
		if d > MaxDelay {
			t.Errorf("wait %d is %v, more than MaxDelay", i, d)
		}
		if i > 0 && d != min(2*slept[i-1], MaxDelay) {
			t.Errorf("wait %d is %v after %v: not doubling", i, d, slept[i-1])
		}
	}
	if total > Budget || total < Budget/2 {
		t.Errorf("waited %v in all, want at most %v and not much less", total, Budget)
	}
	if calls != len(slept)+1 {
		t.Errorf("%d calls for %d waits", calls, len(slept))
	}
}

// TestIsWindowsTransient: the Windows codes are recognised through the wrapping
// os.Rename uses, and nothing else is.
func TestIsWindowsTransient(t *testing.T) {
	for code, want := range map[uintptr]bool{5: true, 32: true, 33: true, 2: false, 3: false, 183: false} {
		if got := isWindowsTransient(linkErr(code)); got != want {
			t.Errorf("code %d: %v, want %v", code, got, want)
		}
	}
	if isWindowsTransient(fs.ErrPermission) {
		t.Error("fs.ErrPermission without a code counts as transient")
	}
}

// TestRename: the real Rename replaces the target, and a missing source is an error
// at once (it is not retried on any OS).
func TestRename(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, ".tmp-a"), filepath.Join(dir, "a")
	for _, p := range []string{from, to} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Rename(from, to); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(to); string(b) != from {
		t.Fatalf("target holds %q after the rename", b)
	}
	err := Rename(filepath.Join(dir, "missing"), to)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Rename of a missing file = %v, want ErrNotExist", err)
	}
	if runtime.GOOS != "windows" && transient(linkErr(errorSharingViolation)) {
		t.Error("off Windows an errno 32 (EPIPE) is retried")
	}
}
