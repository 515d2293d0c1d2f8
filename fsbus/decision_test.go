package fsbus

import (
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestDecisions: orchestrators record one-line decisions, listed newest first; bad
// lines and lower levels are refused and write nothing; a key replays; the fold
// ignores records with a bad id or no line, and a second record under one id.
func TestDecisions(t *testing.T) {
	t.Parallel()
	c, clk, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "mike": "member"})
	alice, mike := ss["alice"], ss["mike"]
	first, err := alice.DecisionRecord("  Use Go 1.26  ", "")
	if err != nil {
		t.Fatal(err)
	}
	if !fold.ValidID(first.ID) || !strings.HasPrefix(first.ID, fold.PrefixDecision) || first.Line != "Use Go 1.26" || first.By != "alice" {
		t.Fatalf("decision %+v", first)
	}
	clk.advance(time.Millisecond)
	second, err := alice.DecisionRecord("Keep the MCP server hand-rolled", "k")
	if err != nil {
		t.Fatal(err)
	}
	n := primaryEntries(t, c)
	replay, err := alice.DecisionRecord("Keep the MCP server hand-rolled", "k")
	if err != nil || replay.ID != second.ID || primaryEntries(t, c) != n {
		t.Fatalf("replay: %+v %v (entries %d → %d)", replay, err, n, primaryEntries(t, c))
	}
	for name, tc := range map[string]struct {
		s    *Session
		line string
		key  string
		cat  errs.Category
	}{
		"member":        {mike, "Ship it", "", errs.Denied},
		"empty":         {alice, "   ", "", errs.Invalid},
		"two lines":     {alice, "one\ntwo", "", errs.Invalid},
		"too long":      {alice, strings.Repeat("x", 201), "", errs.Invalid},
		"key reused":    {alice, "Another", "k", errs.Conflict},
		"invalid utf-8": {alice, "bad \xff", "", errs.Invalid},
	} {
		if _, err := tc.s.DecisionRecord(tc.line, tc.key); !errs.Is(err, tc.cat) {
			t.Errorf("%s: %v; want %s", name, err, tc.cat)
		}
	}
	if primaryEntries(t, c) != n {
		t.Fatal("a refusal wrote an entry")
	}
	if got := primaryLoad(t, c).State.ListDecisions(0); len(got) != 2 || got[0].ID != second.ID || got[1].ID != first.ID {
		t.Fatalf("decisions %+v; want newest first", got)
	}
	badID := primaryAppend(t, alice, fold.TypeDecisionRecord, "o-0000000000000", fold.PrimaryData{Line: "x"})
	noLine := primaryAppend(t, alice, fold.TypeDecisionRecord, fold.NewID(fold.PrefixDecision), fold.PrimaryData{})
	dup := primaryAppend(t, alice, fold.TypeDecisionRecord, first.ID, fold.PrimaryData{Line: "rewritten"})
	v := primaryLoad(t, c)
	if r := primaryIgnored(v.State, badID.Hash()); r != "decision.record with a bad decision id" {
		t.Errorf("bad id: %q", r)
	}
	if r := primaryIgnored(v.State, noLine.Hash()); r != "decision.record without a line" {
		t.Errorf("no line: %q", r)
	}
	// Of two records under one id the lower entry hash counts, whatever the clocks say.
	got := v.State.ListDecisions(0)
	if len(got) != 2 || got[0].HLC < got[1].HLC {
		t.Fatalf("decisions %+v; want two, newest first", got)
	}
	var firstHash string
	for _, e := range v.Snapshot.Entries {
		if e.Ref == first.ID && e.Hash() != dup.Hash() {
			firstHash = e.Hash()
		}
	}
	wantLine := "Use Go 1.26"
	if dup.Hash() < firstHash {
		wantLine = "rewritten"
	}
	var line string
	for _, d := range got {
		if d.ID == first.ID {
			line = d.Line
		}
	}
	if line != wantLine || (primaryIgnored(v.State, dup.Hash()) == "") == (wantLine == "Use Go 1.26") {
		t.Errorf("duplicate id: line %q, want %q", line, wantLine)
	}
	if l := v.State.ListDecisions(1); len(l) != 1 || l[0].ID != got[0].ID {
		t.Errorf("limit 1: %+v", l)
	}
	if l := (&fold.State{}).ListDecisions(0); l == nil {
		t.Error("an empty list is nil")
	}
}
