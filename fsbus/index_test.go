package fsbus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/cache"
	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// reopen opens c's channel again with the same home: a new process's Channel (the
// signature cache is per process; tests that mean "a new process" clear it).
func reopen(t testing.TB, c *Channel) *Channel {
	t.Helper()
	n, err := Open(c.Home, c.Root)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// viewJSON renders what the index must not change: entries, problems and forks of the
// snapshot, and the folded state.
func viewJSON(t testing.TB, v *View) string {
	t.Helper()
	b, err := json.MarshalIndent(struct {
		Entries  []string
		Problems []ledger.Problem
		Forks    []ledger.Fork
		MaxHLC   ledger.HLC
		State    *fold.State
	}{entryHashes(v.Snapshot.Entries), v.Snapshot.Problems, v.Snapshot.Forks, v.Snapshot.MaxHLC, v.State}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func entryHashes(es []ledger.Entry) []string {
	out := make([]string, len(es))
	for i := range es {
		out[i] = es[i].Hash()
	}
	return out
}

// fullLoad is Load with the index off (FERRY_NO_INDEX=1): every segment read in full.
func fullLoad(t *testing.T, c *Channel) *View {
	t.Helper()
	t.Setenv(envNoIndex, "1")
	defer os.Unsetenv(envNoIndex)
	v, err := reopen(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// diffLines shows where two renderings first differ.
func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		if i < len(g) && i < len(w) && g[i] == w[i] {
			continue
		}
		lo := max(0, i-3)
		return fmt.Sprintf("line %d\n got: %s\nwant: %s", i, strings.Join(g[lo:min(len(g), i+4)], "\n      "), strings.Join(w[lo:min(len(w), i+4)], "\n      "))
	}
	return "no difference"
}

// TestIndexedLoadMatchesFullRead drives the busy fixture through random steps — real
// writes by agents, forged conflict copies that fork a chain, torn tails and their
// completion, truncated and swapped segments, a damaged or deleted index — and after
// each step checks that Load through the index (one Channel kept across steps, and a
// new Channel with an empty signature cache, as a new process) gives the same
// snapshot entries, problems, forks and State as Load with FERRY_NO_INDEX=1, which is
// Ledger.Read (+ ReadVerified on forks) and Fold (docs/format.md §18 "The local index").
func TestIndexedLoadMatchesFullRead(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FERRY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (FERRY_SEED=%d reproduces)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 11))
	c := openBusyCopy(t)
	kept := reopen(t, c)
	agents := []string{"cursor-laptop", "codex-laptop", "claude-code-laptop"}
	segs := func() []string {
		m, _ := filepath.Glob(filepath.Join(c.Root, "ledger", "*", "*.jsonl"))
		return m
	}
	for step := range 14 {
		all := segs()
		p := all[r.IntN(len(all))]
		var what string
		switch k := r.IntN(8); k {
		case 0, 1:
			s, err := c.As(agents[r.IntN(len(agents))])
			if err != nil {
				t.Fatal(err)
			}
			what = "order new by " + s.Name
			if _, err := s.NewOrder(NewOrderOptions{Title: fmt.Sprintf("step %d", step)}); errs.Is(err, errs.Denied) || errs.Is(err, errs.RetryNeeded) {
				// An earlier step cut or swapped a segment: the master's grant that
				// seated the writer is gone (denied), or the writer's own segment lost
				// entries it wrote (retry_needed); the refusal is right either way. The
				// index must still agree with the full read below.
				what = "order new refused: " + err.Error()
			} else if err != nil {
				t.Fatal(err)
			}
		case 2:
			// A conflict copy whose last record is forged (same writer, device and seq,
			// other data, the old signature): a fork the signed record must win.
			b, _ := os.ReadFile(p)
			lines := bytes.SplitAfter(b, []byte("\n"))
			if len(lines) < 2 {
				continue
			}
			last := lines[len(lines)-2]
			forged := bytes.Replace(last, []byte(`"type":"`), []byte(`"ref":"forged","type":"`), 1)
			cp := filepath.Join(filepath.Dir(p), fmt.Sprintf("x.sync-conflict-20261129-1830%02d-ABCDEFG.jsonl", step))
			writeTestFile(t, cp, append(bytes.Join(lines[:len(lines)-2], nil), forged...))
			what = "forged conflict copy"
		case 3:
			appendTestFile(t, p, []byte(`{"v":1,"writer":"`))
			what = "torn tail"
		case 4:
			b, _ := os.ReadFile(p)
			if len(b) > 0 && b[len(b)-1] != '\n' {
				writeTestFile(t, p, b[:bytes.LastIndexByte(b, '\n')+1])
				what = "torn tail removed"
			} else {
				writeTestFile(t, p, b[:len(b)*3/4])
				what = "truncated mid-line"
			}
		case 5:
			q := all[r.IntN(len(all))]
			b, _ := os.ReadFile(q)
			writeTestFile(t, p, b)
			what = "content swapped"
		case 6:
			os.WriteFile(c.indexPath(), []byte("ferry-index 1 garbage\n\x05abc"), 0o644)
			what = "index damaged"
		case 7:
			os.Remove(c.indexPath())
			what = "index deleted"
		}
		want := viewJSON(t, fullLoad(t, c))
		v, err := kept.Load()
		if err != nil {
			t.Fatal(err)
		}
		if got := viewJSON(t, v); got != want {
			t.Fatalf("step %d (%s): Load through the kept index differs from the full read: %s", step, what, diffLines(got, want))
		}
		sigcache.Clear()
		v, err = reopen(t, c).Load()
		if err != nil {
			t.Fatal(err)
		}
		if got := viewJSON(t, v); got != want {
			t.Fatalf("step %d (%s): Load of a new process through the saved index differs from the full read: %s", step, what, diffLines(got, want))
		}
	}
}

// writeTestFile writes b to p, making p's directory when missing.
func writeTestFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTestFile(t testing.TB, p string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// indexStats loads a new Channel on c's channel (a new process: signature cache
// emptied) and returns what its incremental read did.
func indexStats(t *testing.T, c *Channel) (*View, ledger.ReadStats) {
	t.Helper()
	sigcache.Clear()
	n := reopen(t, c)
	v, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	return v, n.localIndex().rs.Stats()
}

// TestIndexRebuiltNotTrusted checks each way the index can be wrong: damaged bytes
// (a flipped byte, a torn last frame, garbage), another version, another channel's
// index, a deleted index, a truncated segment and a segment whose content was swapped
// for another's. Each is rebuilt from the channel (its segments read again) and the
// view equals the full read's; a sound index reads nothing again.
func TestIndexRebuiltNotTrusted(t *testing.T) {
	c := openBusyCopy(t)
	want := viewJSON(t, fullLoad(t, c))
	if v, st := indexStats(t, c); st.Reset != st.Files || viewJSON(t, v) != want {
		t.Fatalf("first Load: %+v, want every file read", st)
	}
	if v, st := indexStats(t, c); st.Reset != 0 || st.BytesRead != 0 || viewJSON(t, v) != want {
		t.Fatalf("Load through a sound index: %+v, want nothing read again", st)
	}
	good, err := os.ReadFile(c.indexPath())
	if err != nil {
		t.Fatal(err)
	}
	header := good[:bytes.IndexByte(good, '\n')+1]
	damage := map[string][]byte{
		"flipped byte":    append(bytes.Clone(good[:len(good)/2]), append([]byte{good[len(good)/2] ^ 0x40}, good[len(good)/2+1:]...)...),
		"torn last frame": good[:len(good)-7],
		"garbage":         []byte("\x00\x00\x00 not an index"),
		"other version":   append([]byte("ferry-index 1 "), good[len(cache.IndexHeader):]...),
		"other channel":   append([]byte(cache.IndexHeader+"other-project "+ledger.FormatKey(c.MasterKey)+"\n"), good[len(header):]...),
		"header only":     header[:len(header)-1],
	}
	for name, b := range damage {
		writeTestFile(t, c.indexPath(), b)
		v, st := indexStats(t, c)
		if st.Reset != st.Files {
			t.Fatalf("%s: %+v, want the index rebuilt (every file read)", name, st)
		}
		if got := viewJSON(t, v); got != want {
			t.Fatalf("%s: view differs from the full read: %s", name, diffLines(got, want))
		}
		if _, st := indexStats(t, c); st.Reset != 0 || st.BytesRead != 0 {
			t.Fatalf("%s: the rebuilt index was not saved: %+v", name, st)
		}
	}
	os.Remove(c.indexPath())
	if _, st := indexStats(t, c); st.Reset != st.Files {
		t.Fatalf("deleted index: %+v, want every file read", st)
	}

	seg := ledger.SegmentPath(c.Root, "cursor-laptop", c.Device)
	orig, _ := os.ReadFile(seg)
	other, _ := os.ReadFile(ledger.SegmentPath(c.Root, "codex-laptop", c.Device))
	for name, b := range map[string][]byte{
		"truncated segment": orig[:bytes.LastIndexByte(orig[:len(orig)-1], '\n')+1],
		"swapped segment":   other,
	} {
		writeTestFile(t, seg, orig)
		indexStats(t, c)
		writeTestFile(t, seg, b)
		want := viewJSON(t, fullLoad(t, c))
		v, st := indexStats(t, c)
		if st.Reset != 1 {
			t.Fatalf("%s: %+v, want that one segment read again", name, st)
		}
		if got := viewJSON(t, v); got != want {
			t.Fatalf("%s: view differs from the full read: %s", name, diffLines(got, want))
		}
	}
}

// TestIndexCatchUpReadsNewBytesOnly checks that after a write only the new line is
// read, in the same process and in the next one, and that a conflict copy is a new
// file read once.
func TestIndexCatchUpReadsNewBytesOnly(t *testing.T) {
	t.Parallel()
	c := openBusyCopy(t)
	indexStats(t, c)
	s, err := c.As("cursor-laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewOrder(NewOrderOptions{Title: "one more"}); err != nil {
		t.Fatal(err)
	}
	// The fixture's segments are format 1's: the first write also writes the
	// segment's agent.support.
	v, st := indexStats(t, c)
	if st.NewLines != 2 || st.Reset != 0 || v.State.Entries != 202 {
		t.Fatalf("after one write: %+v, %d entries; want two lines read, 202 entries", st, v.State.Entries)
	}
	seg := ledger.SegmentPath(c.Root, "cursor-laptop", c.Device)
	b, _ := os.ReadFile(seg)
	writeTestFile(t, strings.TrimSuffix(seg, ".jsonl")+".sync-conflict-20261129-183000-ABCDEFG.jsonl", b)
	v, st = indexStats(t, c)
	if st.Reset != 1 || v.State.Entries != 202 || len(v.Snapshot.Forks) != 0 {
		t.Fatalf("after a conflict copy: %+v, %d entries, forks %v; want the copy read once, 202 entries", st, v.State.Entries, v.Snapshot.Forks)
	}
	if _, st = indexStats(t, c); st.BytesRead != 0 {
		t.Fatalf("the copy was read again: %+v", st)
	}
}

// TestIndexConcurrentLoads runs Loads of separate Channel values on goroutines and in
// real processes against one index while agents write; afterwards the index is sound
// (opens without a rebuild) and every view equals the full read.
func TestIndexConcurrentLoads(t *testing.T) {
	c := openBusyCopy(t)
	s, err := c.As("cursor-laptop")
	if err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	if os.Getenv("FERRY_INDEX_CHILD") == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			cmd := exec.Command(exe, "-test.run", "^TestIndexLoaderChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "FERRY_INDEX_CHILD="+c.Root, "FERRY_INDEX_CACHE="+c.Home.CacheDir, "FERRY_INDEX_CONFIG="+c.Home.ConfigDir)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, cmd)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("child output:\n%s", out.String())
				}
			})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 3 {
		wg.Go(func() {
			n, err := Open(c.Home, c.Root)
			if err != nil {
				errs <- err
				return
			}
			for range 5 {
				if _, err := n.Load(); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range 5 {
		if _, err := s.NewOrder(NewOrderOptions{Title: fmt.Sprintf("concurrent %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("loader process: %v", err)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f, err := os.Open(c.indexPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, _, err := cache.ReadIndex(bufioReader(f), c.Project(), ledger.FormatKey(c.MasterKey)); err != nil {
		t.Fatalf("index after concurrent loads: %v", err)
	}
	want := viewJSON(t, fullLoad(t, c))
	v, _ := indexStats(t, c)
	if got := viewJSON(t, v); got != want {
		t.Fatalf("view after concurrent loads differs from the full read: %s", diffLines(got, want))
	}
}

// TestIndexLoaderChild is the loader process of TestIndexConcurrentLoads; it does
// nothing unless that test started it.
func TestIndexLoaderChild(t *testing.T) {
	root := os.Getenv("FERRY_INDEX_CHILD")
	if root == "" {
		return
	}
	h := &Home{ConfigDir: os.Getenv("FERRY_INDEX_CONFIG"), CacheDir: os.Getenv("FERRY_INDEX_CACHE")}
	for range 6 {
		c, err := Open(h, root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Load(); err != nil {
			t.Fatal(err)
		}
	}
}

func bufioReader(f *os.File) *bufio.Reader { return bufio.NewReader(f) }
