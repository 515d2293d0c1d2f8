package ledger

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// Moving frozen files (docs/format.md §21 "Moving frozen files"). A chain's file that a
// newer file of the chain follows is frozen: nobody appends to it again. Once every
// record in it is at or below the cut of a counting owner's checkpoint, it may leave
// the live folder whole — never rewritten, never cut — for archive/ledger/<writer>/,
// where readers of the live folder do not look.

// archiveDirName is the channel's archive directory, beside ledger/.
const archiveDirName = "archive"

// ArchivePath returns where a chain file of the channel under root goes when it
// moves: root/archive/ledger/<writer>/<name> for root/ledger/<writer>/<name>. file is a
// host path; only its writer directory's and its own name are used.
func ArchivePath(root, file string) string {
	return filepath.Join(root, archiveDirName, ledgerDirName, filepath.Base(filepath.Dir(file)), filepath.Base(file))
}

// Frozen reports why the file of (writer, device)'s chain at host path file may not
// move while its chain's cut is at floorSeq, or "" when it may: file must be one of the
// chain's own files (ParseSegmentName), a newer own file must hold a complete entry
// of the chain (so nobody appends to file again, and the chain's tip stays in the live
// folder), and every line of file must be a complete entry of the chain at or below
// floorSeq (a file that ends in a torn line, holds a NUL, a malformed line or another
// chain's line stays). It reads file whole and the newer files' last lines. Errors
// are I/O errors other than file being missing (a missing file reports "missing").
func (l *Ledger) Frozen(writer, device, file string, floorSeq uint64) (reason string, err error) {
	if err := checkNames(writer, device); err != nil {
		return "", err
	}
	if !IsOwnFile(l.opts.Root, writer, device, file) {
		return "not a file of the chain " + writer + "/" + device, nil
	}
	_, epoch, _ := ParseSegmentName(filepath.Base(file))
	seg := SegmentPath(l.opts.Root, writer, device)
	newer := false
	for _, f := range chainFiles(filepath.Dir(seg), listWriterDir(seg), device) {
		if f.epoch <= epoch {
			continue
		}
		tip, err := FileTip(f.path, writer, device)
		if err != nil {
			return "", err
		}
		if tip != nil {
			newer = true
			break
		}
	}
	if !newer {
		return "no newer file of the chain holds an entry of it yet", nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "missing", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", file, err)
	}
	return frozenBelow(data, writer, device, floorSeq), nil
}

// frozenBelow is Frozen's check of a file's bytes: "" when every line is a complete
// entry of (writer, device) at or below floorSeq.
func frozenBelow(data []byte, writer, device string, floorSeq uint64) string {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return "its last line is not complete"
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return "it holds a NUL byte"
	}
	line := 0
	for rest := data; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		body := rest[:i]
		rest = rest[i+1:]
		line++
		if len(bytes.TrimSpace(body)) == 0 {
			continue
		}
		e, err := parseLine(body)
		switch {
		case err != nil:
			return fmt.Sprintf("line %d is not an entry", line)
		case e.Writer != writer || e.Device != device:
			return fmt.Sprintf("line %d is an entry of %s/%s", line, e.Writer, e.Device)
		case e.Seq > floorSeq:
			return fmt.Sprintf("line %d (seq %d) is above the cut (seq %d)", line, e.Seq, floorSeq)
		}
	}
	return ""
}

// MoveFrozen moves the frozen file of (writer, device)'s chain at host path file to
// ArchivePath whole, when Frozen finds nothing against it at floorSeq, and returns
// that path; it returns "" and Frozen's reason when the file may not move (nothing is
// changed then). The steps, each through package fsutil's fault hook: the bytes are
// written to a temp file beside the target, fsynced, renamed to the target and its
// directory fsynced (fsutil.WriteFile), read back and compared with the original by
// sha256, and only then is the original unlinked and its directory fsynced
// (fsutil.Remove). A target already holding the same bytes (a move that stopped
// before the unlink) is kept and the original unlinked; a target holding other bytes
// is an error and nothing is unlinked. After an error the original is still there,
// or it is gone and the target holds its bytes: a later call finishes the move.
func (l *Ledger) MoveFrozen(writer, device, file string, floorSeq uint64) (moved, reason string, err error) {
	reason, err = l.Frozen(writer, device, file, floorSeq)
	if err != nil || reason != "" {
		return "", reason, err
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "missing", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("archiving %s: %w", file, err)
	}
	// Frozen read the file once; a second reading that differs means it is not frozen.
	if r := frozenBelow(data, writer, device, floorSeq); r != "" {
		return "", r, nil
	}
	target := ArchivePath(l.opts.Root, file)
	if err := noLinks(l.opts.Root, filepath.Dir(file)); err != nil {
		return "", "", fmt.Errorf("archiving %s: %w", file, err)
	}
	if err := moveWhole(file, target, l.opts.Root, data); err != nil {
		return "", "", fmt.Errorf("archiving %s: %w", file, err)
	}
	return target, "", nil
}

