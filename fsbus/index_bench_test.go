package fsbus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/ledger"
)

// bigDir is the generated big fixture (fixtures/README.md: 100,000 entries, 10,000
// orders, 20 writers). It is not committed; the benchmarks below fail, naming the
// command, when it is missing. They never run in `go test` without -bench.
var bigDir = filepath.Join("..", "fixtures", "big")

func needBig(b *testing.B) {
	b.Helper()
	if _, err := os.Stat(filepath.Join(bigDir, "channel", "channel.toml")); err != nil {
		b.Fatalf("the big fixture is missing: run `go run ./fixtures/gen -kind big -out fixtures/big` first (%v)", err)
	}
}

// openBigCopy copies the big fixture to a temp dir (the benchmarks append to it) and
// opens its channel with a home whose cache dir starts empty. It returns the channel,
// the home and the temp dir.
func openBigCopy(b *testing.B) (*Channel, *Home, string) {
	b.Helper()
	needBig(b)
	tmp := b.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(bigDir)); err != nil {
		b.Fatal(err)
	}
	h := &Home{ConfigDir: filepath.Join(tmp, "home", "config"), CacheDir: filepath.Join(tmp, "cache")}
	c, err := Open(h, filepath.Join(tmp, "channel"))
	if err != nil {
		b.Fatal(err)
	}
	return c, h, tmp
}

// BenchmarkBigFirstIngest times the first Load of the big fixture on a machine that
// has never seen it: an empty cache dir (no index, no arrival log) and an empty
// signature cache, so every segment is read and every signature checked (on every
// core), the state folded, the arrival log and the index written. The channel is read
// in place: Load never writes to it.
func BenchmarkBigFirstIngest(b *testing.B) {
	needBig(b)
	for b.Loop() {
		b.StopTimer()
		sigcache.Clear()
		h := &Home{ConfigDir: filepath.Join(bigDir, "home", "config"), CacheDir: b.TempDir()}
		c, err := Open(h, filepath.Join(bigDir, "channel"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		v, err := c.Load()
		if err != nil {
			b.Fatal(err)
		}
		if v.State.Entries != 100_000 || len(v.State.Ignored) != 0 {
			b.Fatalf("big fixture: %d entries, %d ignored; want 100000, 0", v.State.Entries, len(v.State.Ignored))
		}
	}
}

// BenchmarkBigCatchUp times Load of the big fixture after 100 new entries (appended
// untimed by one agent, signed, fsync'd), with the index holding everything before
// them.
//
//   - same-process: the Channel that loaded before loads again (a long-running
//     process: ferry mcp, ferry watch).
//   - new-process: a new Channel with an empty signature cache opens the index from
//     the cache dir (one ferry command).
//
// The big channel is copied to a temp dir once (untimed), as the entries are
// appended to it.
func BenchmarkBigCatchUp(b *testing.B) {
	c, h, tmp := openBigCopy(b)
	if _, err := c.Load(); err != nil {
		b.Fatal(err)
	}
	const writer = "agent-01"
	key, err := h.LoadKey(c.Project(), writer)
	if err != nil {
		b.Fatal(err)
	}
	device := ""
	if es, _ := filepath.Glob(filepath.Join(tmp, "channel", "ledger", writer, "*.jsonl")); len(es) > 0 {
		device = filepath.Base(es[0][:len(es[0])-len(".jsonl")])
	}
	add := func(b *testing.B) {
		for i := range 100 {
			d := ledger.Draft{Type: fold.TypeMsgPost, Ref: "m-bench", Data: json.RawMessage(`{"body":"catch-up ` + string(rune('a'+i%26)) + `"}`)}
			if _, err := c.Ledger.Append(writer, device, d, key, ledger.HLC{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("same-process", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			add(b)
			b.StartTimer()
			if _, err := c.Load(); err != nil {
				b.Fatal(err)
			}
			if n := c.localIndex().rs.Stats().NewLines; n != 100 {
				b.Fatalf("read %d new lines, want 100", n)
			}
		}
	})
	b.Run("new-process", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			add(b)
			sigcache.Clear()
			n, err := Open(h, c.Root)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := n.Load(); err != nil {
				b.Fatal(err)
			}
			if got := n.localIndex().rs.Stats().NewLines; got != 100 {
				b.Fatalf("read %d new lines, want 100", got)
			}
			if n.folds.fromCheckpoint != 1 {
				b.Fatalf("the catch-up did not start from the fold checkpoint: %+v", n.folds)
			}
		}
	})
}

// BenchmarkBigClaim times one claim of an open order of the big fixture as agent-02,
// a different order each iteration, with the index in place (one claim
// process on the big fixture).
//
//   - same-process: one Session claims order after order (ferry run, ferry mcp serve).
//   - new-process: each claim opens the channel anew, with an empty signature cache
//     (one `ferry order claim` command).
func BenchmarkBigClaim(b *testing.B) {
	c, h, _ := openBigCopy(b)
	v, err := c.Load()
	if err != nil {
		b.Fatal(err)
	}
	var open []string
	for id, o := range v.State.Orders {
		if o.State == fold.StateOpen && o.OfferedTo == "" && len(o.Deps) == 0 {
			open = append(open, id)
		}
	}
	next := func(b *testing.B) string {
		if len(open) == 0 {
			b.Fatal("the big fixture ran out of open orders")
		}
		id := open[len(open)-1]
		open = open[:len(open)-1]
		return id
	}
	const agent = "agent-02"
	b.Run("same-process", func(b *testing.B) {
		s, err := c.As(agent)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.Claim(next(b), ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	// claim opens the channel anew and claims the next order in it.
	claim := func(b *testing.B) *Channel {
		n, err := Open(h, c.Root)
		if err != nil {
			b.Fatal(err)
		}
		s, err := n.As(agent)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Claim(next(b), ""); err != nil {
			b.Fatal(err)
		}
		return n
	}
	b.Run("new-process", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			sigcache.Clear()
			b.StartTimer()
			if n := claim(b); n.folds.fromCheckpoint != 1 {
				b.Fatalf("the claim did not start from the fold checkpoint: %+v", n.folds)
			}
		}
	})
	// no-checkpoint: the fold checkpoint is removed before each claim (untimed), as
	// when it is older than CheckpointTrust: the claim folds everything (and writes a
	// new checkpoint).
	b.Run("new-process-no-checkpoint", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			sigcache.Clear()
			if err := os.Remove(c.checkpointPath()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if n := claim(b); n.folds.full != 1 {
				b.Fatalf("the claim did not fold everything: %+v", n.folds)
			}
		}
	})
}
