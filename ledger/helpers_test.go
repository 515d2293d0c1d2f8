package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testProject = "test-project"
	testWriter  = "claude-code-laptop"
	testDevice  = "k3f9x2ab"
)

// testKey is the fixed ed25519 key every test signs with; otherKey is a stranger's.
var (
	testKey  = KeySigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
	otherKey = KeySigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize)))
)

// t0 is the wall clock tests start from.
var t0 = time.Date(2026, 11, 29, 18, 30, 0, 123_000_000, time.UTC)

// fakeClock returns t, then moves t on by step.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

// newTestLedger opens a ledger on a fresh channel directory with a clock that ticks
// 1 ms per call.
func newTestLedger(t testing.TB) *Ledger {
	t.Helper()
	return openAt(t, t.TempDir(), &fakeClock{t: t0, step: time.Millisecond})
}

// openAt opens a ledger on root with a lock dir of its own and the given clock.
func openAt(t testing.TB, root string, c *fakeClock) *Ledger {
	t.Helper()
	l, err := Open(Options{Root: root, LockDir: filepath.Join(root, ".locks"), Project: testProject, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// keysFor binds testKey to every writer.
func keysFor(s Signer) KeyFunc {
	return func(*Entry) (ed25519.PublicKey, bool) { return s.Public(), true }
}

// draft returns a draft of type test.<kind> carrying {"n": n}.
func draft(kind string, n int) Draft {
	return Draft{Type: "test." + kind, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

// appendN appends n entries to (writer, device) and returns them.
func appendN(t testing.TB, l *Ledger, writer, device, kind string, n int) []Entry {
	t.Helper()
	var out []Entry
	for i := range n {
		e, err := l.Append(writer, device, draft(kind, i), testKey, HLC{})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, e)
	}
	return out
}

// mustRead reads the ledger or fails the test.
func mustRead(t testing.TB, l *Ledger) *Snapshot {
	t.Helper()
	s, err := l.Read()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hashes lists the entries' hashes.
func hashes(es []Entry) []string {
	var out []string
	for i := range es {
		out = append(out, es[i].Hash())
	}
	return out
}

// readFile reads a file or fails the test.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes a file, making its directory, or fails the test.
func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// appendBytes appends raw bytes to a file or fails the test.
func appendBytes(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// kinds renders problems as "kind@seq" or "kind:line" strings, for comparing.
func kinds(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		switch {
		case p.Seq != 0:
			out = append(out, fmt.Sprintf("%s@%d", p.Kind, p.Seq))
		default:
			out = append(out, fmt.Sprintf("%s:%d", p.Kind, p.Line))
		}
	}
	return out
}

// checkChain fails unless es (in seq order, one segment) is a valid chain from seq 1
// with strictly increasing HLCs.
func checkChain(t testing.TB, es []Entry) {
	t.Helper()
	for i := range es {
		e := &es[i]
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
		if i == 0 {
			if e.Prev != "" {
				t.Fatalf("seq 1 has prev %s", e.Prev)
			}
			continue
		}
		if e.Prev != es[i-1].Hash() {
			t.Fatalf("seq %d prev %s, want %s", e.Seq, e.Prev, es[i-1].Hash())
		}
		if e.HLC <= es[i-1].HLC {
			t.Fatalf("seq %d hlc %s not after %s", e.Seq, e.HLC, es[i-1].HLC)
		}
	}
}

// segmentLines splits a segment's bytes into lines, failing unless it ends in "\n".
func segmentLines(t testing.TB, b []byte) [][]byte {
	t.Helper()
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("segment does not end with a newline: %q", tail(b))
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func tail(b []byte) string {
	if len(b) > 80 {
		b = b[len(b)-80:]
	}
	return strings.ToValidUTF8(string(b), "?")
}
