// Package selfupdate replaces the running ferry binary with an approved release
// (docs/design.md §3 "Signed updates", ADR 0005): it checks a release file's Go build
// information against the platform and version approved, copies it beside the
// executable, fsyncs it and renames it into place (on Windows by way of exe+".old").
// Which release is approved, and whether this machine may take it, is the façade's
// (fsbus/update.go).
package selfupdate

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/lazyre"
)

// CheckBinary reads the Go build information of a release file
// (debug/buildinfo: the GOOS, GOARCH, -ldflags and main module version its toolchain
// recorded) and refuses it (invalid) when it was built for another platform than
// platform, or when the version it will report (`ferry version`: -X main.version, else
// the main module version the go command stamps from a git tag, README "Release
// build", else "dev") is not version — `update apply` would refuse it on every machine.
// Under -trimpath the build information records no -ldflags, so an -X is not visible:
// there only a tagged module version is read, and a build of an untagged commit is
// refused, as its version cannot be told from the file; so is any build of a tree with
// uncommitted changes, which may have changed what the binary reports. A file without
// Go build information is not refused: note says that its platform and version were
// not checked. sameVersion says whether two version texts name one version
// (docs/format.md §11).
func CheckBinary(r io.ReaderAt, path, platform, version string, sameVersion func(a, b string) bool) (note string, err error) {
	bi, berr := buildinfo.Read(r)
	if berr != nil {
		return fmt.Sprintf("%s is not a Go binary this ferry can read: its platform and version were not checked", path), nil
	}
	return "", checkInfo(bi, path, platform, version, sameVersion)
}

// checkInfo is CheckBinary's verdict on a Go binary's build information bi.
func checkInfo(bi *debug.BuildInfo, path, platform, version string, sameVersion func(a, b string) bool) error {
	var goos, goarch string
	for _, st := range bi.Settings {
		switch st.Key {
		case "GOOS":
			goos = st.Value
		case "GOARCH":
			goarch = st.Value
		}
	}
	if goos != "" && goarch != "" && goos+"/"+goarch != platform {
		return errs.Errorf(errs.Invalid, "approve it for "+goos+"/"+goarch+", or build one for "+platform+" (GOOS=… GOARCH=… go build)",
			"%s is a Go binary for %s/%s, not %s", path, goos, goarch, platform)
	}
	tag := "v" + strings.TrimPrefix(version, "v")
	reported, hidden := stamp(bi)
	switch {
	case reported == "" && hidden:
		return errs.Errorf(errs.Invalid, "build it from a commit tagged "+tag+" with no uncommitted changes (README \"Release build\"), or stamp it with -ldflags \"-X main.version="+strings.TrimPrefix(version, "v")+"\" without -trimpath",
			"the version %s reports cannot be read from the file (module version %s): it was built from a tree with uncommitted changes, or with -trimpath from an untagged commit (-trimpath leaves -ldflags out of the build information), or with per-package -ldflags", path, bi.Main.Version)
	case reported == "":
		return errs.Errorf(errs.Invalid, "stamp it with -ldflags \"-X main.version="+strings.TrimPrefix(version, "v")+"\", or build it from the commit tagged "+tag+" (README \"Release build\")",
			"%s reports an empty version (-X main.version= with nothing after it)", path)
	case !sameVersion(reported, version):
		why := ""
		if hidden {
			why = " (its git tag; an -X main.version is not visible under -trimpath)"
		}
		return errs.Errorf(errs.Invalid, "approve the version the binary reports, or build it from the commit tagged "+tag+" (README \"Release build\")",
			"%s reports version %s%s, not %s", path, reported, why, version)
	}
	return nil
}

