package main

import (
	"os"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// caps.txtar: inputs one unit over their caps, written by the script.
func init() { scriptCmds["repeat"] = cmdRepeat }

// repeat FILE N TEXT writes TEXT repeated N times (no newline) to FILE.
func cmdRepeat(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "repeat")
	if len(args) != 3 {
		ts.Fatalf("usage: repeat FILE N TEXT")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(strings.Repeat(args[2], n)), 0o644))
}
