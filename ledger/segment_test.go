package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestValidName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63)
	tests := []struct {
		name string
		ok   bool
	}{
		{"claude-code-laptop", true},
		{"k3f9x2ab", true},
		{"0", true},
		{"a-", true},
		{long, true},
		{long + "a", false},
		{"", false},
		{"-a", false},
		{"A", false},
		{"a_b", false},
		{"a.b", false},
		{"a/b", false},
		{"..", false},
		{"con", false},
		{"nul", false},
		{"com1", false},
		{"lpt9", false},
		{"com10", true},
		{"console", true},
	}
	for _, tt := range tests {
		if got := ValidName(tt.name); got != tt.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tt.name, got, tt.ok)
		}
	}
}

func TestSegmentPath(t *testing.T) {
	t.Parallel()
	got := SegmentPath("/ch", "w", "d")
	want := filepath.Join("/ch", "ledger", "w", "d.jsonl")
	if got != want {
		t.Fatalf("SegmentPath = %q, want %q", got, want)
	}
	if p := tornPath(got, 2); p != filepath.Join("/ch", "ledger", "w", "d.torn-2") {
		t.Fatalf("tornPath = %q", p)
	}
	if p := lockPath("/locks", "a-b", "c"); p != filepath.Join("/locks", "seg-a-b.c.lock") {
		t.Fatalf("lockPath = %q", p)
	}
	if lockPath("/l", "a-b", "c") == lockPath("/l", "a", "b-c") {
		t.Fatal("two segments share a lock file")
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, nil)
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"ok", Options{Root: dir}, true},
		{"empty root", Options{}, false},
		{"missing root", Options{Root: filepath.Join(dir, "missing")}, false},
		{"root is a file", Options{Root: file}, false},
		{"negative skew", Options{Root: dir, MaxSkew: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Open(tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("Open: %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && l.Root() != tt.opts.Root {
				t.Fatalf("Root = %q", l.Root())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "ledger")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created files: %v", err)
	}
}

// wrongSigner claims testKey's public key but signs with another key.
type wrongSigner struct{}

func (wrongSigner) Sign(msg []byte) ([]byte, error) { return otherKey.Sign(msg) }
func (wrongSigner) Public() ed25519.PublicKey       { return testKey.Public() }

func TestAppendErrors(t *testing.T) {
	t.Parallel()
	ok := Draft{Type: "test.x"}
	tests := []struct {
		name    string
		writer  string
		device  string
		d       Draft
		s       Signer
		mutate  func(*Options)
		wantErr error
	}{
		{"bad writer", "Bad", testDevice, ok, testKey, nil, ErrBadName},
		{"bad device", testWriter, "a/b", ok, testKey, nil, ErrBadName},
		{"reserved device", testWriter, "con", ok, testKey, nil, ErrBadName},
		{"empty type", testWriter, testDevice, Draft{}, testKey, nil, ErrInvalidDraft},
		{"data array", testWriter, testDevice, Draft{Type: "t", Data: json.RawMessage(`[1]`)}, testKey, nil, ErrInvalidDraft},
		{"data string", testWriter, testDevice, Draft{Type: "t", Data: json.RawMessage(`"x"`)}, testKey, nil, ErrInvalidDraft},
		{"data invalid", testWriter, testDevice, Draft{Type: "t", Data: json.RawMessage(`{"a":`)}, testKey, nil, ErrInvalidDraft},
		{"wrong signer", testWriter, testDevice, ok, wrongSigner{}, nil, ErrBadSignature},
		{"no lock dir", testWriter, testDevice, ok, testKey, func(o *Options) { o.LockDir = "" }, ErrLocked},
		{"nil signer", testWriter, testDevice, ok, nil, nil, nil},
		{"no project", testWriter, testDevice, ok, testKey, func(o *Options) { o.Project = "" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			opts := Options{Root: root, LockDir: filepath.Join(root, ".locks"), Project: testProject}
			if tt.mutate != nil {
				tt.mutate(&opts)
			}
			l, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Append(tt.writer, tt.device, tt.d, tt.s, HLC{})
			if err == nil {
				t.Fatal("Append succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Append: %v, want %v", err, tt.wantErr)
			}
			// Nothing may have been written.
			if b, err := os.ReadFile(SegmentPath(root, tt.writer, tt.device)); err == nil && len(b) > 0 {
				t.Fatalf("segment holds %q after a failed append", b)
			}
		})
	}
}

func TestAppendReadRoundTrip(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	drafts := []Draft{
		{Type: "agent.join"},
		{Type: "order.create", Ref: "o-k3f9x2abq7mze", Data: json.RawMessage(` { "b" : 2, "a" : [1, "<&>"] } `)},
		{Type: "order.claim", Ref: "o-k3f9x2abq7mze", Data: json.RawMessage(`{}`), Idem: "key-1"},
		{Type: "msg.post", Data: json.RawMessage(`null`)},
		{Type: "msg.post", Data: json.RawMessage(" \n")},
	}
	var written []Entry
	for _, d := range drafts {
		e, err := l.Append(testWriter, testDevice, d, testKey, HLC{})
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, e)
	}
	checkChain(t, written)

	// The file holds exactly the canonical lines, data omitted when empty.
	lines := segmentLines(t, readFile(t, SegmentPath(l.Root(), testWriter, testDevice)))
	if len(lines) != len(drafts) {
		t.Fatalf("%d lines, want %d", len(lines), len(drafts))
	}
	for i, line := range lines {
		c, err := written[i].Canonical()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(line, c) {
			t.Errorf("line %d = %s\nwant canonical %s", i+1, line, c)
		}
		hasData := bytes.Contains(line, []byte(`"data":`))
		if wantData := i == 1 || i == 2; hasData != wantData {
			t.Errorf("line %d: data present %v, want %v: %s", i+1, hasData, wantData, line)
		}
		if bytes.Contains(line, []byte("null")) {
			t.Errorf("line %d has a null: %s", i+1, line)
		}
	}
	if got, want := string(written[1].Data), `{"a":[1,"<&>"],"b":2}`; got != want {
		t.Errorf("data = %s, want %s", got, want)
	}

	s := mustRead(t, l)
	if len(s.Problems) != 0 || len(s.Forks) != 0 {
		t.Fatalf("problems %v forks %v", s.Problems, s.Forks)
	}
	if got, want := hashes(s.Entries), hashes(written); !equal(got, want) {
		t.Fatalf("read hashes %v\nwant %v", got, want)
	}
	for i := range s.Entries {
		r, w := s.Entries[i], written[i]
		if r.Seq != w.Seq || r.HLC != w.HLC || r.Type != w.Type || r.Ref != w.Ref || r.Idem != w.Idem ||
			string(r.Data) != string(w.Data) || r.Sig != w.Sig || r.Writer != testWriter || r.Device != testDevice || r.V != Version {
			t.Errorf("entry %d read %+v\nwritten %+v", i, r, w)
		}
		// A fresh hash of the bytes equals the cached one.
		if h := HashBytes(lines[i]); h != r.Hash() {
			t.Errorf("entry %d hash %s, bytes hash %s", i, r.Hash(), h)
		}
	}
	if want, _ := ParseHLC(written[len(written)-1].HLC); s.MaxHLC != want {
		t.Errorf("MaxHLC = %v, want %v", s.MaxHLC, want)
	}
	rep, err := l.Verify(keysFor(testKey))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Entries != len(drafts) || rep.Segments != 1 {
		t.Fatalf("Verify = %+v", rep)
	}
	// Another project's key check fails: the project id is bound into signatures.
	other, err := Open(Options{Root: l.Root(), Project: "other-project"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = other.Verify(keysFor(testKey))
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || rep.Problems[0].Kind != KindBadSignature {
		t.Fatalf("Verify under another project = %+v", rep)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAppendHLCMonotonic(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name  string
		clock []time.Duration // offsets from t0, one per append
		want  []string        // hlc of each append
	}{
		{"forward", []time.Duration{0, ms, 5 * ms},
			[]string{"2026-11-29T18:30:00.123Z/0000", "2026-11-29T18:30:00.124Z/0000", "2026-11-29T18:30:00.128Z/0000"}},
		{"same millisecond", []time.Duration{0, 0, 0},
			[]string{"2026-11-29T18:30:00.123Z/0000", "2026-11-29T18:30:00.123Z/0001", "2026-11-29T18:30:00.123Z/0002"}},
		{"clock steps back", []time.Duration{0, -time.Hour, -time.Hour, 2 * ms},
			[]string{"2026-11-29T18:30:00.123Z/0000", "2026-11-29T18:30:00.123Z/0001", "2026-11-29T18:30:00.123Z/0002", "2026-11-29T18:30:00.125Z/0000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var i int
			root := t.TempDir()
			now := func() time.Time { d := tt.clock[i]; i++; return t0.Add(d) }
			l, err := Open(Options{Root: root, LockDir: filepath.Join(root, ".locks"), Project: testProject, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for range tt.clock {
				e, err := l.Append(testWriter, testDevice, Draft{Type: "test.tick"}, testKey, HLC{})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, e.HLC)
			}
			if !equal(got, tt.want) {
				t.Fatalf("hlcs %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestAppendObservedHLC(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration, c int) HLC { return HLC{Ms: t0.Add(d).UnixMilli(), Counter: c} }
	tests := []struct {
		name     string
		observed HLC
		want     HLC
	}{
		{"none", HLC{}, at(0, 0)},
		{"behind", at(-time.Minute, 5), at(0, 0)},
		{"ahead within skew", at(30*time.Minute, 7), at(30*time.Minute, 8)},
		{"at the skew limit", at(time.Hour, 0), at(time.Hour, 1)},
		{"beyond skew", at(time.Hour+time.Millisecond, 0), at(0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			l, err := Open(Options{Root: root, LockDir: filepath.Join(root, ".locks"), Project: testProject,
				Now: func() time.Time { return t0 }})
			if err != nil {
				t.Fatal(err)
			}
			e, err := l.Append(testWriter, testDevice, Draft{Type: "test.tick"}, testKey, tt.observed)
			if err != nil {
				t.Fatal(err)
			}
			if e.HLC != tt.want.String() {
				t.Fatalf("hlc %s, want %s", e.HLC, tt.want)
			}
			// The next entry is after it even though the wall clock has not moved.
			e2, err := l.Append(testWriter, testDevice, Draft{Type: "test.tick"}, testKey, HLC{})
			if err != nil {
				t.Fatal(err)
			}
			if e2.HLC <= e.HLC {
				t.Fatalf("next hlc %s not after %s", e2.HLC, e.HLC)
			}
		})
	}
}

func TestAppendConcurrentGoroutines(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			// Each goroutine opens its own Ledger on the same directories.
			l2, err := Open(l.opts)
			if err != nil {
				errs <- err
				return
			}
			for i := range each {
				if _, err := l2.Append(testWriter, testDevice, draft("g", w*1000+i), testKey, HLC{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := mustRead(t, l)
	if len(s.Entries) != workers*each || len(s.Problems) != 0 {
		t.Fatalf("%d entries, problems %v", len(s.Entries), s.Problems)
	}
	checkChain(t, s.Entries)
}

func TestAppendLargeLine(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	big := strings.Repeat("x", 3<<20) // longer than any read buffer and tail chunk
	data, _ := json.Marshal(map[string]string{"blob": big})
	first, err := l.Append(testWriter, testDevice, Draft{Type: "test.big", Data: data}, testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	// The next append reads the 3 MB line backwards to find seq and hash.
	second, err := l.Append(testWriter, testDevice, Draft{Type: "test.small"}, testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Seq != 2 || second.Prev != first.Hash() {
		t.Fatalf("second entry seq %d prev %s, want 2 %s", second.Seq, second.Prev, first.Hash())
	}
	s := mustRead(t, l)
	if len(s.Problems) != 0 || !equal(hashes(s.Entries), []string{first.Hash(), second.Hash()}) {
		t.Fatalf("read %v problems %v", hashes(s.Entries), s.Problems)
	}
}

// tornCases are tails a crash or a half-synced file can leave after good lines.
var tornCases = []struct {
	name string
	tail string
	torn bool // Read reports KindTorn (else KindMalformed)
}{
	{"partial line", `{"v":1,"writer":"claude-co`, true},
	{"nul run", strings.Repeat("\x00", 64), true},
	{"partial line then nuls", `{"v":1,"wri` + strings.Repeat("\x00", 300), true},
	{"nuls then newline", strings.Repeat("\x00", 10) + "\n", true},
	{"whole entry without newline", "{entry}", true},
	{"whole entry and a space without newline", "{entry} ", true},
	{"malformed complete line", "not json\n", false},
	{"malformed line then blank lines", "{\"v\":1}\n\n\r\n", false},
}

// tornTail returns the tail bytes of a case, with "{entry}" replaced by a valid line
// of another segment without its newline.
func tornTail(t *testing.T, tail string) []byte {
	if !strings.Contains(tail, "{entry}") {
		return []byte(tail)
	}
	l := newTestLedger(t)
	e := appendN(t, l, "other", "dev", "x", 1)[0]
	c, _ := e.Canonical()
	return []byte(strings.Replace(tail, "{entry}", string(c), 1))
}

func TestReadTornTail(t *testing.T) {
	t.Parallel()
	for _, tt := range tornCases {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLedger(t)
			good := appendN(t, l, testWriter, testDevice, "a", 3)
			appendBytes(t, SegmentPath(l.Root(), testWriter, testDevice), tornTail(t, tt.tail))

			s := mustRead(t, l)
			if !equal(hashes(s.Entries), hashes(good)) {
				t.Fatalf("entries %v, want the 3 good ones", hashes(s.Entries))
			}
			want := KindMalformed
			if tt.torn {
				want = KindTorn
			}
			if len(s.Problems) != 1 || s.Problems[0].Kind != want || s.Problems[0].Line != 4 ||
				s.Problems[0].Path != "ledger/"+testWriter+"/"+testDevice+".jsonl" {
				t.Fatalf("problems %+v, want one %s at line 4", s.Problems, want)
			}
		})
	}
}

func TestAppendRepairsTornTail(t *testing.T) {
	t.Parallel()
	for _, tt := range tornCases {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLedger(t)
			seg := SegmentPath(l.Root(), testWriter, testDevice)
			good := appendN(t, l, testWriter, testDevice, "a", 3)
			junk := tornTail(t, tt.tail)
			appendBytes(t, seg, junk)

			e, err := l.Append(testWriter, testDevice, draft("b", 0), testKey, HLC{})
			if err != nil {
				t.Fatal(err)
			}
			if e.Seq != 4 || e.Prev != good[2].Hash() {
				t.Fatalf("appended seq %d prev %s, want 4 %s", e.Seq, e.Prev, good[2].Hash())
			}
			if got := readFile(t, tornPath(seg, 1)); !bytes.Equal(got, junk) {
				t.Fatalf(".torn-1 = %q, want %q", got, junk)
			}

			// A second torn tail goes to .torn-2; .torn-1 stays as it was.
			junk2 := []byte(`{"v":1,"seq":`)
			appendBytes(t, seg, junk2)
			moved, err := l.Repair(testWriter, testDevice)
			if err != nil {
				t.Fatal(err)
			}
			if moved != tornPath(seg, 2) {
				t.Fatalf("Repair moved to %q, want %q", moved, tornPath(seg, 2))
			}
			if got := readFile(t, moved); !bytes.Equal(got, junk2) {
				t.Fatalf(".torn-2 = %q, want %q", got, junk2)
			}
			if got := readFile(t, tornPath(seg, 1)); !bytes.Equal(got, junk) {
				t.Fatalf(".torn-1 changed to %q", got)
			}
			e5, err := l.Append(testWriter, testDevice, draft("b", 1), testKey, HLC{})
			if err != nil {
				t.Fatal(err)
			}

			s := mustRead(t, l)
			if len(s.Problems) != 0 {
				t.Fatalf("problems after repair: %+v", s.Problems)
			}
			want := append(good, e, e5)
			if !equal(hashes(s.Entries), hashes(want)) {
				t.Fatalf("entries %v\nwant %v", hashes(s.Entries), hashes(want))
			}
			checkChain(t, s.Entries)
			// The segment is exactly the five canonical lines.
			if n := len(segmentLines(t, readFile(t, seg))); n != 5 {
				t.Fatalf("segment has %d lines, want 5", n)
			}
		})
	}
}

func TestRepairNothingToDo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, l *Ledger, seg string)
	}{
		{"missing segment", func(*testing.T, *Ledger, string) {}},
		{"empty segment", func(t *testing.T, _ *Ledger, seg string) { writeFile(t, seg, nil) }},
		{"clean segment", func(t *testing.T, l *Ledger, _ string) { appendN(t, l, testWriter, testDevice, "a", 2) }},
		{"trailing blank lines", func(t *testing.T, l *Ledger, seg string) {
			appendN(t, l, testWriter, testDevice, "a", 2)
			appendBytes(t, seg, []byte("\n \r\n"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLedger(t)
			seg := SegmentPath(l.Root(), testWriter, testDevice)
			tt.setup(t, l, seg)
			before, _ := os.ReadFile(seg)
			moved, err := l.Repair(testWriter, testDevice)
			if err != nil || moved != "" {
				t.Fatalf("Repair = %q, %v; want nothing", moved, err)
			}
			after, _ := os.ReadFile(seg)
			if !bytes.Equal(before, after) {
				t.Fatalf("segment changed from %q to %q", before, after)
			}
			if _, err := os.Stat(tornPath(seg, 1)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("torn file made: %v", err)
			}
		})
	}
}

func TestRepairWhollyBadSegment(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	seg := SegmentPath(l.Root(), testWriter, testDevice)
	junk := []byte("line one\nline two\n\x00\x00")
	writeFile(t, seg, junk)
	e, err := l.Append(testWriter, testDevice, draft("a", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 1 || e.Prev != "" {
		t.Fatalf("seq %d prev %q, want a new chain", e.Seq, e.Prev)
	}
	if got := readFile(t, tornPath(seg, 1)); !bytes.Equal(got, junk) {
		t.Fatalf(".torn-1 = %q, want %q", got, junk)
	}
}

// A segment whose last lines belong to another segment (a file concatenated by hand):
// they are valid entries, so they stay, but the chain continues from the writer's own.
func TestAppendAfterForeignEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		own  int
	}{
		{"own entries before", 3},
		{"no own entries", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLedger(t)
			own := appendN(t, l, testWriter, testDevice, "a", tt.own)
			foreign := appendN(t, l, "other", "dev", "x", 2)
			seg := SegmentPath(l.Root(), testWriter, testDevice)
			if tt.own == 0 {
				writeFile(t, seg, nil)
			}
			appendBytes(t, seg, readFile(t, SegmentPath(l.Root(), "other", "dev")))
			before := readFile(t, seg)

			e, err := l.Append(testWriter, testDevice, draft("b", 0), testKey, HLC{})
			if err != nil {
				t.Fatal(err)
			}
			wantPrev := ""
			if tt.own > 0 {
				wantPrev = own[tt.own-1].Hash()
			}
			if e.Seq != uint64(tt.own+1) || e.Prev != wantPrev {
				t.Fatalf("seq %d prev %q, want %d %q", e.Seq, e.Prev, tt.own+1, wantPrev)
			}
			if after := readFile(t, seg); !bytes.HasPrefix(after, before) {
				t.Fatal("bytes before the append changed")
			}
			if _, err := os.Stat(tornPath(seg, 1)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("valid foreign lines moved aside: %v", err)
			}
			s := mustRead(t, l)
			if len(s.Problems) != 0 || len(s.Entries) != tt.own+len(foreign)+1 {
				t.Fatalf("%d entries, problems %+v", len(s.Entries), s.Problems)
			}
		})
	}
}
