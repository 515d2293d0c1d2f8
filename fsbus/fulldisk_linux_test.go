package fsbus

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// fullDisk mounts a small tmpfs at a new directory and returns it with a function that
// fills it to the last byte and one that frees it again. It needs root (the CI run is
// root). Gate: without root or mount(8) it fails when FERRY_FULLDISK_TEST=1 or CI=true
// (.ci/run sets both) and is skipped, saying so, only on a machine that asked for
// neither.
func fullDisk(t *testing.T) (dir string, fill, free func()) {
	t.Helper()
	dir = t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := "cannot mount a tmpfs for a real full disk (" + strings.TrimSpace(string(out)) + "): run as root"
		if os.Getenv("FERRY_FULLDISK_TEST") == "1" || os.Getenv("CI") == "true" {
			t.Fatalf("%s; FERRY_FULLDISK_TEST=%q, CI=%q", msg, os.Getenv("FERRY_FULLDISK_TEST"), os.Getenv("CI"))
		}
		t.Skip(msg + " (.ci/run runs this test with FERRY_FULLDISK_TEST=1)")
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	filler := filepath.Join(dir, "filler")
	fill = func() {
		t.Helper()
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, chunk := range []int{64 << 10, 4 << 10, 1} {
			buf := make([]byte, chunk)
			for {
				if _, err := f.Write(buf); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatal(err)
					}
					break
				}
			}
		}
	}
	free = func() {
		t.Helper()
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	return dir, fill, free
}

// A real full disk under the config dir. The mark has a fixed length and is
// overwritten in place, so on a full disk writes go on and the mark follows them. A
// mark that must be made anew (this writer's first write here) cannot be: the write is
// refused naming the mark and ENOSPC, nothing is appended, and once there is room the
// write goes on without a retry.
func TestFullConfigDiskRefusesWrite(t *testing.T) {
	t.Parallel()
	disk, fill, free := fullDisk(t)
	h := &Home{ConfigDir: filepath.Join(disk, "config"), CacheDir: filepath.Join(t.TempDir(), "cache")}
	dir := filepath.Join(t.TempDir(), "ch")
	c, err := Init(h, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewOrder(NewOrderOptions{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	fill()
	if _, err := s.NewOrder(NewOrderOptions{Title: "on a full disk, over the mark in place"}); err != nil {
		t.Fatalf("a write whose mark is overwritten in place, on a full disk: %v", err)
	}
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	tip := v.chainTip(fold.MasterWriter, c.Device)
	if m, err := h.readHighWater(c.Project(), fold.MasterWriter, c.Device); err != nil || m != (highWater{Seq: tip.Seq, Hash: tip.Hash()}) {
		t.Fatalf("mark %+v (%v) after a write on a full disk, want seq %d", m, err, tip.Seq)
	}
	mark := h.highWaterPath(c.Project(), fold.MasterWriter, c.Device)
	if err := os.Remove(mark); err != nil { // as before this writer's first write here
		t.Fatal(err)
	}
	fill() // the page the mark held
	seg := ledger.SegmentPath(dir, fold.MasterWriter, c.Device)
	before := mustReadFile(t, seg)
	_, err = s.NewOrder(NewOrderOptions{Title: "on a full disk, with a new mark"})
	if err == nil || !strings.Contains(err.Error(), mark) || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Fatalf("want a refusal naming %s and ENOSPC, got %v", mark, err)
	}
	if !bytes.Equal(mustReadFile(t, seg), before) {
		t.Fatal("the refused write changed the segment")
	}
	free()
	if _, err := s.NewOrder(NewOrderOptions{Title: "with room again"}); err != nil {
		t.Fatalf("the write with room again: %v", err)
	}
}

// A real full disk under the channel folder: the append fails with ENOSPC, the mark
// goes back to the tip, and once there is room the next write needs no retry.
func TestFullChannelDiskAppendLeavesNoRetry(t *testing.T) {
	t.Parallel()
	disk, fill, free := fullDisk(t)
	h := testHome(t)
	dir := filepath.Join(disk, "ch")
	c, err := Init(h, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.NewOrder(NewOrderOptions{Title: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(o.ID, ""); err != nil {
		t.Fatal(err)
	}
	fill()
	// The segment's last page may have room for a few lines: write until it has none.
	for i := 0; ; i++ {
		_, err := s.Progress(o.ID, NoteOptions{Note: "still working"})
		if err == nil {
			if i > 64 {
				t.Fatal("64 progress notes fit on a full disk")
			}
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ledger.ErrNotWritten) {
			t.Fatalf("want the append's ENOSPC, got %v", err)
		}
		break
	}
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	tip := v.chainTip(fold.MasterWriter, c.Device)
	if m, err := h.readHighWater(c.Project(), fold.MasterWriter, c.Device); err != nil || m != (highWater{Seq: tip.Seq, Hash: tip.Hash()}) {
		t.Fatalf("mark %+v (%v) after a failed append, want the tip seq %d", m, err, tip.Seq)
	}
	free()
	if _, err := s.Progress(o.ID, NoteOptions{Note: "with room again"}); err != nil {
		t.Fatalf("the write with room again: %v", err)
	}
}
