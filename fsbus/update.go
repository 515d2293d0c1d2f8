package fsbus

import (
	"crypto/sha256"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// Signed updates (ADR 0005): the master approves a release with a
// release.approve entry naming, per platform, a binary under the channel's releases/
// folder and its sha256; `ferry update check` reports a newer approved release;
// `ferry update apply` verifies the approval's signature (only counted master entries
// are releases) and the binary's sha256 and swaps the running binary for it. Nothing is
// downloaded: the binary arrives with the channel folder like every other file.

// Platform is this binary's platform, "GOOS/GOARCH" (runtime values).
func Platform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// knownPlatforms are the GOOS/GOARCH pairs Go builds for (`go tool dist list`, Go
// 1.26): an approval names one of them.
var knownPlatforms = map[string]bool{}

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

// knownPlatform reports whether p ("GOOS/GOARCH") is a pair Go builds for (`go tool
// dist list`), or this binary's own platform.
func knownPlatform(p string) bool { return knownPlatforms[p] || p == Platform() }

// ApproveRelease writes a release.approve for version (SemVer 2.0.0, optional leading
// "v") naming, per platform ("GOOS/GOARCH"), a file under the channel's releases/
// folder; it computes each file's sha256 and size itself. Master only. Errors:
// invalid for a version that is not semver-like, no platforms, a platform that is not
// GOOS/GOARCH or not a pair Go builds for (KnownPlatform), or
// a path not under releases/ (a path that leaves releases/ through "..", an absolute
// path or a symlink is refused by os.Root); not_found for a missing file; invalid for
// something that is not a regular file; invalid for a Go binary built for another
// platform or stamped with another version (checkReleaseBinary: a file it cannot
// check is approved with a note in Release.Notes); denied for any writer but the
// master. When the
// newest approval of version already names the same files with the same checksums, it
// writes nothing and returns that approval.
func (s *Session) ApproveRelease(version string, platforms map[string]string) (*fold.Release, error) {
	if !fold.ValidVersion(version) {
		return nil, errs.Errorf(errs.Invalid, "use a semantic version such as 1.4.0 or v1.4.0-rc.1", "version %q is not semver-like", version)
	}
	if len(platforms) == 0 {
		return nil, errs.Errorf(errs.Invalid, "pass --platform GOOS/GOARCH=releases/FILE at least once", "no platforms to approve")
	}
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it on the owner's machine, without --as", "only the owner may approve a release (%s needs the master key)", fold.TypeReleaseApprove)
	}
	files := map[string]fold.ReleaseFile{}
	var notes []string
	for _, p := range slices.Sorted(maps.Keys(platforms)) {
		if !fold.PlatformRE.MatchString(p) {
			return nil, errs.Errorf(errs.Invalid, "write the platform as GOOS/GOARCH, e.g. linux/amd64 or windows/arm64", "platform %q is not GOOS/GOARCH", p)
		}
		if !knownPlatform(p) {
			return nil, errs.Errorf(errs.Invalid, "use a pair from `go tool dist list`, e.g. linux/amd64, darwin/arm64 or windows/amd64",
				"platform %q is not a GOOS/GOARCH pair Go builds for", p)
		}
		rf, note, err := s.hashRelease(platforms[p], p, version)
		if err != nil {
			return nil, err
		}
		files[p] = rf
		if note != "" {
			notes = append(notes, note)
		}
	}
	data := fold.ReleaseData{Version: version, Platforms: files}
	var rel *fold.Release
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeReleaseApprove); err != nil {
			return nil, nil, err
		}
		for _, r := range v.Releases() {
			if fold.CanonicalVersion(r.Version) == fold.CanonicalVersion(version) && r.Version == version && maps.Equal(r.Platforms, files) && len(r.Refused) == 0 {
				rel = &r
				return nil, nil, nil
			}
		}
		return &ledger.Draft{Type: fold.TypeReleaseApprove, Ref: version, Data: mustJSON(data)}, nil, nil
	})
	if err != nil || rel != nil {
		return rel, err // the same approval again writes nothing and notes nothing
	}
	for _, r := range s.viewWithEntry(v, e).Releases() {
		if r.Hash == e.Hash() {
			r.Notes = notes
			return &r, nil
		}
	}
	return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify`", "release %s is not in the state after approving it", version)
}

// hashRelease reads one release file through os.Root at the channel's releases/
// folder, checks it is a binary for platform carrying version (checkReleaseBinary),
// and returns its slash path, sha256 and size, with a note when the check could not
// be made.
func (s *Session) hashRelease(p, platform, version string) (fold.ReleaseFile, string, error) {
	p = filepath.ToSlash(p)
	if err := fold.CheckReleasePath(p); err != nil {
		return fold.ReleaseFile{}, "", err
	}
	f, err := s.openRelease(p)
	if err != nil {
		return fold.ReleaseFile{}, "", err
	}
	defer f.Close()
	note, err := checkReleaseBinary(f, p, platform, version)
	if err != nil {
		return fold.ReleaseFile{}, "", err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fold.ReleaseFile{}, "", fmt.Errorf("reading %s: %w", p, err)
	}
	return fold.ReleaseFile{SHA256: fold.HexSHA(h.Sum(nil)), Path: p, Size: n}, note, nil
}

// openRelease opens a regular file at slash path p ("releases/…") through os.Root, so
// no "..", absolute path or symlink leads outside the releases folder.
func (c *Channel) openRelease(p string) (*os.File, error) {
	if err := fold.CheckReleasePath(p); err != nil {
		return nil, err
	}
	rest := strings.TrimPrefix(p, fold.ReleasesDir+"/")
	root, err := os.OpenRoot(filepath.Join(c.Root, fold.ReleasesDir))
	if err != nil {
		return nil, errs.Errorf(errs.NotFound, "copy the binaries into the channel's releases/ folder first", "the channel has no releases/ folder: %v", err)
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(rest))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errs.Errorf(errs.NotFound, "copy the binary into the channel's releases/ folder (and wait for the sync) first", "release file %s is missing", p)
	case err != nil:
		return nil, &errs.Error{Category: errs.Invalid, Err: err, Hint: "name a regular file inside releases/ (symlinks out of it are refused)",
			Message: fmt.Sprintf("opening release file %s: %v", p, err)}
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, errs.Errorf(errs.Invalid, "name a regular file inside releases/", "release file %s is not a regular file", p)
	}
	return f, nil
}

// UpdateCheck is what `ferry update check` reports for one platform.
type UpdateCheck struct {
	Current   string `json:"current"`  // the running binary's version
	Platform  string `json:"platform"` // GOOS/GOARCH
	Available bool   `json:"available"`
	// Latest is the newest approved version with a usable file for Platform (empty when
	// none); File is that file.
	Latest   string            `json:"latest,omitempty"`
	File     *fold.ReleaseFile `json:"file,omitempty"`
	Approved string            `json:"approved,omitempty"` // HLC of the approval
	// Refused names newer approvals for Platform that no update will use, with why
	// ("1.5.0: approval carries no sha256").
	Refused []string `json:"refused,omitempty"`
	// Installed is true when the installed binary already is the approved file (same
	// sha256) although it reports another version: nothing is available (NoteInstalled).
	Installed bool `json:"installed,omitempty"`
}

// NoteInstalled compares the binary at exe with the approved file: when their sha256
// are equal the release is installed already, whatever version the binary reports (a
// release stamped with another version than approved would otherwise be "available"
// forever), so Available becomes false and Installed true. A
// binary that cannot be read changes nothing.
func (c *UpdateCheck) NoteInstalled(exe string) {
	if !c.Available || c.File == nil || exe == "" {
		return
	}
	f, err := os.Open(exe)
	if err != nil {
		return
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return
	}
	if fold.HexSHA(h.Sum(nil)) == c.File.SHA256 {
		c.Available, c.Installed = false, true
	}
}

// CheckUpdate reports the newest approved release for platform and whether it is newer
// than current (SemVer precedence; a current version that is not semver, such as "dev",
// is older than every release). It reads v only.
func (v *View) CheckUpdate(current, platform string) *UpdateCheck {
	out := &UpdateCheck{Current: current, Platform: platform}
	for _, r := range v.Releases() {
		if why, refused := r.Refused[platform]; refused && fold.CompareVersions(r.Version, current) > 0 {
			out.Refused = append(out.Refused, r.Version+": "+why)
			continue
		}
		f, ok := r.Platforms[platform]
		if !ok {
			continue
		}
		out.Latest, out.Approved, out.File = r.Version, r.HLC, &f
		out.Available = fold.CompareVersions(r.Version, current) > 0
		break
	}
	sort.Strings(out.Refused)
	return out
}

// ApplyOptions says what ApplyUpdate replaces.
type ApplyOptions struct {
	// Exe is the binary to replace; "" means os.Executable() (tests pass a copy).
	Exe string
	// Current is the running binary's version (ferry's build version).
	Current string
	// Platform is "GOOS/GOARCH"; "" means this binary's.
	Platform string
	// DryRun checks everything (approval, file, checksum, version) and replaces nothing.
	DryRun bool
	// CheckVersion, when set, runs the verified copy of the new binary and returns the
	// version it reports; a version other than the approved one refuses the update.
	CheckVersion func(path string) (string, error)
}

// UpdateResult is what ApplyUpdate did.
type UpdateResult struct {
	Applied bool   `json:"applied"`
	DryRun  bool   `json:"dry_run,omitempty"` // checked, would be applied, nothing replaced
	From    string `json:"from"`
	// Latest is the newest approved version for Platform ("" when none is approved).
	Latest    string `json:"latest,omitempty"`
	Installed bool   `json:"installed,omitempty"` // the binary already is the approved file
	To        string `json:"to,omitempty"`
	Platform  string `json:"platform"`
	Exe       string `json:"exe"`
	SHA256    string `json:"sha256,omitempty"`
	Size      int64  `json:"size,omitempty"` // bytes
}

// ApplyUpdate replaces the binary at opt.Exe with the newest approved release for the
// platform when it is newer than opt.Current. The writer must be the master or hold
// level orchestrator. It verifies the approval (only counted master entries
// are releases: the signature checked against the pinned master key) and copies the
// file through os.Root into a temp file beside the binary, hashing as it copies; the
// copy must match the approved sha256 and size, and, with opt.CheckVersion, report the
// approved version when run. Then it fsyncs, sets the binary's mode (plus execute
// bits) and renames it over the binary (replaceExecutable); opt.DryRun stops before
// the rename. No newer release, or a binary that already is the approved file
// (UpdateCheck.NoteInstalled): Applied is false and nothing changes. Errors (nothing
// replaced): denied below orchestrator or when this machine's key for the writer is
// not the seated one; not_found for a missing release file; retry_needed when the
// file's size differs from the approval's (it may still be arriving: wait for the
// sync); invalid when the size matches but the sha256 differs (the file is not the
// approved one), or the new binary does not run or reports another version than
// approved; internal for a failed copy or rename.
func (s *Session) ApplyUpdate(opt ApplyOptions) (*UpdateResult, error) {
	if err := s.Home.CheckPaused(s.Project(), "update apply"); err != nil && !opt.DryRun {
		return nil, err // ADR 0005: a paused machine replaces no binary
	}
	if opt.Platform == "" {
		opt.Platform = Platform()
	}
	exe := opt.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding the running binary: %w", err)
		}
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	v, err := s.Load()
	if err != nil {
		return nil, err
	}
	if lvl := v.State.LevelOf(s.Name); lvl < fold.LevelOrchestrator {
		return nil, errs.Errorf(errs.Denied, "run it as the owner, or as an agent the owner seated at orchestrator",
			"applying an update needs level orchestrator; %s has level %s", s.Name, lvl)
	}
	// The level is the seated key's: a key on this machine under that name that the
	// owner did not seat does not carry it.
	if err := s.checkIdentity(v.State, fold.TypeReleaseApprove); err != nil {
		return nil, err
	}
	chk := v.CheckUpdate(opt.Current, opt.Platform)
	chk.NoteInstalled(exe)
	res := &UpdateResult{From: opt.Current, Platform: opt.Platform, Exe: exe, Latest: chk.Latest, Installed: chk.Installed}
	if !chk.Available {
		if len(chk.Refused) > 0 {
			return nil, errs.Errorf(errs.Invalid, "ask the owner to approve the release again with `ferry update approve` (it computes the sha256)",
				"no usable approval: %s", strings.Join(chk.Refused, "; "))
		}
		return res, nil
	}
	f, err := s.openRelease(chk.File.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tmp, sum, n, err := copyBeside(exe, f)
	if err != nil {
		return nil, err
	}
	if chk.File.Size != 0 && n != chk.File.Size {
		os.Remove(tmp)
		return nil, errs.Errorf(errs.RetryNeeded, "the file may still be arriving: wait for the sync to finish, then run it again; the running binary is unchanged",
			"%s does not match the approval of %s: %d bytes, approved %d bytes", chk.File.Path, chk.Latest, n, chk.File.Size)
	}
	if sum != chk.File.SHA256 {
		os.Remove(tmp)
		return nil, errs.Errorf(errs.Invalid, "the file differs from the approved checksum: do not install it; ask the owner to check releases/ and approve again; the running binary is unchanged",
			"%s does not match the approval of %s: sha256 %s (%d bytes), approved %s (%d bytes)", chk.File.Path, chk.Latest, sum, n, chk.File.SHA256, chk.File.Size)
	}
	if opt.CheckVersion != nil {
		got, err := opt.CheckVersion(tmp)
		if err != nil {
			os.Remove(tmp)
			return nil, &errs.Error{Category: errs.Invalid, Err: err, Message: fmt.Sprintf("the approved binary %s does not run here: %v", chk.File.Path, err),
				Hint: "do not install it; ask the owner to check the release for " + opt.Platform + "; the running binary is unchanged"}
		}
		if fold.CanonicalVersion(got) != fold.CanonicalVersion(chk.Latest) {
			os.Remove(tmp)
			return nil, errs.Errorf(errs.Invalid, "do not install it; ask the owner to build it with the approved version stamp and approve it again; the running binary is unchanged",
				"the approved binary %s reports version %s, not the approved %s", chk.File.Path, got, chk.Latest)
		}
	}
	res.To, res.SHA256, res.Size = chk.Latest, sum, n
	if opt.DryRun {
		os.Remove(tmp)
		res.DryRun = true
		return res, nil
	}
	if err := replaceExecutable(exe, tmp, runtime.GOOS); err != nil {
		os.Remove(tmp)
		return nil, &errs.Error{Category: errs.Internal, Err: err, Message: fmt.Sprintf("replacing %s: %v", exe, err),
			Hint: "check that the binary's folder is writable; the running binary is unchanged"}
	}
	res.Applied = true
	return res, nil
}

// copyBeside copies src into a new temp file in exe's folder (so the rename stays on
// one file system), hashing as it copies; it fsyncs and closes the copy and gives it
// exe's permission bits plus execute bits. It returns the temp path, the sha256 and
// the size in bytes; on error it removes the temp file.
func copyBeside(exe string, src io.Reader) (tmp, sum string, n int64, err error) {
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
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("syncing %s: %w", f.Name(), err))
	}
	if err := f.Chmod(mode); err != nil && runtime.GOOS != "windows" {
		return fail(fmt.Errorf("setting mode of %s: %w", f.Name(), err))
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", "", 0, fmt.Errorf("closing %s: %w", f.Name(), err)
	}
	return f.Name(), fold.HexSHA(h.Sum(nil)), n, nil
}

// replaceExecutable puts the file tmp in place of exe. On unix one rename does it (a
// running binary may be renamed over). Windows will not replace a running .exe but
// will rename it: exe moves to exe+".old" (an older .old removed first), tmp is renamed
// in, and if that fails exe is moved back; CleanOldExecutable removes the .old on a
// later start. goos selects the dance so tests run both on any OS.
func replaceExecutable(exe, tmp, goos string) error {
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

// CleanOldExecutable removes exe+".old" left by an update on Windows (best effort: the
// file may still be running; errors are ignored). "" means os.Executable().
func CleanOldExecutable(exe string) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return
		}
	}
	_ = os.Remove(exe + ".old")
}

// stampRE finds the version ferry's build stamps with -ldflags "-X main.version=V".
var stampRE = regexp.MustCompile(`-X[= ]['"]?main\.version=([^\s'"]+)`)

// checkReleaseBinary reads the Go build information of a release file
// (debug/buildinfo: the GOOS, GOARCH and -ldflags its toolchain recorded) and refuses
// it (invalid) when it was built for another platform than platform, or when it
// carries a version stamp (-X main.version, else the module version) other than
// version — `update apply` would refuse it on every machine. A file without
// Go build information, or without a version stamp, is not refused: note says what
// could not be checked.
func checkReleaseBinary(r io.ReaderAt, path, platform, version string) (note string, err error) {
	bi, berr := buildinfo.Read(r)
	if berr != nil {
		return fmt.Sprintf("%s is not a Go binary this ferry can read: its platform and version were not checked", path), nil
	}
	var goos, goarch, ldflags string
	for _, st := range bi.Settings {
		switch st.Key {
		case "GOOS":
			goos = st.Value
		case "GOARCH":
			goarch = st.Value
		case "-ldflags":
			ldflags = st.Value
		}
	}
	if goos != "" && goarch != "" && goos+"/"+goarch != platform {
		return "", errs.Errorf(errs.Invalid, "approve it for "+goos+"/"+goarch+", or build one for "+platform+" (GOOS=… GOARCH=… go build)",
			"%s is a Go binary for %s/%s, not %s", path, goos, goarch, platform)
	}
	stamped := ""
	if m := stampRE.FindStringSubmatch(ldflags); m != nil {
		stamped = m[1]
	} else if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		stamped = mv
	}
	if stamped == "" {
		return fmt.Sprintf("%s carries no version stamp (build it with -ldflags \"-X main.version=%s\"): its version was not checked, and `update apply` will refuse a binary that does not report %s", path, version, version), nil
	}
	if fold.CanonicalVersion(stamped) != fold.CanonicalVersion(version) {
		return "", errs.Errorf(errs.Invalid, "approve the version the binary reports, or rebuild it with -ldflags \"-X main.version="+version+"\"",
			"%s reports version %s, not %s", path, stamped, version)
	}
	return "", nil
}

// Releases returns the approved releases folded from v: every release.approve the
// master wrote that counts (its signature verifies against the pinned master key),
// newest version first (semver precedence, SemVer 2.0.0 §11), then newest entry first.
// A version approved twice keeps only its newest approval (a re-approval replaces the
// checksums). Entries by any other writer never count (the fold lists them as
// ignored); approvals whose version is not semver-like or whose data does not decode
// are dropped. The list is never nil.
func (v *View) Releases() []fold.Release {
	byVersion := map[string]fold.Release{}
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		if e.Type != fold.TypeReleaseApprove || e.Writer != fold.MasterWriter || !v.State.Counts(e.Hash()) {
			continue
		}
		r, ok := fold.ParseRelease(e)
		if !ok {
			continue
		}
		key := fold.CanonicalVersion(r.Version)
		if old, seen := byVersion[key]; !seen || old.HLC < r.HLC || (old.HLC == r.HLC && old.Hash < r.Hash) {
			byVersion[key] = r
		}
	}
	out := make([]fold.Release, 0, len(byVersion))
	for _, r := range byVersion {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := fold.CompareVersions(out[i].Version, out[j].Version); c != 0 {
			return c > 0
		}
		return out[i].HLC > out[j].HLC
	})
	return out
}
