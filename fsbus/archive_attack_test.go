package fsbus_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
	"github.com/ferryhq/ferry/ledger"
)

// cutAliceTail removes alice's last n lines from her live file and returns them.
func cutAliceTail(t *testing.T, w *ownerWorld, n int) []byte {
	t.Helper()
	files := ledger.ChainFiles(w.c.Root, "alice", w.c.Device)
	live := files[len(files)-1]
	lines := bytes.SplitAfter(readArchived(t, live), []byte("\n"))
	lines = lines[:len(lines)-1]
	if err := os.WriteFile(live, bytes.Join(lines[:len(lines)-n], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return bytes.Join(lines[len(lines)-n:], nil)
}

// put writes b at the slash path rel of w's channel folder.
func put(t *testing.T, w *ownerWorld, rel string, b []byte) {
	t.Helper()
	p := filepath.Join(w.c.Root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyCutRecordsStashed: records above the cut cut from alice's live file, and
// all of them, or the last alone, kept in a file no reader folds (archive/'s
// notes.txt, a .tmp, a torn tail's name), are vanished errors on a machine that read
// them: a file readers do not read holds nothing for the fold.
func TestVerifyCutRecordsStashed(t *testing.T) {
	for _, side := range []string{"archive/ledger/alice/notes.txt", "ledger/alice/x.tmp", "ledger/alice/DEV.torn-1"} {
		for _, all := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s all %v", side, all), func(t *testing.T) {
				w, _ := archiveWorld(t)
				for i := range 3 {
					w.order(fmt.Sprint("above the cut ", i))
				}
				other := fsbustest.Home(t)
				if f := verifyFindings(t, w, other); len(f) != 0 {
					t.Fatalf("before the cut: %q", f)
				}
				tail := cutAliceTail(t, w, 3)
				if !all {
					tail = tail[bytes.LastIndexByte(tail[:len(tail)-1], '\n')+1:]
				}
				put(t, w, strings.ReplaceAll(side, "DEV", w.c.Device), tail)
				if e := errorsIn(verifyFindings(t, w, other)); len(e) == 0 {
					t.Fatal("3 acknowledged records cut: no error")
				}
			})
		}
	}
}

// TestVerifyTailCutOnOneOfTwoDevices: alice writes on two devices; her record above
// the cut on device 1 is cut from its file while a later one of device 2 stays. That
// record arrived after device 1's cut record: a vanished error, not the warning of
// records that left with the archive.
func TestVerifyTailCutOnOneOfTwoDevices(t *testing.T) {
	w, _ := archiveWorld(t)
	ch := fsbustest.Reopen(t, w.c)
	ch.Device = "dev2xyz1"
	alice2, err := ch.As("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice2.NewOrder(fsbus.NewOrderOptions{Title: "on device 2"}); err != nil {
		t.Fatal(err)
	}
	if r, err := w.owner("").Compact(fsbus.CompactOptions{SettleSet: true, Force: true}); err != nil || r.Epoch != 3 {
		t.Fatalf("epoch 3: %+v %v", r, err)
	}
	w.order("first on device 1 after epoch 3")
	w.order("above the cut, device 1")
	if _, err := alice2.NewOrder(fsbus.NewOrderOptions{Title: "later, device 2"}); err != nil {
		t.Fatal(err)
	}
	other := fsbustest.Home(t)
	if f := verifyFindings(t, w, other); len(f) != 0 {
		t.Fatalf("before the cut: %q", f)
	}
	cutAliceTail(t, w, 1)
	if e := errorsIn(verifyFindings(t, w, other)); len(e) == 0 {
		t.Fatal("a tail cut above the cut shows no error")
	}
}

// TestArchiveMoveThroughLinkedArchive: archive/ replaced by a link to the channel
// folder (so archive/ledger is the live ledger/) makes `ferry archive move` move
// nothing: every live file, the chains' tips among them, stays.
func TestArchiveMoveThroughLinkedArchive(t *testing.T) {
	w := newOwnerWorld(t)
	w.twoEpochs()
	w.clock.Add((fold.DefaultArchiveGraceS + 60) * 1000)
	old := time.UnixMilli(w.clock.Load()).Add(-(fold.DefaultArchiveGraceS + 120) * time.Second)
	if err := filepath.Walk(filepath.Join(w.c.Root, "ledger"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			return os.Chtimes(p, old, old)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	before := ledger.ChainFiles(w.c.Root, "alice", w.c.Device)
	if err := os.RemoveAll(filepath.Join(w.c.Root, "archive")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(w.c.Root, "archive")); err != nil {
		t.Fatal(err)
	}
	moved, _, err := w.owner("").ArchiveMove(filepath.Join(t.TempDir(), "old"))
	if len(moved) != 0 || err == nil {
		t.Fatalf("through a linked archive/: moved %v, %v", moved, err)
	}
	if after := ledger.ChainFiles(w.c.Root, "alice", w.c.Device); len(after) != len(before) {
		t.Fatalf("alice's live files: %d before, %d after", len(before), len(after))
	}
}
