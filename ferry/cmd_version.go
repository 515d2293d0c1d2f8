package main

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
)

// VersionCmd is `ferry version [--json]`.
type VersionCmd struct{}

// Help is the long help.
func (c *VersionCmd) Help() string {
	return "Prints the version (-X main.version when set at build time, else the git tag a release\n" +
		"is built from, as the go command records it for the main module, without its leading v),\n" +
		"the channel format this binary reads and writes, the Go version and platform, and\n" +
		"the VCS commit, its time and whether the tree had uncommitted changes when the\n" +
		"build recorded them (runtime/debug.ReadBuildInfo)."
}

// BuildInfo is what `ferry version --json` prints.
type BuildInfo struct {
	Version  string `json:"version"`            // -ldflags -X main.version, else the module version without its "v", else "dev"
	Module   string `json:"module,omitempty"`   // the main module's path
	Revision string `json:"revision,omitempty"` // vcs.revision
	Time     string `json:"time,omitempty"`     // vcs.time (RFC 3339)
	Modified bool   `json:"modified,omitempty"` // vcs.modified: built from a tree with changes
	Format   int    `json:"format"`             // the channel format (docs/format.md)
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// buildInfo merges the linker-set version with what the Go toolchain recorded in the
// binary (bi may be nil when the binary carries none).
func buildInfo(ldVersion string, bi *debug.BuildInfo) BuildInfo {
	out := BuildInfo{Version: ldVersion, Format: fsbus.FormatVersion, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi == nil {
		return out
	}
	out.Module = bi.Main.Path
	if out.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		out.Version = strings.TrimPrefix(bi.Main.Version, "v") // as versions are written elsewhere: 1.4.0
	}
	if bi.GoVersion != "" {
		out.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Revision = s.Value
		case "vcs.time":
			out.Time = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		case "GOOS":
			out.OS = s.Value
		case "GOARCH":
			out.Arch = s.Value
		}
	}
	return out
}

// currentVersion is the version this binary reports (BuildInfo.Version): what `ferry
// update` compares and MCP's serverInfo names.
func currentVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return buildInfo(version, bi).Version
}

// Run implements the command.
func (c *VersionCmd) Run(g *Globals) error {
	bi, _ := debug.ReadBuildInfo()
	info := buildInfo(version, bi)
	if g.JSON {
		return g.printJSON(info)
	}
	g.printf("ferry %s (channel format %d, %s %s/%s)\n", info.Version, info.Format, info.Go, info.OS, info.Arch)
	if info.Revision != "" {
		g.printf("commit %s", info.Revision)
		if info.Time != "" {
			g.printf(" (%s)", info.Time)
		}
		if info.Modified {
			g.printf(", with uncommitted changes")
		}
		g.printf("\n")
	}
	return nil
}
