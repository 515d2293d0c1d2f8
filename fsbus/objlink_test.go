package fsbus

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/verify"
)

// TestObjectLinksNotRead (docs/threat-model.md "Paths and links"): an object file
// replaced by a link — to a key file, say — is listed as a link by verify and in its
// findings, and never opened: none of the target's bytes appear in the report
// (fsbus/doctor's TestDoctorLinksNotRead: nor in doctor's).
func TestObjectLinksNotRead(t *testing.T) {
	t.Parallel()
	w := newAdvWorld(t)
	secret := "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"
	target := filepath.Join(t.TempDir(), "master.key")
	writeTestFile(t, target, []byte(secret+"\n"))
	for _, id := range []string{w.order, "o-0000000000000"} { // named by an entry, and by none
		p := verify.ObjectPath(w.c.Root, "alice", id)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	r := w.report(t)
	b, err := json.Marshal(r.vr)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(secret[:12])) || bytes.Contains(b, []byte("QQQQ")) {
		t.Errorf("a report shows the link's target: %s", b)
	}
	if len(r.vr.Links) != 2 {
		t.Errorf("verify lists links %v, want both object files", r.vr.Links)
	}
	links := 0
	for _, f := range r.vr.Findings {
		if f.Check == verify.CheckLink && f.Level == verify.LevelError {
			links++
		}
	}
	if links != 2 {
		t.Errorf("verify's findings report %d links, want 2: %+v", links, r.vr.Findings)
	}
}
