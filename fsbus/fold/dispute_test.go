package fold

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/ledger"
)

// TestDisputeFirstIsAnIDOrAToken: a dispute's first is "cut", a thing id, or
// "(state)" — a reason naming this machine's paths, or a member's free text with
// newlines, never reaches the entry or a display.
func TestDisputeFirstIsAnIDOrAToken(t *testing.T) {
	for in, want := range map[string]string{
		"cut":        "cut",
		"o-1a2b3c4d": "o-1a2b3c4d",
		"(the state does not load: chunk /home/alice/x.json)": "(state)",
		"o-1\nfake status line":                               "(state)",
		strings.Repeat("a", 65):                               "(state)",
		"":                                                    "(state)",
	} {
		if got := disputeFirst(in); got != want {
			t.Errorf("disputeFirst(%q) = %q, want %q", in, got, want)
		}
	}
	d := DisputeDraft(Dispute{Hash: "sha256:00", Epoch: 1, Rules: RulesVersion, First: "(the state does not load: /home/alice)"}, false)
	var data DisputeData
	if err := json.Unmarshal(d.Data, &data); err != nil || data.First != "(state)" || strings.Contains(string(d.Data), "alice") {
		t.Fatalf("draft data %s: %v", d.Data, err)
	}
}

// TestStandingDisputesNameTheNewest: a dispute stands only against the newest counting
// checkpoint, whatever older ones the reader's chain holds (a reader from the cut
// holds fewer than one that read the ledger whole); its writer's later withdrawal ends
// it; an unseated writer's does not stand.
func TestStandingDisputesNameTheNewest(t *testing.T) {
	cp := func(epoch int) Counting {
		return Counting{Entry: ledger.Entry{Writer: MasterWriter, Device: "m1", Seq: uint64(10 * epoch), Type: TypeCheckpoint, Ref: TypeCheckpoint, HLC: fmt.Sprintf("%d", epoch)}, Data: CheckpointData{Epoch: epoch}}
	}
	c1, c2 := cp(1), cp(2)
	seq := uint64(0)
	dispute := func(writer string, c Counting, withdrawn bool) ledger.Entry {
		seq++
		d := DisputeDraft(Dispute{Hash: c.Entry.Hash(), Epoch: c.Data.Epoch, Rules: RulesVersion, First: "o-1"}, withdrawn)
		return ledger.Entry{Writer: writer, Device: "d1", Seq: seq, Type: d.Type, Ref: d.Ref, Data: d.Data, HLC: fmt.Sprintf("h%03d", seq)}
	}
	old := dispute("alice", c1, false)
	cur := dispute("bob", c2, false)
	gone := dispute("carol", c2, false)
	withdrawnLater := []ledger.Entry{dispute("dan", c2, false), dispute("dan", c2, true)}
	entries := append([]ledger.Entry{old, cur, gone}, withdrawnLater...)
	st := &State{Agents: map[string]*Agent{}}
	counted := map[string]bool{}
	for _, e := range entries {
		counted[e.Hash()] = true
	}
	st.Counted = st.Counted.With(counted)
	for _, w := range []string{"alice", "bob", "dan"} {
		st.Agents[w] = &Agent{Name: w, Seated: true}
	}
	st.Agents["carol"] = &Agent{Name: "carol", Seated: true, Retired: true}
	for _, chain := range [][]Counting{{c1, c2}, {c2}} {
		got := StandingDisputes(entries, st, chain)
		if len(got) != 1 || got[0].Writer != "bob" || got[0].Epoch != 2 || got[0].Entry != cur.Hash() {
			t.Fatalf("chain of %d: standing %+v, want bob's dispute of epoch 2 only", len(chain), got)
		}
	}
	if got := StandingDisputes(entries, st, []Counting{c1}); len(got) != 1 || got[0].Writer != "alice" {
		t.Fatalf("with epoch 1 the newest: %+v", got)
	}
	if got := StandingDisputes(entries, st, nil); len(got) != 0 {
		t.Fatalf("no chain: %+v", got)
	}
}
