package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/doctor"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/fsbus/verify"
)

// TestSyncthingTwoNodes (docs/sync.md "Syncthing"): two real Syncthing instances on
// loopback carry one channel between two machines (two FERRY_HOMEs). Agents on both
// sides create, claim, submit and message concurrently; in the middle the devices are
// paused (a partition) while both sides claim, submit and accept the same orders; after
// resuming, the test waits on Syncthing's /rest/db/completion and folder state (never a
// sleep) and checks that both machines fold the same state, every message is delivered
// exactly once, no order has two accepted results, `ferry ledger verify` is clean on
// both and `ferry doctor` finds no conflict copy unmerged.
//
// Gate: runs when FERRY_SYNCTHING_TEST=1 (.ci/run sets it) or CI=true, and fails then
// when syncthing is not installed; with neither set it is skipped with a message.
func TestSyncthingTwoNodes(t *testing.T) {
	t.Parallel()
	stBin := syncthingGate(t)
	deadline := time.Now().Add(170 * time.Second) // the whole test stays under 3 minutes
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	bin, root := ferryExe(t), t.TempDir()
	stA, stB, a, b := twoNodes(t, ctx, stBin, bin)
	dirA, dirB := a.dir, b.dir

	a.must("init", dirA, "--project", "acme")
	converge(t, ctx, stA, stB, a, b)
	for _, n := range []string{"alice", "carol"} {
		a.must("join", "--as", n, "--channel", dirA, "--app", "claude-code")
	}
	for _, n := range []string{"bob", "dan"} {
		b.must("join", "--as", n, "--channel", dirB, "--app", "codex")
	}
	converge(t, ctx, stA, stB, a, b)
	for _, n := range []string{"alice", "carol", "bob", "dan"} {
		a.must("grant", n, "--level", "member")
	}
	converge(t, ctx, stA, stB, a, b)

	agents := map[string]*syncMachine{"alice": a, "carol": a, "bob": b, "dan": b}
	names := []string{"alice", "bob", "carol", "dan"}
	var mu sync.Mutex
	sent := map[string][]string{} // recipient → message ids
	var orders []string

	// Phase 1, connected: every agent creates orders and messages the others at once.
	parallel(t, names, func(n string) {
		m := agents[n]
		for i := range 2 {
			var o struct{ ID string }
			m.jsonOut(&o, "--as", n, "order", "new", fmt.Sprintf("%s's order %d", n, i))
			mu.Lock()
			orders = append(orders, o.ID)
			mu.Unlock()
		}
		for _, to := range names {
			if to == n {
				continue
			}
			var msg struct{ ID string }
			m.jsonOut(&msg, "--as", n, "talk", "send", "--to", to, "hello from "+n)
			mu.Lock()
			sent[to] = append(sent[to], msg.ID)
			mu.Unlock()
		}
	})
	converge(t, ctx, stA, stB, a, b)
	sort.Strings(orders)

	// Phase 2, partitioned: both Syncthings pause the other device. Both sides claim,
	// submit and accept the same orders; messages keep being written.
	pauseDevice(t, ctx, stA, stB.id, true)
	pauseDevice(t, ctx, stB, stA.id, true)
	waitConnected(t, ctx, stA, stB, false)
	var ps struct{ Sync *synchealth.Line }
	a.jsonOut(&ps, "primary", "status")
	if ps.Sync == nil || ps.Sync.Delivery != synchealth.Stored {
		t.Errorf("primary status on A during the partition: sync %+v, want stored", ps.Sync)
	}
	contested := orders[:3]
	parallel(t, []string{"A", "B"}, func(side string) {
		holder, reviewer, m := "alice", "carol", a
		if side == "B" {
			holder, reviewer, m = "bob", "dan", b
		}
		for _, id := range contested {
			m.must("--as", holder, "order", "claim", id)
			m.must("--as", holder, "order", "submit", id, "--ref", "branch:"+holder, "--note", "done on "+side)
			m.must("--as", reviewer, "order", "review", id, "--accept")
		}
		for _, to := range names {
			if agents[to] == m {
				continue
			}
			var msg struct{ ID string }
			m.jsonOut(&msg, "--as", holder, "talk", "send", "--to", to, "written during the partition on "+side)
			mu.Lock()
			sent[to] = append(sent[to], msg.ID)
			mu.Unlock()
		}
	})
	// Meanwhile, on a side of its own, an order nobody contests.
	b.must("--as", "dan", "order", "claim", orders[3])

	// Phase 3: resume and converge.
	pauseDevice(t, ctx, stA, stB.id, false)
	pauseDevice(t, ctx, stB, stA.id, false)
	waitConnected(t, ctx, stA, stB, true)
	converge(t, ctx, stA, stB, a, b)

	// Both machines fold the same state.
	ordersA, ordersB := a.must("order", "list", "--json"), b.must("order", "list", "--json")
	if ordersA != ordersB {
		t.Errorf("order lists differ:\nA: %s\nB: %s", ordersA, ordersB)
	}
	var stsA, stsB fsbus.Status
	a.jsonOut(&stsA, "status")
	b.jsonOut(&stsB, "status")
	if stsA.Entries != stsB.Entries || !jsonEqual(stsA.Counts, stsB.Counts) || !jsonEqual(stsA.Contests, stsB.Contests) {
		t.Errorf("status differs:\nA: %d entries %v %+v\nB: %d entries %v %+v", stsA.Entries, stsA.Counts, stsA.Contests, stsB.Entries, stsB.Counts, stsB.Contests)
	}
	// No order has two accepted results: each contested order is accepted once, with
	// one result, and the contest names the winner on both machines.
	for _, id := range contested {
		var oa, ob fold.Order
		a.jsonOut(&oa, "order", "show", id)
		b.jsonOut(&ob, "order", "show", id)
		if oa.State != fold.StateAccepted || oa.Result == nil || oa.Holder != oa.Result.By || !jsonEqual(oa, ob) {
			t.Errorf("order %s: A %s holder %s result %+v; B %s holder %s", id, oa.State, oa.Holder, oa.Result, ob.State, ob.Holder)
		}
		if !slices.ContainsFunc(stsA.Contests, func(c fold.Contest) bool { return c.Ref == id }) {
			t.Errorf("order %s was claimed on both sides but is not listed as contested: %+v", id, stsA.Contests)
		}
	}
	// Every message is delivered exactly once, on the recipient's own machine.
	for _, to := range names {
		var r1, r2 struct {
			Messages []struct{ ID string }
		}
		agents[to].jsonOut(&r1, "--as", to, "talk", "read")
		agents[to].jsonOut(&r2, "--as", to, "talk", "read")
		var got []string
		for _, m := range r1.Messages {
			got = append(got, m.ID)
		}
		want := slices.Clone(sent[to])
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) || len(r2.Messages) != 0 {
			t.Errorf("%s read %v then %d more; sent to it: %v", to, got, len(r2.Messages), want)
		}
	}
	converge(t, ctx, stA, stB, a, b) // the acks travel too
	// ledger verify is clean, and doctor finds no error and no unmerged conflict copy,
	// with Syncthing reporting the channel delivered.
	for _, m := range []*syncMachine{a, b} {
		if out := m.must("ledger", "verify"); !strings.Contains(out, "no problems") {
			t.Errorf("ledger verify on %s: %s", m.name, out)
		}
		var r doctor.Report
		m.jsonOut(&r, "doctor")
		if r.Errors != 0 || r.Unmerged() != 0 {
			t.Errorf("doctor on %s: %d errors, %d unmerged copies: %+v", m.name, r.Errors, r.Unmerged(), r.Findings)
		}
		if r.Sync == nil || r.Sync.Syncthing != synchealth.StateOK || r.Sync.Delivery != synchealth.Delivered || r.Sync.Folder == nil || r.Sync.Folder.MaxConflicts != -1 {
			t.Errorf("doctor's sync health on %s: %+v", m.name, r.Sync)
		}
		t.Logf("machine %s: %d conflict copies (all merged), %d contested", m.name, len(r.Copies), len(findingsOfCheck(r, doctor.CheckContested)))
	}
	var j struct{ Sync synchealth.Line }
	b.jsonOut(&j, "primary", "status")
	if j.Sync.Delivery != synchealth.Delivered {
		t.Errorf("primary status on B after convergence: %+v", j.Sync)
	}

	// Phase 4: a restored clone of machine A (its device and alice's key) writes on B's
	// side of a second partition while alice writes on A, and a human edits the same
	// note on both sides. Syncthing keeps conflict copies; ferry merges the segment's
	// copy by content (a fork, both lines reported) and lists the note's copy.
	clone := &syncMachine{t: t, name: "A-clone", bin: bin, home: filepath.Join(root, "ferry-a-clone"), dir: dirB, env: b.env}
	for _, f := range []string{"config/device", "config/projects.toml", "config/pins/acme.pub", "config/keys/acme/alice.key"} {
		copyFile(t, filepath.Join(a.home, f), filepath.Join(clone.home, f))
	}
	pauseDevice(t, ctx, stA, stB.id, true)
	pauseDevice(t, ctx, stB, stA.id, true)
	waitConnected(t, ctx, stA, stB, false)
	a.must("--as", "alice", "talk", "send", "--to", "bob", "from the original machine")
	clone.must("--as", "alice", "talk", "send", "--to", "bob", "from the restored clone")
	writeNote(t, filepath.Join(dirA, "memory", "notes.md"), "# Notes\nwritten on A\n")
	writeNote(t, filepath.Join(dirB, "memory", "notes.md"), "# Notes\nwritten on B\n")
	pauseDevice(t, ctx, stA, stB.id, false)
	pauseDevice(t, ctx, stB, stA.id, false)
	waitConnected(t, ctx, stA, stB, true)
	converge(t, ctx, stA, stB, a, b)
	if ordersA, ordersB := a.must("order", "list", "--json"), b.must("order", "list", "--json"); ordersA != ordersB {
		t.Errorf("order lists differ after the clone:\nA: %s\nB: %s", ordersA, ordersB)
	}
	tailA, tailB := a.must("ledger", "tail", "-n", "0", "--json"), b.must("ledger", "tail", "-n", "0", "--json")
	if tailA != tailB {
		t.Errorf("the merged ledgers differ after the clone")
	}
	for _, m := range []*syncMachine{a, b} {
		var r doctor.Report
		so, _, _ := m.run("--channel", m.dir, "doctor", "--json") // exits non-zero: the fork is an error
		if err := json.Unmarshal([]byte(so), &r); err != nil {
			t.Fatalf("doctor --json on %s: %v\n%s", m.name, err, so)
		}
		forks := findingsOfCheck(r, verify.CheckFork)
		if len(r.Copies) == 0 || r.Unmerged() != 0 || len(forks) != 1 || len(forks[0].Lines) != 2 {
			t.Errorf("doctor on %s after the clone: copies %+v, forks %+v", m.name, r.Copies, forks)
		}
		if len(findingsOfCheck(r, doctor.CheckMemoryConflict)) != 1 {
			t.Errorf("doctor on %s: the note's conflict copy is not listed: %+v", m.name, r.Findings)
		}
		t.Logf("machine %s after the clone: conflict copies %+v", m.name, r.Copies)
	}
}

