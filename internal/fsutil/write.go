package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
)

// Op names one step of a write made through this package, as a fault hook sees it.
type Op string

// The steps of WriteFile and Append (and of Remove: OpSyncDir).
const (
	OpCreate  Op = "create"  // creating or opening the file (WriteFile: its temp file)
	OpWrite   Op = "write"   // writing the bytes
	OpSync    Op = "sync"    // fsync of the file
	OpRename  Op = "rename"  // publishing the temp file under its name
	OpSyncDir Op = "syncdir" // fsync of the directory after a rename
	// The steps of ReadBack and Remove.
	OpReadBack Op = "readback" // reading a written file back to compare it
	OpRemove   Op = "remove"   // unlinking a file
)

// FaultFunc is called before each step of a write with the step and the path the
// write is for (the published name, not a temp name); a non-nil error it returns is
// taken as that step's error, as if the OS had returned it.
type FaultFunc func(op Op, path string) error

var fault atomic.Pointer[FaultFunc]

// SetFault makes f the fault hook of every write made through this package from now
// on, process-wide, and returns the function that puts the previous hook back. nil
// removes the hook. It exists for tests that inject errors (ENOSPC, EIO) into every
// machine-local write path; nothing in ferry itself calls it and no environment
// variable sets it.
func SetFault(f FaultFunc) (restore func()) {
	var p *FaultFunc
	if f != nil {
		p = &f
	}
	old := fault.Swap(p)
	return func() { fault.Store(old) }
}

// fsyncs counts the fsyncs made through this package (Sync, SyncDir and the writes).
var fsyncs atomic.Int64

// Fsyncs is the number of fsyncs this process has made through this package so far:
// every file and directory fsync of ferry's writes (a test reads it before and after
// one command to pin what the command costs in fsyncs).
func Fsyncs() int64 { return fsyncs.Load() }

// Sync fsyncs f, counted in Fsyncs. It runs no fault hook: the writes of this package
// run theirs (OpSync) before they call it.
func Sync(f *os.File) error {
	fsyncs.Add(1)
	return f.Sync()
}

// check runs the fault hook, if any, for op on path.
func check(op Op, path string) error {
	if f := fault.Load(); f != nil {
		return (*f)(op, path)
	}
	return nil
}

// WriteFile publishes data at path by rename (docs/design.md §2 rule 3): a temp file
// in the same directory under a dot-name readers ignore (".ferry-<name>-*.tmp"), write,
// fsync, close, rename (Rename), fsync the directory. Missing parent directories are
// created (0755). perm is the mode of the new file (0644, or 0600 for keys). The temp
// file is removed on error. It returns the first error met, wrapped with the step and
// path (the OS error inside names the temp file); path then holds what it held before (after a failed directory fsync it
// holds data, but the rename may not survive a crash).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := check(OpCreate, path); err != nil {
		return fmt.Errorf("creating temp file for %s: %w", path, err)
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
		return fail(fmt.Errorf("setting the mode of %s: %w", path, err))
	}
	if err := check(OpWrite, path); err != nil {
		return fail(fmt.Errorf("writing %s: %w", path, err))
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(fmt.Errorf("writing %s: %w", path, err))
	}
	if err := check(OpSync, path); err != nil {
		return fail(fmt.Errorf("syncing %s: %w", path, err))
	}
	if err := Sync(tmp); err != nil {
		return fail(fmt.Errorf("syncing %s: %w", path, err))
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("closing %s: %w", path, err)
	}
	if err := check(OpRename, path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("publishing %s: %w", path, err)
	}
	if err := Rename(tmpName, path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("publishing %s: %w", path, err)
	}
	if err := check(OpSyncDir, path); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so a rename or a new name in it is durable. Windows
// cannot open directories for sync; there NTFS journaling makes the rename durable,
// and SyncDir does nothing.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s for fsync: %w", dir, err)
	}
	defer d.Close()
	fsyncs.Add(1)
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// AppendOptions says how Append opens and finishes a file.
type AppendOptions struct {
	Create bool        // create the file (with Perm) when missing; else a missing file is an error
	Perm   fs.FileMode // the mode of a created file
	Sync   bool        // fsync the file after the write
}

// Append writes data at the end of path with one write to a file opened O_APPEND,
// and returns the file's size after it. A failed or short write may leave part of data
// at the end of the file: callers' readers treat an incomplete last line as torn. It
// returns the first error met, wrapped with the step and the path.
func Append(path string, data []byte, o AppendOptions) (end int64, err error) {
	flags := os.O_WRONLY | os.O_APPEND
	if o.Create {
		flags |= os.O_CREATE
	}
	if err := check(OpCreate, path); err != nil {
		return 0, fmt.Errorf("opening %s: %w", path, err)
	}
	f, err := os.OpenFile(path, flags, o.Perm)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", path, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing %s: %w", path, cerr)
		}
	}()
	if err := check(OpWrite, path); err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if o.Sync {
		if err := check(OpSync, path); err != nil {
			return 0, fmt.Errorf("syncing %s: %w", path, err)
		}
		if err := Sync(f); err != nil {
			return 0, fmt.Errorf("syncing %s: %w", path, err)
		}
	}
	end, err = f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("reading the size of %s: %w", path, err)
	}
	return end, nil
}

// WriteAt writes data at offset off of the existing file path, in place, without
// fsync: for a change whose loss in a crash is harmless, such as marking a record
// done. A write of a few bytes inside one page is never torn in the page cache. It
// returns the first error met, wrapped with the step and the path.
func WriteAt(path string, off int64, data []byte) (err error) {
	if err := check(OpCreate, path); err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing %s: %w", path, cerr)
		}
	}()
	if err := check(OpWrite, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Overwrite writes data over the start of the existing file path, in place, and
// fsyncs it: for a small record of fixed length rewritten often, where a rename would
// cost a second fsync. data should be no longer than one disk sector (512 bytes), which
// disks write whole; callers still check what they read back. It returns the first
// error met, wrapped with the step and the path.
func Overwrite(path string, data []byte) (err error) {
	if err := check(OpCreate, path); err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing %s: %w", path, cerr)
		}
	}()
	if err := check(OpWrite, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := check(OpSync, path); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := Sync(f); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return nil
}

// ReadBack reads path whole, after the fault hook's OpReadBack: the read that checks
// what a write left on disk. Errors are wrapped with the path.
func ReadBack(path string) ([]byte, error) {
	if err := check(OpReadBack, path); err != nil {
		return nil, fmt.Errorf("reading %s back: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s back: %w", path, err)
	}
	return b, nil
}

// Remove unlinks path and fsyncs its directory, so that the unlink survives a crash;
// a path already missing is no error (its directory is fsynced all the same). The
// fault hook runs before each step (OpRemove, OpSyncDir). Errors are wrapped with the
// step and the path.
func Remove(path string) error {
	if err := check(OpRemove, path); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := check(OpSyncDir, path); err != nil {
		return fmt.Errorf("syncing %s: %w", filepath.Dir(path), err)
	}
	return SyncDir(filepath.Dir(path))
}