// moveWhole moves file, whose bytes are data, to target (MoveFrozen's steps): written
// to a temp file beside target, fsynced, renamed, directory fsynced; read back and
// compared by sha256; then file unlinked and its directory fsynced. A target already
// holding data is kept; one holding other bytes is an error, and nothing is unlinked.
// A target that is file itself (by a symbolic link on the way, or a hard link), or
// whose directories up to top include a symbolic link, is an error: nothing moves.
func moveWhole(file, target, top string, data []byte) error {
	if err := noLinks(top, filepath.Dir(target)); err != nil {
		return err
	}
	if a, err := os.Stat(file); err == nil {
		if b, err := os.Stat(target); err == nil && os.SameFile(a, b) {
			return fmt.Errorf("%s is %s itself: nothing was moved", target, file)
		}
	}
	want := sha256.Sum256(data)
	if have, err := os.ReadFile(target); err == nil {
		if sha256.Sum256(have) != want {
			return fmt.Errorf("%s already holds other bytes: nothing was moved (compare the two files; keep whichever holds more of the chain under another *.jsonl name in the writer's folder)", target)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	} else if err := fsutil.WriteFile(target, data, 0o644); err != nil {
		return err
	}
	back, err := fsutil.ReadBack(target)
	if err != nil {
		return err
	}
	if sha256.Sum256(back) != want {
		return fmt.Errorf("%s does not read back as written: nothing was removed", target)
	}
	if err := fsutil.Remove(file); err != nil {
		return fmt.Errorf("copied to %s: %w", target, err)
	}
	return nil
}

// noLinks returns an error when a directory from top (exclusive) down to dir that
// exists is a symbolic link: a move must not write through, or unlink beside, a link
// someone placed in the folder. dir must be top or below it.
func noLinks(top, dir string) error {
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is not below %s", dir, top)
	}
	p := top
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." || part == "" {
			continue
		}
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // made by the move, as a directory
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
			return fmt.Errorf("%s is not a plain directory (a symbolic link or a file): nothing was moved", p)
		}
	}
	return nil
}

// MoveArchived moves the file of (writer, device)'s chain at host path file, in the
// channel's archive/ledger/<writer>/, to dir/ledger/<writer>/<name> (`ferry archive
// move DIR`, docs/format.md §21) with MoveFrozen's steps, when every line of it is a
// complete entry of the chain at or below floorSeq, and returns the path written; it
// returns "" and the reason when the file may not move (nothing is changed then).
func (l *Ledger) MoveArchived(writer, device, file, dir string, floorSeq uint64) (moved, reason string, err error) {
	if err := checkNames(writer, device); err != nil {
		return "", "", err
	}
	name := filepath.Base(file)
	if d, _, ok := ParseSegmentName(name); !ok || d != device || file != filepath.Join(l.opts.Root, archiveDirName, ledgerDirName, writer, name) {
		return "", "not an archived file of the chain " + writer + "/" + device, nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "missing", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("moving %s out: %w", file, err)
	}
	if r := frozenBelow(data, writer, device, floorSeq); r != "" {
		return "", r, nil
	}
	target := filepath.Join(dir, ledgerDirName, writer, name)
	if err := noLinks(l.opts.Root, filepath.Dir(file)); err != nil {
		return "", "", fmt.Errorf("moving %s out: %w", file, err)
	}
	if err := moveWhole(file, target, dir, data); err != nil {
		return "", "", fmt.Errorf("moving %s out: %w", file, err)
	}
	return target, "", nil
}

