package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	scriptCmds["ageclock"] = cmdAgeClock
}

// ageclock HOME SECONDS makes time pass on one machine (issue 6): every first-seen
// time in the arrival logs under HOME moves SECONDS into the past, so the windows that
// machine measures from them (and its sightings) are that much older. The clock of
// every other machine, and every signed record, are untouched.
func cmdAgeClock(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "ageclock")
	if len(args) != 2 {
		ts.Fatalf("usage: ageclock HOME SECONDS")
	}
	secs, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	n := 0
	err = filepath.WalkDir(ts.MkAbs(args[0]), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "arrivals.log" {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines := strings.Split(string(raw), "\n")
		for i, l := range lines {
			f := strings.Fields(l)
			if len(f) != 4 {
				continue // the header, a torn line
			}
			ms, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				continue
			}
			f[2] = strconv.FormatInt(ms-secs*1000, 10)
			lines[i] = strings.Join(f, " ")
		}
		n++
		return os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
	})
	ts.Check(err)
	if n == 0 {
		ts.Fatalf("ageclock: no arrival log under %s", args[0])
	}
}
