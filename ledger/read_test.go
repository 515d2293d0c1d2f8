package ledger

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestReadMissingLedger(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	s := mustRead(t, l)
	if len(s.Entries) != 0 || len(s.Problems) != 0 || len(s.Forks) != 0 || s.MaxHLC != (HLC{}) {
		t.Fatalf("snapshot of an empty channel = %+v", s)
	}
	rep, err := l.Verify(keysFor(testKey))
	if err != nil || rep.Segments != 0 || rep.Entries != 0 || !rep.OK() {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

func TestReadSkipsOtherFiles(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	good := appendN(t, l, testWriter, testDevice, "a", 2)
	dir := filepath.Join(l.Root(), "ledger")
	junk := []byte("not an entry\n")
	for _, name := range []string{
		"claude-code-laptop/.k3f9x2ab.jsonl.tmp",
		"claude-code-laptop/k3f9x2ab.jsonl.tmp",
		"claude-code-laptop/.syncthing.k3f9x2ab.jsonl.tmp", // Syncthing's temp names
		"claude-code-laptop/~syncthing~k3f9x2ab.jsonl.tmp",
		"claude-code-laptop/k3f9x2ab.torn-1",
		"claude-code-laptop/k3f9x2ab.torn-2.jsonl",
		"claude-code-laptop/.hidden.jsonl",
		"claude-code-laptop/notes.txt",
		"claude-code-laptop/k3f9x2ab.json",
		"top-level.jsonl",
		".stversions/claude-code-laptop/k3f9x2ab.jsonl",
	} {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), junk)
	}
	if runtime.GOOS != "windows" {
		if err := os.Symlink(filepath.Join(dir, "top-level.jsonl"), filepath.Join(dir, "claude-code-laptop", "link.jsonl")); err != nil {
			t.Fatal(err)
		}
	}
	s := mustRead(t, l)
	if len(s.Problems) != 0 || !equal(hashes(s.Entries), hashes(good)) {
		t.Fatalf("entries %v problems %+v", hashes(s.Entries), s.Problems)
	}
	rep, err := l.Verify(keysFor(testKey))
	if err != nil || rep.Segments != 1 {
		t.Fatalf("Verify = %+v, %v; want 1 segment", rep, err)
	}
}

func TestReadMalformedLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		edit     func(lines [][]byte) [][]byte
		kept     []int // indexes of the appended entries Read keeps
		problems []string
	}{
		{"inserted garbage", func(ls [][]byte) [][]byte {
			return append(ls[:2:2], append([][]byte{[]byte("{garbage")}, ls[2:]...)...)
		}, []int{0, 1, 2, 3, 4}, []string{"malformed:3"}},
		{"inserted entry missing seq", func(ls [][]byte) [][]byte {
			return append(ls[:2:2], append([][]byte{[]byte(`{"v":1,"writer":"w","device":"d","hlc":"2026-11-29T18:30:00.123Z/0000","type":"x"}`)}, ls[2:]...)...)
		}, []int{0, 1, 2, 3, 4}, []string{"malformed:3"}},
		{"replaced line", func(ls [][]byte) [][]byte {
			ls[2] = []byte(`["not","an","object"]`)
			return ls
		}, []int{0, 1, 3, 4}, []string{"malformed:3", "broken_chain@4"}},
		{"blank lines are not malformed", func(ls [][]byte) [][]byte {
			return append(ls[:2:2], append([][]byte{{}, []byte(" \r")}, ls[2:]...)...)
		}, []int{0, 1, 2, 3, 4}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLedger(t)
			es := appendN(t, l, testWriter, testDevice, "a", 5)
			seg := SegmentPath(l.Root(), testWriter, testDevice)
			lines := tt.edit(segmentLines(t, readFile(t, seg)))
			writeFile(t, seg, append(bytes.Join(lines, []byte("\n")), '\n'))

			s := mustRead(t, l)
			var want []Entry
			for _, i := range tt.kept {
				want = append(want, es[i])
			}
			if !equal(hashes(s.Entries), hashes(want)) {
				t.Fatalf("entries %v\nwant %v", hashes(s.Entries), hashes(want))
			}
			if got := kinds(s.Problems); !equal(got, tt.problems) {
				t.Fatalf("problems %v (%+v), want %v", got, s.Problems, tt.problems)
			}
		})
	}
}

