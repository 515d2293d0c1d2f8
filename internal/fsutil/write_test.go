package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Every step of WriteFile and Append runs the fault hook; a fault leaves the target
// as it was and no temp file behind.
func TestFaultEveryStep(t *testing.T) {
	for _, op := range []Op{OpCreate, OpWrite, OpSync, OpRename} {
		t.Run(string(op), func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f")
			if err := WriteFile(p, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			restore := SetFault(func(o Op, path string) error {
				if o == op && path == p {
					return &fs.PathError{Op: string(o), Path: path, Err: syscall.ENOSPC}
				}
				return nil
			})
			err := WriteFile(p, []byte("new"), 0o644)
			restore()
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("WriteFile with %s failing: %v", op, err)
			}
			if b, _ := os.ReadFile(p); string(b) != "old" {
				t.Fatalf("the file holds %q after a failed write", b)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Fatalf("temp files left: %v", ents)
			}
		})
	}
	// SyncDir's fault comes after the rename: the data is there, the error is reported.
	p := filepath.Join(t.TempDir(), "f")
	restore := SetFault(func(o Op, path string) error {
		if o == OpSyncDir {
			return syscall.EIO
		}
		return nil
	})
	err := WriteFile(p, []byte("new"), 0o644)
	restore()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("want the directory fsync's error, got %v", err)
	}
}

func TestAppend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if _, err := Append(p, []byte("a\n"), AppendOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Append without Create to a missing file: %v", err)
	}
	for i, want := range []int64{2, 4} {
		end, err := Append(p, []byte("a\n"), AppendOptions{Create: true, Perm: 0o644, Sync: i == 1})
		if err != nil || end != want {
			t.Fatalf("Append %d: end %d, %v; want %d", i, end, err, want)
		}
	}
	for _, op := range []Op{OpCreate, OpWrite, OpSync} {
		restore := SetFault(func(o Op, _ string) error {
			if o == op {
				return syscall.ENOSPC
			}
			return nil
		})
		_, err := Append(p, []byte("b\n"), AppendOptions{Sync: true})
		restore()
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Append with %s failing: %v", op, err)
		}
	}
	if b, _ := os.ReadFile(p); string(b) != "a\na\nb\n" { // the sync fault came after its write
		t.Fatalf("log %q", b)
	}
}

// ReadBack and Remove run the fault hook before each step; a fault at the unlink
// leaves the file, a fault at the directory fsync comes after the unlink; a missing
// file is no error for Remove.
func TestReadBackRemove(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadBack(p); err != nil || string(b) != "data" {
		t.Fatalf("ReadBack: %q, %v", b, err)
	}
	if _, err := ReadBack(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadBack of a missing file: %v", err)
	}
	for _, op := range []Op{OpReadBack, OpRemove, OpSyncDir} {
		restore := SetFault(func(o Op, _ string) error {
			if o == op {
				return syscall.EIO
			}
			return nil
		})
		var err error
		if op == OpReadBack {
			_, err = ReadBack(p)
		} else {
			err = Remove(p)
		}
		restore()
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s failing: %v", op, err)
		}
		_, statErr := os.Stat(p)
		if gone := errors.Is(statErr, fs.ErrNotExist); gone != (op == OpSyncDir) {
			t.Fatalf("after a fault at %s the file is gone = %v", op, gone)
		}
	}
	if err := Remove(p); err != nil {
		t.Fatalf("Remove of a file already gone: %v", err)
	}
}
