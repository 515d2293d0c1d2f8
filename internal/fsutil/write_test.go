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
