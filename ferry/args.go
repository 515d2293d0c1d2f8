package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
)

// maxArgFile is the most readArg reads from an @FILE (bytes). Every text field ferry
// writes is far smaller; the limit keeps /dev/zero or a huge log from exhausting memory.
const maxArgFile = 1 << 20

// readArg returns s, or the contents of FILE when s is "@FILE". It returns invalid when
// the file cannot be read or is larger than 1 MiB.
func readArg(s string) (string, error) {
	p, ok := strings.CutPrefix(s, "@")
	if !ok {
		return s, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", errs.Errorf(errs.Invalid, "check the path after @", "reading %s: %v", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxArgFile+1))
	if err != nil {
		return "", errs.Errorf(errs.Invalid, "check the path after @", "reading %s: %v", p, err)
	}
	if len(b) > maxArgFile {
		return "", errs.Errorf(errs.Invalid, "put large material in the work repo and reference it",
			"%s is larger than %s; the channel carries short texts", p, fmt.Sprintf("%d MiB", maxArgFile>>20))
	}
	return string(b), nil
}
