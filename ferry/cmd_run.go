package main

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/recheck"
	"github.com/ferryhq/ferry/fsbus/runner"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
)

// RunCmd is `ferry run --as NAME --exec FILE` (docs/runs.md).
type RunCmd struct {
	Exec    string        `required:"" help:"Executable run for each order, without a shell; it reads the order as JSON on stdin." placeholder:"FILE"`
	Once    bool          `help:"Run at most one order, then exit (exit 0 when none is ready)."`
	Label   []string      `help:"Only take orders carrying this label (repeat: every one)." placeholder:"L"`
	Env     []string      `help:"Pass this environment variable to FILE (by name; repeat)." placeholder:"NAME"`
	Poll    time.Duration `help:"How often to look for ready orders." default:"5s"`
	Beat    time.Duration `help:"Heartbeat period while a run is going." default:"60s"`
	Grace   time.Duration `help:"On stop, how long FILE gets to exit before it is killed." default:"10s"`
	Workdir string        `help:"FILE's working directory: the workspace (default: the current directory)." placeholder:"DIR"`
	Queue   string        `help:"Job-queue command for heavy orders ({order} = order id; 'off': none). Default: $FERRY_QUEUE_CMD, else snifrig on PATH." placeholder:"CMD"`
}

// Help explains what a run does with the order and the file's output.
func (c *RunCmd) Help() string {
	return `Polls the orders the agent may take (open, or offered to it; every dependency
accepted), claims one, and runs FILE on it: the order as JSON on stdin, the
working directory the workspace (--workdir: file pointers are checked there), an
environment of PATH, HOME and their equivalents plus the variables named with
--env, FERRY_ORDER_ID and FERRY_RUN_ID. Heavy orders run through the job-queue
command when one is set. Orders the agent holds in changes_requested from an
earlier run here are run again, the review in the input.

When FILE exits 0, the first line of its stdout is submitted as the result's
reference and the rest as its note; for an order with a result schema, stdout is
the JSON result (optionally after a reference line). A result the schema refuses
runs FILE again with the refusal in its input. When FILE fails, the order is
failed with the tail of its stderr. At start-up the runs this agent left behind
on this machine (a killed runner) are settled: their orders are released with a
signed note, then taken again like any other. Ctrl-C stops FILE's whole process
group (--grace, then killed) and releases its order. Several runners of one
agent on one machine never run the same order. See docs/runs.md.`
}

// Run implements the command.
func (c *RunCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	if err := runner.CheckEnvNames(c.Env); err != nil {
		return err
	}
	if err := checkRunFlags(c.Poll, c.Beat, c.Grace, c.Label); err != nil {
		return err
	}
	file, err := resolveExec(c.Exec, "")
	if err != nil {
		return err
	}
	wd, err := workdir(c.Workdir, "")
	if err != nil {
		return err
	}
	q, err := runner.ResolveQueue(c.Queue, "--queue")
	if err != nil {
		return err
	}
	h := &runner.Handler{Exec: file, Env: c.Env}
	r := &runner.Runner{S: s, Labels: c.Label, Queue: q, Workdir: wd, Beat: c.Beat, Grace: c.Grace, Log: g.stderr,
		Pick: func(*fold.Order, runner.Spec) *runner.Handler { return h }}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := r.Start(); err != nil {
		return err
	}
	if !c.Once {
		recheck.Start(ctx, g.Open, s.Name, g.stderr) // the owner's checkpoint folded again (fsbus/recheck)
	}
	res, err := r.Loop(ctx, c.Poll, c.Once)
	if err != nil {
		return err
	}
	if c.Once {
		if g.JSON {
			return g.printJSON(struct {
				Ran    bool           `json:"ran"`
				Result *runner.Result `json:"result,omitempty"`
			}{res != nil, res})
		}
		if res == nil {
			g.printf("no order ready for %s\n", s.Name)
			return nil
		}
		printRunResult(g, res)
	}
	return nil
}

// printRunResult prints one run's outcome.
func printRunResult(g *Globals, res *runner.Result) {
	g.printf("%s %s %q (run %s, via %s)\n", res.Outcome, res.Order, res.Title, res.Run, res.Via)
	if res.Ref != "" {
		g.printf("reference %s\n", res.Ref)
	}
	if res.Note != "" && res.Outcome != "submitted" {
		g.printf("%s\n", res.Note)
	}
}

// resolveExec returns the absolute path of an executable: a name without a path
// separator is looked up on PATH; a path is taken relative to base (or the current
// directory). Errors: invalid naming the file when it is missing, a directory or not
// executable.
func resolveExec(file, base string) (string, error) {
	if strings.TrimSpace(file) == "" {
		return "", errs.Errorf(errs.Invalid, "pass --exec FILE", "no executable given")
	}
	if !strings.ContainsAny(file, `/\`) {
		p, err := exec.LookPath(file)
		if err != nil {
			return "", errs.Errorf(errs.Invalid, "give a path to the file, or put it on PATH", "executable %q not found on PATH", file)
		}
		return filepath.Abs(p)
	}
	if !filepath.IsAbs(file) && base != "" {
		file = filepath.Join(base, file)
	}
	p, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return "", errs.Errorf(errs.Invalid, "check the path", "executable %s: %v", p, err)
	case fi.IsDir():
		return "", errs.Errorf(errs.Invalid, "name the file to run, not its folder", "executable %s is a directory", p)
	case runtime.GOOS != "windows" && fi.Mode()&0o111 == 0:
		return "", errs.Errorf(errs.Invalid, "make it executable: chmod +x "+p, "%s is not executable", p)
	}
	return p, nil
}

// workdir resolves a run's working directory (default: the current directory; a
// relative dir is taken from base when set). Errors: invalid when it is not a folder.
func workdir(dir, base string) (string, error) {
	if dir == "" {
		dir = "."
		if base != "" {
			dir = base
		}
	} else if !filepath.IsAbs(dir) && base != "" {
		dir = filepath.Join(base, dir)
	}
	p, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return "", errs.Errorf(errs.Invalid, "pass an existing folder", "working directory %s is not a folder", p)
	}
	return p, nil
}

// checkRunFlags returns invalid for a poll or beat period that is not positive, a
// negative grace, or a label that is not a label name.
func checkRunFlags(poll, beat, grace time.Duration, labels []string) error {
	switch {
	case poll <= 0:
		return errs.Errorf(errs.Invalid, "e.g. --poll 5s", "--poll must be a positive duration, not %s", poll)
	case beat <= 0:
		return errs.Errorf(errs.Invalid, "e.g. --beat 60s", "--beat must be a positive duration, not %s", beat)
	case grace < 0:
		return errs.Errorf(errs.Invalid, "e.g. --grace 10s", "--grace must not be negative")
	}
	for _, l := range labels {
		if !fold.ValidName(l) {
			return errs.Errorf(errs.Invalid, "labels use a-z, 0-9 and '-'", "bad label %s", secretguard.Quote(l))
		}
	}
	return nil
}
