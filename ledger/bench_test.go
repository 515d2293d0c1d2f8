package ledger

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAppendSigned measures Append: lock, tail read, sign, one write, fsync.
func BenchmarkAppendSigned(b *testing.B) {
	l := newTestLedger(b)
	d := draft("bench", 12345)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(testWriter, testDevice, d, testKey, HLC{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendRaw is the floor under BenchmarkAppendSigned: one O_APPEND write of
// a line of the same size, then fsync.
func BenchmarkAppendRaw(b *testing.B) {
	l := newTestLedger(b)
	e := appendN(b, l, testWriter, testDevice, "bench", 1)[0]
	c, err := e.Canonical()
	if err != nil {
		b.Fatal(err)
	}
	line := append(c, '\n')
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead measures Read of one segment of 10,000 entries.
func BenchmarkRead(b *testing.B) {
	const n = 10_000
	l := newTestLedger(b)
	writeChain(b, l, testWriter, testDevice, n)
	fi, err := os.Stat(SegmentPath(l.Root(), testWriter, testDevice))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		s, err := l.Read()
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Entries) != n || len(s.Problems) != 0 {
			b.Fatalf("%d entries, problems %v", len(s.Entries), s.Problems)
		}
	}
}

// writeChain writes a valid chain of n entries to a segment in one go, without the
// per-entry lock and fsync of Append.
func writeChain(tb testing.TB, l *Ledger, writer, device string, n int) {
	tb.Helper()
	var buf []byte
	var last *Entry
	for i := range n {
		d := draft("bench", i)
		data, err := draftData(d)
		if err != nil {
			tb.Fatal(err)
		}
		e, line, err := l.next(writer, device, d, data, testKey, last, HLC{})
		if err != nil {
			tb.Fatal(err)
		}
		buf = append(buf, line...)
		last = &e
	}
	writeFile(tb, SegmentPath(l.Root(), writer, device), buf)
}
