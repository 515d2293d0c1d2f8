package fsbus

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// The machine-local high-water mark (docs/format.md §10 "Writer continuity", §18).

// markWorld is a channel with the master's session and one order written.
type markWorld struct {
	t    *testing.T
	c    *Channel
	s    *Session
	seg  string
	warn []string
}

func newMarkWorld(t *testing.T) *markWorld {
	t.Helper()
	w := &markWorld{t: t}
	h := testHome(t)
	h.Warn = func(msg string) { w.warn = append(w.warn, msg) }
	dir := filepath.Join(t.TempDir(), "ch")
	c, err := Init(h, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	w.c, w.s, w.seg = c, s, ledger.SegmentPath(dir, fold.MasterWriter, c.Device)
	w.order("first")
	return w
}

func (w *markWorld) order(title string) (*fold.Order, error) {
	return w.s.NewOrder(NewOrderOptions{Title: title})
}

func (w *markWorld) mark() highWater {
	w.t.Helper()
	m, err := w.c.Home.readHighWater(w.c.Project(), fold.MasterWriter, w.c.Device)
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

func (w *markWorld) markPath() string {
	return w.c.Home.highWaterPath(w.c.Project(), fold.MasterWriter, w.c.Device)
}

// tip is the seq and hash of the segment's last line.
func (w *markWorld) tip() (uint64, string) {
	w.t.Helper()
	lines := bytes.Split(bytes.TrimSuffix(mustReadFile(w.t, w.seg), []byte("\n")), []byte("\n"))
	e, err := ledger.ParseLine(lines[len(lines)-1])
	if err != nil {
		w.t.Fatal(err)
	}
	return e.Seq, e.Hash()
}

// enospc injects ENOSPC into every write of path, counting the writes tried.
func enospc(path string, skip int) (restore func(), tried *int) {
	n := 0
	return fsutil.SetFault(func(op fsutil.Op, p string) error {
		if p != path || op != fsutil.OpCreate {
			return nil
		}
		n++
		if n <= skip {
			return nil
		}
		return &fs.PathError{Op: string(op), Path: p, Err: syscall.ENOSPC}
	}), &n
}

// The mark is written, pending, before the append: when it cannot be, the write is
// refused naming the file and the OS error, and the segment and objects are unchanged.
func TestWriteRefusedWhenMarkCannotBeSaved(t *testing.T) {
	w := newMarkWorld(t)
	seg := mustReadFile(t, w.seg)
	orders, _ := os.ReadDir(filepath.Join(w.c.Root, "orders"))
	restore, _ := enospc(w.markPath(), 0)
	_, err := w.order("second")
	restore()
	if err == nil {
		t.Fatal("the write went on with its high-water mark unsaved")
	}
	if !errs.Is(err, errs.Internal) || !strings.Contains(err.Error(), w.markPath()) || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Fatalf("the refusal does not name the mark and the OS error: %v", err)
	}
	if !bytes.Equal(mustReadFile(t, w.seg), seg) {
		t.Fatal("the refused write changed the segment")
	}
	if now, _ := os.ReadDir(filepath.Join(w.c.Root, "orders")); len(now) != len(orders) {
		t.Fatalf("the refused write left objects: %d order files, %d before", len(now), len(orders))
	}
	// With the disk free again the write goes through, without a retry.
	if _, err := w.order("second"); err != nil {
		t.Fatal(err)
	}
}

// After the append the mark is promoted; a failure there is a warning (the pending
// mark guards), and the next write finds the entry and goes on.
func TestMarkPromotionFailureWarns(t *testing.T) {
	w := newMarkWorld(t)
	restore, tried := enospc(w.markPath(), 1) // the pending mark is written, the promotion is not
	o, err := w.order("second")
	restore()
	if err != nil || o == nil {
		t.Fatalf("the write failed on its promotion: %v", err)
	}
	if *tried != 2 || len(w.warn) != 1 || !strings.Contains(w.warn[0], w.markPath()) {
		t.Fatalf("want one warning naming %s after 2 tries, got %d tries and %q", w.markPath(), *tried, w.warn)
	}
	seq, hash := w.tip()
	if m := w.mark(); m != (highWater{Seq: seq, Hash: hash, Pending: true}) {
		t.Fatalf("mark %+v, want the pending mark of seq %d", m, seq)
	}
	if _, err := w.order("third"); err != nil {
		t.Fatalf("the write after a failed promotion: %v", err)
	}
	seq, hash = w.tip()
	if m := w.mark(); m != (highWater{Seq: seq, Hash: hash}) {
		t.Fatalf("mark %+v, want seq %d promoted", m, seq)
	}
}

// A pending mark whose entry is in no file — the process stopped between the mark and
// the append — answers retry_needed once; the retry writes that seq.
func TestPendingMarkWithoutEntryRefusesOnce(t *testing.T) {
	t.Parallel()
	w := newMarkWorld(t)
	seq, _ := w.tip()
	ghost := highWater{Seq: seq + 1, Hash: "sha256:" + strings.Repeat("ab", 32), Pending: true}
	if err := w.c.Home.writeHighWater(w.c.Project(), fold.MasterWriter, w.c.Device, ghost); err != nil {
		t.Fatal(err)
	}
	seg := mustReadFile(t, w.seg)
	_, err := w.order("second")
	if !errs.Is(err, errs.RetryNeeded) || !strings.Contains(err.Error(), ghost.Hash) {
		t.Fatalf("want retry_needed naming the missing entry, got %v", err)
	}
	if !bytes.Equal(mustReadFile(t, w.seg), seg) {
		t.Fatal("the refused write changed the segment")
	}
	if _, err := w.order("second"); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if got, _ := w.tip(); got != seq+1 {
		t.Fatalf("the retry wrote seq %d, want %d", got, seq+1)
	}
}

// A pending mark below which records are missing is a loss, refused every time.
func TestPendingMarkAboveLostEntriesRefuses(t *testing.T) {
	t.Parallel()
	w := newMarkWorld(t)
	w.order("second")
	seq, hash := w.tip()
	pend := highWater{Seq: seq + 2, Hash: hash, Pending: true} // seq+1 was acknowledged
	if err := w.c.Home.writeHighWater(w.c.Project(), fold.MasterWriter, w.c.Device, pend); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := w.order("third"); !errs.Is(err, errs.RetryNeeded) || !strings.Contains(err.Error(), "entries were lost") {
			t.Fatalf("attempt %d: want retry_needed for lost entries, got %v", i, err)
		}
	}
}

