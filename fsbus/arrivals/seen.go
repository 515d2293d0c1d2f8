package arrivals

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// Seen is one line of presence.seen: a presence file's hash and when this machine
// first saw that version of it.
type Seen struct {
	Hash string
	At   Stamp
}

// ReadSeen reads the presence.seen file at path: one line per presence file,
// "<file name> <hash> <Unix ms> <boot clock ms> <boot id>" (ADR 0013). A record read on
// other clocks than now's (a reboot, a clock step since) is re-stamped now — the first
// observation after the step — and changed reports it. A line of an older binary,
// "<file name> <hash> <Unix ms>", is read as seen on now's clocks; other lines are
// skipped. A missing or unreadable file reads as none.
func ReadSeen(path string, now Stamp) (seen map[string]Seen, changed bool) {
	seen = map[string]Seen{}
	b, err := os.ReadFile(path)
	if err != nil {
		return seen, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 && len(f) != 5 {
			continue
		}
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		at := Stamp{Wall: ms}
		if len(f) == 5 {
			boot, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				continue
			}
			at.Boot, at.BootID = boot, f[4]
		}
		if rebased := now.OnClock(at); rebased != at {
			at, changed = rebased, true
		}
		seen[f[0]] = Seen{f[1], at}
	}
	return seen, changed
}

// WriteSeen writes seen to path in ReadSeen's shape, in file-name order (a stamp
// with no boot clock in the three-field form).
func WriteSeen(path string, seen map[string]Seen) error {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(seen)) {
		r := seen[n]
		if r.At.BootID == "" { // no boot clock on this machine
			fmt.Fprintf(&b, "%s %s %d\n", n, r.Hash, r.At.Wall)
		} else {
			fmt.Fprintf(&b, "%s %s %d %d %s\n", n, r.Hash, r.At.Wall, r.At.Boot, r.At.BootID)
		}
	}
	return fsutil.WriteFile(path, []byte(b.String()), 0o644)
}
