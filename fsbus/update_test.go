package fsbus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/selfupdate"
)

// updateWorld is a channel with an orchestrator and a member, a release binary in
// releases/ and a copy of a real built binary (this test binary) standing in for the
// running ferry. The release is that binary behind a marker line.
type updateWorld struct {
	c        *Channel
	ss       map[string]*Session
	exe      string
	exeBytes []byte
	rel      []byte
}

func newUpdateWorld(t *testing.T) *updateWorld {
	t.Helper()
	c, _, ss := primaryWorld(t, map[string]string{"olga": "orchestrator", "mike": "member"})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	w := &updateWorld{c: c, ss: ss, exe: filepath.Join(t.TempDir(), "ferry"), exeBytes: bin}
	if err := os.WriteFile(w.exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// A marker line before the binary: the release differs from it, and its Go build
	// information cannot be read (which version a binary reports is selfupdate's
	// TestStamp and ferry's TestUpdateApplyReplacesBinary, with real builds).
	w.rel = append([]byte("ferry release 1.1.0\n"), bin...)
	if err := os.WriteFile(filepath.Join(c.Root, "releases", "ferry-new"), w.rel, 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// exeUnchanged fails unless the stand-in binary still holds its old bytes and no temp
// file was left beside it.
func (w *updateWorld) exeUnchanged(t *testing.T) {
	t.Helper()
	got, err := os.ReadFile(w.exe)
	if err != nil || !bytes.Equal(got, w.exeBytes) {
		t.Fatalf("the binary changed (err %v)", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(w.exe))
	if len(ents) != 1 {
		t.Fatalf("left beside the binary: %v", ents)
	}
}

func sumHex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestUpdateApproveCheckApply: the owner approves 1.1.0 for this platform (the sha256
// computed from the file in releases/); check offers it to 1.0.0 and not to 1.1.0 or a
// newer binary; a member may not apply; an orchestrator applies it and the binary is
// replaced by the approved bytes, still executable; a second apply has nothing to do.
func TestUpdateApproveCheckApply(t *testing.T) {
	t.Parallel()
	w := newUpdateWorld(t)
	plat := selfupdate.Platform()
	r, err := w.ss[fold.MasterWriter].ApproveRelease("1.1.0", map[string]string{plat: "releases/ferry-new"})
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Platforms[plat]; f.SHA256 != sumHex(w.rel) || f.Size != int64(len(w.rel)) || f.Path != "releases/ferry-new" {
		t.Fatalf("approval %+v", r)
	}
	n := primaryEntries(t, w.c)
	if again, err := w.ss[fold.MasterWriter].ApproveRelease("1.1.0", map[string]string{plat: "releases/ferry-new"}); err != nil || again.Hash != r.Hash || primaryEntries(t, w.c) != n {
		t.Fatalf("re-approving the same files wrote again: %v", err)
	}
	v := primaryLoad(t, w.c)
	for cur, want := range map[string]bool{"1.0.0": true, "dev": true, "1.1.0-rc.1": true, "1.1.0": false, "v1.1.0": false, "1.2.0": false} {
		chk := v.CheckUpdate(cur, plat)
		if chk.Available != want || chk.Latest != "1.1.0" {
			t.Errorf("check from %s: %+v; want available=%v", cur, chk, want)
		}
	}
	if chk := v.CheckUpdate("1.0.0", "plan9/mips"); chk.Available || chk.Latest != "" {
		t.Errorf("another platform offered %+v", chk)
	}

	if _, err := w.ss["mike"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat}); !errs.Is(err, errs.Denied) {
		t.Fatalf("member apply: %v", err)
	}
	w.exeUnchanged(t)
	res, err := w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat})
	if err != nil || !res.Applied || res.To != "1.1.0" || res.SHA256 != sumHex(w.rel) {
		t.Fatalf("apply: %+v %v", res, err)
	}
	got, _ := os.ReadFile(w.exe)
	if !bytes.Equal(got, w.rel) {
		t.Fatal("the binary does not hold the release")
	}
	if st, _ := os.Stat(w.exe); runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("mode %v", st.Mode())
	}
	if ents, _ := os.ReadDir(filepath.Dir(w.exe)); len(ents) != 1 {
		t.Fatalf("left beside the binary: %v", ents)
	}
	if res, err := w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.1.0", Platform: plat}); err != nil || res.Applied {
		t.Fatalf("apply at the newest: %+v %v", res, err)
	}
}

