// Command ferry coordinates AI coding agents and their owners through a plain folder:
// signed JSON files plus an append-only ledger, carried between machines by any sync
// tool. See README.md and docs/format.md.
package main

import (
	"os"
	"runtime"

	"github.com/ferryhq/ferry/internal/selfupdate"
)

func main() {
	if runtime.GOOS == "windows" {
		selfupdate.CleanOld("") // the .exe.old a `ferry update apply` left (best effort)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
