package fsbus

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
)

// busyDir is the committed busy fixture (fixtures/README.md).
var busyDir = filepath.Join("..", "fixtures", "busy")

// openBusyCopy copies the busy fixture (channel + home) into a temp dir and opens the
// channel from its device A home.
func openBusyCopy(tb testing.TB) *Channel {
	tb.Helper()
	tmp := tb.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(busyDir)); err != nil {
		tb.Fatal(err)
	}
	h := &Home{ConfigDir: filepath.Join(tmp, "home", "config"), CacheDir: filepath.Join(tmp, "home", "cache")}
	c, err := Open(h, filepath.Join(tmp, "channel"))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkFoldBusy measures Fold over the busy fixture's 200 entries, read once
// (segments and object files) before the loop.
//
//   - cold: the per-process signature cache (verifycache.go) is emptied every
//     iteration, so every signature is checked: the first fold of a ferry process.
//   - cached: every signature is already in the cache: a second fold in the same
//     process (a write's fold after its append).
func BenchmarkFoldBusy(b *testing.B) {
	c := openBusyCopy(b)
	snap, err := c.Ledger.Read()
	if err != nil {
		b.Fatal(err)
	}
	type obj struct {
		canon []byte
		hash  string
		err   error
	}
	objs := map[string]obj{}
	read := c.objects()
	in := fold.FoldInput{Project: c.Project(), Master: c.MasterKey, Entries: snap.Entries,
		Objects: func(writer, id string) ([]byte, string, error) {
			o, ok := objs[writer+"/"+id]
			if !ok {
				o.canon, o.hash, o.err = read(writer, id)
				objs[writer+"/"+id] = o
			}
			return o.canon, o.hash, o.err
		}}
	check := func(st *fold.State) {
		if st.Entries != 200 || len(st.Ignored) != 0 || len(st.Orders) != 75 {
			b.Fatalf("busy fold: %d entries, %d ignored, %d orders; want 200, 0, 75", st.Entries, len(st.Ignored), len(st.Orders))
		}
	}
	st := fold.Fold(in) // reads every object file once, into objs
	check(st)
	if n := len(st.ListOrders(fold.OrderFilter{State: string(fold.StateOpen)})); n != 40 {
		b.Fatalf("busy fold: %d open orders, want 40", n)
	}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sigcache.Clear()
			check(fold.Fold(in))
		}
	})
	b.Run("cached", func(b *testing.B) {
		check(fold.Fold(in))
		b.ReportAllocs()
		for b.Loop() {
			check(fold.Fold(in))
		}
	})
}

// BenchmarkLoadBusy measures Channel.Load of the busy fixture as one ferry process
// does it: read every segment and object file, verify every signature (cache emptied
// each iteration), fold, and check the machine's arrival log (already holding every
// entry, as on a machine that has seen the channel before).
func BenchmarkLoadBusy(b *testing.B) {
	c := openBusyCopy(b)
	if _, err := c.Load(); err != nil { // first sight: fills the arrival log
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		sigcache.Clear()
		v, err := c.Load()
		if err != nil {
			b.Fatal(err)
		}
		if v.State.Entries != 200 {
			b.Fatalf("%d entries, want 200", v.State.Entries)
		}
	}
}
