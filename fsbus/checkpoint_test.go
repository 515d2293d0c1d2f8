package fsbus

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/cache"
	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/ledger"
)

// rewriteCheckpoint changes a checkpoint file through edit (header and payload, the
// checksum left off) and writes it back with a good checksum: a checkpoint this
// machine could have written.
func rewriteCheckpoint(t *testing.T, c *Channel, edit func(head, payload []byte) []byte) {
	t.Helper()
	raw, err := os.ReadFile(c.checkpointPath())
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.IndexByte(raw, '\n') + 1
	payload := edit(raw[:i], raw[i:len(raw)-cache.FrameSumSize])
	sum := cache.FrameSum(payload)
	out := append(append(bytes.Clone(raw[:i]), payload...), sum[:]...)
	if err := os.WriteFile(c.checkpointPath(), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadStartsFromCheckpoint: a process that folded everything leaves a fold
// checkpoint; the next process starts from it and folds only what was appended since,
// and its state equals a full fold (ADR 0011). A damaged checkpoint, one of
// a full fold older than CheckpointTrust, and one over a segment read again since are
// not used: that process folds everything, to the same state, and writes a good one.
func TestLoadStartsFromCheckpoint(t *testing.T) {
	c := openBusyCopy(t)
	if _, err := c.Load(); err != nil {
		t.Fatal(err)
	}
	if c.folds.full != 1 {
		t.Fatalf("first Load: %+v, want one full fold", c.folds)
	}
	if _, err := os.Stat(c.checkpointPath()); err != nil {
		t.Fatalf("no checkpoint after a full fold: %v", err)
	}
	write := func(c *Channel, i int) {
		t.Helper()
		s, err := c.As("codex-desktop")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.TalkSend(TalkSendOptions{To: "claude-code-desktop", Body: "checkpoint note " + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	// want is the state a process without the index folds.
	want := func() string {
		t.Helper()
		t.Setenv(envNoIndex, "1")
		defer os.Unsetenv(envNoIndex)
		v, err := reopened(t, c).Load()
		if err != nil {
			t.Fatal(err)
		}
		return incrCanon(v.State)
	}
	check := func(name string, wantFrom bool) *Channel {
		t.Helper()
		n := reopened(t, c)
		v, err := n.Load()
		if err != nil {
			t.Fatal(err)
		}
		if got := n.folds.fromCheckpoint == 1; got != wantFrom {
			t.Fatalf("%s: %+v, want from the checkpoint %v", name, n.folds, wantFrom)
		}
		if g, w := incrCanon(v.State), want(); g != w {
			t.Fatalf("%s: state differs from a full fold: %s", name, propDiff(g, w))
		}
		// The arrivals are the log's, as a process reading it whole sees them.
		rd, _, err := arrivals.Read(n.arrivalsPath())
		if err != nil || rd == nil {
			t.Fatalf("%s: reading the arrival log: %v", name, err)
		}
		if v.Arrivals.LogID != rd.Log.LogID || v.Arrivals.Last != rd.Log.Last {
			t.Fatalf("%s: arrivals %s/%d, the log says %s/%d", name, v.Arrivals.LogID, v.Arrivals.Last, rd.Log.LogID, rd.Log.Last)
		}
		for i := range v.Snapshot.Entries {
			h := v.Snapshot.Entries[i].Hash()
			if g, w := v.Arrivals.Number(h), rd.Log.Number(h); g != w || g == 0 {
				t.Fatalf("%s: entry %s arrived as %d, the log says %d", name, h, g, w)
			}
		}
		// Every record ingested, those no segment holds any more included (doctor's
		// vanished records).
		got, wantIngested := map[string]string{}, map[string]string{}
		v.Arrivals.Ingested(func(h, w string, n uint64) { got[h] = fmt.Sprint(w, n) })
		rd.Log.Ingested(func(h, w string, n uint64) { wantIngested[h] = fmt.Sprint(w, n) })
		if !maps.Equal(got, wantIngested) {
			t.Fatalf("%s: %d records ingested, the log has %d", name, len(got), len(wantIngested))
		}
		return n
	}

	// Writes by other processes since the checkpoint: a new process folds them alone.
	for i := range 3 {
		write(reopened(t, c), i)
	}
	n := check("after 3 writes", true)
	// It decoded the index's signature frames only when looking up beats checking the
	// roster's and the new entries' signatures (lookUpSaved). A whole rewrite of the
	// index keeps them.
	sigsInIndex := func() int {
		t.Helper()
		f, err := os.Open(c.indexPath())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, frames, _, err := cache.ReadIndex(bufioReader(f), c.Project(), ledger.FormatKey(c.MasterKey))
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, b := range frames {
			s, err := cache.DecodeSigs(b)
			if err != nil {
				t.Fatal(err)
			}
			total += len(s)
		}
		return total
	}
	write(reopened(t, c), 9)
	before := sigsInIndex()
	sigcache.Clear() // a new process's cache
	m := reopened(t, c)
	if _, err := m.Load(); err != nil {
		t.Fatal(err)
	}
	roster, added := len(m.lastFold.Roster), len(m.lastSnap.Added)
	if undecoded := len(m.localIndex().sigFrames) > 0; undecoded == lookUpSaved(roster, added, before) || before < 150 || m.folds.fromCheckpoint != 1 {
		t.Fatalf("signature frames left undecoded %v with %d roster entries and %d added to check against %d signatures in the index (%+v)", undecoded, roster, added, before, m.folds)
	}
	m.localIndex().whole = true
	if err := m.saveIndex(); err != nil {
		t.Fatal(err)
	}
	if after := sigsInIndex(); after < before {
		t.Fatalf("a whole rewrite from a process that never loaded the signature frames kept %d of %d signatures", after, before)
	}
	// The process goes on from there: its next write and Load are incremental too.
	write(n, 3)
	if _, err := n.Load(); err != nil {
		t.Fatal(err)
	}
	if n.folds.full != 0 {
		t.Fatalf("a process started from the checkpoint folded everything: %+v", n.folds)
	}

	// Damage: a flipped payload byte fails the checksum.
	raw, _ := os.ReadFile(c.checkpointPath())
	raw[len(raw)/2] ^= 1
	os.WriteFile(c.checkpointPath(), raw, 0o644)
	check("damaged checkpoint", false)
	check("after the damaged one was replaced", true)

	// A checkpoint whose full fold is older than CheckpointTrust.
	rewriteCheckpoint(t, c, func(_, p []byte) []byte {
		_, k := binary.Uvarint(p)
		old := time.Now().Add(-checkpointTrust - time.Minute).UnixMilli()
		return append(binary.AppendUvarint(nil, uint64(old)), p[k:]...)
	})
	check("stale checkpoint", false)
	check("after the stale one was replaced", true)

	// A payload that passes the checksum but does not decode.
	rewriteCheckpoint(t, c, func(_, p []byte) []byte { return p[:len(p)-3] })
	check("truncated payload", false)

	// Another binary's layout, another build of the same layout.
	raw, _ = os.ReadFile(c.checkpointPath())
	os.WriteFile(c.checkpointPath(), bytes.Replace(raw, []byte(cache.StateLayout()), []byte("0123456789abcdef"), 1), 0o644)
	check("other layout", false)
	raw, _ = os.ReadFile(c.checkpointPath())
	os.WriteFile(c.checkpointPath(), bytes.Replace(raw, []byte(cache.BinaryIdentity()), []byte("0123456789abcdef"), 1), 0o644)
	check("other build", false)

	// A segment rewritten (a sync tool replaced it with an older copy): the index reads
	// it again from its start, and the checkpoint no longer matches.
	write(reopened(t, c), 4)
	check("before the rewrite", true)
	seg := filepath.Join(c.Root, "ledger", "codex-desktop", c.Device+".jsonl") // this machine's
	b, _ := os.ReadFile(seg)
	lines := bytes.SplitAfter(b, []byte("\n"))
	os.WriteFile(seg, bytes.Join(lines[:len(lines)-3], nil), 0o644)
	check("segment cut back", false)
	// The records cut are still in the arrival log: the next checkpoint keeps them.
	cut := check("from the checkpoint after the cut", true)
	if v, _ := cut.Load(); v.Arrivals.Last <= uint64(len(v.Snapshot.Entries)) {
		t.Fatalf("arrival log of %d records for %d entries: the cut records are not in it", v.Arrivals.Last, len(v.Snapshot.Entries))
	}
}

// TestThoroughLoadFindsAnInPlaceEdit: a signature changed in place in the middle of a
// segment (same length, first and last line intact) after a fold checkpoint. A new
// process starting from the checkpoint keeps what the checkpoint's full fold verified
// (ADR 0011); a thorough Load (ferry doctor, ferry ledger verify) hashes the segment
// bytes again, reads the segment again and ignores the forged line.
func TestThoroughLoadFindsAnInPlaceEdit(t *testing.T) {
	t.Parallel()
	c := openBusyCopy(t)
	v0, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	seg := ""
	most := 0
	segs, _ := filepath.Glob(filepath.Join(c.Root, "ledger", "*", "*.jsonl"))
	for _, p := range segs {
		if b, _ := os.ReadFile(p); bytes.Count(b, []byte("\n")) > most {
			seg, most = p, bytes.Count(b, []byte("\n"))
		}
	}
	b, _ := os.ReadFile(seg)
	lines := bytes.SplitAfter(b, []byte("\n"))
	mid := lines[len(lines)/2]
	i := bytes.Index(mid, []byte(`"sig":"`)) + len(`"sig":"`) + 5
	if mid[i] == 'A' {
		mid[i] = 'B'
	} else {
		mid[i] = 'A'
	}
	if err := os.WriteFile(seg, bytes.Join(lines, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	n := reopened(t, c)
	v1, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	if n.folds.fromCheckpoint != 1 || len(v1.State.Ignored) != len(v0.State.Ignored) {
		t.Fatalf("from the checkpoint (%+v): %d ignored, want the %d verified", n.folds, len(v1.State.Ignored), len(v0.State.Ignored))
	}
	n = reopened(t, c)
	n.Thorough = true
	v2, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, ig := range v2.State.Ignored {
		if strings.Contains(ig.Reason, "signature") {
			bad++
		}
	}
	if n.folds.full != 1 || bad == 0 {
		t.Fatalf("a thorough Load (%+v) ignored %v; want the forged line ignored for its signature", n.folds, v2.State.Ignored)
	}
}

// TestDecodeCheckpointDamaged decodes a real checkpoint with random bytes changed and
// cut short, many times: each gives an error or a state, never a panic, and the state
// restored is used only when decoding succeeded (ADR 0011).
func TestDecodeCheckpointDamaged(t *testing.T) {
	t.Parallel()
	c := openBusyCopy(t)
	if _, err := c.Load(); err != nil {
		t.Fatal(err)
	}
	_, last, body, err := c.readCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	r := propSeed(t)
	refused := 0
	for i := range 600 {
		b := bytes.Clone(body)
		if i%3 == 0 {
			b = b[:r.Intn(len(b))]
		} else {
			for range 1 + r.Intn(4) {
				b[r.Intn(len(b))] = byte(r.Intn(256))
			}
		}
		snap, err := c.localIndex().rs.RestoreLast(last)
		if err != nil {
			t.Fatal(err)
		}
		f, _, err := cache.DecodeCheckpoint(b, snap)
		switch {
		case err != nil:
			refused++
		case f == nil || f.State == nil:
			t.Fatalf("case %d decoded without error to nothing", i)
		}
	}
	if refused < 200 {
		t.Fatalf("%d of 600 damaged checkpoints refused; at least the 200 cut short must be", refused)
	}
}

// FuzzDecodeCheckpoint feeds the checkpoint decoder damaged payloads (their checksum
// recomputed: what a bug, not a bad disk, would write): it returns an error or a
// state, and never panics or allocates without bound (ADR 0011).
func FuzzDecodeCheckpoint(f *testing.F) {
	c := openBusyCopy(f)
	if _, err := c.Load(); err != nil {
		f.Fatal(err)
	}
	_, last, body, err := c.readCheckpoint()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add(body[:len(body)/3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := c.localIndex().rs.RestoreLast(last)
		if err != nil {
			t.Fatal(err)
		}
		if f, arr, err := cache.DecodeCheckpoint(b, snap); err == nil && (f == nil || f.State == nil) {
			t.Fatalf("decoded without error to %v, %v", f, arr)
		}
	})
}

// TestSortByHash holds sortByHash to the order of the text, hashes sharing their first
// bytes and texts without the sha256: prefix included.
func TestSortByHash(t *testing.T) {
	t.Parallel()
	r := propSeed(t)
	for round := range 50 {
		var hs []string
		for i := range 200 {
			h := fmt.Sprintf("sha256:%064x", r.Uint64())
			if i%5 == 0 && len(hs) > 0 { // same first 8 bytes after the prefix as another
				h = hs[r.Intn(len(hs))][:15] + fmt.Sprintf("%049x", r.Uint64())
			}
			hs = append(hs, h)
		}
		if round%10 == 0 {
			hs = append(hs, "sha256:invalid", "other")
		}
		got := slices.Clone(hs)
		fold.SortByHash(got, func(s string) string { return s })
		want := slices.Clone(hs)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: sortByHash differs from sorting the text", round)
		}
	}
}

// TestCheckpointWithManyNewEntries: over sigFramesAfter entries appended since the
// checkpoint make the new process load the index's signature frames (the entries'
// signatures were saved by the processes that checked them) and still fold only the
// new entries, to the state of a full fold.
func TestCheckpointWithManyNewEntries(t *testing.T) {
	c := openBusyCopy(t)
	if _, err := c.Load(); err != nil {
		t.Fatal(err)
	}
	key, err := c.Home.LoadKey(c.Project(), "codex-desktop")
	if err != nil {
		t.Fatal(err)
	}
	for i := range sigFramesAfter + 20 {
		d := ledger.Draft{Type: fold.TypeMsgPost, Ref: fmt.Sprintf("m-many%04d", i%50), Data: []byte(`{"body":"many ` + fmt.Sprint(i) + `"}`)}
		if _, err := c.Ledger.Append("codex-desktop", c.Device, d, key, ledger.HLC{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reopened(t, c).Load(); err != nil { // a process that saved them in the index
		t.Fatal(err)
	}
	// That process started from the first checkpoint too and wrote none (under
	// checkpointEvery): the next one folds all of them on top of it.
	n := reopened(t, c)
	v, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	if n.folds.fromCheckpoint != 1 || len(v.Snapshot.Added) <= sigFramesAfter || n.localIndex().sigFrames != nil {
		t.Fatalf("folds %+v, %d added, %d signature frames left: want from the checkpoint, over %d added, frames loaded",
			n.folds, len(v.Snapshot.Added), len(n.localIndex().sigFrames), sigFramesAfter)
	}
	t.Setenv(envNoIndex, "1")
	w, err := reopened(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	if g, want := incrCanon(v.State), incrCanon(w.State); g != want {
		t.Fatalf("state differs from a full fold: %s", propDiff(g, want))
	}
}

// TestCheckpointWithAThingUnderAnotherID: a checkpoint whose checksum holds but whose
// state files an order under another id than its own (`ferry catchup` would
// panic on it) is refused, and the process folds everything.
func TestCheckpointWithAThingUnderAnotherID(t *testing.T) {
	t.Parallel()
	c := openBusyCopy(t)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for k := range v.State.Orders {
		id = k
		break
	}
	forged := id[:len(id)-1] + "x"
	if id[len(id)-1] == 'x' {
		forged = id[:len(id)-1] + "y"
	}
	rewriteCheckpoint(t, c, func(_, p []byte) []byte {
		// The id appears as a map key and as the order's ID field: change the second.
		i := bytes.Index(p, []byte(id))
		j := bytes.Index(p[i+len(id):], []byte(id))
		if i < 0 || j < 0 {
			t.Fatalf("order %s not twice in the checkpoint", id)
		}
		q := bytes.Clone(p)
		copy(q[i+len(id)+j:], forged)
		return q
	})
	n := reopened(t, c)
	v2, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	if n.folds.full != 1 || v2.State.Order(id) == nil || v2.State.Order(id).ID != id {
		t.Fatalf("a checkpoint filing order %s as %s was used (%+v)", id, forged, n.folds)
	}
	n.Catchup(v2, "codex-desktop", "") // no panic
}

// TestLookUpSaved: saved signatures are loaded before a delta fold when checking the
// roster and the new entries would cost more than loading them, and always past
// sigFramesAfter new entries.
func TestLookUpSaved(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		roster, added, saved int
		want                 bool
	}{
		{5, 1, 200, true},        // the busy fixture's size: 6 checks cost more than 200 look-ups
		{20, 3, 100_000, false},  // a big channel: 23 checks beat loading 100,000
		{20, 600, 100_000, true}, // past sigFramesAfter
		{0, 0, 0, false},         // nothing to check
		{1, 0, 0, true},          // nothing saved: loading costs nothing
	} {
		if got := lookUpSaved(c.roster, c.added, c.saved); got != c.want {
			t.Errorf("lookUpSaved(%d, %d, %d) = %v, want %v", c.roster, c.added, c.saved, got, c.want)
		}
	}
}
