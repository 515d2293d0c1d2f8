package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Environment of the appender child processes started by TestAppendProcesses.
const (
	appenderEnv   = "FERRY_LEDGER_TEST_APPENDER" // "1" makes the test binary an appender
	appenderRoot  = "FERRY_LEDGER_TEST_ROOT"
	appenderLocks = "FERRY_LEDGER_TEST_LOCKDIR"
	appenderID    = "FERRY_LEDGER_TEST_ID"
	appenderCount = "FERRY_LEDGER_TEST_COUNT"
	appenderStart = "FERRY_LEDGER_TEST_START" // Unix nanoseconds to start appending at
)

func TestMain(m *testing.M) {
	if os.Getenv(crasherEnv) == "1" {
		runCrasher() // never returns: it appends until killed
	}
	if os.Getenv(moverEnv) == "1" {
		runMover() // never returns
	}
	if os.Getenv(appenderEnv) == "1" {
		if err := runAppender(); err != nil {
			fmt.Fprintln(os.Stderr, "appender:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runAppender appends COUNT entries {"proc": ID, "n": 0..COUNT-1} to the test segment,
// starting at START.
func runAppender() error {
	id, err := strconv.Atoi(os.Getenv(appenderID))
	if err != nil {
		return err
	}
	count, err := strconv.Atoi(os.Getenv(appenderCount))
	if err != nil {
		return err
	}
	start, err := strconv.ParseInt(os.Getenv(appenderStart), 10, 64)
	if err != nil {
		return err
	}
	l, err := Open(Options{Root: os.Getenv(appenderRoot), LockDir: os.Getenv(appenderLocks), Project: testProject})
	if err != nil {
		return err
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	for n := range count {
		d := Draft{Type: "test.contend", Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"proc":%d}`, n, id))}
		if _, err := l.Append(testWriter, testDevice, d, testKey, HLC{}); err != nil {
			return fmt.Errorf("append %d: %w", n, err)
		}
	}
	return nil
}

// TestAppendProcesses has 8 OS processes append to one segment at once: the flock must
// serialise them into one chain of whole lines.
func TestAppendProcesses(t *testing.T) {
	t.Parallel()
	procs, each := 8, 500
	if testing.Short() {
		each = 50
	}
	root := t.TempDir()
	locks := filepath.Join(t.TempDir(), "locks")
	start := time.Now().Add(300 * time.Millisecond).UnixNano()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for id := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			appenderEnv+"=1",
			appenderRoot+"="+root,
			appenderLocks+"="+locks,
			appenderID+"="+strconv.Itoa(id),
			appenderCount+"="+strconv.Itoa(each),
			appenderStart+"="+strconv.FormatInt(start, 10),
		)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("appender %d: %v\n%s", i, err, outs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	total := procs * each
	seg := SegmentPath(root, testWriter, testDevice)
	lines := segmentLines(t, readFile(t, seg))
	if len(lines) != total {
		t.Fatalf("%d lines, want %d", len(lines), total)
	}
	var es []Entry
	next := make([]int, procs) // next n expected of each process
	for i, line := range lines {
		e, err := ParseLine(line)
		if err != nil {
			t.Fatalf("line %d: %v: %q", i+1, err, tail(line))
		}
		if c, _ := CanonicalJSON(line); !bytes.Equal(c, line) {
			t.Fatalf("line %d is not one canonical entry: %q", i+1, tail(line))
		}
		var d struct{ N, Proc int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Proc < 0 || d.Proc >= procs || d.N != next[d.Proc] {
			t.Fatalf("line %d: proc %d n %d, want n %d", i+1, d.Proc, d.N, next[d.Proc])
		}
		next[d.Proc]++
		es = append(es, e)
	}
	checkChain(t, es)

	l, err := Open(Options{Root: root, Project: testProject})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Verify(keysFor(testKey))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Problems) != 0 || rep.Entries != total || rep.Segments != 1 {
		t.Fatalf("Verify = %+v", rep)
	}
	if torn, _ := filepath.Glob(filepath.Join(filepath.Dir(seg), "*.torn-*")); len(torn) != 0 {
		t.Fatalf("torn files %v", torn)
	}
}
