package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// snapJSON renders a snapshot for comparing: entries by hash, problems, forks, max HLC.
func snapJSON(t testing.TB, s *Snapshot) string {
	t.Helper()
	type out struct {
		Entries  []string
		Raw      []string
		Problems []Problem
		Forks    []Fork
		MaxHLC   HLC
	}
	o := out{Entries: hashes(s.Entries), Problems: s.Problems, Forks: s.Forks, MaxHLC: s.MaxHLC}
	for i := range s.Entries {
		c, err := s.Entries[i].Canonical()
		if err != nil {
			t.Fatal(err)
		}
		o.Raw = append(o.Raw, string(c)+"|"+string(s.Entries[i].Data))
	}
	b, err := json.MarshalIndent(o, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// reload saves st as a process would (whole, then changes) and restores it in a
// fresh ReadState, as the next process would.
func reload(t *testing.T, saved *[][]byte, st *ReadState, whole bool) *ReadState {
	t.Helper()
	if whole {
		*saved = st.Chunks()
	} else {
		*saved = append(*saved, st.TakeChanges()...)
	}
	fresh := NewReadState()
	for _, c := range *saved {
		if err := fresh.ApplyChunk(c); err != nil {
			t.Fatalf("ApplyChunk: %v", err)
		}
	}
	return fresh
}

// TestIncrementalMatchesRead drives a channel directory through random steps — appends
// on several segments, torn tails and their completion, NUL runs filled in later,
// malformed and blank lines, conflict copies that fork, truncation, replaced content,
// deleted files — and after each step checks that ReadIncremental (kept in memory, and
// saved and restored through chunks) gives exactly the Snapshot of Read and of
// ReadVerified (docs/format.md §18).
func TestIncrementalMatchesRead(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FERRY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (FERRY_SEED=%d reproduces)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 7))
	writers := []string{testWriter, "codex-desktop", "cursor-laptop"}
	appended := 0 // reads that took the append-only fast path (Snapshot.Added)
	// restored counts last snapshots restored in a new process, appendedRestored the
	// reads of such a process that took the fast path.
	restored, appendedRestored := 0, 0
	for round := range 3 {
		l := newTestLedger(t)
		mem, memPlain, viaChunks := NewReadState(), NewReadState(), NewReadState()
		var saved [][]byte
		// After each plain read a new process opens what the one before saved: its
		// chunks and, from that or some earlier read, its last snapshot (SaveLast).
		var lastChunks [][]byte
		var lastSaved []byte
		segs := func() []string {
			m, _ := filepath.Glob(filepath.Join(l.Root(), "ledger", "*", "*.jsonl"))
			return m
		}
		pick := func() string {
			m := segs()
			if len(m) == 0 {
				return ""
			}
			return m[r.IntN(len(m))]
		}
		var pendingNUL []struct {
			path string
			at   int64
			data []byte
		}
		for step := range 50 {
			var what string
			switch k := r.IntN(12); {
			case k < 4 || len(segs()) == 0:
				w := writers[r.IntN(len(writers))]
				n := 1 + r.IntN(5)
				seg := SegmentPath(l.Root(), w, testDevice)
				if b, err := os.ReadFile(seg); err == nil && len(b) > 0 && b[len(b)-1] != '\n' {
					appendBytes(t, seg, []byte("\n")) // let Append see a clean tail
				}
				if _, err := os.Stat(seg); err == nil {
					if _, err := l.Repair(w, testDevice); err != nil {
						t.Fatal(err)
					}
				}
				for i := range n {
					if _, err := l.Append(w, testDevice, draft("s", step*10+i), testKey, HLC{}); err != nil {
						t.Fatal(err)
					}
				}
				what = "append " + w
			case k == 4:
				p := pick()
				appendBytes(t, p, []byte(`{"v":1,"writer":"x`+strconv.Itoa(step)+`"`)) // torn tail
				what = "torn tail"
			case k == 5:
				p := pick()
				// Distinct junk, so that no two files share a line at one offset by chance:
				// the index tells files apart by their first and last line.
				appendBytes(t, p, []byte("not json "+strconv.Itoa(step)+"\n"+strings.Repeat(" ", step)+"\n"))
				what = "malformed and blank lines"
			case k == 6:
				p := pick()
				b := readFile(t, p)
				lines := segmentLinesLoose(b)
				if len(lines) == 0 {
					continue
				}
				// A conflict copy: the file as it was some lines ago, then the writer goes
				// on from there in the copy → a fork when the original also went on.
				cut := r.IntN(len(lines)) + 1
				cp := filepath.Join(filepath.Dir(p), "c"+strconv.Itoa(step)+".sync-conflict-20261129-183000-ABCDEFG.jsonl")
				writeFile(t, cp, bytes.Join(lines[:cut], nil))
				if r.IntN(2) == 0 {
					writeFile(t, p, bytes.Join(lines[:cut], nil))
					w := filepath.Base(filepath.Dir(p))
					if _, err := l.Append(w, testDevice, draft("fork", step), testKey, HLC{}); err != nil {
						t.Fatal(err)
					}
				}
				what = "conflict copy"
			case k == 7:
				p := pick()
				b := readFile(t, p)
				writeFile(t, p, b[:r.IntN(len(b)+1)])
				what = "truncate"
			case k == 8:
				p, q := pick(), pick()
				writeFile(t, p, readFile(t, q))
				what = "replace content"
			case k == 9:
				p := pick()
				os.Remove(p)
				what = "delete"
			case k == 10:
				p := pick()
				fi, err := os.Stat(p)
				if err != nil {
					continue
				}
				// Space allocated by a sync tool, filled in later.
				if b := readFile(t, p); len(b) > 0 && b[len(b)-1] != '\n' {
					continue
				}
				w := filepath.Base(filepath.Dir(p))
				other := openAt(t, t.TempDir(), &fakeClock{t: t0.Add(time.Hour), step: time.Millisecond})
				e, err := other.Append(w+"-x", testDevice, draft("nul", step), testKey, HLC{})
				if err != nil {
					t.Fatal(err)
				}
				line, _ := e.Canonical()
				line = append(bytes.Clone(line), '\n')
				appendBytes(t, p, make([]byte, len(line)))
				pendingNUL = append(pendingNUL, struct {
					path string
					at   int64
					data []byte
				}{p, fi.Size(), line})
				what = "NUL run"
			default:
				for _, n := range pendingNUL {
					// Only a run still there: a sync tool fills the space it allocated, it
					// does not write over lines appended since.
					b, err := os.ReadFile(n.path)
					if err != nil || int64(len(b)) < n.at+int64(len(n.data)) || bytes.Count(b[n.at:n.at+int64(len(n.data))], []byte{0}) != len(n.data) {
						continue
					}
					f, err := os.OpenFile(n.path, os.O_WRONLY, 0)
					if err != nil {
						continue
					}
					f.WriteAt(n.data, n.at)
					f.Close()
				}
				pendingNUL = nil
				what = "NUL runs filled"
			}
			for _, keys := range []KeyFunc{nil, keysFor(testKey)} {
				var want *Snapshot
				var err error
				if keys == nil {
					want, err = l.Read()
				} else {
					want, err = l.ReadVerified(keys)
				}
				if err != nil {
					t.Fatal(err)
				}
				rs := mem
				if keys == nil {
					rs = memPlain // a verified read starts the fast path over: keep one state per kind
				}
				got, err := l.ReadIncremental(rs, keys, nil)
				if err != nil {
					t.Fatal(err)
				}
				if rs.Stats().Appended {
					appended++
				}
				if g, w := snapJSON(t, got), snapJSON(t, want); g != w {
					t.Fatalf("round %d step %d (%s), keys %v: in-memory incremental read differs: %s", round, step, what, keys != nil, firstDiff(g, w))
				}
				viaChunks = reload(t, &saved, viaChunks, step%7 == 0)
				got, err = l.ReadIncremental(viaChunks, keys, nil)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := snapJSON(t, got), snapJSON(t, want); g != w {
					t.Fatalf("round %d step %d (%s), keys %v: restored incremental read differs: %s", round, step, what, keys != nil, firstDiff(g, w))
				}
				if keys != nil {
					continue
				}
				// A new process: the chunks saved so far, then the last snapshot saved
				// with them or some reads before (a process that read on without saving
				// its snapshot).
				fresh := NewReadState()
				for _, c := range lastChunks {
					if err := fresh.ApplyChunk(c); err != nil {
						t.Fatal(err)
					}
				}
				if lastSaved != nil {
					if _, err := fresh.RestoreLast(lastSaved); err == nil {
						restored++
					}
				}
				got, err = l.ReadIncremental(fresh, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				if fresh.Stats().Appended {
					appendedRestored++
				}
				if g, w := snapJSON(t, got), snapJSON(t, want); g != w {
					t.Fatalf("round %d step %d (%s): read on a restored last snapshot differs: %s", round, step, what, firstDiff(g, w))
				}
				if r.IntN(3) == 0 {
					lastChunks = fresh.Chunks()
				} else {
					lastChunks = append(lastChunks, fresh.TakeChanges()...)
				}
				if r.IntN(3) != 0 {
					lastSaved = fresh.SaveLast()
				}
			}
		}
	}
	if appended == 0 {
		t.Fatal("no read took the append-only fast path: the test no longer covers it")
	}
	if restored == 0 || appendedRestored == 0 {
		t.Fatalf("restored %d last snapshots, %d fast reads on them: the test no longer covers RestoreLast", restored, appendedRestored)
	}
}

// segmentLinesLoose splits b after every '\n', keeping the newlines (a torn tail is
// dropped).
func segmentLinesLoose(b []byte) [][]byte {
	var out [][]byte
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return out
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
}

// TestIncrementalReadsOnlyNewBytes checks the point of the index: a second read of an
// unchanged ledger reads no bytes past the offsets, and one appended entry costs one
// line; a truncated or replaced segment is read again from its start.
func TestIncrementalReadsOnlyNewBytes(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	appendN(t, l, testWriter, testDevice, "a", 20)
	appendN(t, l, "codex-desktop", testDevice, "a", 20)
	st := NewReadState()
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Reset != 2 || s.NewLines != 40 {
		t.Fatalf("first read: %+v, want 2 files started, 40 lines", s)
	}
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Reset != 0 || s.NewLines != 0 || s.BytesRead != 0 {
		t.Fatalf("unchanged read: %+v, want nothing read", s)
	}
	e := appendN(t, l, testWriter, testDevice, "b", 1)[0]
	snap, err := l.ReadIncremental(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := e.Canonical()
	if s := st.Stats(); s.Reset != 0 || s.NewLines != 1 || s.BytesRead != int64(len(c)+1) {
		t.Fatalf("after one append: %+v, want 1 line of %d bytes", s, len(c)+1)
	}
	if len(snap.Entries) != 41 {
		t.Fatalf("%d entries, want 41", len(snap.Entries))
	}
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	b := readFile(t, seg)
	lines := segmentLinesLoose(b)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"truncated", bytes.Join(lines[:10], nil)},
		{"same length, other last line", append(bytes.Join(lines[:20], nil), bytes.Replace(lines[20], []byte(`"n":0`), []byte(`"n":9`), 1)...)},
		{"other first line", append(append(bytes.Clone(lines[1]), lines[0]...), bytes.Join(lines[2:], nil)...)},
	} {
		writeFile(t, seg, b)
		if _, err := l.ReadIncremental(st, nil, nil); err != nil {
			t.Fatal(err)
		}
		writeFile(t, seg, tc.data)
		got, err := l.ReadIncremental(st, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Stats(); s.Reset != 1 {
			t.Fatalf("%s: %+v, want the segment read again from its start", tc.name, s)
		}
		if g, w := snapJSON(t, got), snapJSON(t, mustRead(t, l)); g != w {
			t.Fatalf("%s: incremental read differs from Read: %s", tc.name, firstDiff(g, w))
		}
	}
}

// TestApplyChunkRejectsDamage checks that a chunk cut short or with bytes flipped in
// its framing is refused with ErrChunk and leaves the state unchanged.
func TestApplyChunkRejectsDamage(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	appendN(t, l, testWriter, testDevice, "a", 3)
	st := NewReadState()
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	chunks := st.Chunks()
	if len(chunks) != 1 {
		t.Fatalf("%d chunks, want 1", len(chunks))
	}
	c := chunks[0]
	for _, bad := range [][]byte{nil, c[:1], c[:len(c)/2], c[:len(c)-1], append(bytes.Clone(c), 0), append([]byte{'Z'}, c[1:]...)} {
		fresh := NewReadState()
		if err := fresh.ApplyChunk(bad); err == nil || !errors.Is(err, ErrChunk) {
			t.Fatalf("ApplyChunk(%d bytes) = %v, want ErrChunk", len(bad), err)
		}
		if fresh.Len() != 0 {
			t.Fatalf("damaged chunk left %d records", fresh.Len())
		}
	}
}

// firstDiff shows where two renderings first differ, with a few lines around.
func firstDiff(got, want string) string {
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

// TestCheckPrefixesFindsAnInPlaceEdit: a line changed in place between a segment's
// first and last line, same length, passes ReadIncremental's first/last line checks;
// CheckPrefixes (the running hash of every byte read) finds it, and the next read
// reads the segment whole again — equal to Read — including after the state went
// through chunks (the index) and back.
func TestCheckPrefixesFindsAnInPlaceEdit(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	appendN(t, l, testWriter, testDevice, "a", 10)
	appendN(t, l, "codex-desktop", testDevice, "a", 5)
	for _, viaChunks := range []bool{false, true} {
		st := NewReadState()
		if _, err := l.ReadIncremental(st, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := st.CheckPrefixes(l.Root()); len(got) != 0 {
			t.Fatalf("untouched ledger: CheckPrefixes forgot %v", got)
		}
		seg := SegmentPath(l.Root(), testWriter, testDevice)
		b := readFile(t, seg)
		lines := segmentLinesLoose(b)
		edited := bytes.Replace(lines[4], []byte(`"n":4`), []byte(`"n":7`), 1)
		if bytes.Equal(edited, lines[4]) {
			t.Fatal("the test line holds no n field to edit")
		}
		writeFile(t, seg, append(append(bytes.Join(lines[:4], nil), edited...), bytes.Join(lines[5:], nil)...))
		if viaChunks {
			n := NewReadState()
			for _, c := range st.Chunks() {
				if err := n.ApplyChunk(c); err != nil {
					t.Fatal(err)
				}
			}
			st = n
		}
		got := st.CheckPrefixes(l.Root())
		if len(got) != 1 || !strings.HasSuffix(got[0], testDevice+".jsonl") {
			t.Fatalf("via chunks %v: CheckPrefixes forgot %v, want the edited segment", viaChunks, got)
		}
		snap, err := l.ReadIncremental(st, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := l.Read()
		if err != nil {
			t.Fatal(err)
		}
		if g, w := snapJSON(t, snap), snapJSON(t, want); g != w {
			t.Fatalf("via chunks %v: after the check the read differs from Read: %s", viaChunks, firstDiff(g, w))
		}
		writeFile(t, seg, b) // back for the next round
	}
}

// TestRestoreLastRejectsDamage feeds RestoreLast a saved snapshot cut short, with bytes
// flipped, and one that names a segment read again from its start: each is refused
// with ErrChunk, without a panic, and the next read merges everything and gives the
// snapshot of Read (a damaged index is rebuilt, never trusted).
func TestRestoreLastRejectsDamage(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	appendN(t, l, testWriter, testDevice, "a", 30)
	appendN(t, l, "codex-desktop", testDevice, "b", 20)
	st := NewReadState()
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	chunks, last := st.Chunks(), st.SaveLast()
	if last == nil {
		t.Fatal("SaveLast after a plain read returned nil")
	}
	open := func() *ReadState {
		fresh := NewReadState()
		for _, c := range chunks {
			if err := fresh.ApplyChunk(c); err != nil {
				t.Fatal(err)
			}
		}
		return fresh
	}
	if _, err := open().RestoreLast(last); err != nil {
		t.Fatalf("the saved snapshot itself: %v", err)
	}
	bad := [][]byte{nil, last[:len(last)/2], last[:len(last)-1], append(bytes.Clone(last), 0)}
	for i := 0; i < len(last); i += 7 {
		b := bytes.Clone(last)
		b[i] ^= 0x5a
		bad = append(bad, b)
	}
	want := mustRead(t, l)
	refused := 0
	for i, b := range bad {
		fresh := open()
		if _, err := fresh.RestoreLast(b); err != nil {
			if !errors.Is(err, ErrChunk) {
				t.Fatalf("case %d: %v, want ErrChunk", i, err)
			}
			refused++
		}
		got, err := l.ReadIncremental(fresh, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := snapJSON(t, got), snapJSON(t, want); g != w {
			t.Fatalf("case %d: read after a damaged saved snapshot differs: %s", i, firstDiff(g, w))
		}
	}
	if refused < 4 {
		t.Fatalf("refused %d of %d damaged snapshots; at least the 4 cut or padded ones must be", refused, len(bad))
	}
	// A segment read again from its start since ('S' chunk): the snapshot no longer
	// matches it.
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	writeFile(t, seg, bytes.Join(segmentLinesLoose(readFile(t, seg))[:10], nil))
	if _, err := l.ReadIncremental(st, nil, nil); err != nil {
		t.Fatal(err)
	}
	chunks = append(chunks, st.TakeChanges()...)
	if _, err := open().RestoreLast(last); !errors.Is(err, ErrChunk) {
		t.Fatalf("restore over a segment read again: %v, want ErrChunk", err)
	}
}
