package main

import (
	"runtime"

	"github.com/ferryhq/ferry/fsbus"
)

// VersionCmd is `ferry version`.
type VersionCmd struct{}

// Run implements the command.
func (c *VersionCmd) Run(g *Globals) error {
	if g.JSON {
		return g.printJSON(map[string]any{"version": version, "format": fsbus.FormatVersion, "go": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH})
	}
	g.printf("ferry %s (channel format %d, %s %s/%s)\n", version, fsbus.FormatVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
