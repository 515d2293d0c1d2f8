//go:build unix

package fsbus

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
)

// TestPointerFIFORefusedUnopened: a --pointer naming a FIFO is
// refused at dispatch without opening it (an open would block until a writer comes),
// and a FIFO in the worker's checkout is refused at claim as that checkout's problem.
// The test hangs — and times out, failing — if either path opens the FIFO.
func TestPointerFIFORefusedUnopened(t *testing.T) {
	t.Parallel()
	w := newContractWorld(t)
	if err := syscall.Mkfifo(filepath.Join(w.wa, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := w.entries(t)
	_, err := w.alice.NewOrder(NewOrderOptions{Title: "x", Pointers: []string{"pipe"}})
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("FIFO pointer: %v", err)
	}
	if w.entries(t) != n {
		t.Fatal("a refused dispatch wrote")
	}
	// The author's file is regular; bob's copy is a FIFO: refused, nothing written, and
	// the hint says the checkout is the problem (not "ask the author").
	o, err := w.alice.NewOrder(NewOrderOptions{Title: "Review", Pointers: []string{"README.md"}})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(w.wb, "README.md"))
	if err := syscall.Mkfifo(filepath.Join(w.wb, "README.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	n = w.entries(t)
	_, err = w.bob.Claim(o.ID, "")
	var e *errs.Error
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("claim on a FIFO: %v", err)
	}
	if e = errOf(err); !strings.Contains(e.Hint, "this checkout's copy is the problem") || strings.Contains(e.Hint, "ask the author") {
		t.Fatalf("hint %q", e.Hint)
	}
	if w.entries(t) != n {
		t.Fatal("a refused claim wrote")
	}
	// A symlink in bob's checkout leading outside the workspace: the same local hint.
	os.Remove(filepath.Join(w.wb, "README.md"))
	outside := filepath.Join(t.TempDir(), "README.md")
	writeFile(t, outside, "# calc\n")
	if err := os.Symlink(outside, filepath.Join(w.wb, "README.md")); err != nil {
		t.Fatal(err)
	}
	_, err = w.bob.Claim(o.ID, "")
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "leads outside the workspace (through a symlink)") {
		t.Fatalf("claim through a symlink: %v", err)
	}
	if e = errOf(err); !strings.Contains(e.Hint, "this checkout's copy is the problem") {
		t.Fatalf("symlink hint %q", e.Hint)
	}
}