// stamp is the version a binary with build information bi reports (`ferry version`: an
// -X main.version, else its module version without the leading v, else "dev"), and
// whether an -X could be hidden from bi (-trimpath records no -ldflags). When one could,
// only a tagged module version with no +dirty is given, and "" for anything else.
func stamp(bi *debug.BuildInfo) (version string, hidden bool) {
	ldflags := ""
	hasLdflags, trimpath := false, false
	for _, st := range bi.Settings {
		switch st.Key {
		case "-ldflags":
			ldflags, hasLdflags = st.Value, true
		case "-trimpath":
			trimpath = st.Value == "true"
		}
	}
	if hasLdflags {
		x, found, readable := xVersion(ldflags)
		if !readable {
			return "", true
		}
		if found && x != "dev" { // -X main.version=dev leaves the module version in force
			return x, false
		}
	}
	mv := bi.Main.Version
	hidden = trimpath && !hasLdflags
	switch {
	case hidden && (mv == "" || mv == "(devel)" || pseudoRE.MatchString(mv)), strings.Contains(mv, "+dirty"):
		// A changed tree may have changed what the binary reports (its default
		// version among the rest): nothing in the file tells.
		return "", true
	case mv == "" || mv == "(devel)":
		return "dev", false
	}
	return strings.TrimPrefix(mv, "v"), hidden // as `ferry version` reports it
}

// xVersion reads the value of the last -X main.version=V of a build's -ldflags (the
// linker takes the last), split into words as the go command splits it (splitQuoted),
// skipping the values of the linker's other flags (an -extldflags
// holding "-X main.version=…" sets nothing). found is false without one; readable is
// false when the text cannot be read so: per-package flags ("pattern=flags"), which may
// not apply to the main package, or an unclosed quote.
func xVersion(ldflags string) (v string, found, readable bool) {
	t := strings.TrimSpace(ldflags)
	if t != "" && t[0] != '-' {
		return "", false, false
	}
	words, ok := splitQuoted(t)
	if !ok {
		return "", false, false
	}
	for i := 0; i < len(words); i++ {
		if !strings.HasPrefix(words[i], "-") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(words[i], "-"), "=")
		if !hasVal && linkerValueFlags[name] && i+1 < len(words) {
			i++
			val = words[i]
		}
		if name != "X" {
			continue
		}
		if sym, x, ok := strings.Cut(val, "="); ok && sym == "main.version" {
			v, found = x, true
		}
	}
	return v, found, true
}

// splitQuoted splits s into words as the go command splits a flag's value
// (cmd/internal/quoted.Split): words are separated by spaces, tabs and newlines, and a
// word that starts with ' or " runs to the next such quote — no escapes, and the word
// ends there even with no space after it. A quote anywhere else is a plain character.
// ok is false for an unclosed quote, which the go command refuses.
func splitQuoted(s string) (words []string, ok bool) {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(s) > 0 {
		for len(s) > 0 && space(s[0]) {
			s = s[1:]
		}
		if len(s) == 0 {
			break
		}
		if q := s[0]; q == '"' || q == '\'' {
			end := strings.IndexByte(s[1:], q)
			if end < 0 {
				return nil, false
			}
			words = append(words, s[1:1+end])
			s = s[2+end:]
			continue
		}
		i := 0
		for i < len(s) && !space(s[i]) {
			i++
		}
		words = append(words, s[:i])
		s = s[i:]
	}
	return words, true
}

// linkerValueFlags are the flags of `go tool link` that take a value (go1.26): the word
// after one is its value, not a flag.
var linkerValueFlags = map[string]bool{
	"B": true, "D": true, "E": true, "H": true, "I": true, "L": true, "R": true, "T": true, "X": true,
	"benchmark": true, "benchmarkprofile": true, "buildid": true, "buildmode": true, "capturehostobjs": true,
	"cpuprofile": true, "debugtextsize": true, "debugtramp": true, "extar": true, "extld": true,
	"extldflags": true, "fipso": true, "funcalign": true, "importcfg": true, "installsuffix": true,
	"k": true, "libgcc": true, "linkmode": true, "memprofile": true, "memprofilerate": true, "o": true,
	"pluginpath": true, "r": true, "randlayout": true, "strictdups": true, "tmpdir": true,
}

// pseudoRE matches a Go pseudo-version's timestamp and revision (go.dev/ref/mod
// "Pseudo-versions"): a build of an untagged commit.
var pseudoRE = lazyre.New(`[-.]0\.\d{14}-[0-9a-f]{12}|-\d{14}-[0-9a-f]{12}`)

// CleanOld removes exe+".old" left by an update on Windows (best effort: the
// file may still be running; errors are ignored). "" means os.Executable().
func CleanOld(exe string) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return
		}
	}
	_ = os.Remove(exe + ".old")
}

