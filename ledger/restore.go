package ledger

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// Restored reports what Restore (or the continuity check inside Append) did.
type Restored struct {
	// Moved is the <device>.torn-<n> file the segment's damaged part was copied to
	// before the segment was cut ("" when none).
	Moved string `json:"moved,omitempty"`
	// Appended lists the seqs of the records copied verbatim into the segment: kept
	// records that were only in conflict copies, or valid records found after a hole.
	Appended []uint64 `json:"appended,omitempty"`
	// Missing lists the seqs below the tip that no file holds (a hole destroyed them,
	// or they never arrived): readers count the records around the gap and report it
	// as broken_chain; the records come back, without a fork, when a file holding them
	// is put into the writer directory.
	Missing []uint64 `json:"missing,omitempty"`
	// Tip is the last record of the chain readers keep after the restore (nil: none).
	Tip *Entry `json:"-"`
}

// Changed reports whether the restore wrote anything.
func (r *Restored) Changed() bool { return r != nil && (r.Moved != "" || len(r.Appended) > 0) }

// Restore makes the segment of (writer, device) hold the whole chain readers keep,
// under the segment's lock (docs/design.md §2 rule 4; ADR 0007):
//
//   - every *.jsonl file of the writer directory (the segment and a sync tool's conflict
//     copies of it) is read; records of (writer, device) count wherever they are, as for
//     readers (Read);
//   - the kept chain is resolved as Read resolves it (at a fork the branch whose record
//     has the lower hash), except that at a fork a record whose signature does not
//     verify against pub is passed over while another one does (pub nil: no check);
//   - the first unreadable byte of the segment — a line holding a NUL, a complete line
//     that is not an entry, a last line without "\n" — and everything after it is
//     copied to <device>.torn-<n> (as Repair does for a torn tail) and the segment is cut
//     there; valid records found after that point are not lost: they join the pool;
//   - the kept records the segment does not hold are appended to it, verbatim (their
//     canonical line, signed by their writer), in seq order, with one write and fsync;
//     when the segment's last record of the chain is then not the kept tip (a fork's
//     losing branch last, a record restored below the tip), the tip's line is appended
//     once more, so that Append, which reads the last line, follows it (readers dedupe
//     it by hash).
//
// With epoch files (docs/format.md §21) the segment restored is the chain's newest own
// file (or the file of the epoch SetEpoch set, when newer); what the older own files
// hold counts as held and is never appended again, and only the newest file is cut.
//
// A seq missing below the tip (a hole destroyed it) changes nothing in this: the records
// after it still count for readers, who report the gap; Restored.Missing lists it. Only
// complete lines are salvaged from the damaged part: a last line without "\n" was never
// acknowledged. Restore returns ErrBadName, ErrLocked and wrapped I/O errors like
// Append; after an I/O error the segment is unchanged, or its damaged part is copied
// and the segment cut, or the restored records are appended in part (the next restore
// finishes).
func (l *Ledger) Restore(writer, device string, pub ed25519.PublicKey) (*Restored, error) {
	if err := checkNames(writer, device); err != nil {
		return nil, err
	}
	unlock, err := l.lock(writer, device)
	if err != nil {
		return nil, err
	}
	defer unlock()
	path, _, _, _ := l.current(writer, device)
	return restorePath(l.opts.Root, path, writer, device, pub, l.opts.Project)
}