// TestUpdateRefusals: each refusal names its category, writes no entry and leaves the
// binary alone: a tampered file (sha256 mismatch), an approval by a non-master writer
// (ignored by the fold), an approval without a checksum or with a path outside
// releases/ (refused by check and apply), and approve's own checks.
func TestUpdateRefusals(t *testing.T) {
	t.Parallel()
	plat := selfupdate.Platform()
	t.Run("tampered", func(t *testing.T) {
		t.Parallel()
		w := newUpdateWorld(t)
		if _, err := w.ss[fold.MasterWriter].ApproveRelease("1.1.0", map[string]string{plat: "releases/ferry-new"}); err != nil {
			t.Fatal(err)
		}
		// Same size, other bytes: not the approved file (invalid, "do not install").
		bad := append([]byte{}, w.rel...)
		bad[len(bad)-2] ^= 1
		if err := os.WriteFile(filepath.Join(w.c.Root, "releases", "ferry-new"), bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat})
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), "differs from the approved checksum: do not install") {
			t.Fatalf("tampered apply: %v", err)
		}
		w.exeUnchanged(t)
		// Another size: it may still be arriving (retry_needed, "wait for the sync").
		if err := os.WriteFile(filepath.Join(w.c.Root, "releases", "ferry-new"), w.rel[:len(w.rel)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat, DryRun: true})
		if !errs.Is(err, errs.RetryNeeded) || !strings.Contains(err.Error(), "wait for the sync") {
			t.Fatalf("half-synced apply: %v", err)
		}
		w.exeUnchanged(t)
	})
	t.Run("version check and dry run", func(t *testing.T) {
		t.Parallel()
		w := newUpdateWorld(t)
		if _, err := w.ss[fold.MasterWriter].ApproveRelease("1.1.0", map[string]string{plat: "releases/ferry-new"}); err != nil {
			t.Fatal(err)
		}
		reports := func(v string, err error) func(string) (string, error) {
			return func(p string) (string, error) {
				if b, rerr := os.ReadFile(p); rerr != nil || !bytes.Equal(b, w.rel) {
					t.Errorf("CheckVersion got %s, not the verified copy (%v)", p, rerr)
				}
				return v, err
			}
		}
		_, err := w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat, CheckVersion: reports("1.0.5", nil)})
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "reports version 1.0.5, not the approved 1.1.0") {
			t.Fatalf("mis-stamped apply: %v", err)
		}
		w.exeUnchanged(t)
		_, err = w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat, CheckVersion: reports("", os.ErrPermission)})
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "does not run here") {
			t.Fatalf("apply of a binary that does not run: %v", err)
		}
		w.exeUnchanged(t)
		res, err := w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat, DryRun: true, CheckVersion: reports("v1.1.0", nil)})
		if err != nil || res.Applied || !res.DryRun || res.To != "1.1.0" || res.SHA256 != sumHex(w.rel) {
			t.Fatalf("dry run: %+v %v", res, err)
		}
		w.exeUnchanged(t)
		// The binary already is the approved file (it reports another version): check
		// offers nothing and apply does nothing.
		if err := os.WriteFile(w.exe, w.rel, 0o755); err != nil {
			t.Fatal(err)
		}
		chk := primaryLoad(t, w.c).CheckUpdate("1.0.0", plat)
		chk.NoteInstalled(w.exe)
		if chk.Available || !chk.Installed {
			t.Fatalf("check of the installed file: %+v", chk)
		}
		res, err = w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat})
		if err != nil || res.Applied || !res.Installed || res.Latest != "1.1.0" {
			t.Fatalf("apply over the installed file: %+v %v", res, err)
		}
	})
	t.Run("unknown platform", func(t *testing.T) {
		t.Parallel()
		w := newUpdateWorld(t)
		for _, p := range []string{"foo/bar", "linux/foo", "windows/mips"} {
			if _, err := w.ss[fold.MasterWriter].ApproveRelease("1.1.0", map[string]string{p: "releases/ferry-new"}); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not a GOOS/GOARCH pair Go builds for") {
				t.Errorf("approve for %s: %v", p, err)
			}
		}
		if len(primaryLoad(t, w.c).Releases()) != 0 {
			t.Fatal("a refused approval was written")
		}
	})
	t.Run("unseated key under an orchestrator's name", func(t *testing.T) {
		t.Parallel()
		w := newUpdateWorld(t)
		if _, err := w.ss[fold.MasterWriter].ApproveRelease("1.1.0", map[string]string{plat: "releases/ferry-new"}); err != nil {
			t.Fatal(err)
		}
		impostor := &Session{Channel: w.c, Name: "olga", Signer: w.ss["mike"].Signer}
		if _, err := impostor.ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat}); !errs.Is(err, errs.Denied) {
			t.Fatalf("apply with a key the owner did not seat: %v", err)
		}
		w.exeUnchanged(t)
	})
	t.Run("non-master approval ignored", func(t *testing.T) {
		t.Parallel()
		w := newUpdateWorld(t)
		d := fold.ReleaseData{Version: "9.0.0", Platforms: map[string]fold.ReleaseFile{plat: {SHA256: sumHex(w.rel), Path: "releases/ferry-new"}}}
		e := primaryAppend(t, w.ss["olga"], fold.TypeReleaseApprove, "9.0.0", d)
		v := primaryLoad(t, w.c)
		if len(v.Releases()) != 0 || v.CheckUpdate("1.0.0", plat).Available || v.State.Counts(e.Hash()) {
			t.Fatalf("an orchestrator's approval counted: %+v", v.Releases())
		}
		if res, err := w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat}); err != nil || res.Applied {
			t.Fatalf("apply: %+v %v", res, err)
		}
		w.exeUnchanged(t)
	})
	for name, f := range map[string]fold.ReleaseFile{
		"missing checksum": {Path: "releases/ferry-new"},
		"short checksum":   {SHA256: "abc", Path: "releases/ferry-new"},
		"path traversal":   {SHA256: strings.Repeat("0", 64), Path: "releases/../channel.toml"},
		"absolute path":    {SHA256: strings.Repeat("0", 64), Path: "/etc/passwd"},
		"outside releases": {SHA256: strings.Repeat("0", 64), Path: "channel.toml"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newUpdateWorld(t)
			primaryAppend(t, w.ss[fold.MasterWriter], fold.TypeReleaseApprove, "2.0.0", fold.ReleaseData{Version: "2.0.0", Platforms: map[string]fold.ReleaseFile{plat: f}})
			chk := primaryLoad(t, w.c).CheckUpdate("1.0.0", plat)
			if chk.Available || len(chk.Refused) != 1 || !strings.HasPrefix(chk.Refused[0], "2.0.0: ") {
				t.Fatalf("check: %+v", chk)
			}
			if _, err := w.ss["olga"].ApplyUpdate(ApplyOptions{Exe: w.exe, Current: "1.0.0", Platform: plat}); !errs.Is(err, errs.Invalid) {
				t.Fatalf("apply: %v", err)
			}
			w.exeUnchanged(t)
		})
	}
	t.Run("approve checks", func(t *testing.T) {
		t.Parallel()
		w := newUpdateWorld(t)
		outside := filepath.Join(t.TempDir(), "evil")
		if err := os.WriteFile(outside, []byte("evil"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(w.c.Root, "releases", "link")); err != nil && runtime.GOOS != "windows" {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(w.c.Root, "releases", "dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		n := primaryEntries(t, w.c)
		for _, tc := range []struct {
			who, version, plat, path string
			cat                      errs.Category
		}{
			{fold.MasterWriter, "1.1", plat, "releases/ferry-new", errs.Invalid},
			{fold.MasterWriter, "latest", plat, "releases/ferry-new", errs.Invalid},
			{fold.MasterWriter, "1.1.0", "linux", "releases/ferry-new", errs.Invalid},
			{fold.MasterWriter, "1.1.0", plat, "releases/../channel.toml", errs.Invalid},
			{fold.MasterWriter, "1.1.0", plat, "../ferry-new", errs.Invalid},
			{fold.MasterWriter, "1.1.0", plat, "/etc/passwd", errs.Invalid},
			{fold.MasterWriter, "1.1.0", plat, "releases/link", errs.Invalid},
			{fold.MasterWriter, "1.1.0", plat, "releases/dir", errs.Invalid},
			{fold.MasterWriter, "1.1.0", plat, "releases/nope", errs.NotFound},
			{"olga", "1.1.0", plat, "releases/ferry-new", errs.Denied},
		} {
			if runtime.GOOS == "windows" && strings.HasSuffix(tc.path, "link") {
				continue
			}
			_, err := w.ss[tc.who].ApproveRelease(tc.version, map[string]string{tc.plat: tc.path})
			if !errs.Is(err, tc.cat) {
				t.Errorf("%+v: %v; want %s", tc, err, tc.cat)
			}
		}
		if _, err := w.ss[fold.MasterWriter].ApproveRelease("1.1.0", nil); !errs.Is(err, errs.Invalid) {
			t.Errorf("no platforms: %v", err)
		}
		if primaryEntries(t, w.c) != n {
			t.Fatal("a refused approval wrote an entry")
		}
	})
}

// TestUpdateOlderNotOffered: with 1.2.0 and 1.10.0 approved, a 1.10.0 binary is offered
// nothing (semver, not string order), a 1.3.0 binary is offered 1.10.0, and a later
// re-approval of a version replaces its checksum.
func TestUpdateOlderNotOffered(t *testing.T) {
	t.Parallel()
	w := newUpdateWorld(t)
	plat := selfupdate.Platform()
	m := w.ss[fold.MasterWriter]
	for _, ver := range []string{"1.10.0", "1.2.0"} {
		if _, err := m.ApproveRelease(ver, map[string]string{plat: "releases/ferry-new"}); err != nil {
			t.Fatal(err)
		}
	}
	v := primaryLoad(t, w.c)
	if chk := v.CheckUpdate("1.10.0", plat); chk.Available {
		t.Fatalf("older offered: %+v", chk)
	}
	if chk := v.CheckUpdate("1.3.0", plat); !chk.Available || chk.Latest != "1.10.0" {
		t.Fatalf("check: %+v", chk)
	}
	if err := os.WriteFile(filepath.Join(w.c.Root, "releases", "ferry-2"), []byte("two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ApproveRelease("1.10.0", map[string]string{plat: "releases/ferry-2"}); err != nil {
		t.Fatal(err)
	}
	rs := primaryLoad(t, w.c).Releases()
	if len(rs) != 2 || rs[0].Version != "1.10.0" || rs[0].Platforms[plat].SHA256 != sumHex([]byte("two")) {
		t.Fatalf("releases %+v", rs)
	}
}

// TestReplaceExecutableWindowsDance runs the Windows rename dance on this OS: the old
// binary moves to .old, the new one is renamed in, and selfupdate.CleanOld removes .old.
func TestReplaceExecutableWindowsDance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe, tmp := filepath.Join(dir, "ferry.exe"), filepath.Join(dir, ".ferry.exe.new-1")
	os.WriteFile(exe, []byte("old"), 0o755)
	os.WriteFile(exe+".old", []byte("older"), 0o755)
	os.WriteFile(tmp, []byte("new"), 0o755)
	if err := selfupdate.Replace(exe, tmp, "windows"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(exe); string(b) != "new" {
		t.Fatalf("exe holds %q", b)
	}
	if b, _ := os.ReadFile(exe + ".old"); string(b) != "old" {
		t.Fatalf(".old holds %q", b)
	}
	selfupdate.CleanOld(exe)
	if _, err := os.Stat(exe + ".old"); !os.IsNotExist(err) {
		t.Fatalf(".old left: %v", err)
	}
	// A failed rename-in moves the old binary back.
	if err := selfupdate.Replace(exe, filepath.Join(dir, "missing"), "windows"); err == nil {
		t.Fatal("renaming a missing file in succeeded")
	}
	if b, _ := os.ReadFile(exe); string(b) != "new" {
		t.Fatalf("after a failed dance exe holds %q", b)
	}
}

// TestCompareVersions: SemVer 2.0.0 §11 precedence, and non-versions are oldest.
func TestCompareVersions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0}, {"v1.0.0", "1.0.0", 0}, {"1.0.0+abc", "1.0.0", 0},
		{"1.0.0", "2.0.0", -1}, {"1.10.0", "1.9.0", 1}, {"1.0.10", "1.0.9", 1},
		{"1.0.0-alpha", "1.0.0", -1}, {"1.0.0-alpha", "1.0.0-alpha.1", -1},
		{"1.0.0-alpha.1", "1.0.0-alpha.beta", -1}, {"1.0.0-beta.2", "1.0.0-beta.11", -1},
		{"1.0.0-rc.1", "1.0.0-beta.11", 1}, {"dev", "0.0.1", -1}, {"dev", "(devel)", 0},
	} {
		if got := fold.CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d; want %d", tc.a, tc.b, got, tc.want)
		}
		if got := fold.CompareVersions(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d; want %d", tc.b, tc.a, got, -tc.want)
		}
	}
	for _, bad := range []string{"1", "1.2", "01.2.3", "1.2.3-", "1.2.3-01", "v", strings.Repeat("1", 70) + ".0.0"} {
		if fold.ValidVersion(bad) {
			t.Errorf("%q is valid", bad)
		}
	}
}
