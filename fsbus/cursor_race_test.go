package fsbus

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/verify"
)

// TestCursorHoldsBackForEntriesLoggedWhileReading: another process logs an entry in
// the arrival log while a Load is reading the segments, and that Load's reading missed
// the entry (it read the writer's segment just before the append). The Load's cursor
// must stay below the entry's arrival number, so a catch-up from it shows the entry
// once it is read (every message delivered; `ferry watch` beside a writer
// must not lose 1 entry in 500).
func TestCursorHoldsBackForEntriesLoggedWhileReading(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	w.send(t, w.alice, "bob", "first")
	v1, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(w.c.arrivalsPath())
	if err != nil {
		t.Fatal(err)
	}
	size0 := fi.Size() // a Load begins here, and reads the segments ...
	m2 := w.send(t, otherWriter(t, w, "alice"), "bob", "second")
	if _, err := reopened(t, w.c).Load(); err != nil { // ... while another process logs m2
		t.Fatal(err)
	}
	// ... and its reading did not hold m2: it ingests what v1 read.
	arr, err := w.c.ingestArrivals(v1.Snapshot.Entries, nil, false, size0)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := reopened(t, w.c).Load()
	if err != nil {
		t.Fatal(err)
	}
	n2 := v2.Arrivals.Number(v2.State.Messages[m2.ID].Post)
	if n2 == 0 || arr.Last < n2 {
		t.Fatalf("m2 arrived as %d, the log's last is %d: the scenario did not happen", n2, arr.Last)
	}
	if arr.Complete() >= n2 {
		t.Fatalf("cursor %s reaches m2 (arrival %d), which the reading did not hold", arr.Cursor(), n2)
	}
	got := w.c.Catchup(v2, "bob", arr.Cursor())
	found := false
	for _, m := range got.Messages.Oldest {
		found = found || m.ID == m2.ID
	}
	if !got.Since || !found {
		t.Fatalf("catch-up from %s (since %v) lists %+v; want m2", arr.Cursor(), got.Since, got.Messages.Oldest)
	}
	// Without the late line, the cursor is the log's last.
	arr, err = w.c.ingestArrivals(v2.Snapshot.Entries, nil, false, -1)
	if err != nil || arr.Complete() != arr.Last {
		t.Fatalf("no late lines: complete %d, last %d (%v)", arr.Complete(), arr.Last, err)
	}
}

// TestTwoDirectoriesOfOneProject: two channel directories of one project on one
// machine (two clones, a copy) receive files apart. An entry read in one must not
// move the other's cursor past it: when the entry reaches the other directory, a
// catch-up there from an earlier cursor lists it (else an open order would never be
// listed).
func TestTwoDirectoriesOfOneProject(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	w.send(t, w.alice, "bob", "first")
	other := filepath.Join(t.TempDir(), "acme-copy")
	if err := os.CopyFS(other, os.DirFS(w.c.Root)); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(w.c.Home, other)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c2.As("alice")
	if err != nil {
		t.Fatal(err)
	}
	o, err := a2.NewOrder(NewOrderOptions{Title: "written in the copy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reopened(t, c2).Load(); err != nil { // the copy's arrivals log o
		t.Fatal(err)
	}
	v, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	cur := w.c.Catchup(v, "bob", "").Next
	// o reaches the first directory, as a sync tool or a git pull brings it.
	seg := filepath.Join("ledger", "alice", a2.Device+".jsonl")
	obj, err := filepath.Rel(other, verify.ObjectPath(other, "alice", o.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{seg, obj} {
		b, err := os.ReadFile(filepath.Join(other, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(w.c.Root, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.c.Root, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v, err = w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := w.c.Catchup(v, "bob", cur)
	found := false
	for _, r := range got.Open {
		found = found || r.ID == o.ID
	}
	if !got.Since || !found {
		t.Fatalf("catch-up from %s lists open orders %+v; want the one written in the copy", cur, got.Open)
	}
}

// TestLegacyArrivalLogAdopted: the per-project arrival log of an older binary is taken
// over by the first channel directory that loads after the upgrade (ADR 0012): its
// cursors stay valid and its sightings and first-seen times go on.
func TestLegacyArrivalLogAdopted(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	w.send(t, w.alice, "bob", "before the upgrade")
	v1, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	cur := v1.Arrivals.Cursor()
	legacy := filepath.Join(w.c.Home.StateDir(w.c.Project()), "arrivals.log")
	if err := os.Rename(w.c.arrivalsPath(), legacy); err != nil { // as an older binary left it
		t.Fatal(err)
	}
	m := w.send(t, otherWriter(t, w, "alice"), "bob", "after the upgrade")
	n := reopened(t, w.c)
	v2, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Fatalf("the old log is still there: %v", err)
	}
	if v2.Arrivals.LogID != v1.Arrivals.LogID {
		t.Fatalf("log %s → %s: the old log was not taken over", v1.Arrivals.LogID, v2.Arrivals.LogID)
	}
	for i := range v1.Snapshot.Entries {
		h := v1.Snapshot.Entries[i].Hash()
		if v1.Arrivals.Number(h) != v2.Arrivals.Number(h) || !v1.Arrivals.Seen(h).Equal(v2.Arrivals.Seen(h)) {
			t.Fatalf("entry %s renumbered or seen anew after the upgrade", h)
		}
	}
	got := n.Catchup(v2, "bob", cur)
	if !got.Since {
		t.Fatalf("a cursor from before the upgrade (%s) fell back to the digest", cur)
	}
	if v2.Arrivals.Number(v2.State.Messages[m.ID].Post) <= v1.Arrivals.Last {
		t.Fatal("the message sent after the upgrade is not new to the old cursor")
	}
}

// otherWriter opens the channel again as name: another process of the same machine.
func otherWriter(t *testing.T, w *talkWorld, name string) *Session {
	t.Helper()
	c, err := Open(w.c.Home, w.c.Root)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.As(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