// restorePath is Restore for a locked segment path.
func restorePath(root, segment, writer, device string, pub ed25519.PublicKey, project string) (*Restored, error) {
	fail := func(err error) (*Restored, error) { return nil, fmt.Errorf("restoring %s: %w", segment, err) }
	data, err := os.ReadFile(segment)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	dir := filepath.Dir(segment)
	relDir := path.Join(ledgerDirName, filepath.Base(dir))
	relSeg := path.Join(relDir, filepath.Base(segment))

	// The segment's readable part, up to the first bad byte.
	var inMain []*record
	badAt := int64(-1)
	var off int64
	for lineNo := 1; off < int64(len(data)); lineNo++ {
		rest := data[off:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 || bytes.IndexByte(rest[:i], 0) >= 0 {
			badAt = off
			break
		}
		body := rest[:i]
		if len(bytes.TrimSpace(body)) != 0 {
			e, perr := parseLine(body)
			if perr != nil {
				badAt = off
				break
			}
			if e.Writer == writer && e.Device == device {
				inMain = append(inMain, &record{e: e, path: relSeg, line: lineNo})
			}
		}
		off += int64(i) + 1
	}

	pool := map[string]*record{}
	add := func(r *record) {
		if _, ok := pool[r.e.Hash()]; !ok {
			pool[r.e.Hash()] = r
		}
	}
	for _, r := range inMain {
		add(r)
	}
	if badAt >= 0 {
		// Salvage: every run of bytes between newlines and NULs, in the damaged part's
		// complete lines, that parses as an entry.
		region := data[badAt:]
		region = region[:bytes.LastIndexByte(region, '\n')+1]
		for piece := range bytes.FieldsFuncSeq(region, func(r rune) bool { return r == '\n' || r == 0 }) {
			if e, perr := parseLine(bytes.TrimSpace(piece)); perr == nil && e.Writer == writer && e.Device == device {
				add(&record{e: e, path: relSeg + " (after offset " + fmt.Sprint(badAt) + ")"})
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	// The chain's older epoch files are its own too: what they hold is not restored
	// into the newest file (docs/format.md §21).
	_, segEpoch, _ := ParseSegmentName(filepath.Base(segment))
	var older []*record // records of the older own files
	var olderLast *record
	olderLastEpoch := uint64(0)
	for _, de := range ents {
		if de.Name() == filepath.Base(segment) || !de.Type().IsRegular() || !isSegmentName(de.Name()) {
			continue
		}
		res := readSegment(segFile{abs: filepath.Join(dir, de.Name()), rel: path.Join(relDir, de.Name())})
		if res.err != nil {
			return fail(res.err)
		}
		d, ep, isOwn := ParseSegmentName(de.Name())
		isOwn = isOwn && d == device && ep < segEpoch
		for i := range res.records {
			if r := &res.records[i]; r.e.Writer == writer && r.e.Device == device {
				add(r)
				if isOwn {
					older = append(older, r)
					if olderLast == nil || ep >= olderLastEpoch {
						olderLast, olderLastEpoch = r, ep
					}
				}
			}
		}
	}

	chain, missing := keptChain(writer, device, pool, pub, project)
	have := map[string]bool{}
	for _, r := range slices.Concat(inMain, older) {
		have[r.e.Hash()] = true
	}
	out := &Restored{Missing: missing}
	var lines []byte
	var lastOwn *Entry // the chain's last record in its own files once lines are written
	if n := len(inMain); n > 0 {
		lastOwn = &inMain[n-1].e
	} else if olderLast != nil {
		lastOwn = &olderLast.e
	}
	appendLine := func(e *Entry) error {
		c, err := e.Canonical()
		if err != nil {
			return err
		}
		lines = append(append(lines, c...), '\n')
		lastOwn = e
		return nil
	}
	for _, r := range chain {
		if !have[r.e.Hash()] {
			if err := appendLine(&r.e); err != nil {
				return fail(err)
			}
			out.Appended = append(out.Appended, r.e.Seq)
		}
	}
	if n := len(chain); n > 0 {
		out.Tip = &chain[n-1].e
		if lastOwn == nil || lastOwn.Hash() != out.Tip.Hash() {
			if err := appendLine(out.Tip); err != nil {
				return fail(err)
			}
		}
	}
	if badAt < 0 && len(lines) == 0 {
		return out, nil
	}
	if badAt >= 0 {
		moved, err := copyTail(bytes.NewReader(data), segment, badAt, int64(len(data)))
		if err != nil {
			return fail(err)
		}
		out.Moved = moved
		if err := truncateSync(segment, badAt); err != nil {
			return nil, fmt.Errorf("restoring %s: damaged part copied to %s: %w", segment, moved, err)
		}
	}
	if len(lines) > 0 {
		if err := appendSync(root, segment, lines); err != nil {
			return nil, fmt.Errorf("restoring %s: %w", segment, err)
		}
	}
	return out, nil
}

// keptChain resolves the pool of one chain's records as readers do and returns the
// kept records in seq order and the seqs missing below the last of them.
func keptChain(writer, device string, pool map[string]*record, pub ed25519.PublicKey, project string) (kept []*record, missing []uint64) {
	bySeq := map[uint64][]*record{}
	for _, r := range pool {
		bySeq[r.e.Seq] = append(bySeq[r.e.Seq], r)
	}
	if pub != nil {
		for s, rs := range bySeq {
			if len(rs) < 2 {
				continue
			}
			good := slices.DeleteFunc(slices.Clone(rs), func(r *record) bool { return r.e.VerifySig(pub, project) != nil })
			if len(good) > 0 {
				bySeq[s] = good
			}
		}
	}
	for _, rs := range bySeq { // resolve's result must not depend on map order
		slices.SortFunc(rs, func(a, b *record) int { return cmp.Compare(a.e.Hash(), b.e.Hash()) })
	}
	kept, _, _ = resolve(segKey{writer, device}, bySeq, nil)
	var next uint64 = 1
	for _, r := range kept {
		for ; next < r.e.Seq; next++ {
			missing = append(missing, next)
		}
		next = r.e.Seq + 1
	}
	return kept, missing
}

// appendSync appends b to path (creating it, and fsyncing the directories that name it
// when it is new) with one write and fsyncs it.
func appendSync(root, path string, b []byte) error {
	f, created, err := openSegment(path)
	if err != nil {
		return err
	}
	if created {
		if err := syncCreated(root, path); err != nil {
			f.Close()
			return err
		}
	}
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write")
	}
	if err == nil {
		err = fsutil.Sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
