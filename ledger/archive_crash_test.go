package ledger

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// Environment of the mover child process started by TestMoveFrozenKilled.
const (
	moverEnv    = "FERRY_LEDGER_TEST_MOVER" // "1" makes the test binary a mover
	moverRoot   = "FERRY_LEDGER_TEST_MOVE_ROOT"
	moverLocks  = "FERRY_LEDGER_TEST_MOVE_LOCKDIR"
	moverFile   = "FERRY_LEDGER_TEST_MOVE_FILE"
	moverFloor  = "FERRY_LEDGER_TEST_MOVE_FLOOR"
	moverKillAt = "FERRY_LEDGER_TEST_MOVE_KILL_AT" // the step, from 0, before which it kills itself
)

// runMover moves FILE (MoveFrozen at FLOOR) with a fault hook that prints each step of
// the move on stdout, one line each, and kills the process with SIGKILL (TerminateProcess
// on Windows) before step KILL_AT, so that every step before it has completed. A
// KILL_AT past the last step lets the move finish: it prints "done" and exits 0.
func runMover() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "mover:", err)
		os.Exit(2)
	}
	killAt, err := strconv.Atoi(os.Getenv(moverKillAt))
	if err != nil {
		fail(err)
	}
	floor, err := strconv.ParseUint(os.Getenv(moverFloor), 10, 64)
	if err != nil {
		fail(err)
	}
	l, err := Open(Options{Root: os.Getenv(moverRoot), LockDir: os.Getenv(moverLocks), Project: testProject})
	if err != nil {
		fail(err)
	}
	step := 0
	fsutil.SetFault(func(op fsutil.Op, path string) error {
		if step == killAt {
			p, _ := os.FindProcess(os.Getpid())
			_ = p.Kill()
			select {} // the kill lands; nothing after it runs
		}
		step++
		fmt.Fprintf(os.Stdout, "%s %s\n", op, filepath.Base(path))
		return nil
	})
	if _, reason, err := l.MoveFrozen(testWriter, testDevice, os.Getenv(moverFile), floor); err != nil || reason != "" {
		fail(fmt.Errorf("move: %q, %v", reason, err))
	}
	fmt.Fprintln(os.Stdout, "done")
	os.Exit(0)
}

