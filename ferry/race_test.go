package main

// Real processes racing on real files:
//
//   - one machine: 8 processes race to claim each of 100 orders, and the machine-local
//     channel lock makes each claim a true compare-and-set — exactly one wins;
//   - two machines on one folder: two FERRY_HOMEs (two devices, two lock folders) claim
//     one order at once; both succeed locally, and afterwards every process on either
//     side folds the same single holder and tells the loser it lost, and to whom.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// Environment of the claim helper processes (raceClaimHelper).
const (
	raceHelperEnv  = "FERRY_TEST_RACE_HELPER" // "1" in a helper process
	raceChannelEnv = "FERRY_TEST_RACE_CHANNEL"
	raceIDsEnv     = "FERRY_TEST_RACE_IDS"     // file: one order id a line
	raceBarrierEnv = "FERRY_TEST_RACE_BARRIER" // file whose appearance starts the race
	raceOutEnv     = "FERRY_TEST_RACE_OUT"     // file the helper writes its results to
)

// raceResult is one claim attempt of a helper process.
type raceResult struct {
	Agent  string `json:"agent"`
	ID     string `json:"id"`
	Code   int    `json:"code"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// raceEnv returns the environment with every FERRY_ variable replaced by kv.
func raceEnv(kv ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FERRY_") {
			env = append(env, e)
		}
	}
	return append(env, kv...)
}

// raceClaimHelper is the body of a helper process: TestRaceEightProcessesClaimEachOrderOnce starts
// this test binary 8 times running only this function. Each process waits for the
// barrier file, then runs `ferry order claim ID --as AGENT` through the CLI's own run
// for every order in turn — a real process per racer, each claim a full open, fold,
// check and append — and writes every exit code and output to its result file.
// TestMain runs it instead of the tests when FERRY_TEST_RACE_HELPER=1; it returns
// the process exit code.
func raceClaimHelper() int {
	agent := os.Getenv(fsbusAgentEnv)
	raw, err := os.ReadFile(os.Getenv(raceIDsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ids := strings.Fields(string(raw))
	for {
		if _, err := os.Stat(os.Getenv(raceBarrierEnv)); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	for _, id := range ids {
		var so, se bytes.Buffer
		code := run([]string{"order", "claim", id, "--as", agent, "--channel", os.Getenv(raceChannelEnv)}, &so, &se)
		if err := enc.Encode(raceResult{Agent: agent, ID: id, Code: code, Stdout: so.String(), Stderr: se.String()}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := os.WriteFile(os.Getenv(raceOutEnv), out.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fsbusAgentEnv is the variable --as reads (FERRY_AGENT); the helper reads its agent
// name from it so the name is set the way a user sets it.
const fsbusAgentEnv = "FERRY_AGENT"

// TestRaceEightProcessesClaimEachOrderOnce: 8 processes (8 seated agents) race to claim
// each of 100 orders (-short: 20) on one machine. Every order is claimed exactly once:
// one process succeeds, the other 7 get a conflict (exit code 5) naming the holder;
// the ledger holds exactly one claim per order; the fold shows that one holder and no
// contests, because the machine's channel lock serialises fold → check → append.
func TestRaceEightProcessesClaimEachOrderOnce(t *testing.T) {
	const procs = 8
	orders := 100
	if testing.Short() {
		orders = 20
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	ch := filepath.Join(dir, "channel")
	t.Setenv(fsbus.EnvHome, home)
	h, err := fsbus.LocalHome()
	if err != nil {
		t.Fatal(err)
	}
	c, err := fsbus.Init(h, fsbus.InitOptions{Dir: ch, Project: "race"})
	if err != nil {
		t.Fatal(err)
	}
	master, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	var agents []string
	for i := range procs {
		name := fmt.Sprintf("racer-%d", i)
		agents = append(agents, name)
		if _, err := fsbus.Join(c, name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := master.Grant(fsbus.GrantOptions{Agent: name, Level: "member"}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range orders {
		o, err := master.NewOrder(fsbus.NewOrderOptions{Title: fmt.Sprintf("order %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	idFile := filepath.Join(dir, "ids")
	if err := os.WriteFile(idFile, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	barrier := filepath.Join(dir, "go")

	start := time.Now()
	cmds := make([]*exec.Cmd, procs)
	outs := make([]string, procs)
	logs := make([]*bytes.Buffer, procs)
	for i, a := range agents {
		outs[i] = filepath.Join(dir, "out-"+a)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = raceEnv(fsbus.EnvHome+"="+home, fsbusAgentEnv+"="+a, raceHelperEnv+"=1",
			raceChannelEnv+"="+ch, raceIDsEnv+"="+idFile, raceBarrierEnv+"="+barrier, raceOutEnv+"="+outs[i])
		logs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = logs[i], logs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	if err := os.WriteFile(barrier, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %s: %v\n%s", agents[i], err, logs[i])
		}
	}
	t.Logf("%d processes × %d claims in %v", procs, orders, time.Since(start).Round(time.Millisecond))

	byOrder := map[string][]raceResult{}
	for i := range agents {
		f, err := os.Open(outs[i])
		if err != nil {
			t.Fatalf("helper %s wrote no results: %v\n%s", agents[i], err, logs[i])
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		n := 0
		for sc.Scan() {
			var r raceResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			byOrder[r.ID] = append(byOrder[r.ID], r)
			n++
		}
		f.Close()
		if n != orders {
			t.Fatalf("helper %s reported %d claims; want %d", agents[i], n, orders)
		}
	}

	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	wins := map[string]int{}
	for _, id := range ids {
		var winners []raceResult
		for _, r := range byOrder[id] {
			if r.Code == 0 {
				winners = append(winners, r)
			}
		}
		if len(winners) != 1 {
			t.Errorf("order %s: %d processes succeeded; want exactly 1: %+v", id, len(winners), byOrder[id])
			continue
		}
		win := winners[0].Agent
		wins[win]++
		for _, r := range byOrder[id] {
			if r.Code == 0 {
				continue
			}
			if r.Code != exitCodes[errs.Conflict] || !strings.Contains(r.Stderr, "ferry: error: conflict:") || !strings.Contains(r.Stderr, "claimed by "+win) {
				t.Errorf("order %s: %s got exit %d, stderr %q; want exit %d, a conflict naming %s", id, r.Agent, r.Code, r.Stderr, exitCodes[errs.Conflict], win)
			}
		}
		o := v.State.Order(id)
		if o == nil || o.State != fold.StateClaimed || o.Holder != win || len(o.Contests) != 0 {
			t.Errorf("order %s folds as %+v; want claimed by %s, uncontested", id, o, win)
		}
	}
	claims := 0
	for _, e := range v.Snapshot.Entries {
		if e.Type == fold.TypeOrderClaim {
			claims++
		}
	}
	if claims != orders {
		t.Errorf("the ledger holds %d order.claim entries; want exactly %d", claims, orders)
	}
	if len(v.State.Contested) != 0 {
		t.Errorf("contests on one machine: %+v", v.State.Contested)
	}
	rep, err := c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("ledger verify after the race: %+v", rep)
	}
	t.Logf("wins per process: %v", wins)
}

// raceMachine is one machine: its FERRY_HOME, as LocalHome lays it out.
type raceMachine struct {
	name string
	home string
	bin  string // the ferry executable (ferryExe)
}

func (m raceMachine) fsHome() *fsbus.Home {
	return &fsbus.Home{ConfigDir: filepath.Join(m.home, "config"), CacheDir: filepath.Join(m.home, "cache")}
}

// command returns a real ferry process on machine m.
func (m raceMachine) command(args ...string) *exec.Cmd {
	cmd := exec.Command(m.bin, args...)
	cmd.Env = raceEnv(fsbus.EnvHome + "=" + m.home)
	return cmd
}

// ferry runs a real ferry process on machine m and returns its output and exit code.
func (m raceMachine) ferry(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := m.command(args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return so.String(), se.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("running ferry %v on %s: %v", args, m.name, err)
	}
	return so.String(), se.String(), 0
}

// must runs ferry on m and fails the test unless it exits 0.
func (m raceMachine) must(t *testing.T, args ...string) string {
	t.Helper()
	so, se, code := m.ferry(t, args...)
	if code != 0 {
		t.Fatalf("ferry %v on %s: exit %d\n%s%s", args, m.name, code, so, se)
	}
	return so
}

// TestRaceTwoMachinesOneFolder: two machines — two FERRY_HOMEs, so two devices and two
// lock folders — share one channel folder, and alice (machine A) and bob (machine B)
// claim one order at once. Their channel locks are separate, so neither serialises the
// other: both fold the order as open, both append a claim naming the same basis, and
// both succeed locally (exit 0). Then every ferry process on either side folds one
// holder — the claim with the lower hash (docs/design.md §2) — and the loser's `order
// show` and `status` say it lost, and to whom.
//
// "At once" is made certain, not hoped for: the test holds each claimer's segment lock
// (the machine-local lock Append takes after the fold), so neither process can append
// before both have read the channel; it lets them go once both have ingested the
// order's creation into their arrival logs, which Load does after reading every
// segment.
func TestRaceTwoMachinesOneFolder(t *testing.T) {
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
	a.must(t, "grant", "alice", "--level", "member")
	a.must(t, "grant", "bob", "--level", "member")
	var row struct{ ID string }
	if err := json.Unmarshal([]byte(a.must(t, "order", "new", "Race me", "--as", "alice", "--json")), &row); err != nil || row.ID == "" {
		t.Fatalf("order new --json: %v %+v", err, row)
	}
	id := row.ID

	// The marker both claimers must read before either may append: the order's creation.
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
		if e := &snap.Entries[i]; e.Type == fold.TypeOrderCreate && e.Ref == id {
			marker = e.Hash()
		}
	}
	arrivals := func(m raceMachine) string { return m.arrivalLogs(project) }
	for _, m := range []raceMachine{a, b} {
		if strings.Contains(arrivals(m), marker) {
			t.Fatalf("precondition: %s ingested the order's creation before the race; the test cannot tell when the claimers have read the channel", m.name)
		}
	}

	// Hold each claimer's segment lock (seg-<writer>.<device>.lock in its machine's
	// lock folder, made by its join).
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

	type claimer struct {
		m      raceMachine
		agent  string
		cmd    *exec.Cmd
		so, se bytes.Buffer
		done   chan error
	}
	claimers := []*claimer{{m: a, agent: "alice"}, {m: b, agent: "bob"}}
	for _, c := range claimers {
		c.cmd = c.m.command("order", "claim", id, "--as", c.agent)
		c.cmd.Stdout, c.cmd.Stderr = &c.so, &c.se
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c.done = make(chan error, 1)
		go func() { c.done <- c.cmd.Wait() }()
	}
	// Wait (no deadline but the test's own) until both have read the channel. A claimer
	// that exits first did so without appending — it cannot get past its held lock.
	for !strings.Contains(arrivals(a), marker) || !strings.Contains(arrivals(b), marker) {
		for _, c := range claimers {
			select {
			case err := <-c.done:
				t.Fatalf("%s's claim ended before both claimers read the channel: %v\n%s%s", c.agent, err, c.so.String(), c.se.String())
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	for _, c := range claimers {
		if err := <-c.done; err != nil {
			t.Fatalf("%s's claim on %s failed: %v\n%s%s", c.agent, c.m.name, err, c.so.String(), c.se.String())
		}
		if !strings.Contains(c.so.String(), "claimed "+id) || !strings.Contains(c.so.String(), "holder "+c.agent) {
			t.Errorf("%s's claim printed %q; want its own local success", c.agent, c.so.String())
		}
	}

	// The rule of docs/design.md §2: both branches reached "claimed"; the lower hash wins.
	snap, err = lg.Read()
	if err != nil {
		t.Fatal(err)
	}
	var claims []*ledger.Entry
	for i := range snap.Entries {
		if e := &snap.Entries[i]; e.Type == fold.TypeOrderClaim && e.Ref == id {
			claims = append(claims, e)
		}
	}
	if len(claims) != 2 {
		t.Fatalf("%d claims in the ledger; want 2", len(claims))
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Hash() < claims[j].Hash() })
	winner, loser := claims[0].Writer, claims[1].Writer
	if claims[0].Device == claims[1].Device {
		t.Fatalf("both claims come from device %s; want one per machine", claims[0].Device)
	}
	t.Logf("winner %s (claim %s), loser %s", winner, claims[0].Hash(), loser)

	// Every ferry process on either side folds one holder, the same.
	for _, m := range []raceMachine{a, b} {
		for _, as := range []string{"", "alice", "bob"} {
			args := []string{"order", "show", id, "--json"}
			if as != "" {
				args = append(args, "--as", as)
			}
			var o fold.Order
			if err := json.Unmarshal([]byte(m.must(t, args...)), &o); err != nil {
				t.Fatal(err)
			}
			if o.State != fold.StateClaimed || o.Holder != winner || o.Claim != claims[0].Hash() || len(o.Contests) != 1 ||
				o.Contests[0].Winner.By != winner || len(o.Contests[0].Losers) != 1 || o.Contests[0].Losers[0].By != loser {
				t.Errorf("%s, as %q: order folds as state %s holder %s contests %+v; want claimed by %s, %s's claim superseded",
					m.name, as, o.State, o.Holder, o.Contests, winner, loser)
			}
		}
		var rows []fold.OrderRow
		if err := json.Unmarshal([]byte(m.must(t, "order", "list", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Holder != winner {
			t.Errorf("%s: order list %+v; want one order held by %s", m.name, rows, winner)
		}

		// The loser is told, on either machine, that it lost and to whom.
		show := m.must(t, "order", "show", id, "--as", loser)
		if !strings.Contains(show, "lost") || !strings.Contains(show, "you ("+loser+")") || !strings.Contains(show, "to "+winner) {
			t.Errorf("%s: `order show --as %s` does not say %s lost to %s:\n%s", m.name, loser, loser, winner, show)
		}
		status := m.must(t, "status", "--as", loser)
		if !strings.Contains(status, "contested") || !strings.Contains(status, id) ||
			!strings.Contains(status, "you ("+loser+") lost "+id+" to "+winner) {
			t.Errorf("%s: `status --as %s` does not list the contest naming %s:\n%s", m.name, loser, winner, status)
		}
		var st fsbus.Status
		if err := json.Unmarshal([]byte(m.must(t, "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Contests) != 1 || st.Contests[0].Winner.By != winner || st.Contests[0].Ref != id {
			t.Errorf("%s: status --json contests %+v; want one, won by %s", m.name, st.Contests, winner)
		}
		if so, se, code := m.ferry(t, "ledger", "verify"); code != 0 {
			t.Errorf("%s: ledger verify exit %d\n%s%s", m.name, code, so, se)
		}
	}

	// Only the winner's claim moves the order: the loser is refused as superseded,
	// naming the winner (its claim lost a race, it lacks no permission); the winner is not.
	loserM, winnerM := a, b
	if loser == "bob" {
		loserM, winnerM = b, a
	}
	for _, args := range [][]string{{"progress", id, "still on it"}, {"submit", id, "--ref", "abc123"}} {
		so, se, code := loserM.ferry(t, append(append([]string{"order"}, args...), "--as", loser)...)
		if code != exitCodes[errs.Superseded] || !strings.Contains(se, "ferry: error: superseded: "+loser+"'s claim on order "+id+" lost a race across machines: "+winner+"'s claim counts") {
			t.Errorf("the loser's %s: exit %d; want %d (superseded, naming %s)\n%s%s", args[0], code, exitCodes[errs.Superseded], winner, so, se)
		}
	}
	winnerM.must(t, "order", "progress", id, "on it", "--as", winner)
}

// holdSegmentLock takes writer's segment lock on machine m (seg-<writer>.<device>.lock
// in its lock folder, made by its join), so that writer's next append waits until the
// test releases it: two machines' writes then race from the same folded state.
func holdSegmentLock(t *testing.T, m raceMachine, project, writer string) *flock.Flock {
	t.Helper()
	dev, err := m.fsHome().Device()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(m.fsHome().LockDir(project), "seg-"+writer+"."+dev+".lock")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no segment lock file for %s on %s: %v", writer, m.name, err)
	}
	lk := flock.New(p)
	if err := lk.Lock(); err != nil {
		t.Fatal(err)
	}
	return lk
}

// arrivalLogs returns the text of every arrival log of project on machine m (one per
// channel directory, ADR 0012).
func (m raceMachine) arrivalLogs(project string) string {
	logs, _ := filepath.Glob(filepath.Join(m.fsHome().StateDir(project), "arrivals-*.log"))
	var all []byte
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		all = append(all, b...)
	}
	return string(all)
}
