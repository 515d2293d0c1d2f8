// Package ckfile reads an owner's checkpoint objects from a channel folder
// (docs/format.md §20): heads at checkpoints/<epoch>-<16 hex>/head.json, chunks at
// checkpoints/chunks/<64 hex>.json.
package ckfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// headMax and chunkMax bound what is read of a head or chunk file: a head holds the cut
// (about 200 bytes a segment) and the rotation lines; a chunk is at most 64 KiB.
const (
	headMax  = 16 << 20
	chunkMax = 64 << 10
)

// Dir reads the checkpoint objects of the channel folder Root (fold.Checkpoints).
type Dir struct{ Root string }

// Head returns a head file's bytes, fold.ErrObjectMissing when it is not there or only
// partly (fold.ErrObjectTorn: empty, or holding a NUL byte).
func (d Dir) Head(epoch int, hash string) ([]byte, error) {
	return readBounded(filepath.Join(d.Root, filepath.FromSlash(fold.HeadPath(epoch, hash))), headMax)
}

// Chunk returns a chunk file's bytes, fold.ErrObjectMissing when it is not there or only
// partly (as Head).
func (d Dir) Chunk(hash string) ([]byte, error) {
	return readBounded(filepath.Join(d.Root, filepath.FromSlash(fold.ChunkPath(hash))), chunkMax)
}

// PutChunk publishes a chunk file (fsutil.WriteFile: temp, fsync, rename, directory
// fsync) whose bytes b hash to hash (fold.ChunkPutter). It refuses bytes of another
// hash, more than a chunk may hold, and a checkpoints or chunks directory that is a
// link: ferry never writes through links.
func (d Dir) PutChunk(hash string, b []byte) error {
	if ledger.HashBytes(b) != hash || len(b) > chunkMax {
		return fmt.Errorf("chunk of %d bytes hashing to %s, not %s", len(b), ledger.HashBytes(b), hash)
	}
	for _, dir := range []string{"checkpoints", filepath.Join("checkpoints", "chunks")} {
		if fi, err := os.Lstat(filepath.Join(d.Root, dir)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s in the channel is a symbolic link: ferry never writes through links", dir)
		}
	}
	return fsutil.WriteFile(filepath.Join(d.Root, filepath.FromSlash(fold.ChunkPath(hash))), b, 0o644)
}

// readBounded reads a regular file of at most limit bytes; fold.ErrObjectMissing when
// it is not there or only partly, fold.ErrObjectUnreadable when this machine cannot
// read it. A link, a directory or a larger file is an error.
func readBounded(path string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fold.ErrObjectMissing
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fold.ErrObjectUnreadable, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", path, fi.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fold.ErrObjectUnreadable, err)
	}
	defer f.Close()
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead)) // one allocation unless it grew since the stat
	_, err = buf.ReadFrom(io.LimitReader(f, limit+1))
	b := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fold.ErrObjectUnreadable, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past %d bytes", path, limit)
	}
	if len(b) == 0 || bytes.IndexByte(b, 0) >= 0 {
		// What a sync tool that writes in place leaves before the rest arrives
		// (docs/format.md §11): pending, as a torn object file is, never tampered.
		return nil, fmt.Errorf("%s: %w", path, fold.ErrObjectTorn)
	}
	return b, nil
}
