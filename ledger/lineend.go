package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
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
