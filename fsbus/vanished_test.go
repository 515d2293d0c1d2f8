package fsbus

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
)

// TestCutRevocationReported: deleting the last line of the master
// segment (`head -n -1`) undoes a revocation in the fold of every machine — the folder
// is what they all fold — but every machine that had read the line reports an error in
// `ferry ledger verify` and `ferry doctor`, once, naming the writer, its segment with
// the seq it now holds, and the fix.
func TestCutRevocationReported(t *testing.T) {
	t.Parallel()
	w := newAdvWorld(t)
	other, err := Open(testHome(t), w.c.Root) // a second machine sharing the folder
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.master.Revoke("bob"); err != nil {
		t.Fatal(err)
	}
	if a := mustLoad(t, other).State.Agents["bob"]; a.Seated {
		t.Fatal("the other machine did not read the revocation")
	}
	raw := bytes.TrimSuffix(mustReadFile(t, w.masterSeg), []byte("\n"))
	writeTestFile(t, w.masterSeg, raw[:bytes.LastIndexByte(raw, '\n')+1])

	// The owner's machine: its own segment lost an append, reported once.
	r := w.report(t)
	if !r.v.State.Agents["bob"].Seated {
		t.Fatal("the cut did not undo the revocation: the test does not exercise it")
	}
	if len(r.vr.Lost) != 1 || len(r.vr.Vanished) != 0 || r.vr.OK() || r.vr.Fixes["lost"] == "" {
		t.Errorf("owner's verify: lost %q, vanished %+v", r.vr.Lost, r.vr.Vanished)
	}
	nErrs := 0
	for _, f := range r.vr.Findings {
		if f.Level == verify.LevelError && (f.Check == verify.CheckLost || f.Check == verify.CheckVanished) {
			nErrs++
		}
	}
	if nErrs != 1 {
		t.Errorf("owner's findings report the cut %d times, want once as an error: %+v", nErrs, r.vr.Findings)
	}

	// The other machine read the line but never wrote it: the vanished record is an
	// error there too.
	v := mustLoad(t, reopen(t, other))
	vr, err := other.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(vr.Vanished) != 1 || vr.Vanished[0].Writer != fold.MasterWriter || vr.Vanished[0].Records != 1 || vr.OK() ||
		vr.Fixes[verify.KindVanished] == "" || !strings.Contains(vr.Vanished[0].String(), " up to seq ") {
		t.Errorf("other machine's verify: vanished %+v lost %q", vr.Vanished, vr.Lost)
	}
	found := 0
	for _, f := range vr.Findings {
		if f.Check == verify.CheckVanished && f.Level == verify.LevelError && f.Path == "ledger/master" && strings.Contains(f.Detail, "up to seq") && strings.Contains(f.Fix, "restore") {
			found++
		}
	}
	if found != 1 {
		t.Errorf("other machine's findings: %d shrunk errors, want 1: %+v", found, vr.Findings)
	}
}
