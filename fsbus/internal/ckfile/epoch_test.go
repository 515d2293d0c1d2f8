package ckfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSeenEpochs: the epoch-seen file keeps one line per epoch with the time it was
// first seen, ignores an epoch not above the highest, reads a line of an older build
// (no time) as first seen at the file's mtime, skips lines that do not parse, and
// keeps the newest seenKeep epochs.
func TestSeenEpochs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cfg", "seen")
	if s := Seen(p); s != nil {
		t.Fatalf("a missing file remembers %+v", s)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i, e := range []int{1, 2, 2, 1, 4} {
		if err := RememberEpoch(p, e, "sha256:"+strings.Repeat("a", i+1), t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	s := Seen(p)
	if len(s) != 3 || s[0].Epoch != 1 || s[1].Epoch != 2 || s[2].Epoch != 4 ||
		!s[1].At.Equal(t0.Add(time.Hour)) || !s[2].At.Equal(t0.Add(4*time.Hour)) || s[2].Entry != "sha256:aaaaa" {
		t.Fatalf("Seen: %+v", s)
	}
	if e, h := readSeen(p); e != 4 || h != "sha256:aaaaa" {
		t.Fatalf("readSeen: %d %s", e, h)
	}

	legacy := filepath.Join(t.TempDir(), "legacy")
	if err := os.WriteFile(legacy, []byte("3 sha256:bb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := time.Unix(1_600_000_000, 0)
	if err := os.Chtimes(legacy, mt, mt); err != nil {
		t.Fatal(err)
	}
	if s := Seen(legacy); len(s) != 1 || s[0].Epoch != 3 || !s[0].At.Equal(mt) {
		t.Fatalf("an older build's line: %+v", s)
	}
	if err := RememberEpoch(legacy, 5, "sha256:cc", t0); err != nil {
		t.Fatal(err)
	}
	if s := Seen(legacy); len(s) != 2 || !s[0].At.Equal(mt) || s[1].Epoch != 5 {
		t.Fatalf("after remembering epoch 5: %+v", s)
	}

	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("x y z\n0 sha256:aa 1\n2 sha256:aa notatime\n7 sha256:dd 5\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := Seen(bad); len(s) != 1 || s[0].Epoch != 7 || s[0].At.Unix() != 5 {
		t.Fatalf("lines that do not parse: %+v", s)
	}

	many := filepath.Join(t.TempDir(), "many")
	for e := 1; e <= seenKeep+10; e++ {
		if err := RememberEpoch(many, e, "sha256:ee", t0); err != nil {
			t.Fatal(err)
		}
	}
	if s := Seen(many); len(s) != seenKeep || s[0].Epoch != 11 {
		t.Fatalf("the file keeps %d epochs from %d", len(s), s[0].Epoch)
	}
}