// copyFile copies src to dst, making dst's directory.
// twoNodes starts two Syncthing instances on loopback sharing one folder each for
// project acme, and the two machines using them: A finds its Syncthing through
// config.xml (STHOMEDIR), B through SYNCTHING_API_URL and SYNCTHING_API_KEY. It
// returns once the devices are connected.
func twoNodes(t *testing.T, ctx context.Context, stBin, bin string) (stA, stB *stNode, a, b *syncMachine) {
	t.Helper()
	root := t.TempDir()
	stA = startSyncthing(t, ctx, stBin, filepath.Join(root, "st-a"))
	stB = startSyncthing(t, ctx, stBin, filepath.Join(root, "st-b"))
	dirA, dirB := filepath.Join(root, "sync-a", "acme"), filepath.Join(root, "sync-b", "acme")
	for _, d := range []string{dirA, dirB} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pairSyncthing(t, ctx, stA, stB, dirA)
	pairSyncthing(t, ctx, stB, stA, dirB)
	a = &syncMachine{t: t, name: "A", bin: bin, home: filepath.Join(root, "ferry-a"), dir: dirA,
		env: []string{"STHOMEDIR=" + stA.home}}
	b = &syncMachine{t: t, name: "B", bin: bin, home: filepath.Join(root, "ferry-b"), dir: dirB,
		env: []string{synchealth.EnvURL + "=" + stB.base, synchealth.EnvKey + "=" + stB.key}}
	waitConnected(t, ctx, stA, stB, true)
	return stA, stB, a, b
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeNote writes a memory note as a person's editor would.
func writeNote(t *testing.T, p, text string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func findingsOfCheck(r doctor.Report, check string) []verify.Finding {
	var out []verify.Finding
	for _, f := range r.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// syncthingGate returns the syncthing binary. The test runs wherever syncthing is
// installed; without it, it fails when FERRY_SYNCTHING_TEST=1 or CI=true (.ci/run
// installs it and sets both), and is skipped, saying so, only on a machine that asked
// for neither — the one gate the project allows for an installed tool.
func syncthingGate(t *testing.T) string {
	t.Helper()
	want, ci := os.Getenv("FERRY_SYNCTHING_TEST") == "1", os.Getenv("CI") == "true"
	bin, err := exec.LookPath("syncthing")
	switch {
	case err != nil && (want || ci):
		t.Fatalf("syncthing is not installed (FERRY_SYNCTHING_TEST=%q, CI=%q): install the Debian package syncthing, as .ci/run does", os.Getenv("FERRY_SYNCTHING_TEST"), os.Getenv("CI"))
	case err != nil:
		t.Skip("syncthing is not installed: the two-node test needs it (.ci/run installs it and sets FERRY_SYNCTHING_TEST=1)")
	}
	return bin
}

// stNode is one running Syncthing: its home, REST base URL and key, device id and
// sync port.
type stNode struct {
	home, base, key, id string
	syncPort            int
	log                 *bytes.Buffer
}

// freePort returns a free TCP port on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startSyncthing generates a Syncthing home, confines it to loopback before it ever
// starts (listen on 127.0.0.1, no global or local discovery, relays, NAT, usage
// reporting, crash reporting or upgrades: nothing leaves the machine), serves it, and
// kills it when the test ends.
func startSyncthing(t *testing.T, ctx context.Context, bin, home string) *stNode {
	t.Helper()
	// STMONITORED: run Syncthing as one process (without it, 1.19 forks a monitor and an
	// inner process, and killing the monitor orphans the inner one).
	env := append(os.Environ(), "HOME="+home, "STNOUPGRADE=1", "STNORESTART=1", "STNODEFAULTFOLDER=1", "STMONITORED=yes")
	gen := exec.CommandContext(ctx, bin, "generate", "--home", home, "--no-default-folder")
	gen.Env = env
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("syncthing generate: %v\n%s", err, out)
	}
	n := &stNode{home: home, syncPort: freePort(t), log: &bytes.Buffer{}}
	guiPort := freePort(t)
	n.base = fmt.Sprintf("http://127.0.0.1:%d", guiPort)
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	n.key = hex.EncodeToString(key)

	cfgPath := filepath.Join(home, "config.xml")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(raw)
	for _, r := range [][2]string{
		{"<listenAddress>default</listenAddress>", fmt.Sprintf("<listenAddress>tcp://127.0.0.1:%d</listenAddress>", n.syncPort)},
		{"<globalAnnounceEnabled>true</globalAnnounceEnabled>", "<globalAnnounceEnabled>false</globalAnnounceEnabled>"},
		{"<localAnnounceEnabled>true</localAnnounceEnabled>", "<localAnnounceEnabled>false</localAnnounceEnabled>"},
		{"<relaysEnabled>true</relaysEnabled>", "<relaysEnabled>false</relaysEnabled>"},
		{"<natEnabled>true</natEnabled>", "<natEnabled>false</natEnabled>"},
		{"<urAccepted>0</urAccepted>", "<urAccepted>-1</urAccepted>"},
		{"<autoUpgradeIntervalH>12</autoUpgradeIntervalH>", "<autoUpgradeIntervalH>0</autoUpgradeIntervalH>"},
		{"<crashReportingEnabled>true</crashReportingEnabled>", "<crashReportingEnabled>false</crashReportingEnabled>"},
		{"<startBrowser>true</startBrowser>", "<startBrowser>false</startBrowser>"},
		{"<reconnectionIntervalS>60</reconnectionIntervalS>", "<reconnectionIntervalS>1</reconnectionIntervalS>"},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("syncthing's generated config.xml has no %s", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	gui := regexpGUI(cfg)
	if gui == "" {
		t.Fatal("syncthing's generated config.xml has no <gui> element")
	}
	cfg = strings.Replace(cfg, gui, fmt.Sprintf("<gui enabled=\"true\" tls=\"false\" debugging=\"false\">\n        <address>127.0.0.1:%d</address>\n        <apikey>%s</apikey>\n    </gui>", guiPort, n.key), 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "serve", "--home", home, "--no-browser", "--no-restart", "--no-upgrade", "--logflags=0")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting syncthing: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// Ask it to stop, then kill it if it has not within 10 s; either way wait for it.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = n.call(sctx, http.MethodPost, "/rest/system/shutdown", nil, nil)
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("syncthing %s log (tail):\n%s", home, tail(n.log.String(), 3000))
		}
	})
	var st struct {
		MyID string `json:"myID"`
	}
	poll(t, ctx, "syncthing's REST API to answer", func() bool {
		return n.call(ctx, http.MethodGet, "/rest/system/status", nil, &st) == nil && st.MyID != ""
	})
	n.id = st.MyID
	return n
}

// regexpGUI returns the <gui …>…</gui> element of a config.xml text.
func regexpGUI(cfg string) string {
	i := strings.Index(cfg, "<gui ")
	j := strings.Index(cfg, "</gui>")
	if i < 0 || j < i {
		return ""
	}
	return cfg[i : j+len("</gui>")]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// call sends one REST request (body marshalled as JSON when not nil) and decodes the
// answer into out when not nil.
func (n *stNode) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, n.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", n.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (n *stNode) mustCall(t *testing.T, ctx context.Context, method, path string, body, out any) {
	t.Helper()
	if err := n.call(ctx, method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

const stFolder = "ferry-acme"

// pairSyncthing makes n know peer at its static loopback address and share the folder
// at dir with it: watcher delay 1 s, every conflict copy kept.
func pairSyncthing(t *testing.T, ctx context.Context, n, peer *stNode, dir string) {
	t.Helper()
	n.mustCall(t, ctx, http.MethodPut, "/rest/config/devices/"+peer.id, map[string]any{
		"deviceID": peer.id, "name": filepath.Base(peer.home),
		"addresses": []string{fmt.Sprintf("tcp://127.0.0.1:%d", peer.syncPort)},
	}, nil)
	n.mustCall(t, ctx, http.MethodPut, "/rest/config/folders/"+stFolder, map[string]any{
		"id": stFolder, "label": "acme", "path": dir, "type": "sendreceive",
		"devices":          []map[string]string{{"deviceID": n.id}, {"deviceID": peer.id}},
		"fsWatcherEnabled": true, "fsWatcherDelayS": 1, "maxConflicts": -1, "rescanIntervalS": 3600,
	}, nil)
}

// pauseDevice pauses or resumes peer on n (a partition that both sides see).
func pauseDevice(t *testing.T, ctx context.Context, n *stNode, peer string, pause bool) {
	t.Helper()
	verb := "resume"
	if pause {
		verb = "pause"
	}
	n.mustCall(t, ctx, http.MethodPost, "/rest/system/"+verb+"?device="+url.QueryEscape(peer), nil, nil)
}

// waitConnected waits until both nodes report each other connected (or not).
func waitConnected(t *testing.T, ctx context.Context, a, b *stNode, want bool) {
	t.Helper()
	poll(t, ctx, fmt.Sprintf("both Syncthings to report connected=%v", want), func() bool {
		for _, p := range [][2]*stNode{{a, b}, {b, a}} {
			var c struct {
				Connections map[string]struct{ Connected bool } `json:"connections"`
			}
			if p[0].call(ctx, http.MethodGet, "/rest/system/connections", nil, &c) != nil || c.Connections[p[1].id].Connected != want {
				return false
			}
		}
		return true
	})
}

// converge waits until the two folders have met: each Syncthing rescans now (no wait
// for the watcher), reports the folder idle with nothing needed and the peer at 100%
// completion, and both channel folders hold the same ledger, object and presence
// files. It polls with the test's deadline, never sleeps for a fixed time.
func converge(t *testing.T, ctx context.Context, stA, stB *stNode, a, b *syncMachine) {
	t.Helper()
	poll(t, ctx, "the two folders to converge", func() bool {
		for _, p := range [][2]*stNode{{stA, stB}, {stB, stA}} {
			n, peer := p[0], p[1]
			if n.call(ctx, http.MethodPost, "/rest/db/scan?folder="+stFolder, nil, nil) != nil {
				return false
			}
			var st struct {
				State     string `json:"state"`
				NeedFiles int    `json:"needFiles"`
			}
			var comp struct {
				Completion float64 `json:"completion"`
			}
			if n.call(ctx, http.MethodGet, "/rest/db/status?folder="+stFolder, nil, &st) != nil || st.State != "idle" || st.NeedFiles != 0 {
				return false
			}
			if n.call(ctx, http.MethodGet, "/rest/db/completion?folder="+stFolder+"&device="+peer.id, nil, &comp) != nil || comp.Completion != 100 {
				return false
			}
		}
		return channelDigest(a.dir) == channelDigest(b.dir)
	})
}

// channelDigest lists the synced files of a channel with their contents' sizes and
// bytes (dot-files such as .stignore, machine-local, left out).
func channelDigest(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %d %x\n", filepath.ToSlash(rel), len(data), data)
		return nil
	})
	return b.String()
}

// poll calls cond until it holds or ctx ends (then the test fails naming what).
func poll(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// parallel runs f for every key at once and waits.
func parallel(t *testing.T, keys []string, f func(string)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() { f(k) })
	}
	wg.Wait()
}

