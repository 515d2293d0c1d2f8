package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/selfupdate"
)

// UpdateCmd groups the signed-update verbs (ADR 0005).
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
		"or downloaded: the files travel with the channel folder. A version older than the newest\n" +
		"approved one, or a re-approval of a version with other files, is written with a note.\n" +
		"A Go binary is read for the platform and the version it will report (the git tag it was\n" +
		"built from, README \"Release build\", or -ldflags \"-X main.version=…\", which -trimpath\n" +
		"hides): one built for another platform or reporting another version is refused, and so\n" +
		"is a -trimpath build of an untagged commit or any build of a changed tree, whose version\n" +
		"cannot be read; a file that is not a Go binary is approved with a note saying what was\n" +
		"not checked."
}

// ownerAction marks release.approve the owner's (docs/format.md §13, the master row).
func (c *UpdateApproveCmd) ownerAction(*Globals) string {
	return "approve a release (release.approve)"
}

// Run implements the command.
func (c *UpdateApproveCmd) Run(g *Globals) error {
	plats := map[string]string{}
	for _, p := range c.Platform {
		plat, path, ok := strings.Cut(p, "=")
		if !ok || plat == "" || path == "" {
			return errs.Errorf(errs.Invalid, "write it as --platform linux/amd64=releases/ferry-linux-amd64", "--platform %q is not OS/ARCH=PATH", p)
		}
		if _, dup := plats[plat]; dup {
			return errs.Errorf(errs.Invalid, "name each platform once", "platform %s given twice", plat)
		}
		plats[plat] = path
	}
	s, err := g.Master()
	if err != nil {
		return err
	}
	before, err := s.Load()
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
	for _, n := range append(approvalNotes(before.Releases(), r), r.Notes...) {
		g.printf("  note: %s\n", clean(n))
	}
	names := slices.Sorted(maps.Keys(r.Platforms))
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
	chk := v.CheckUpdate(currentVersion(), selfupdate.Platform())
	if exe, err := os.Executable(); err == nil {
		chk.NoteInstalled(exe)
	}
	if g.JSON {
		return g.printJSON(chk)
	}
	switch {
	case chk.Available:
		g.printf("update available: ferry %s (this binary: %s, %s)\n", chk.Latest, chk.Current, chk.Platform)
		g.printf("  %s  sha256 %s\n", chk.File.Path, chk.File.SHA256)
		g.printf("  run `ferry update apply --yes` to install it\n")
	case chk.Installed:
		g.printf("%s\n", installedLine(chk.Latest, chk.Current, chk.Platform))
	case chk.Latest != "":
		g.printf("ferry %s is up to date for %s (newest approved: %s)\n", chk.Current, chk.Platform, chk.Latest)
	default:
		g.printf("no release is approved in this channel for %s (this binary: %s)\n", chk.Platform, chk.Current)
	}
	for _, r := range chk.Refused {
		g.printf("refused approval: %s\n", r)
	}
	return nil
}

// installedLine says that this binary already is the approved file of latest although
// it reports current.
func installedLine(latest, current, platform string) string {
	return fmt.Sprintf("this binary already is the approved file of ferry %s for %s, but it reports version %s: ask the owner to build the release with the approved version stamp", latest, platform, current)
}

// UpdateApplyCmd is `ferry update apply`.
type UpdateApplyCmd struct {
	Yes bool `help:"Replace the binary (without it, check everything and say what would be installed)."`
}

// Help is the long help.
func (c *UpdateApplyCmd) Help() string {
	return "Needs the owner's key on this machine, or --as an agent seated at orchestrator. Verifies\n" +
		"the approval (master-signed) and the file's sha256 and size, runs the copy with\n" +
		"`version --json` (5 s at most) and requires the approved version, then fsyncs it and\n" +
		"renames it into place (on Windows the running .exe is first renamed to .exe.old,\n" +
		"removed on a later start). A mismatch replaces nothing: a size that differs is\n" +
		"retry_needed (the sync may still be bringing the file), a checksum or version that\n" +
		"differs is invalid. Without --yes it is a dry run: every check, nothing replaced."
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
	res, err := s.ApplyUpdate(fsbus.ApplyOptions{Current: currentVersion(), DryRun: !c.Yes, CheckVersion: binaryVersion})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	switch {
	case res.DryRun:
		g.printf("would install ferry %s in place of %s at %s (sha256 %s, checked); run again with --yes to install it\n", res.To, res.From, res.Exe, res.SHA256)
	case res.Applied:
		g.printf("✔ ferry %s → %s installed at %s (sha256 %s)\n", res.From, res.To, res.Exe, res.SHA256)
	case res.Installed:
		g.printf("nothing to apply: %s\n", installedLine(res.Latest, res.From, res.Platform))
	case res.Latest == "":
		g.printf("nothing to apply: no release is approved in this channel for %s\n", res.Platform)
	default:
		g.printf("nothing to apply: ferry %s is not older than the newest approved release for %s (%s)\n", res.From, res.Platform, res.Latest)
	}
	return nil
}

// binaryVersion runs the binary at path with `version --json` (5 s at most, no channel
// or agent in its environment) and returns the version it reports.
func binaryVersion(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version", "--json")
	cmd.WaitDelay = time.Second
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_CHANNEL=") && !strings.HasPrefix(kv, "FERRY_AGENT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("`version --json` did not answer within 5 s")
		}
		return "", fmt.Errorf("`version --json`: %v: %s", err, clean(strings.TrimSpace(errb.String())))
	}
	var bi BuildInfo
	if err := json.Unmarshal(out.Bytes(), &bi); err != nil || bi.Version == "" {
		return "", fmt.Errorf("`version --json` printed no version: %q", clean(truncate(firstLine(out.String()), 200)))
	}
	return bi.Version, nil
}

// truncate is s cut to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// approvalNotes warns about an approval r given the releases approved before it
// (newest version first): one that replaces an approval of the same version, and one
// whose version is not newer than the newest approved — `ferry update` offers only
// the newest, so an older approval is never offered while a newer one stands. An
// approval that wrote nothing (the same files again) gets no note.
func approvalNotes(prior []fold.Release, r *fold.Release) []string {
	var notes []string
	for _, p := range prior {
		if p.Hash == r.Hash {
			return nil
		}
	}
	for _, p := range prior {
		if fold.CompareVersions(p.Version, r.Version) == 0 {
			what := "other files or checksums"
			if maps.Equal(p.Platforms, r.Platforms) {
				what = "the same files, the version written " + r.Version
			}
			notes = append(notes, fmt.Sprintf("this replaces the approval of %s made at %s (%s)", p.Version, p.HLC, what))
			break
		}
	}
	for _, p := range prior {
		if fold.CompareVersions(p.Version, r.Version) == 0 {
			continue
		}
		if fold.CompareVersions(r.Version, p.Version) < 0 {
			notes = append(notes, fmt.Sprintf("%s is older than the approved %s: machines are offered only the newest approved release, so nothing will update to %s", r.Version, p.Version, r.Version))
		}
		break
	}
	return notes
}
