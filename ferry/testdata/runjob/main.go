// Command runjob is the executable the `ferry run` and `ferry daemon` tests hand to
// --exec: a Go program, so the tests run the same on every OS. It reads the
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
	"os/signal"
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
		ID     string `json:"id"`
		Run    string `json:"run"`
		Heavy  bool   `json:"heavy"`
		Task   string `json:"task"`
		Review *struct {
			Note string `json:"note"`
		} `json:"review"`
		Refused string `json:"refused"`
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
	if in.Review != nil {
		mark(dir, "review-"+in.ID, in.Review.Note)
	}
	if in.Refused != "" {
		appendMark(dir, "refused-"+in.ID, in.Refused+"\n")
	}
	switch os.Getenv("FERRY_TEST_JOB_MODE") {
	case "spawn-exit", "spawn-block":
		// A child that outlives the file, holding its stdout and stderr open and
		// ignoring SIGINT: only a kill of the process group ends it.
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), "FERRY_TEST_JOB_MODE=grandchild")
		gc.Stdin = strings.NewReader(`{"id":"grandchild","run":"grandchild"}`)
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "runjob:", err)
			os.Exit(2)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "grandchild")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if os.Getenv("FERRY_TEST_JOB_MODE") == "spawn-block" {
			mark(dir, "started-"+in.ID, strconv.Itoa(os.Getpid()))
			wait()
			os.Exit(1)
		}
	case "grandchild":
		signal.Ignore(os.Interrupt)
		mark(dir, "grandchild", strconv.Itoa(os.Getpid()))
		wait()
		os.Exit(0)
	case "silent":
		os.Exit(0)
	case "json":
		fmt.Println(os.Getenv("FERRY_TEST_JOB_OUTPUT"))
		return
	case "gate":
		mark(dir, "started-"+in.ID, strconv.Itoa(os.Getpid()))
		for i := 0; i < 6000; i++ {
			if _, err := os.Stat(filepath.Join(dir, "gate-"+in.ID)); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
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

func appendMark(dir, name, text string) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		_, err = f.WriteString(text)
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runjob:", err)
		os.Exit(2)
	}
}

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
