package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Crash safety: a writer process killed at random points, 200 times,
// loses no acknowledged append. The child is this test binary re-executed with
// crasherEnv set (see TestMain); os.Process.Kill is SIGKILL on unix and
// TerminateProcess on Windows — the process gets no chance to clean up either way.

// Environment of the crasher child process.
const (
	crasherEnv   = "FERRY_LEDGER_TEST_CRASHER" // "1" makes the test binary a crasher
	crasherRoot  = "FERRY_LEDGER_TEST_CRASH_ROOT"
	crasherLocks = "FERRY_LEDGER_TEST_CRASH_LOCKDIR"
	crasherRun   = "FERRY_LEDGER_TEST_CRASH_RUN"
)

// crasherMax bounds one child's appends, so a child whose parent died stops by itself.
const crasherMax = 100_000

// runCrasher appends entries {"run": RUN, "n": 0, 1, …} to the test segment and, only
// after Append has returned (the line written and fsynced), prints "<seq> <hash>\n" on
// stdout with one unbuffered write. It exits 2 on any error, 0 after crasherMax appends.
func runCrasher() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crasher:", err)
		os.Exit(2)
	}
	run, err := strconv.Atoi(os.Getenv(crasherRun))
	if err != nil {
		fail(err)
	}
	l, err := Open(Options{Root: os.Getenv(crasherRoot), LockDir: os.Getenv(crasherLocks), Project: testProject})
	if err != nil {
		fail(err)
	}
	for n := range crasherMax {
		d := Draft{Type: "test.crash", Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q,"run":%d}`, n, strings.Repeat("x", n%300), run))}
		e, err := l.Append(testWriter, testDevice, d, testKey, HLC{})
		if err != nil {
			fail(fmt.Errorf("append %d: %w", n, err))
		}
		if _, err := fmt.Fprintf(os.Stdout, "%d %s\n", e.Seq, e.Hash()); err != nil {
			fail(err)
		}
	}
	os.Exit(0)
}

// crashAck is one append a child acknowledged.
type crashAck struct {
	run  int
	seq  uint64
	hash string
}

// TestCrashSafety starts a writer process 200 times on one segment and kills it at a
// random point each time: before it opened the ledger, between appends, or during one
// (after a random number of acknowledged appends plus a random delay). In one run of
// five the test then leaves what a power cut during a write can leave on disk — a line
// without its end, or the file's new size filled with NUL bytes — before the next
// child starts. After every run: each append a child acknowledged is in the segment,
// at its seq with its hash (a seq is never reused), the segment reads with no problem
// but a torn tail the test made or a kill left (part of the line being written, cut at
// a page boundary), and a child that appended has moved such a tail aside
// (never deleting it; a kill during the repair may leave a second, partial copy). At
// the end the whole chain verifies.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	runs := 200
	if testing.Short() {
		runs = 40
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))

	root := t.TempDir()
	locks := filepath.Join(t.TempDir(), "locks")
	seg := SegmentPath(root, testWriter, testDevice)
	l, err := Open(Options{Root: root, LockDir: locks, Project: testProject})
	if err != nil {
		t.Fatal(err)
	}

	var acks []crashAck
	var torn [][]byte // tails the test left, in order
	// pendingTail reports whether the segment still ends with the last tail the test
	// left (not yet repaired, or a child was killed after copying it aside but before
	// truncating: the next repair copies it again).
	pendingTail := func() bool {
		return len(torn) > 0 && bytes.HasSuffix(readFile(t, seg), torn[len(torn)-1])
	}
	killedMidRun := 0
	for run := range runs {
		got, killed := crashRun(t, r, root, locks, run)
		if killed {
			killedMidRun++
		}
		for _, a := range got {
			if n := len(acks); n > 0 && a.seq <= acks[n-1].seq {
				t.Fatalf("run %d acknowledged seq %d after seq %d was acknowledged (run %d): a seq was reused (seed %d)",
					run, a.seq, acks[n-1].seq, acks[n-1].run, seed)
			}
			acks = append(acks, a)
		}
		if len(got) > 0 && pendingTail() {
			t.Fatalf("run %d appended, yet the segment still ends with the torn tail %q (seed %d)", run, torn[len(torn)-1], seed)
		}
		// A kill during write(2) can stop the copy at a page boundary, leaving part of
		// the line it was writing (never acknowledged): a torn tail like the test's,
		// which the next child that appends must move aside.
		if b, _ := os.ReadFile(seg); len(b) > 0 && b[len(b)-1] != '\n' && !pendingTail() {
			torn = append(torn, bytes.Clone(b[bytes.LastIndexByte(b, '\n')+1:]))
		}
		checkAcked(t, l, acks, pendingTail(), fmt.Sprintf("after run %d (seed %d)", run, seed))

		// One tail at a time: a new one only once the last has been moved aside.
		if run%5 == 4 && run < runs-1 && !pendingTail() {
			torn = append(torn, powerCutTail(t, r, seg))
		}
	}
	// A last append repairs whatever the final runs left.
	e, err := l.Append(testWriter, testDevice, draft("final", 0), testKey, HLC{})
	if err != nil {
		t.Fatal(err)
	}
	acks = append(acks, crashAck{run: runs, seq: e.Seq, hash: e.Hash()})
	checkAcked(t, l, acks, false, fmt.Sprintf("at the end (seed %d)", seed))

	// Every tail the test left is aside, whole, in a <device>.torn-<n>; each such file
	// holds one of them, or the start of one (a child killed while copying it aside,
	// before it truncated anything: the next repair copied it again, whole).
	files, err := filepath.Glob(strings.TrimSuffix(seg, ".jsonl") + ".torn-*")
	if err != nil {
		t.Fatal(err)
	}
	whole := map[int]bool{}
	for _, f := range files {
		b := readFile(t, f)
		found := false
		for i, junk := range torn {
			if bytes.Equal(b, junk) {
				whole[i], found = true, true
			} else if bytes.HasPrefix(junk, b) {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s = %q: no tail the test left (seed %d)", f, b, seed)
		}
	}
	for i, junk := range torn {
		if !whole[i] {
			t.Fatalf("torn tail %d (%q) is in no .torn-<n> file whole (seed %d)", i, junk, seed)
		}
	}
	rep, err := l.Verify(keysFor(testKey))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Problems) != 0 || rep.Segments != 1 || uint64(rep.Entries) != e.Seq {
		t.Fatalf("Verify = %+v; want 1 clean segment of %d entries", rep, e.Seq)
	}
	if killedMidRun < runs/2 {
		t.Fatalf("only %d of %d children were killed while appending: the test did not exercise crashes", killedMidRun, runs)
	}
	t.Logf("%d runs, %d acknowledged appends, %d entries, %d children killed while appending, %d torn tails moved aside",
		runs, len(acks), e.Seq, killedMidRun, len(torn))
}

// crashRun starts one child, kills it at a random point and returns the appends it
// acknowledged (complete stdout lines only) and whether it had acknowledged at least
// one append when killed.
func crashRun(t *testing.T, r *rand.Rand, root, locks string, run int) ([]crashAck, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crasherEnv+"=1", crasherRoot+"="+root, crasherLocks+"="+locks, crasherRun+"="+strconv.Itoa(run))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	done := make(chan error, 1)
	go func() {
		br := bufio.NewReader(out)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if err == io.EOF && line != "" {
					err = fmt.Errorf("partial line %q", line) // ack cut off by the kill: not counted
				}
				done <- err
				close(lines)
				return
			}
			lines <- line
		}
	}()

	// Kill after `after` acknowledged appends plus a random delay; after <= 0 kills at
	// a random moment of start-up (before, during or after the first append).
	after := r.Intn(40) - 5
	delay := time.Duration(r.Intn(3000)) * time.Microsecond
	var acks []crashAck
	parse := func(line string) {
		f := strings.Fields(line)
		seq, err := strconv.ParseUint(f[0], 10, 64)
		if len(f) != 2 || err != nil {
			t.Fatalf("run %d: bad ack line %q", run, line)
		}
		acks = append(acks, crashAck{run: run, seq: seq, hash: f[1]})
	}
	var timer <-chan time.Time
	if after <= 0 {
		timer = time.After(delay * 5)
	}
	exited := false
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				exited = true
				break wait
			}
			parse(line)
			if len(acks) == after {
				timer = time.After(delay)
			}
		case <-timer:
			break wait
		}
	}
	if exited {
		cmd.Wait()
		t.Fatalf("run %d: the child exited before it was killed: %v\n%s", run, <-done, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for line := range lines { // acks written before the kill
		parse(line)
	}
	<-done
	if err := cmd.Wait(); err == nil {
		t.Fatalf("run %d: the child was killed but exited cleanly\n%s", run, stderr.String())
	}
	if strings.Contains(stderr.String(), "crasher:") {
		t.Fatalf("run %d: the child failed before it was killed:\n%s", run, stderr.String())
	}
	return acks, len(acks) > 0
}

// checkAcked reads the ledger and fails unless every acknowledged append is in it at
// its seq with its hash, the segment is one valid chain from seq 1, and nothing is
// wrong with it but, when tornOK, the torn tail the test left.
func checkAcked(t *testing.T, l *Ledger, acks []crashAck, tornOK bool, when string) {
	t.Helper()
	s, err := l.Read()
	if err != nil {
		t.Fatalf("%s: the segment cannot be read: %v", when, err)
	}
	for _, p := range s.Problems {
		if p.Kind != KindTorn || !tornOK {
			t.Fatalf("%s: problem %+v", when, p)
		}
	}
	if len(s.Forks) != 0 {
		t.Fatalf("%s: forks %+v", when, s.Forks)
	}
	checkChain(t, s.Entries)
	for _, a := range acks {
		if a.seq == 0 || a.seq > uint64(len(s.Entries)) {
			t.Fatalf("%s: run %d acknowledged seq %d, the segment holds %d entries", when, a.run, a.seq, len(s.Entries))
		}
		if h := s.Entries[a.seq-1].Hash(); h != a.hash {
			t.Fatalf("%s: run %d acknowledged seq %d as %s, the segment holds %s there", when, a.run, a.seq, a.hash, h)
		}
	}
}

// powerCutTail appends what a crash during a write can leave at the end of the segment
// — part of a line, or a run of NUL bytes where the size reached disk but the data did
// not — and returns the bytes.
func powerCutTail(t *testing.T, r *rand.Rand, seg string) []byte {
	t.Helper()
	var junk []byte
	switch r.Intn(3) {
	case 0:
		junk = []byte(`{"data":{"n":7,"pad":"xxx`)
	case 1:
		junk = bytes.Repeat([]byte{0}, 1+r.Intn(400))
	default:
		junk = append([]byte(`{"data":{"n":7},"device":"`), bytes.Repeat([]byte{0}, 1+r.Intn(100))...)
	}
	if _, err := os.Stat(seg); err != nil {
		writeFile(t, seg, nil) // no child appended yet: the file's creation reached disk
	}
	appendBytes(t, seg, junk)
	return junk
}
