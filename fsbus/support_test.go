package fsbus

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// segmentTypes lists the type and ref of every line of the segment (writer, device).
func segmentTypes(t *testing.T, c *Channel, writer string) []string {
	t.Helper()
	b, err := os.ReadFile(ledger.SegmentPath(c.Root, writer, c.Device))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Type, Ref string
			Data      json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		s := e.Type
		if e.Type == fold.TypeAgentSupport {
			s += " " + e.Ref + " " + string(e.Data)
		}
		out = append(out, s)
	}
	return out
}

// A format-2 build writes one agent.support in each segment it writes to, with the
// first entry it writes there (after an agent.join, which stays first); the fold
// counts it and changes nothing else; verify reports nothing about it.
func TestAgentSupportWritten(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	if _, err := w.alice.NewOrder(NewOrderOptions{Title: "one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.alice.NewOrder(NewOrderOptions{Title: "two"}); err != nil {
		t.Fatal(err)
	}
	support := func(name string) string { return fold.TypeAgentSupport + " " + name + ` {"formats":[1,2]}` }
	if got, want := strings.Join(segmentTypes(t, w.c, "alice"), "\n"), strings.Join([]string{"agent.join", support("alice"), "order.create", "order.create"}, "\n"); got != want {
		t.Errorf("alice's segment:\n%s\nwant\n%s", got, want)
	}
	if got := segmentTypes(t, w.c, fold.MasterWriter); len(got) < 2 || got[0] != support(fold.MasterWriter) || got[1] != fold.TypeGrantSet {
		t.Errorf("the master's segment: %v, want its agent.support first", got)
	}
	v, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.State.Ignored) != 0 {
		t.Errorf("ignored: %+v", v.State.Ignored)
	}
	if !fold.HasSupport(v.Snapshot.Entries, "alice", w.c.Device, 2) {
		t.Error("HasSupport does not see alice's agent.support")
	}
	rep, err := w.c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 {
		t.Errorf("verify: %+v", rep.Findings)
	}
}

// An unseated writer's agent.support, written with its join, is checked against the
// join's key and listed as ignored no more than the join is.
func TestAgentSupportOfUnseatedWriter(t *testing.T) {
	t.Parallel()
	w := newLifeWorld(t)
	if _, err := Join(w.c, "dave", "test"); err != nil {
		t.Fatal(err)
	}
	v, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.State.Ignored) != 0 {
		t.Errorf("ignored: %+v", v.State.Ignored)
	}
	rep, err := w.c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 {
		t.Errorf("verify: %+v", rep.Findings)
	}
}

// SupportFormats takes only a writer's own, well-formed statement.
func TestSupportFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ref, data string
		ok        bool
	}{
		{"alice", `{"formats":[1,2]}`, true},
		{"alice", `{"formats":[2]}`, true},
		{"bob", `{"formats":[1,2]}`, false},
		{"alice", `{"formats":[2,1]}`, false},
		{"alice", `{"formats":[1,1]}`, false},
		{"alice", `{"formats":[0,2]}`, false},
		{"alice", `{"formats":[]}`, false},
		{"alice", `{"formats":"2"}`, false},
		{"alice", `{}`, false},
	} {
		e := ledger.Entry{Writer: "alice", Type: fold.TypeAgentSupport, Ref: tc.ref, Data: json.RawMessage(tc.data)}
		if _, ok := fold.SupportFormats(&e); ok != tc.ok {
			t.Errorf("ref %s data %s: ok %v, want %v", tc.ref, tc.data, ok, tc.ok)
		}
	}
}
