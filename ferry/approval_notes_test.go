package main

import (
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
)

// TestApprovalNotes: an approval that wrote nothing gets no note; one replacing an
// approval of the same version says whether its files differ or only the version's
// spelling; one older than the newest approved says nothing will update to it.
func TestApprovalNotes(t *testing.T) {
	t.Parallel()
	files := map[string]fold.ReleaseFile{"linux/amd64": {SHA256: "aa", Path: "releases/f", Size: 3}}
	other := map[string]fold.ReleaseFile{"linux/amd64": {SHA256: "bb", Path: "releases/f", Size: 3}}
	prior := []fold.Release{
		{Version: "1.2.0", Platforms: files, HLC: "h2", Hash: "sha256:2"},
		{Version: "0.9.0", Platforms: files, HLC: "h1", Hash: "sha256:1"},
	}
	for _, c := range []struct {
		name string
		r    fold.Release
		want []string // substrings, one per note
	}{
		{"the same approval again", fold.Release{Version: "1.2.0", Platforms: files, Hash: "sha256:2"}, nil},
		{"other files", fold.Release{Version: "1.2.0", Platforms: other, Hash: "sha256:3"}, []string{"replaces the approval of 1.2.0 made at h2 (other files or checksums)"}},
		{"the same files, v spelled", fold.Release{Version: "v1.2.0", Platforms: files, Hash: "sha256:4"}, []string{"replaces the approval of 1.2.0 made at h2 (the same files, the version written v1.2.0)"}},
		{"older than the newest", fold.Release{Version: "0.9.0", Platforms: other, Hash: "sha256:5"},
			[]string{"replaces the approval of 0.9.0 made at h1 (other files or checksums)", "0.9.0 is older than the approved 1.2.0"}},
		{"newer", fold.Release{Version: "1.3.0", Platforms: files, Hash: "sha256:6"}, nil},
	} {
		got := approvalNotes(prior, &c.r)
		ok := len(got) == len(c.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.Contains(got[i], c.want[i])
		}
		if !ok {
			t.Errorf("%s: notes %q, want %q", c.name, got, c.want)
		}
	}
}
