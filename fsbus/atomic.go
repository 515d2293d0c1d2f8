package fsbus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// WriteFileAtomic publishes data at path by rename (DESIGN §2 rule 3): a temp file in
// the same directory under a dot-name readers ignore, write, fsync, close, rename,
// fsync the directory. The temp file is removed only on error. The rename is
// fsutil.Rename: on Windows it is retried with backoff (about 1 s at most) on
// access-denied, sharing and lock violations (antivirus, indexers and sync clients
// hold files open briefly). perm is the mode of a new file (0644, or
// 0600 for keys). It returns the first error met; path is then unchanged.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".ferry-"+base+"-*.tmp")
	if err != nil {
		return fmt.Errorf("creating temp file for %s: %w", path, err)
	}
	tmpName := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmpName)
		return err
	}
	if err := tmp.Chmod(perm); err != nil && runtime.GOOS != "windows" {
		return fail(fmt.Errorf("setting mode of %s: %w", tmpName, err))
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(fmt.Errorf("writing %s: %w", tmpName, err))
	}
	if err := tmp.Sync(); err != nil {
		return fail(fmt.Errorf("syncing %s: %w", tmpName, err))
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("closing %s: %w", tmpName, err)
	}
	if err := fsutil.Rename(tmpName, path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("publishing %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so a rename in it is durable. Windows cannot open
// directories for sync; there the rename is already durable by NTFS journaling.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// writeNew writes data to path only if path does not exist yet (objects are written
// once, DESIGN §2 rule 2). It returns an error wrapping fs.ErrExist otherwise.
func writeNew(path string, data []byte) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("writing %s: %w", path, fs.ErrExist)
	}
	return WriteFileAtomic(path, data, 0o644)
}