// TestMoveFrozenKilled kills a process moving a frozen file to archive/ before each
// step of the move — so after the temp write, fsync, rename, directory fsync, read-back
// and unlink in turn — while another process of the same writer appends to the chain's
// newest file throughout. After every kill: every entry either process acknowledged is
// in a live or archive file, the archive holds nothing but the frozen file's bytes, a
// whole reading of the chain with its archived files has no problem, and the next move
// finishes (the frozen file then only in archive/, byte for byte).
func TestMoveFrozenKilled(t *testing.T) {
	t.Parallel()
	// The steps of a whole move, learned from a mover that is never killed.
	steps := moveSteps(t)
	want := []string{"create", "write", "sync", "rename", "syncdir", "readback", "remove", "syncdir"}
	if !slices.Equal(steps, want) {
		t.Fatalf("the move's steps are %v, want %v", steps, want)
	}
	for killAt := range len(steps) + 1 {
		t.Run(fmt.Sprintf("before %d", killAt), func(t *testing.T) {
			l, frozen, es := frozenChain(t)
			root := l.opts.Root
			before := readFile(t, frozen)
			floor := es[9].Seq

			// The appender: acknowledged appends of the same writer, throughout.
			app := exec.Command(os.Args[0], "-test.run=^$")
			app.Env = append(os.Environ(), crasherEnv+"=1", crasherRoot+"="+root, crasherLocks+"="+l.opts.LockDir, crasherRun+"=1")
			out, err := app.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := app.Start(); err != nil {
				t.Fatal(err)
			}
			ackc := make(chan crashAck)
			go func() {
				defer close(ackc)
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					if seq, err := strconv.ParseUint(f[0], 10, 64); err == nil && len(f) == 2 {
						ackc <- crashAck{run: 1, seq: seq, hash: f[1]}
					}
				}
			}()
			var got []crashAck
			// wait takes n more acknowledged appends (a liveness bound, not a timing claim).
			wait := func(n int) {
				for range n {
					select {
					case a, ok := <-ackc:
						if !ok {
							t.Fatal("the appender stopped")
						}
						got = append(got, a)
					case <-time.After(30 * time.Second):
						t.Fatal("the appender acknowledged nothing for 30 s")
					}
				}
			}
			wait(3) // appends land before the move

			mover := moverCmd(root, l.opts.LockDir, frozen, floor, killAt)
			moverOut, merr := mover.Output()
			done := strings.Contains(string(moverOut), "done\n")
			if killAt < len(steps) && (merr == nil || done) {
				t.Fatalf("the mover was to be killed before step %d, yet it finished: %v\n%s", killAt, merr, moverOut)
			}
			if killAt == len(steps) && (merr != nil || !done) {
				t.Fatalf("the mover never killed did not finish: %v\n%s", merr, moverOut)
			}
			wait(3) // and after it
			if err := app.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			for a := range ackc { // acknowledged before the kill
				got = append(got, a)
			}
			_ = app.Wait()

			// What the kill left: the frozen file in place, or in archive/ whole.
			target := ArchivePath(root, frozen)
			if b, err := os.ReadFile(target); err == nil && !bytes.Equal(b, before) {
				t.Fatal("archive/ holds other bytes than the frozen file: a rename published a partial copy")
			}
			if _, err := os.Stat(frozen); os.IsNotExist(err) {
				if b, err := os.ReadFile(target); err != nil || !bytes.Equal(b, before) {
					t.Fatalf("the frozen file is gone and archive/ does not hold it: %v", err)
				}
			}
			checkMoved(t, l, es, got, "after the kill")

			// The next run finishes the move.
			if _, reason, err := l.MoveFrozen(testWriter, testDevice, frozen, floor); err != nil || (reason != "" && reason != "missing") {
				t.Fatalf("the next move: %q, %v", reason, err)
			}
			if b, err := os.ReadFile(target); err != nil || !bytes.Equal(b, before) {
				t.Fatalf("after the next move archive/ does not hold the frozen file: %v", err)
			}
			if _, err := os.Stat(frozen); !os.IsNotExist(err) {
				t.Fatalf("after the next move the frozen file is still live: %v", err)
			}
			checkMoved(t, l, es, got, "after the next move")
		})
	}
}

// moverCmd is a mover child of root moving frozen at floor, killed before step killAt.
func moverCmd(root, locks, frozen string, floor uint64, killAt int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), moverEnv+"=1", moverRoot+"="+root, moverLocks+"="+locks, moverFile+"="+frozen,
		moverFloor+"="+strconv.FormatUint(floor, 10), moverKillAt+"="+strconv.Itoa(killAt))
	return cmd
}

// moveSteps runs a mover that is never killed and returns the steps it printed.
func moveSteps(t *testing.T) []string {
	t.Helper()
	l, frozen, es := frozenChain(t)
	out, err := moverCmd(l.opts.Root, l.opts.LockDir, frozen, es[9].Seq, 1<<30).Output()
	if err != nil {
		t.Fatalf("mover: %v\n%s", err, out)
	}
	var steps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			steps = append(steps, f[0])
		}
	}
	return steps
}

// checkMoved fails unless a whole reading of the test chain with its archived files
// has no problem and no fork, holds es first, and holds every acknowledged append at
// its seq with its hash.
func checkMoved(t *testing.T, l *Ledger, es []Entry, acks []crashAck, when string) {
	t.Helper()
	l.SetArchived([]Chain{{testWriter, testDevice}})
	defer l.SetArchived(nil)
	s, err := l.Read()
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if len(s.Problems) != 0 || len(s.Forks) != 0 {
		t.Fatalf("%s: problems %+v, forks %+v", when, s.Problems, s.Forks)
	}
	checkChain(t, s.Entries)
	if len(s.Entries) < len(es) || !slices.Equal(hashes(s.Entries[:len(es)]), hashes(es)) {
		t.Fatalf("%s: the chain does not start with the entries written before the move", when)
	}
	for _, a := range acks {
		if a.seq == 0 || a.seq > uint64(len(s.Entries)) || s.Entries[a.seq-1].Hash() != a.hash {
			t.Fatalf("%s: the appender acknowledged seq %d as %s; the chain holds %d entries", when, a.seq, a.hash, len(s.Entries))
		}
	}
}