// MoveFrozenChain moves every frozen file of (writer, device)'s chain that lies wholly
// at or below floorSeq (MoveFrozen, oldest first) and returns the archive paths it
// wrote. A file that may not move (above the cut, the chain's newest, torn) is left
// where it is and is no error; the first error stops the walk.
func (l *Ledger) MoveFrozenChain(writer, device string, floorSeq uint64) ([]string, error) {
	if err := checkNames(writer, device); err != nil {
		return nil, err
	}
	seg := SegmentPath(l.opts.Root, writer, device)
	files := chainFiles(filepath.Dir(seg), listWriterDir(seg), device)
	var moved []string
	for i := 0; i+1 < len(files); i++ {
		to, _, err := l.MoveFrozen(writer, device, files[i].path, floorSeq)
		if err != nil {
			return moved, err
		}
		if to != "" {
			moved = append(moved, to)
		}
	}
	return moved, nil
}

// Chain names one (writer, device) chain.
type Chain struct{ Writer, Device string }

// SetArchived makes every later Read, ReadVerified and ReadIncremental read, beside the
// live segments, the chain files of chains under root/archive/ledger/ (their own files'
// names, ParseSegmentName; paths in problems and records are archive/ledger/<writer>/
// <name>). Readers call it for the chains whose records a whole reading lacks below
// no counting cut (docs/format.md §21 "When a checkpoint stops counting"); nil reads
// the live folder only. It is safe to call while other goroutines append.
func (l *Ledger) SetArchived(chains []Chain) {
	c := slices.Clone(chains)
	l.archived.Store(&c)
}

// Archived returns the chains SetArchived set.
func (l *Ledger) Archived() []Chain {
	if p := l.archived.Load(); p != nil {
		return *p
	}
	return nil
}

// SetArchiveDirs names archive folders outside the channel folder (`--archive DIR`:
// where `ferry archive move` took archive/, with its layout, ledger/<writer>/<name>)
// that reads of archived chains (SetArchived) take files from too, after the
// channel's own archive/. A file whose name an earlier folder holds for the same writer
// is not read again. nil names none.
func (l *Ledger) SetArchiveDirs(dirs []string) {
	d := slices.Clone(dirs)
	l.archiveDirs.Store(&d)
}

// archiveRoots returns the archive folders reads look in: the channel's archive/, then
// those SetArchiveDirs named.
func (l *Ledger) archiveRoots() []archiveRoot {
	roots := []archiveRoot{{abs: filepath.Join(l.opts.Root, archiveDirName), rel: archiveDirName}}
	if p := l.archiveDirs.Load(); p != nil {
		for _, d := range *p {
			roots = append(roots, archiveRoot{abs: d, rel: filepath.ToSlash(d)})
		}
	}
	return roots
}

// archiveRoot is one archive folder: its host path, and how paths in it are shown
// (relative to the channel folder for its own archive/, else the folder's own path).
type archiveRoot struct{ abs, rel string }

// listArchived lists the archived files of chains in roots (listSegments' shape).
func listArchived(roots []archiveRoot, chains []Chain) []segFile {
	var out []segFile
	for _, c := range chains {
		if checkNames(c.Writer, c.Device) != nil {
			continue
		}
		seen := map[string]bool{}
		for _, r := range roots {
			sub := filepath.Join(r.abs, ledgerDirName, c.Writer)
			ents, err := os.ReadDir(sub)
			if err != nil {
				continue // none moved (a listing that fails reads as none: the gap stays reported)
			}
			for _, e := range ents {
				if d, _, ok := ParseSegmentName(e.Name()); ok && d == c.Device && e.Type().IsRegular() && !seen[e.Name()] {
					seen[e.Name()] = true
					out = append(out, segFile{abs: filepath.Join(sub, e.Name()), rel: path.Join(r.rel, ledgerDirName, c.Writer, e.Name())})
				}
			}
		}
	}
	return out
}

// ArchivedChains returns every chain with an own file (ParseSegmentName) in the
// channel's archive/ or a folder SetArchiveDirs named, in writer and device order.
func (l *Ledger) ArchivedChains() []Chain {
	var out []Chain
	for _, r := range l.archiveRoots() {
		writers, _ := os.ReadDir(filepath.Join(r.abs, ledgerDirName))
		for _, w := range writers {
			if !w.IsDir() || !ValidName(w.Name()) {
				continue
			}
			ents, _ := os.ReadDir(filepath.Join(r.abs, ledgerDirName, w.Name()))
			for _, e := range ents {
				if d, _, ok := ParseSegmentName(e.Name()); ok && e.Type().IsRegular() && !slices.Contains(out, Chain{w.Name(), d}) {
					out = append(out, Chain{w.Name(), d})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Chain) int { return cmp.Or(cmp.Compare(a.Writer, b.Writer), cmp.Compare(a.Device, b.Device)) })
	return out
}
