package fsbus

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/ledger"
)

// vecFerryV2 holds the format-2 vector channel: a small channel after its first
// compact (docs/format.md §20).
const vecFerryV2 = vecRoot + "/ferry-v2"

// buildVectorsV2 writes the format-2 vector channel through the real code paths, with
// the v1 vectors' keys and fixed HLCs: both writers' agent.support, an order cancelled
// (terminal at the cut) and one claimed (live), the owner's checkpoint covering every
// entry (head and chunks), then channel.toml moved to format 2. It returns the files,
// paths relative to fixtures/vectors/ferry-v2.
func buildVectorsV2(t *testing.T) map[string][]byte {
	b := newVecBuilder(t)
	b.channel()
	A, M := vecAgentA, fold.MasterWriter
	h := b.hashes
	support := func(w string) fold.SupportData { return fold.SupportData{Formats: []int{1, 2}} }

	b.entry("a1-join", A, "2026-11-29T18:30:00.000Z/0000", fold.TypeAgentJoin, A, "",
		fold.EntryData{Key: b.key(A), App: "claude-code", Machine: "laptop"})
	b.entry("a2-support", A, "2026-11-29T18:30:00.000Z/0001", fold.TypeAgentSupport, A, "", support(A))
	b.entry("m1-support", M, "2026-11-29T18:30:01.000Z/0000", fold.TypeAgentSupport, M, "", support(M))
	b.entry("m2-grant-a", M, "2026-11-29T18:30:01.000Z/0001", fold.TypeGrantSet, A, "",
		fold.EntryData{Agent: A, Key: b.key(A), Level: "member"})
	o1 := &fold.OrderObject{Envelope: fold.Envelope{V: 1, ID: vecOrder1, Author: A, Device: b.devices[A]}, Title: "Cancelled before the cut"}
	b.entry("a3-create-o1", A, "2026-11-29T18:31:00.000Z/0000", fold.TypeOrderCreate, vecOrder1, "",
		fold.EntryData{Object: b.object("order o1", A, vecOrder1, o1, &o1.Envelope)})
	b.entry("a4-cancel-o1", A, "2026-11-29T18:32:00.000Z/0000", fold.TypeOrderCancel, vecOrder1, "",
		fold.EntryData{Basis: h["a3-create-o1"], Note: "not needed"})
	o2 := &fold.OrderObject{Envelope: fold.Envelope{V: 1, ID: vecOrder2, Author: M, Device: b.devices[M]}, Title: "Live at the cut"}
	b.entry("m3-create-o2", M, "2026-11-29T18:33:00.000Z/0000", fold.TypeOrderCreate, vecOrder2, "",
		fold.EntryData{Object: b.object("order o2", M, vecOrder2, o2, &o2.Envelope)})
	b.entry("a5-claim-o2", A, "2026-11-29T18:34:00.000Z/0000", fold.TypeOrderClaim, vecOrder2, "",
		fold.EntryData{Basis: h["m3-create-o2"]})

	write := func() string {
		files := map[string][]byte{}
		for p, data := range b.files {
			files[p] = data
		}
		for p, buf := range b.seg {
			files[p] = bytes.Clone(buf.Bytes())
		}
		dir := t.TempDir()
		writeTree(t, dir, files)
		return dir
	}
	// The checkpoint: every entry settled, the cut covering every segment.
	dir := write()
	c := openDir(t, dir)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{A: true, M: true}
	plan, err := fold.PlanCheckpoint(fold.PlanInput{
		In:    fold.FoldInput{Project: vecProject, Master: c.MasterKey, Objects: c.objects(), Entries: v.Snapshot.Entries, Forks: v.Snapshot.Forks},
		State: v.State, Advanced: all, Device: b.devices[M], Format: 1,
		SeenMs: func(string) int64 { return 1 }, SettledMs: 2, SettleText: "0s",
		Offset: func(writer, device, hash string) int64 {
			return ledger.LineEnd(ledger.SegmentPath(filepath.Join(dir, "ledger"), writer, device), hash)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cpFiles, headHash, err := ckfile.NewFiles(dir, plan, b.signers[M])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range cpFiles {
		rel, _ := filepath.Rel(dir, f.Path)
		b.files[filepath.ToSlash(rel)] = f.Data
	}
	b.entry("m4-checkpoint", M, "2026-11-29T18:40:00.000Z/0000", fold.TypeCheckpoint, fold.TypeCheckpoint, "",
		fold.CheckpointData{Epoch: 1, Head: headHash, Rules: fold.RulesVersion})
	// channel.toml moved to format 2, as the first compact moves it.
	toml, err := ckfile.RewriteFormat(dir, b.files["channel.toml"], 2, b.signers[M].Public(), func(body []byte) (string, error) {
		return ledger.SignDomain(b.signers[M], channelDomain, vecProject, body)
	})
	if err != nil {
		t.Fatal(err)
	}
	b.files["channel.toml"] = toml
	out := map[string][]byte{}
	for p, data := range b.files {
		out["channel/"+p] = data
	}
	for p, buf := range b.seg {
		out["channel/"+p] = buf.Bytes()
	}
	return out
}

// The format-2 vectors: byte for byte, and folded: channel.toml verifies as format 2,
// the checkpoint counts and the fold starts from it, the cancelled order is final and
// the claimed one live.
func TestVectorsFerryV2(t *testing.T) {
	t.Parallel()
	files := buildVectorsV2(t)
	if updating() {
		if err := os.RemoveAll(vecFerryV2); err != nil {
			t.Fatal(err)
		}
		writeTree(t, vecFerryV2, files)
		t.Logf("rewrote %d files under %s", len(files), vecFerryV2)
	}
	stored := map[string]bool{}
	err := filepath.WalkDir(vecFerryV2, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(vecFerryV2, p)
		stored[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v (run with -update to create it)", vecFerryV2, err)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if !stored[p] {
			t.Errorf("%s: missing from fixtures", p)
		} else if got := readFile(t, filepath.Join(vecFerryV2, p)); !bytes.Equal(got, files[p]) {
			t.Errorf("%s: the code now writes other bytes than the golden file: format v2 changed\ngolden: %q\n  code: %q", p, clip(got), clip(files[p]))
		}
	}
	for p := range stored {
		if files[p] == nil {
			t.Errorf("%s: stored but no longer generated", p)
		}
	}
	if t.Failed() {
		return
	}
	dir := filepath.Join(t.TempDir(), "ch")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(vecFerryV2, "channel"))); err != nil {
		t.Fatal(err)
	}
	c := openDir(t, dir)
	if c.Config.Format != 2 {
		t.Fatalf("channel.toml format %d", c.Config.Format)
	}
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	cf := c.OwnerCheckpoint()
	if cf == nil || len(cf.Chain) != 1 || len(cf.Problems) != 0 || v.State.Base() == nil {
		t.Fatalf("the checkpoint does not count: %+v", cf)
	}
	if o := v.State.Order(vecOrder1); o == nil || o.State != fold.StateCancelled {
		t.Errorf("o1: %+v, want cancelled", o)
	}
	if o := v.State.Order(vecOrder2); o == nil || o.State != fold.StateClaimed || o.Holder != vecAgentA {
		t.Errorf("o2: %+v, want claimed by %s", o, vecAgentA)
	}
	if len(v.State.Ignored) != 0 {
		t.Errorf("ignored: %+v", v.State.Ignored)
	}
}
