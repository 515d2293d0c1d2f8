package main

import (
	"sort"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
)

// UpdateCmd groups the signed-update verbs (issue 9, ADR 0005).
type UpdateCmd struct {
	Approve UpdateApproveCmd `cmd:"" help:"Approve a release: sign its version and each platform's binary checksum (owner only)."`
	Check   UpdateCheckCmd   `cmd:"" help:"Report a newer approved release for this machine's platform."`
	Apply   UpdateApplyCmd   `cmd:"" help:"Verify the newest approved release and put it in place of this binary."`
}

// UpdateApproveCmd is `ferry update approve VERSION --platform OS/ARCH=releases/FILE…`.
type UpdateApproveCmd struct {
	Version  string   `arg:"" help:"Version being approved (semver, e.g. 1.4.0 or v1.4.0-rc.1)."`
	Platform []string `help:"GOOS/GOARCH=releases/FILE, once per platform." required:"" sep:"none" placeholder:"OS/ARCH=PATH"`
}

// Help is the long help.
func (c *UpdateApproveCmd) Help() string {
	return "Copy the binaries into the channel's releases/ folder first. The sha256 of each file is\n" +
		"computed here and signed with the master key in a release.approve entry; a path outside\n" +
		"releases/, a missing file or a version that is not semver is refused. Nothing is uploaded\n" +
		"or downloaded: the files travel with the channel folder."
}

// Run implements the command.
func (c *UpdateApproveCmd) Run(g *Globals) error {
	if g.As != "" && g.As != fsbus.MasterWriter {
		return fsbus.Errorf(fsbus.CatDenied, "run it on the owner's machine, without --as", "only the owner may approve a release; %s may not", g.As)
	}
	plats := map[string]string{}
	for _, p := range c.Platform {
		plat, path, ok := strings.Cut(p, "=")
		if !ok || plat == "" || path == "" {
			return fsbus.Errorf(fsbus.CatInvalid, "write it as --platform linux/amd64=releases/ferry-linux-amd64", "--platform %q is not OS/ARCH=PATH", p)
		}
		if _, dup := plats[plat]; dup {
			return fsbus.Errorf(fsbus.CatInvalid, "name each platform once", "platform %s given twice", plat)
		}
		plats[plat] = path
	}
	s, err := g.Master()
	if err != nil {
		return err
	}
	r, err := s.ApproveRelease(c.Version, plats)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(r)
	}
	g.printf("✔ release %s approved\n", r.Version)
	names := make([]string, 0, len(r.Platforms))
	for p := range r.Platforms {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		f := r.Platforms[p]
		g.printf("  %s  %s  sha256 %s  %d bytes\n", p, f.Path, f.SHA256, f.Size)
	}
	return nil
}

// UpdateCheckCmd is `ferry update check`.
type UpdateCheckCmd struct{}

// Help is the long help.
func (c *UpdateCheckCmd) Help() string {
	return "Compares this binary's version with the newest master-approved release for this platform\n" +
		"(semver precedence; an unstamped \"dev\" build is older than any release). Reads only."
}

// Run implements the command.
func (c *UpdateCheckCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	chk := v.CheckUpdate(version, fsbus.Platform())
	if g.JSON {
		return g.printJSON(chk)
	}
	switch {
	case chk.Available:
		g.printf("update available: ferry %s (this binary: %s, %s)\n", chk.Latest, chk.Current, chk.Platform)
		g.printf("  %s  sha256 %s\n", chk.File.Path, chk.File.SHA256)
		g.printf("  run `ferry update apply --yes` to install it\n")
	case chk.Latest != "":
		g.printf("ferry %s is up to date for %s (newest approved: %s)\n", chk.Current, chk.Platform, chk.Latest)
	default:
		g.printf("no approved release for %s (this binary: %s)\n", chk.Platform, chk.Current)
	}
	for _, r := range chk.Refused {
		g.printf("refused approval: %s\n", r)
	}
	return nil
}

// UpdateApplyCmd is `ferry update apply`.
type UpdateApplyCmd struct {
	Yes bool `help:"Replace the binary (without it, only say what would be installed)."`
}

// Help is the long help.
func (c *UpdateApplyCmd) Help() string {
	return "Needs the owner's key on this machine, or --as an agent seated at orchestrator. Verifies\n" +
		"the approval (master-signed) and the file's sha256 and size, copies it beside this binary,\n" +
		"fsyncs it and renames it into place (on Windows the running .exe is first renamed to\n" +
		".exe.old, removed on a later start). A mismatch replaces nothing."
}

// Run implements the command.
func (c *UpdateApplyCmd) Run(g *Globals) error {
	var s *fsbus.Session
	var err error
	if g.As != "" {
		s, err = g.Session()
	} else {
		s, err = g.Master()
	}
	if err != nil {
		return err
	}
	if !c.Yes {
		v, err := s.Load()
		if err != nil {
			return err
		}
		chk := v.CheckUpdate(version, fsbus.Platform())
		if !chk.Available {
			if g.JSON {
				return g.printJSON(&fsbus.UpdateResult{From: version, Platform: chk.Platform})
			}
			g.printf("nothing to apply: ferry %s is the newest approved release for %s\n", chk.Current, chk.Platform)
			return nil
		}
		return fsbus.Errorf(fsbus.CatInvalid, "run `ferry update apply --yes` to replace this binary",
			"ferry %s would replace %s; nothing was changed without --yes", chk.Latest, chk.Current)
	}
	res, err := s.ApplyUpdate(fsbus.ApplyOptions{Current: version})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	if !res.Applied {
		g.printf("nothing to apply: ferry %s is the newest approved release for %s\n", res.From, res.Platform)
		return nil
	}
	g.printf("✔ ferry %s → %s installed at %s (sha256 %s)\n", res.From, res.To, res.Exe, res.SHA256)
	return nil
}