func jsonEqual(x, y any) bool {
	a, err1 := json.Marshal(x)
	b, err2 := json.Marshal(y)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// syncMachine is one machine of the two-node test: its FERRY_HOME, its channel folder
// (synced by its own Syncthing) and how its ferry finds that Syncthing.
type syncMachine struct {
	t    *testing.T
	name string
	bin  string
	home string
	dir  string
	env  []string
}

// run runs one ferry process on m with --channel set.
func (m *syncMachine) run(args ...string) (string, string, error) {
	full := args
	if len(args) == 0 || (args[0] != "init" && args[0] != "join" && args[0] != "--channel") {
		full = append([]string{"--channel", m.dir}, args...)
	}
	cmd := exec.Command(m.bin, full...)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FERRY_") && !strings.HasPrefix(e, "SYNCTHING_") && !strings.HasPrefix(e, "STHOMEDIR=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(append(env, fsbus.EnvHome+"="+m.home), m.env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	return so.String(), se.String(), err
}

// must runs ferry on m and fails the test (from any goroutine) unless it exits 0.
func (m *syncMachine) must(args ...string) string {
	so, se, err := m.run(args...)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			m.t.Errorf("ferry %v on %s: exit %d\n%s%s", args, m.name, ee.ExitCode(), so, se)
		} else {
			m.t.Errorf("ferry %v on %s: %v", args, m.name, err)
		}
		runtime.Goexit() // FailNow from any goroutine: parallel's WaitGroup still counts it done
	}
	return so
}

// jsonOut runs ferry with --json on m and decodes its output into v.
func (m *syncMachine) jsonOut(v any, args ...string) {
	out := m.must(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		m.t.Errorf("ferry %v on %s: output is not JSON: %v\n%s", args, m.name, err, out)
		runtime.Goexit()
	}
}
