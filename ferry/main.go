// Command ferry coordinates AI coding agents and their owners through a plain folder:
// signed JSON files plus an append-only ledger, carried between machines by any sync
// tool. See README.md and docs/format.md.
package main

import (
	"os"
	"runtime"
	"runtime/debug"

	"github.com/ferryhq/ferry/internal/selfupdate"
)

func main() {
	lateFirstGC(debug.SetGCPercent)
	if runtime.GOOS == "windows" {
		selfupdate.CleanOld("") // the .exe.old a `ferry update apply` left (best effort)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// lateFirstGC lets the heap reach 16 MB before the first garbage collection, instead of
// Go's 4 MB, and puts the collector back to its default (GOGC=100) once that collection
// has run: a one-shot command on a channel of normal size ends before it ever collects,
// and a bigger or longer-running one pays one late collection and then the usual ones
// (docs/adr/0018-start-up.md). A GOGC in the environment is left alone. setGCPercent is
// debug.SetGCPercent.
func lateFirstGC(setGCPercent func(int) int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	setGCPercent(400)
	sentinel := new([64]byte)
	runtime.SetFinalizer(sentinel, func(*[64]byte) { setGCPercent(100) })
}
