package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// TestRacePrimaryTwoMachines: two machines — two FERRY_HOMEs, so two devices, two lock
// folders and two arrival logs — share one channel folder, and alice (machine A) and
// bob (machine B), both orchestrators, take the unheld primary role at once as ferry
// processes. Their channel locks are separate, so both fold the role as unheld, both
// append a first take (no basis) and both succeed locally. Then every process on either
// side folds one holder — the take with the lower hash (docs/design.md §2) — and a
// contest naming the winner; the loser may no longer brief, the winner may.
//
// "At once" is made certain as in TestRaceTwoMachinesOneFolder: the test holds each
// taker's segment lock, so neither can append before both have read the channel, and
// lets them go once both arrival logs hold the last entry written before the race.
func TestRacePrimaryTwoMachines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ch := filepath.Join(dir, "shared", "duo")
	bin := ferryExe(t)
	a := raceMachine{"machine A", filepath.Join(dir, "home-a"), bin}
	b := raceMachine{"machine B", filepath.Join(dir, "home-b"), bin}
	const project = "duo"

	a.must(t, "init", ch, "--project", project)
	a.must(t, "join", "--as", "alice", "--channel", ch)
	b.must(t, "join", "--as", "bob", "--channel", ch)
	a.must(t, "grant", "alice", "--level", "orchestrator")
	a.must(t, "grant", "bob", "--level", "orchestrator")
	// The last entry before the race: a decision, which no arrival log has seen yet (the
	// writer's own read happened before it was appended).
	var dec fold.Decision
	if err := json.Unmarshal([]byte(a.must(t, "decision", "record", "Race for the lead", "--as", "alice", "--json")), &dec); err != nil || dec.ID == "" {
		t.Fatalf("decision record --json: %v %+v", err, dec)
	}
	lg, err := ledger.Open(ledger.Options{Root: ch})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := lg.Read()
	if err != nil {
		t.Fatal(err)
	}
	marker := ""
	for i := range snap.Entries {
		if e := &snap.Entries[i]; e.Type == fold.TypeDecisionRecord && e.Ref == dec.ID {
			marker = e.Hash()
		}
	}
	arrivals := func(m raceMachine) string { return m.arrivalLogs(project) }
	for _, m := range []raceMachine{a, b} {
		if marker == "" || strings.Contains(arrivals(m), marker) {
			t.Fatalf("precondition: %s ingested the marker (%q) before the race", m.name, marker)
		}
	}
	lockA, lockB := holdSegmentLock(t, a, project, "alice"), holdSegmentLock(t, b, project, "bob")
	released := false
	release := func() {
		if !released {
			released = true
			lockA.Unlock()
			lockB.Unlock()
		}
	}
	defer release()

	type taker struct {
		m      raceMachine
		agent  string
		cmd    *exec.Cmd
		so, se bytes.Buffer
		done   chan error
	}
	takers := []*taker{{m: a, agent: "alice"}, {m: b, agent: "bob"}}
	for _, tk := range takers {
		tk.cmd = tk.m.command("primary", "take", "--as", tk.agent, "--channel", ch)
		tk.cmd.Stdout, tk.cmd.Stderr = &tk.so, &tk.se
		if err := tk.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tk.done = make(chan error, 1)
		go func() { tk.done <- tk.cmd.Wait() }()
	}
	for !strings.Contains(arrivals(a), marker) || !strings.Contains(arrivals(b), marker) {
		for _, tk := range takers {
			select {
			case err := <-tk.done:
				t.Fatalf("%s's take ended before both takers read the channel: %v\n%s%s", tk.agent, err, tk.so.String(), tk.se.String())
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	for _, tk := range takers {
		if err := <-tk.done; err != nil {
			t.Fatalf("%s's take on %s failed: %v\n%s%s", tk.agent, tk.m.name, err, tk.so.String(), tk.se.String())
		}
		if !strings.Contains(tk.so.String(), "✔ "+tk.agent+" holds the primary role") {
			t.Errorf("%s's take printed %q; want its own local success", tk.agent, tk.so.String())
		}
	}

	snap, err = lg.Read()
	if err != nil {
		t.Fatal(err)
	}
	var takes []*ledger.Entry
	for i := range snap.Entries {
		if e := &snap.Entries[i]; e.Type == fold.TypePrimaryTake {
			takes = append(takes, e)
		}
	}
	if len(takes) != 2 || takes[0].Device == takes[1].Device {
		t.Fatalf("%d takes in the ledger; want one per machine", len(takes))
	}
	sort.Slice(takes, func(i, j int) bool { return takes[i].Hash() < takes[j].Hash() })
	winner, loser := takes[0].Writer, takes[1].Writer
	t.Logf("winner %s, loser %s", winner, loser)

	machineOf := map[string]raceMachine{"alice": a, "bob": b}
	for _, m := range []raceMachine{a, b} {
		var st fsbus.PrimaryStatus
		if err := json.Unmarshal([]byte(m.must(t, "primary", "status", "--json", "--channel", ch)), &st); err != nil {
			t.Fatal(err)
		}
		if st.State != fold.PrimaryHeld || st.Holder != winner || len(st.Contests) != 1 {
			t.Fatalf("%s: primary %+v; want held by %s with one contest", m.name, st, winner)
		}
		ct := st.Contests[0]
		if ct.Ref != fold.PrimaryRef || ct.Basis != "" || ct.Winner.By != winner || ct.Winner.Hash != takes[0].Hash() ||
			len(ct.Losers) != 1 || ct.Losers[0].By != loser || !slices.Equal(ct.Involved, []string{"alice", "bob"}) {
			t.Errorf("%s: contest %+v", m.name, ct)
		}
		text := m.must(t, "primary", "status", "--channel", ch)
		if !strings.Contains(text, "primary   "+winner+" (alive") || !strings.Contains(text, "contested primary.take by "+winner+" won over primary.take by "+loser) {
			t.Errorf("%s: primary status does not name the holder and the contest:\n%s", m.name, text)
		}
		if so, se, code := m.ferry(t, "ledger", "verify", "--channel", ch); code != 0 {
			t.Errorf("%s: ledger verify exit %d\n%s%s", m.name, code, so, se)
		}
	}
	// Only the winner is the primary now, on its own machine as on the other.
	if so, se, code := machineOf[loser].ferry(t, "primary", "brief", "--objective", "mine", "--as", loser, "--channel", ch); code != exitCodes[errs.Denied] ||
		!strings.Contains(se, loser+" is not the primary (holder: "+winner+")") {
		t.Errorf("the loser's brief: exit %d\n%s%s", code, so, se)
	}
	machineOf[winner].must(t, "primary", "brief", "--objective", "Carry on", "--as", winner, "--channel", ch)
}
