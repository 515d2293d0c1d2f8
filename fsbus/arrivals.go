package fsbus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// Arrivals is this machine's arrival log (DESIGN §2 "The local arrival log"): every
// entry it ingests gets the next local arrival number and the local time it was first
// seen. Cursors name arrival numbers, so an old entry arriving late is still new;
// sightings (when this machine last saw each writer change) come from the same log.
// The log lives in the cache dir and is rebuildable from the channel at any time.
//
// File format (arrivals.log): a header line "ferry-arrivals 1 <log id>", then one line
// per entry: "<n> <entry hash> <first seen, Unix ms> <writer>".
type Arrivals struct {
	LogID    string
	Last     uint64            // highest arrival number
	number   map[string]uint64 // entry hash → arrival number
	seen     map[string]int64  // entry hash → first seen (Unix ms)
	writer   map[string]string // entry hash → its writer
	Sighting map[string]int64  // writer → when this machine last saw it change (Unix ms)
	torn     bool              // the file ends without a newline
}

// Number returns the arrival number of an entry hash (0 if not ingested).
func (a *Arrivals) Number(hash string) uint64 { return a.number[hash] }

// Ingested calls fn for every entry this machine has ingested: its hash, writer and
// arrival number (doctor's check that no record read here has vanished since).
func (a *Arrivals) Ingested(fn func(hash, writer string, n uint64)) {
	for h, n := range a.number {
		fn(h, a.writer[h], n)
	}
}

// Seen returns when this machine first saw an entry (zero time if never).
func (a *Arrivals) Seen(hash string) time.Time {
	ms, ok := a.seen[hash]
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

const arrivalsHeader = "ferry-arrivals 1 "

// ingestArrivals loads the arrival log of the channel and appends every entry of snap
// it has not seen, under a machine-local flock. A damaged log is moved aside and
// rebuilt (cursors into it then fall back to a bounded digest).
func ingestArrivals(c *Channel, entries []ledger.Entry) (*Arrivals, error) {
	dir := c.Home.StateDir(c.Project())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.MkdirAll(c.Home.LockDir(c.Project()), 0o755); err != nil {
		return nil, fmt.Errorf("creating lock dir: %w", err)
	}
	lk := flock.New(filepath.Join(c.Home.LockDir(c.Project()), "arrivals.lock"))
	if err := lk.Lock(); err != nil {
		return nil, fmt.Errorf("locking arrival log: %w", err)
	}
	defer lk.Unlock()
	path := filepath.Join(dir, "arrivals.log")
	a, err := loadArrivals(path)
	if err != nil {
		aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().UnixNano())
		if rerr := fsutil.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("moving damaged arrival log aside: %w", rerr)
		}
		a = nil
	}
	var buf bytes.Buffer
	if a == nil {
		a = &Arrivals{LogID: randomBase32(8), number: map[string]uint64{}, seen: map[string]int64{}, writer: map[string]string{}, Sighting: map[string]int64{}}
		buf.WriteString(arrivalsHeader + a.LogID + "\n")
	}
	now := c.now().UnixMilli()
	for i := range entries {
		e := &entries[i]
		h := e.Hash()
		if _, ok := a.number[h]; ok {
			continue
		}
		a.Last++
		a.number[h], a.seen[h], a.writer[h] = a.Last, now, e.Writer
		if now > a.Sighting[e.Writer] {
			a.Sighting[e.Writer] = now
		}
		fmt.Fprintf(&buf, "%d %s %d %s\n", a.Last, h, now, e.Writer)
	}
	if buf.Len() == 0 {
		return a, nil
	}
	out := buf.Bytes()
	if a.torn {
		out = append([]byte{'\n'}, out...)
		a.torn = false
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening arrival log: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(out); err != nil {
		return nil, fmt.Errorf("appending to arrival log: %w", err)
	}
	return a, nil
}

func loadArrivals(path string) (*Arrivals, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 4096), 1<<20)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), arrivalsHeader) {
		return nil, fmt.Errorf("arrival log %s has no header", path)
	}
	a := &Arrivals{LogID: strings.TrimPrefix(sc.Text(), arrivalsHeader), number: map[string]uint64{}, seen: map[string]int64{}, writer: map[string]string{}, Sighting: map[string]int64{}}
	for sc.Scan() {
		// A line that does not parse (a torn tail left by a crash, completed by a later
		// append's leading newline) names no arrival: skip it.
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		n, err1 := strconv.ParseUint(f[0], 10, 64)
		ms, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || !strings.HasPrefix(f[1], "sha256:") {
			continue
		}
		a.number[f[1]], a.seen[f[1]], a.writer[f[1]] = n, ms, f[3]
		if n > a.Last {
			a.Last = n
		}
		if ms > a.Sighting[f[3]] {
			a.Sighting[f[3]] = ms
		}
	}
	a.torn = len(raw) > 0 && raw[len(raw)-1] != '\n'
	return a, nil
}

// Cursor returns an opaque token naming the current arrival number.
func (a *Arrivals) Cursor() string { return fmt.Sprintf("%s.%d", a.LogID, a.Last) }

// parseCursor returns the arrival number a cursor names, or ok=false when the cursor is
// from another machine, a lost log, or malformed: callers then fall back to a bounded
// digest, never an error (DESIGN §2).
func (a *Arrivals) parseCursor(cur string) (uint64, bool) {
	id, num, found := strings.Cut(cur, ".")
	if !found || id != a.LogID {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > a.Last {
		return 0, false
	}
	return n, true
}
