package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Epoch segments (docs/format.md §21, ADR 0021). Once its writer has seen a counting
// owner's checkpoint of epoch e, a (writer, device) chain goes on in a new file,
// ledger/<writer>/<device>.<e>.jsonl: seq and prev continue across files, and the
// older files are frozen — nothing is appended to them again, so a reader that starts
// from a later cut need not read them, and they can leave the folder whole. Epoch 0's
// file is the segment's first name, <device>.jsonl.

// maxEpochDigits bounds the decimal epoch of a segment name, so that it fits a uint64.
const maxEpochDigits = 18

// EpochSegmentPath returns the file of (writer, device) for checkpoint epoch e under the
// channel directory root: root/ledger/<writer>/<device>.<e>.jsonl, or SegmentPath's
// name for epoch 0. Like SegmentPath it does not check the names.
func EpochSegmentPath(root, writer, device string, epoch uint64) string {
	if epoch == 0 {
		return SegmentPath(root, writer, device)
	}
	return filepath.Join(root, ledgerDirName, writer, device+"."+strconv.FormatUint(epoch, 10)+segmentExt)
}

// ParseSegmentName reports whether name (a file name without directory) is a segment
// file ferry itself writes — <device>.jsonl, epoch 0, or <device>.<epoch>.jsonl with
// epoch a decimal number from 1 without leading zeros, at most 18 digits — and returns
// the device and epoch. Any other *.jsonl name readers read is a sync tool's copy, or
// a file put there by hand (docs/format.md §10); since a name holds no '.', the two
// cannot be confused.
func ParseSegmentName(name string) (device string, epoch uint64, ok bool) {
	stem, ok := strings.CutSuffix(name, segmentExt)
	if !ok {
		return "", 0, false
	}
	if ValidName(stem) {
		return stem, 0, true
	}
	dev, num, ok := strings.Cut(stem, ".")
	if !ok || !ValidName(dev) || num == "" || len(num) > maxEpochDigits || num[0] == '0' || !allDigits(num) {
		return "", 0, false
	}
	e, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return dev, e, true
}

// IsOwnFile reports whether the host path abs is one of the files of (writer,
// device)'s chain under root: ledger/<writer>/<device>.jsonl or an epoch file of it.
func IsOwnFile(root, writer, device, abs string) bool {
	if filepath.Dir(abs) != filepath.Dir(SegmentPath(root, writer, device)) {
		return false
	}
	d, _, ok := ParseSegmentName(filepath.Base(abs))
	return ok && d == device
}

// chainFile is one of a chain's own files in its writer directory.
type chainFile struct {
	path  string // host path
	epoch uint64
}

// chainFiles returns the regular files of device's chain among a writer directory's
// entries (dir's listing), by epoch, lowest first.
func chainFiles(dir string, ents []fs.DirEntry, device string) []chainFile {
	var out []chainFile
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if d, ep, ok := ParseSegmentName(e.Name()); ok && d == device {
			out = append(out, chainFile{filepath.Join(dir, e.Name()), ep})
		}
	}
	slices.SortFunc(out, func(a, b chainFile) int { return cmp.Compare(a.epoch, b.epoch) })
	return out
}

// copiesIn reports whether a writer directory's listing holds a file that readers read
// as a segment but whose name is no segment name ferry writes (a sync tool's conflict
// copy, a backup put back under another name). The files of the writer's other devices
// and the epoch files of any device do not count.
func copiesIn(ents []fs.DirEntry) bool {
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !isSegmentName(name) {
			continue
		}
		if _, _, ok := ParseSegmentName(name); !ok {
			return true
		}
	}
	return false
}

// listWriterDir lists the writer directory of segment (nil when it is missing or
// cannot be listed: the append that follows reports what is wrong with it).
func listWriterDir(segment string) []fs.DirEntry {
	ents, err := os.ReadDir(filepath.Dir(segment))
	if err != nil {
		return nil
	}
	return ents
}

// current returns the file the chain of (writer, device) goes on in — its newest
// file, or the file of the epoch SetEpoch set when that is newer (not made yet; a
// chain with no file yet starts there too) — and
// its newest file (SegmentPath's name when it has none; it may not exist), with the
// chain's files and the writer directory's listing.
func (l *Ledger) current(writer, device string) (path, newest string, files []chainFile, ents []fs.DirEntry) {
	newest = SegmentPath(l.opts.Root, writer, device)
	ents = listWriterDir(newest)
	files = chainFiles(filepath.Dir(newest), ents, device)
	cur := uint64(0)
	if n := len(files); n > 0 {
		newest, cur = files[n-1].path, files[n-1].epoch
	}
	path = newest
	if e := l.epoch.Load(); e > cur {
		path = EpochSegmentPath(l.opts.Root, writer, device, e)
	}
	return path, newest, files, ents
}

// CurrentPath returns the file the next append of (writer, device) writes to: the
// chain's newest file, or the file of the epoch SetEpoch set when that is newer (which
// the append makes; a chain with no file yet starts there too). It lists the writer
// directory; it takes no lock.
func (l *Ledger) CurrentPath(writer, device string) string {
	path, _, _, _ := l.current(writer, device)
	return path
}

// SetEpoch sets the epoch of the newest counting owner's checkpoint the caller has
// seen (docs/format.md §21). A later append whose chain's newest file is of a lower
// epoch, or that has no file yet, starts the file of this epoch; a chain whose newest
// file is of a higher epoch (a checkpoint that stopped counting) goes on in it. 0, the
// default, starts no file. It is safe to call while other goroutines append.
func (l *Ledger) SetEpoch(e uint64) { l.epoch.Store(e) }

// Epoch returns the epoch SetEpoch set.
func (l *Ledger) Epoch() uint64 { return l.epoch.Load() }

// olderTip returns the last entry of (writer, device) in the newest of files below
// path that holds one (nil when none does): the tip an empty newest file goes on from.
// Frozen files are only read, never repaired: a torn tail there is a reader's
// KindTorn, and the chain goes on after its last complete entry.
func olderTip(files []chainFile, path, writer, device string) (*Entry, error) {
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].path == path {
			continue
		}
		f, err := os.Open(files[i].path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("appending: reading %s: %w", files[i].path, err)
		}
		last, _, err := scanHandle(f, writer, device)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("appending: reading %s: %w", files[i].path, err)
		}
		if last != nil {
			return last, nil
		}
	}
	return nil, nil
}

// ChainFiles returns the host paths of (writer, device)'s own files under root —
// <device>.jsonl and its epoch files — oldest first; none when the writer directory
// does not list.
func ChainFiles(root, writer, device string) []string {
	seg := SegmentPath(root, writer, device)
	var out []string
	for _, f := range chainFiles(filepath.Dir(seg), listWriterDir(seg), device) {
		out = append(out, f.path)
	}
	return out
}
