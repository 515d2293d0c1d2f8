package fsbus

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/selfupdate"
	"github.com/ferryhq/ferry/ledger"
)

// Signed updates (ADR 0005): the master approves a release with a
// release.approve entry naming, per platform, a binary under the channel's releases/
// folder and its sha256; `ferry update check` reports a newer approved release;
// `ferry update apply` verifies the approval's signature (only counted master entries
// are releases) and the binary's sha256 and swaps the running binary for it. Nothing is
// downloaded: the binary arrives with the channel folder like every other file.

// ApproveRelease writes a release.approve for version (SemVer 2.0.0, optional leading
// "v") naming, per platform ("GOOS/GOARCH"), a file under the channel's releases/
// folder; it computes each file's sha256 and size itself. Master only. Errors:
// invalid for a version that is not semver-like, no platforms, a platform that is not
// GOOS/GOARCH or not a pair Go builds for (KnownPlatform), or
// a path not under releases/ (a path that leaves releases/ through "..", an absolute
// path or a symlink is refused by os.Root); not_found for a missing file; invalid for
// something that is not a regular file; invalid for a Go binary built for another
// platform or stamped with another version (selfupdate.CheckBinary: a file it cannot
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
		if !selfupdate.Known(p) {
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
// folder, checks it is a binary for platform carrying version (selfupdate.CheckBinary),
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
	note, err := selfupdate.CheckBinary(f, p, platform, version, sameVersion)
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
	slices.Sort(out.Refused)
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
// bits) and renames it over the binary (selfupdate.Replace); opt.DryRun stops before
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
		opt.Platform = selfupdate.Platform()
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
	tmp, sum, n, err := selfupdate.CopyBeside(exe, f)
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
	if err := selfupdate.Replace(exe, tmp, runtime.GOOS); err != nil {
		os.Remove(tmp)
		return nil, &errs.Error{Category: errs.Internal, Err: err, Message: fmt.Sprintf("replacing %s: %v", exe, err),
			Hint: "check that the binary's folder is writable; the running binary is unchanged"}
	}
	res.Applied = true
	return res, nil
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
	slices.SortFunc(out, func(a, b fold.Release) int {
		return cmp.Or(fold.CompareVersions(b.Version, a.Version), strings.Compare(b.HLC, a.HLC))
	})
	return out
}

// sameVersion reports whether two version texts name one version (docs/format.md §11).
func sameVersion(a, b string) bool { return fold.CanonicalVersion(a) == fold.CanonicalVersion(b) }