// branches builds one segment and a second copy of it that share seqs 1..2 and then
// diverge: branch a adds na entries, branch b adds nb. When bLower is set, b's first
// record (seq 3) has the lower hash, else a's; the fork rule keeps the lower one.
func branches(t *testing.T, na, nb int, bLower bool) (a, b []byte, common, ea, eb []Entry) {
	t.Helper()
	rootA := t.TempDir()
	la := openAt(t, rootA, &fakeClock{t: t0, step: time.Millisecond})
	common = appendN(t, la, testWriter, testDevice, "common", 2)
	segA := SegmentPath(rootA, testWriter, testDevice)
	prefix := readFile(t, segA)
	ea = appendN(t, la, testWriter, testDevice, "a", na)
	for try := range 64 {
		rootB := t.TempDir()
		writeFile(t, SegmentPath(rootB, testWriter, testDevice), prefix)
		lb := openAt(t, rootB, &fakeClock{t: t0.Add(time.Second), step: time.Millisecond})
		var out []Entry
		for i := range nb {
			e, err := lb.Append(testWriter, testDevice, draft("b", try*100+i), testKey, HLC{})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		if (out[0].Hash() < ea[0].Hash()) == bLower {
			return readFile(t, segA), readFile(t, SegmentPath(rootB, testWriter, testDevice)), common, ea, out
		}
	}
	t.Fatal("no branch with the wanted hash order in 64 tries")
	return
}

func TestReadFork(t *testing.T) {
	t.Parallel()
	seg := "ledger/" + testWriter + "/" + testDevice
	layouts := []struct {
		name  string
		aPath string
		bPath string
	}{
		{"syncthing copy", seg + ".jsonl", seg + ".sync-conflict-20261129-183000-ABCDEFG.jsonl"},
		{"syncthing copy swapped", seg + ".sync-conflict-20261129-183000-ABCDEFG.jsonl", seg + ".jsonl"},
		{"dropbox copy", seg + ".jsonl", seg + " (conflicted copy 2026-11-29).jsonl"},
		{"copy under another writer's directory", seg + ".jsonl", "ledger/aaa/zzz.jsonl"},
		{"copy under another writer's directory swapped", "ledger/aaa/zzz.jsonl", seg + ".jsonl"},
	}
	shapes := []struct {
		name   string
		na, nb int
		bLower bool
	}{
		{"longer branch loses", 3, 2, true},
		{"longer branch wins", 3, 2, false},
		{"branches of one record", 1, 1, true},
	}
	for _, sh := range shapes {
		a, b, common, ea, eb := branches(t, sh.na, sh.nb, sh.bLower)
		win, lose := ea, eb
		if sh.bLower {
			win, lose = eb, ea
		}
		wantEntries := hashes(append(append([]Entry{}, common...), win...))
		for _, lay := range layouts {
			t.Run(sh.name+"/"+lay.name, func(t *testing.T) {
				root := t.TempDir()
				writeFile(t, filepath.Join(root, filepath.FromSlash(lay.aPath)), a)
				writeFile(t, filepath.Join(root, filepath.FromSlash(lay.bPath)), b)
				l := openAt(t, root, &fakeClock{t: t0})
				s := mustRead(t, l)

				got := hashes(s.Entries)
				// Entries are in hlc order; both branches' hlcs are after the common ones,
				// and within a branch increasing, so the order is the chain order.
				if !equal(got, wantEntries) {
					t.Fatalf("entries %v\nwant %v", got, wantEntries)
				}
				if len(s.Forks) != 1 {
					t.Fatalf("forks %+v, want 1", s.Forks)
				}
				fk := s.Forks[0]
				if fk.Writer != testWriter || fk.Device != testDevice || fk.Seq != 3 || fk.Winner.Hash() != win[0].Hash() {
					t.Fatalf("fork %s/%s seq %d winner %s, want seq 3 winner %s", fk.Writer, fk.Device, fk.Seq, fk.Winner.Hash(), win[0].Hash())
				}
				if !equal(hashes(fk.Losers), hashes(lose)) {
					t.Fatalf("losers %v\nwant every record of the other branch %v", hashes(fk.Losers), hashes(lose))
				}
				if k := kinds(s.Problems); !equal(k, []string{"fork@3"}) {
					t.Fatalf("problems %v (%+v), want one fork", k, s.Problems)
				}
				// The problem names both lines: the left-out record's file and line, and
				// the kept one's (docs/design.md §2 rule 8: a fork is reported with every line).
				winPath, losePath := lay.aPath, lay.bPath
				if sh.bLower {
					winPath, losePath = lay.bPath, lay.aPath
				}
				if p := s.Problems[0]; p.Path != losePath || p.Line != 3 || !strings.Contains(p.Detail, fmt.Sprintf("(%s line 3)", winPath)) {
					t.Fatalf("fork problem %+v; want it at %s line 3 naming %s line 3", p, losePath, winPath)
				}
				if want, _ := ParseHLC(win[len(win)-1].HLC); s.MaxHLC != want {
					t.Fatalf("MaxHLC %v, want %v (losers do not count)", s.MaxHLC, want)
				}
				rep, err := l.Verify(keysFor(testKey))
				if err != nil || rep.OK() || len(rep.Forks) != 1 || rep.Segments != 2 || rep.Entries != len(wantEntries) {
					t.Fatalf("Verify = %+v, %v", rep, err)
				}
			})
		}
	}
}

func TestReadThreeWayFork(t *testing.T) {
	t.Parallel()
	a, b, common, ea, eb := branches(t, 2, 2, true)
	root := t.TempDir()
	seg := SegmentPath(root, testWriter, testDevice)
	writeFile(t, seg, a)
	writeFile(t, seg+".1.jsonl", b)
	// A third copy forks b at seq 4: b's first three lines plus a different seq 4.
	lc := openAt(t, t.TempDir(), &fakeClock{t: t0.Add(time.Hour), step: time.Millisecond})
	segC := SegmentPath(lc.Root(), testWriter, testDevice)
	writeFile(t, segC, append(bytes.Join(segmentLines(t, b)[:3], []byte("\n")), '\n'))
	e4, err := lc.Append(testWriter, testDevice, draft("c", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, seg+".2.jsonl", readFile(t, segC))

	s := mustRead(t, openAt(t, root, &fakeClock{t: t0}))
	if len(s.Forks) != 2 {
		t.Fatalf("forks %+v, want 2 (seq 3 and seq 4)", s.Forks)
	}
	// b won seq 3; at seq 4 the lower of b[1] and e4 wins.
	win4, lose4 := eb[1], e4
	if e4.Hash() < eb[1].Hash() {
		win4, lose4 = e4, eb[1]
	}
	want := hashes([]Entry{common[0], common[1], eb[0], win4})
	if !equal(hashes(s.Entries), want) {
		t.Fatalf("entries %v\nwant %v", hashes(s.Entries), want)
	}
	if f := s.Forks[0]; f.Seq != 3 || !equal(hashes(f.Losers), hashes(ea)) {
		t.Fatalf("fork at seq 3: %+v", f)
	}
	if f := s.Forks[1]; f.Seq != 4 || f.Winner.Hash() != win4.Hash() || !equal(hashes(f.Losers), []string{lose4.Hash()}) {
		t.Fatalf("fork at seq 4: %+v", f)
	}
}

func TestReadDuplicates(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	es := appendN(t, l, testWriter, testDevice, "a", 5)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	whole := readFile(t, seg)
	lines := segmentLines(t, whole)
	// An editor's reformatting: spaces, CRLF, a BOM. Same canonical form, same record.
	var reformatted [][]byte
	for _, ln := range lines {
		reformatted = append(reformatted, append([]byte("\ufeff"), append(bytes.ReplaceAll(ln, []byte(`,"`), []byte(`, "`)), '\r')...))
	}
	tests := []struct {
		name string
		path string
		data []byte
	}{
		{"identical conflict copy", seg[:len(seg)-len(".jsonl")] + ".sync-conflict-20261129-183000-ABCDEFG.jsonl", whole},
		{"copy in another directory", filepath.Join(l.Root(), "ledger", "elsewhere", "x.jsonl"), whole},
		{"older prefix", seg[:len(seg)-len(".jsonl")] + " (1).jsonl", append(bytes.Join(lines[:3], []byte("\n")), '\n')},
		{"reformatted copy", seg[:len(seg)-len(".jsonl")] + "-otherhost.jsonl", append(bytes.Join(reformatted, []byte("\n")), '\n')},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeFile(t, tt.path, tt.data)
			defer os.Remove(tt.path)
			s := mustRead(t, l)
			if len(s.Problems) != 0 || len(s.Forks) != 0 {
				t.Fatalf("problems %+v forks %+v", s.Problems, s.Forks)
			}
			if !equal(hashes(s.Entries), hashes(es)) {
				t.Fatalf("entries %v\nwant %v", hashes(s.Entries), hashes(es))
			}
		})
	}
}

