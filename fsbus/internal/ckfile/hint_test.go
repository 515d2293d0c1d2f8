package ckfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// TestFindHintReadsEpochAndCut: the hint of a head holds the epoch and the floors of
// its cut as a whole decode gives them, in RFC 8785 member order or any other; a
// head that is no object, lacks its cut or epoch, is cut short, or whose epoch is not
// its directory's gives no hint.
func TestFindHintReadsEpochAndCut(t *testing.T) {
	cut := fold.Cut{
		{Writer: "agent-01", Device: "d1", Seq: 4909, Hash: "sha256:e548f77cd95e94cf47e550712d20745da8f60d34526b30f5d4923759eed2eb1c", Offset: 2205092},
		{Writer: "agent-02", Device: "d2", Seq: 3, Hash: "sha256:e658c84a17b7cb92159b6df6473a6b46980247ef661dd8c0437518894bcca21b", Offset: 900},
	}
	head := fold.Head{V: 1, Project: "p", Epoch: 2, Rules: 3, Cut: cut, Compactor: "d1",
		Things: []fold.ChunkRef{{First: "o-0000000000000", Hash: "sha256:e658c84a17b7cb92159b6df6473a6b46980247ef661dd8c0437518894bcca21b"}}}
	inOrder, err := ledger.Canonical(head)
	if err != nil {
		t.Fatal(err)
	}
	asStruct, err := json.Marshal(head) // v, project, epoch, rules, cut, …: not RFC 8785 order
	if err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, epoch int, raw []byte) string {
		root := t.TempDir()
		p := filepath.Join(root, filepath.FromSlash(fold.HeadPath(epoch, ledger.HashBytes(raw))))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return root
	}
	for name, raw := range map[string][]byte{"RFC 8785 order": inOrder, "struct order": asStruct} {
		h, ok := FindHint(put(t, 2, raw), filepath.Join(t.TempDir(), "seen"))
		if !ok || h.Epoch != 2 || h.Head != ledger.HashBytes(raw) || !reflect.DeepEqual(h.Floors, fold.Floors(cut)) {
			t.Errorf("%s: hint %+v, %v; want epoch 2, head %s, floors %+v", name, h, ok, ledger.HashBytes(raw), fold.Floors(cut))
		}
	}
	for name, c := range map[string]struct {
		epoch int
		raw   string
	}{
		"not an object": {2, `[1,2]`},
		"no cut":        {2, `{"epoch":2,"v":1}`},
		"no epoch":      {2, `{"cut":[],"v":1}`},
		"cut short":     {2, string(inOrder[:len(inOrder)/3])},
		"another epoch": {3, string(inOrder)},
	} {
		if h, ok := FindHint(put(t, c.epoch, []byte(c.raw)), filepath.Join(t.TempDir(), "seen")); ok {
			t.Errorf("%s: hint %+v", name, h)
		}
	}
}
