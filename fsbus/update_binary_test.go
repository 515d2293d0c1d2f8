package fsbus

import (
	"os"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/selfupdate"
)

// TestCheckReleaseBinary: the running test binary is a Go binary for this platform
// without a version stamp, which reports "dev": approving it as 1.0.0 is refused, as
// `update apply` would refuse it; for another platform it is refused; a file that is
// not a Go binary only gets a note (the stamped cases run in ferry's
// TestUpdateApplyReplacesBinary, the rule in selfupdate's TestStamp).
func TestCheckReleaseBinary(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	note, err := selfupdate.CheckBinary(f, "releases/x", selfupdate.Platform(), "1.0.0", sameVersion)
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "reports version dev, not 1.0.0") || note != "" {
		t.Fatalf("the test binary for its own platform: note %q, err %v", note, err)
	}
	other := "plan9/386"
	if _, err := selfupdate.CheckBinary(f, "releases/x", other, "1.0.0", sameVersion); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not "+other) {
		t.Fatalf("the test binary approved for %s: %v", other, err)
	}
	note, err = selfupdate.CheckBinary(strings.NewReader("#!/bin/sh\necho hi\n"), "releases/x.sh", selfupdate.Platform(), "1.0.0", sameVersion)
	if err != nil || !strings.Contains(note, "not a Go binary") {
		t.Fatalf("a shell script: note %q, err %v", note, err)
	}
}
