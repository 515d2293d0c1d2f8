package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// LineEnd returns the byte offset just after the line of the segment file at path
// whose record hashes to hash, or 0 when the file holds no such line (the record came
// from a conflict copy) or cannot be read: the offset an owner's checkpoint's cut names
// is a hint a reader checks, never trusts (docs/format.md §20).
func LineEnd(path, hash string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			off += int64(len(line))
			if e, perr := ParseLine(bytes.TrimRight(line, "\r\n")); perr == nil && e.Hash() == hash {
				return off
			}
		}
		if err != nil {
			return 0
		}
	}
}

// FileTip returns the last complete entry of (writer, device) in the segment file at
// path, read backwards from its end (normally one line), nil when the file holds none
// or does not exist. It reads the file as it is now, whatever a snapshot read before.
func FileTip(path, writer, device string) (*Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	_, last, _, err := scanTail(f, fi.Size(), writer, device)
	return last, err
}

// chainFilesNewestFirst returns the host paths of the chain's own files (ParseSegmentName)
// under root, newest epoch first.
func chainFilesNewestFirst(root, writer, device string) []string {
	own := SegmentPath(root, writer, device)
	files := chainFiles(filepath.Dir(own), listWriterDir(own), device)
	out := make([]string, 0, len(files))
	for i := len(files) - 1; i >= 0; i-- {
		out = append(out, files[i].path)
	}
	return out
}

// ChainLineEnd is LineEnd over the chain's own files, newest epoch first: the offset
// after the line hashing to hash in the first file holding it, 0 when none does. The
// offset names no file: a reader tries it on each of the chain's files, by hash.
func ChainLineEnd(root, writer, device, hash string) int64 {
	for _, p := range chainFilesNewestFirst(root, writer, device) {
		if off := LineEnd(p, hash); off > 0 {
			return off
		}
	}
	return 0
}

// ChainTip is FileTip over the chain's own files, newest epoch first: the last
// complete entry of (writer, device) in the newest file holding one.
func ChainTip(root, writer, device string) (*Entry, error) {
	for _, p := range chainFilesNewestFirst(root, writer, device) {
		tip, err := FileTip(p, writer, device)
		if err != nil || tip != nil {
			return tip, err
		}
	}
	return nil, nil
}