func TestReadOrdersByHLC(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// Two writers whose clocks interleave; b's clock is behind a's by half a step.
	la := openAt(t, root, &fakeClock{t: t0, step: 2 * time.Millisecond})
	lb := openAt(t, root, &fakeClock{t: t0.Add(time.Millisecond), step: 2 * time.Millisecond})
	var want []string
	for i := range 3 {
		ea, err := la.Append("writer-a", "dev", draft("a", i), testKey, HLC{})
		if err != nil {
			t.Fatal(err)
		}
		eb, err := lb.Append("writer-b", "dev", draft("b", i), testKey, HLC{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s/%d", ea.Writer, ea.Seq), fmt.Sprintf("%s/%d", eb.Writer, eb.Seq))
	}
	// One more in the same millisecond as another writer's: the writer name breaks the tie.
	same := openAt(t, root, &fakeClock{t: t0})
	ec, err := same.Append("writer-0", "dev", draft("c", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	want = append([]string{fmt.Sprintf("%s/%d", ec.Writer, ec.Seq)}, want...)

	s := mustRead(t, la)
	var got []string
	for _, e := range s.Entries {
		got = append(got, fmt.Sprintf("%s/%d", e.Writer, e.Seq))
	}
	if !equal(got, want) {
		t.Fatalf("order %v\nwant %v", got, want)
	}
	if s.MaxHLC.String() != s.Entries[len(s.Entries)-1].HLC {
		t.Fatalf("MaxHLC %v, last entry %s", s.MaxHLC, s.Entries[len(s.Entries)-1].HLC)
	}
}