// Purging the cache dir, as users do, keeps the guard: the mark lives in the config dir.
func TestMarkSurvivesCachePurge(t *testing.T) {
	t.Parallel()
	w := newMarkWorld(t)
	w.order("second")
	w.order("third")
	if err := os.RemoveAll(w.c.Home.CacheDir); err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(mustReadFile(t, w.seg), []byte("\n"))
	if err := os.WriteFile(w.seg, bytes.Join(lines[:2], nil), 0o644); err != nil { // cut back to seq 2
		t.Fatal(err)
	}
	c, err := Open(w.c.Home, w.c.Root)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewOrder(NewOrderOptions{Title: "after the purge"}); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("a write after a cache purge and a cut-back segment: want retry_needed, got %v", err)
	}
}

// A mark an older binary left in the cache dir is read while the config dir has none,
// and removed by the first mark written there.
func TestLegacyMarkIsTakenOver(t *testing.T) {
	t.Parallel()
	w := newMarkWorld(t)
	seq, hash := w.tip()
	h, project, dev := w.c.Home, w.c.Project(), w.c.Device
	legacy := h.legacyHighWaterPath(project, fold.MasterWriter, dev)
	if err := os.MkdirAll(filepath.Dir(legacy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(w.markPath(), legacy); err != nil {
		t.Fatal(err)
	}
	if m := w.mark(); m != (highWater{Seq: seq, Hash: hash}) {
		t.Fatalf("legacy mark read as %+v", m)
	}
	if _, err := w.order("second"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Fatalf("the legacy mark is still there: %v", err)
	}
	if _, err := os.Stat(w.markPath()); err != nil {
		t.Fatal(err)
	}
}

// A mark that does not parse (torn by a crash, edited by hand) refuses the write once,
// naming the file, and the retry writes on: never as if the check were off.
func TestDamagedMarkRefusesOnce(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "x\n", "3 nothash\n", "3 sha256:" + strings.Repeat("0", 64) + " later\n", "1 2 3 4\n"} {
		w := newMarkWorld(t)
		if err := os.WriteFile(w.markPath(), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		seg := mustReadFile(t, w.seg)
		_, err := w.order("second")
		if !errs.Is(err, errs.RetryNeeded) || !strings.Contains(err.Error(), w.markPath()) || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("mark %q: want retry_needed naming the damaged file, got %v", text, err)
		}
		if !bytes.Equal(mustReadFile(t, w.seg), seg) {
			t.Fatalf("mark %q: the refused write changed the segment", text)
		}
		if _, err := w.order("second"); err != nil {
			t.Fatalf("mark %q: the retry: %v", text, err)
		}
	}
}

// Every mark has the same length, so the next overwrites it in place.
func TestMarkFixedLength(t *testing.T) {
	t.Parallel()
	w := newMarkWorld(t)
	for i := 0; i < 3; i++ {
		if b := mustReadFile(t, w.markPath()); len(b) != markLen || b[len(b)-1] != '\n' {
			t.Fatalf("mark %q: %d bytes, want %d ending in a newline", b, len(b), markLen)
		}
		w.order("more")
	}
	seq, hash := w.tip()
	if m := w.mark(); m != (highWater{Seq: seq, Hash: hash}) {
		t.Fatalf("mark %+v, want seq %d promoted", m, seq)
	}
}

func TestParseHighWater(t *testing.T) {
	t.Parallel()
	h := "sha256:" + strings.Repeat("0a", 32)
	for _, tc := range []struct {
		in   string
		want highWater
		ok   bool
	}{
		{"7\n", highWater{Seq: 7}, true},
		{"7 " + h + "\n", highWater{Seq: 7, Hash: h}, true},
		{"7 " + h + " pending\n", highWater{Seq: 7, Hash: h, Pending: true}, true},
		{"", highWater{}, false},
		{"-1\n", highWater{}, false},
		{"7 " + strings.ToUpper(h) + "\n", highWater{}, false},
		{"7 " + h + " done\n", highWater{}, false},
	} {
		got, ok := parseHighWater(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseHighWater(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// BenchmarkAppendMark measures what the high-water mark costs a write: the same
// signed, fsync'd append of a small draft to this writer's segment, bare
// (Ledger.Append) and with the pending mark before and its promotion after
// (appendMarked: two more fsync'd temp-file-and-rename writes).
func BenchmarkAppendMark(b *testing.B) {
	for _, tc := range []struct {
		name   string
		marked bool
	}{{"bare", false}, {"marked", true}} {
		b.Run(tc.name, func(b *testing.B) {
			h := &Home{ConfigDir: filepath.Join(b.TempDir(), "config"), CacheDir: filepath.Join(b.TempDir(), "cache")}
			c, err := Init(h, InitOptions{Dir: filepath.Join(b.TempDir(), "ch"), Project: "acme"})
			if err != nil {
				b.Fatal(err)
			}
			s, err := c.As(fold.MasterWriter)
			if err != nil {
				b.Fatal(err)
			}
			d := ledger.Draft{Type: fold.TypeMsgPost, Data: []byte(`{"to":"all","body":"benchmark"}`)}
			s.supported = true // measure the mark alone, not the first write's agent.support
			b.ResetTimer()
			for range b.N {
				if tc.marked {
					_, err = s.appendMarked(nil, d, ledger.HLC{})
				} else {
					_, err = s.Ledger.Append(s.Name, s.Device, d, s.Signer, ledger.HLC{})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestVerifyAfterAWriteIsNotLost: a write of this machine acknowledged after the view
// verify checks was read (a daemon writing while `ferry ledger verify` runs) is not
// reported lost; a segment that really lost entries still is.
func TestVerifyAfterAWriteIsNotLost(t *testing.T) {
	w := newMarkWorld(t)
	v, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.order("second"); err != nil {
		t.Fatal(err)
	}
	rep, err := w.c.Verify(v)
	if err != nil || len(rep.Lost) != 0 {
		t.Fatalf("verify of a view read before this machine's last write: lost %q, %v", rep.Lost, err)
	}
	// The segment loses its last line: lost, against the stale view and a fresh one.
	b := mustReadFile(t, w.seg)
	cut := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	if err := os.WriteFile(w.seg, b[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, err = w.c.Verify(v); err != nil || len(rep.Lost) != 1 {
		t.Fatalf("verify after the segment lost its last line: lost %q, %v", rep.Lost, err)
	}
}
