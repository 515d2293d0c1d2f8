// Command runjob is the executable the `ferry run` and `ferry daemon` tests hand to
// --exec (issue 6): a Go program, so the tests run the same on every OS. It reads the
// order on stdin and behaves as FERRY_TEST_JOB_MODE says, leaving marks in
// FERRY_TEST_JOB_DIR. Started under a name beginning with "snifrig" it is a fake job
// queue instead: it records its arguments in queue.log and runs what follows "--".
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	dir := os.Getenv("FERRY_TEST_JOB_DIR")
	if strings.HasPrefix(filepath.Base(os.Args[0]), "snifrig") {
		os.Exit(queue(dir))
	}
	var in struct {
		ID    string `json:"id"`
		Run   string `json:"run"`
		Heavy bool   `json:"heavy"`
		Task  string `json:"task"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "runjob: reading the order:", err)
		os.Exit(2)
	}
	var names []string
	for _, kv := range os.Environ() {
		n, _, _ := strings.Cut(kv, "=")
		names = append(names, n)
	}
	sort.Strings(names)
	wd, _ := os.Getwd()
	mark(dir, in.Run+".env", strings.Join(names, "\n")+"\ncwd="+wd+"\norder="+os.Getenv("FERRY_ORDER_ID")+"\n")
	switch os.Getenv("FERRY_TEST_JOB_MODE") {
	case "fail":
		fmt.Fprint(os.Stderr, "boom \x1b[31mred\x1b[0m\n")
		fmt.Fprint(os.Stderr, strings.Repeat("noise line\n", 300))
		fmt.Fprint(os.Stderr, "the last words\n")
		os.Exit(3)
	case "block":
		mark(dir, "started-"+in.ID, strconv.Itoa(os.Getpid()))
		wait()
		os.Exit(1)
	case "block-first":
		if _, err := os.Stat(filepath.Join(dir, "attempt-"+in.ID)); errors.Is(err, os.ErrNotExist) {
			mark(dir, "attempt-"+in.ID, in.Run)
			mark(dir, "started-"+in.ID, strconv.Itoa(os.Getpid()))
			wait()
			os.Exit(1)
		}
	}
	fmt.Printf("ref-%s\nsummary of %s heavy=%v task=%s\n", in.ID, in.Run, in.Heavy, in.Task)
}

// wait blocks for at most a minute: long enough for any test, short enough that a job
// orphaned on a system without a parent-death signal ends by itself.
func wait() { time.Sleep(time.Minute) }

func mark(dir, name, text string) {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "runjob:", err)
		os.Exit(2)
	}
}

// queue is the fake job queue: it appends its arguments (JSON) to queue.log, then runs
// the command after "--" with the same stdin, stdout and stderr.
func queue(dir string) int {
	args := os.Args[1:]
	b, _ := json.Marshal(args)
	f, err := os.OpenFile(filepath.Join(dir, "queue.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "snifrig:", err)
		return 2
	}
	f.Write(append(b, '\n'))
	f.Close()
	for i, a := range args {
		if a == "--" && i+1 < len(args) {
			cmd := exec.Command(args[i+1], args[i+2:]...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return ee.ExitCode()
				}
				fmt.Fprintln(os.Stderr, "snifrig:", err)
				return 2
			}
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "snifrig: no command after --")
	return 2
}