// Replace puts the file tmp in place of exe. On unix one rename does it (a
// running binary may be renamed over). Windows will not replace a running .exe but
// will rename it: exe moves to exe+".old" (an older .old removed first), tmp is renamed
// in, and if that fails exe is moved back; CleanOld removes the .old on a
// later start. goos selects the dance so tests run both on any OS.
func Replace(exe, tmp, goos string) error {
	if goos != "windows" {
		if err := fsutil.Rename(tmp, exe); err != nil {
			return err
		}
		return fsutil.SyncDir(filepath.Dir(exe))
	}
	old := exe + ".old"
	if err := os.Remove(old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the previous %s: %w", old, err)
	}
	if err := fsutil.Rename(exe, old); err != nil {
		return fmt.Errorf("moving the running binary aside: %w", err)
	}
	if err := fsutil.Rename(tmp, exe); err != nil {
		if berr := fsutil.Rename(old, exe); berr != nil {
			return fmt.Errorf("renaming the new binary in: %w (and moving the old one back: %v; it is at %s)", err, berr, old)
		}
		return fmt.Errorf("renaming the new binary in: %w", err)
	}
	return fsutil.SyncDir(filepath.Dir(exe))
}

// CopyBeside copies src into a new temp file in exe's folder (so the rename stays on
// one file system), hashing as it copies; it fsyncs and closes the copy and gives it
// exe's permission bits plus execute bits. It returns the temp path, the sha256 and
// the size in bytes; on error it removes the temp file.
func CopyBeside(exe string, src io.Reader) (tmp, sum string, n int64, err error) {
	dir, base := filepath.Split(exe)
	if dir == "" {
		dir = "."
	}
	mode := fs.FileMode(0o755)
	if st, err := os.Stat(exe); err == nil {
		mode = st.Mode().Perm() | 0o111
	}
	ext := filepath.Ext(base) // kept last, so Windows runs the copy (.exe)
	f, err := os.CreateTemp(dir, "."+strings.TrimSuffix(base, ext)+".new-*"+ext)
	if err != nil {
		return "", "", 0, fmt.Errorf("creating the new binary beside %s: %w", exe, err)
	}
	fail := func(err error) (string, string, int64, error) {
		f.Close()
		os.Remove(f.Name())
		return "", "", 0, err
	}
	h := sha256.New()
	if n, err = io.Copy(io.MultiWriter(f, h), src); err != nil {
		return fail(fmt.Errorf("copying the new binary: %w", err))
	}
	if err := fsutil.Sync(f); err != nil {
		return fail(fmt.Errorf("syncing %s: %w", f.Name(), err))
	}
	if err := f.Chmod(mode); err != nil && runtime.GOOS != "windows" {
		return fail(fmt.Errorf("setting mode of %s: %w", f.Name(), err))
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", "", 0, fmt.Errorf("closing %s: %w", f.Name(), err)
	}
	return f.Name(), hex.EncodeToString(h.Sum(nil)), n, nil
}

// Known reports whether p ("GOOS/GOARCH") is a pair Go builds for (`go tool
// dist list`), or this binary's own platform.
func Known(p string) bool { return knownPlatforms[p] || p == Platform() }

func init() {
	for _, p := range strings.Fields(`aix/ppc64 android/386 android/amd64 android/arm android/arm64
		darwin/amd64 darwin/arm64 dragonfly/amd64 freebsd/386 freebsd/amd64 freebsd/arm freebsd/arm64
		illumos/amd64 ios/amd64 ios/arm64 js/wasm linux/386 linux/amd64 linux/arm
		linux/arm64 linux/loong64 linux/mips linux/mips64 linux/mips64le linux/mipsle linux/ppc64
		linux/ppc64le linux/riscv64 linux/s390x netbsd/386 netbsd/amd64 netbsd/arm netbsd/arm64
		openbsd/386 openbsd/amd64 openbsd/arm openbsd/arm64 openbsd/ppc64 openbsd/riscv64 plan9/386
		plan9/amd64 plan9/arm solaris/amd64 wasip1/wasm windows/386 windows/amd64 windows/arm64`) {
		knownPlatforms[p] = true
	}
}

// knownPlatforms are the GOOS/GOARCH pairs Go builds for (`go tool dist list`, Go
// 1.26): an approval names one of them.
var knownPlatforms = map[string]bool{}

// Platform is this binary's platform, "GOOS/GOARCH" (runtime values).
func Platform() string { return runtime.GOOS + "/" + runtime.GOARCH }
