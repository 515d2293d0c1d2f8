package fold

import (
	"encoding/hex"
	"encoding/json"
	"path"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/ledger"
)

// TypeReleaseApprove is the master's approval of a release (ADR 0005,
// docs/format.md §12): ref is the version, data is
// {"version": V, "platforms": {"GOOS/GOARCH": {"sha256": HEX, "path": "releases/…", "size": BYTES}}}.
// Only the master's entries count (minLevel); the MCP surface never writes it.
const TypeReleaseApprove = "release.approve"

// ReleasesDir is the channel folder that holds release binaries (docs/design.md §2 layout).
const ReleasesDir = "releases"

// Release is one approved release as folded from a counted release.approve entry.
type Release struct {
	Version   string                 `json:"version"`
	Platforms map[string]ReleaseFile `json:"platforms"`
	HLC       string                 `json:"hlc"`
	Hash      string                 `json:"hash"` // the approving entry's hash
	// Refused lists platforms of this approval that no update may use, with the reason
	// (no sha256, a path outside releases/, a bad platform name).
	Refused map[string]string `json:"refused,omitempty"`
	// Notes are set only on the release ApproveRelease returns: what it could not
	// check about a file (not a Go binary). Never folded.
	Notes []string `json:"notes,omitempty"`
}

// ReleaseFile is one platform's binary of a release: a slash path inside the channel
// under releases/, its sha256 (64 lower-case hex digits) and its size in bytes.
type ReleaseFile struct {
	SHA256 string `json:"sha256"`
	Path   string `json:"path"`
	Size   int64  `json:"size,omitempty"`
}

// ReleaseData is release.approve's data as written.
type ReleaseData struct {
	Version   string                 `json:"version"`
	Platforms map[string]ReleaseFile `json:"platforms"`
}

var (
	PlatformRE = lazyre.New(`^[a-z0-9]{1,20}/[a-z0-9]{1,20}$`)
	sha256RE   = lazyre.New(`^[0-9a-f]{64}$`)
)

// ParseRelease decodes a release.approve entry strictly: the data keys must be spelled
// exactly (encoding/json would match "VERSION" too, and the meaning would hang on key
// case, which the signature covers but a reader would not expect). Platforms with a
// bad name, a missing or malformed sha256 or a path outside releases/ are kept out of
// Platforms and listed in Refused.
func ParseRelease(e *ledger.Entry) (Release, bool) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(e.Data, &raw) != nil {
		return Release{}, false
	}
	var d ReleaseData
	if json.Unmarshal(raw["version"], &d.Version) != nil || !ValidVersion(d.Version) || e.Ref != d.Version {
		return Release{}, false
	}
	var plats map[string]map[string]json.RawMessage
	if json.Unmarshal(raw["platforms"], &plats) != nil {
		return Release{}, false
	}
	r := Release{Version: d.Version, Platforms: map[string]ReleaseFile{}, HLC: e.HLC, Hash: e.Hash()}
	refuse := func(p, why string) {
		if r.Refused == nil {
			r.Refused = map[string]string{}
		}
		r.Refused[p] = why
	}
	for p, f := range plats {
		var rf ReleaseFile
		_ = json.Unmarshal(f["sha256"], &rf.SHA256)
		_ = json.Unmarshal(f["path"], &rf.Path)
		_ = json.Unmarshal(f["size"], &rf.Size)
		switch {
		case !PlatformRE.MatchString(p):
			refuse(p, "platform is not GOOS/GOARCH")
		case rf.SHA256 == "":
			refuse(p, "approval carries no sha256")
		case !sha256RE.MatchString(rf.SHA256):
			refuse(p, "sha256 is not 64 lower-case hex digits")
		case CheckReleasePath(rf.Path) != nil:
			refuse(p, "path is not a file under releases/")
		default:
			r.Platforms[p] = rf
		}
	}
	return r, true
}

// CheckReleasePath checks that p is a slash path "releases/…" naming something inside
// the releases folder: local (no "..", not absolute, no backslash or colon), cleaned.
func CheckReleasePath(p string) error {
	rest, ok := strings.CutPrefix(p, ReleasesDir+"/")
	if !ok || rest == "" || path.Clean(p) != p || strings.ContainsAny(p, `\:`) || !isLocalSlash(rest) {
		return errs.Errorf(errs.Invalid, "name a file inside the channel's releases/ folder, e.g. releases/ferry-linux-amd64",
			"release path %q is not under releases/", p)
	}
	return nil
}

func isLocalSlash(p string) bool {
	if strings.HasPrefix(p, "/") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// semverRE is SemVer 2.0.0's grammar (semver.org), with an optional leading "v".
var semverRE = lazyre.New(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ValidVersion reports whether s is a SemVer 2.0.0 version, optionally with a leading
// "v" ("1.4.0", "v1.4.0-rc.1"), at most 64 bytes.
func ValidVersion(s string) bool { return len(s) <= 64 && semverRE.MatchString(s) }

// CanonicalVersion drops the leading "v" and the build metadata, which precedence
// ignores (SemVer 2.0.0 §10): "v1.2.0+abc" and "1.2.0" are one version.
func CanonicalVersion(s string) string {
	s = strings.TrimPrefix(s, "v")
	s, _, _ = strings.Cut(s, "+")
	return s
}

// CompareVersions compares two versions by SemVer 2.0.0 precedence (§11): -1 when a
// is older than b, 0 when equal, +1 when newer. A string that is not a valid version
// ("dev", an unstamped build) is older than every valid one; two invalid ones are equal.
func CompareVersions(a, b string) int {
	va, vb := ValidVersion(a), ValidVersion(b)
	switch {
	case !va && !vb:
		return 0
	case !va:
		return -1
	case !vb:
		return 1
	}
	ma, mb := semverRE.FindStringSubmatch(a), semverRE.FindStringSubmatch(b)
	for i := 1; i <= 3; i++ {
		if c := compareNumeric(ma[i], mb[i]); c != 0 {
			return c
		}
	}
	pa, pb := ma[4], mb[4]
	switch {
	case pa == pb:
		return 0
	case pa == "": // a release is newer than its pre-releases (§11.3)
		return 1
	case pb == "":
		return -1
	}
	fa, fb := strings.Split(pa, "."), strings.Split(pb, ".")
	for i := 0; i < len(fa) && i < len(fb); i++ {
		na, ea := strconv.ParseUint(fa[i], 10, 64)
		nb, eb := strconv.ParseUint(fb[i], 10, 64)
		switch {
		case ea == nil && eb == nil:
			if na != nb {
				return cmpInt(na < nb)
			}
		case ea == nil: // numeric identifiers are older than alphanumeric ones (§11.4.3)
			return -1
		case eb == nil:
			return 1
		case fa[i] != fb[i]:
			return cmpInt(fa[i] < fb[i])
		}
	}
	if len(fa) != len(fb) {
		return cmpInt(len(fa) < len(fb))
	}
	return 0
}

func compareNumeric(a, b string) int {
	if len(a) != len(b) { // no leading zeros (the grammar): longer is larger
		return cmpInt(len(a) < len(b))
	}
	if a != b {
		return cmpInt(a < b)
	}
	return 0
}

func cmpInt(less bool) int {
	if less {
		return -1
	}
	return 1
}

// HexSHA is the lower-case hex of a sha256 sum.
func HexSHA(sum []byte) string { return hex.EncodeToString(sum) }
