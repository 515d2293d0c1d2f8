package ledger

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// AppendBatch chains its entries onto the segment's tip and onto each other, shows
// the mark every one of them before the write, and writes them as one append.
func TestAppendBatch(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	first := appendN(t, l, testWriter, testDevice, "a", 1)
	var marked []Entry
	es, err := l.AppendBatch(testWriter, testDevice, []Draft{draft("b", 1), draft("c", 2)}, testKey, HLC{}, func(es []Entry) error {
		marked = append(marked, es...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || len(marked) != 2 || es[0].Hash() != marked[0].Hash() || es[1].Hash() != marked[1].Hash() {
		t.Fatalf("AppendBatch returned %d entries and marked %d", len(es), len(marked))
	}
	checkChain(t, append(first, es...))
	lines := segmentLines(t, readFile(t, SegmentPath(l.Root(), testWriter, testDevice)))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	for i, e := range es {
		if c, _ := e.Canonical(); !bytes.Equal(lines[i+1], c) {
			t.Errorf("line %d = %s, want %s", i+2, lines[i+1], c)
		}
	}
}

// A batch with one bad draft, an empty batch and a refused mark write nothing.
func TestAppendBatchRefusedWritesNothing(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	path := SegmentPath(l.Root(), testWriter, testDevice)
	if _, err := l.AppendBatch(testWriter, testDevice, []Draft{draft("b", 1), {}}, testKey, HLC{}, nil); !errors.Is(err, ErrInvalidDraft) {
		t.Fatalf("a bad draft: %v, want ErrInvalidDraft", err)
	}
	if _, err := l.AppendBatch(testWriter, testDevice, nil, testKey, HLC{}, nil); !errors.Is(err, ErrInvalidDraft) {
		t.Fatalf("an empty batch: %v, want ErrInvalidDraft", err)
	}
	refuse := errors.New("no mark")
	if _, err := l.AppendBatch(testWriter, testDevice, []Draft{draft("b", 1), draft("c", 2)}, testKey, HLC{}, func([]Entry) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("a refused mark: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("%s exists after refused batches", path)
	}
}
