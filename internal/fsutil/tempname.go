package fsutil

import "strings"

// IsTempName reports whether a file name is a temporary file of a write in progress —
// ferry's own or a sync tool's — that readers and watchers ignore (docs/design.md
// §2 rule 3):
//
//   - a name starting with "." — WriteFile's .ferry-<name>-<rand>.tmp, Syncthing's
//     .syncthing.<name>.tmp, Google Drive's .tmp.drivedownload, Dropbox's .dropbox.cache;
//   - a name starting with "~" — Syncthing's ~syncthing~<name>.tmp (Windows), and the
//     ~$<name> owner files Office and OneDrive leave beside a file being written;
//   - a name ending in ".tmp" (any case), ".partial" or ".crdownload" — the ledger's
//     own temp files, and the partial downloads of Dropbox, OneDrive and browsers;
//   - a torn tail moved aside by a segment's writer (<device>.torn-<n>), which no
//     reader folds.
//
// Conflict copies are not temp names: they are evidence and are read (rule 8).
func IsTempName(name string) bool {
	if name == "" || name[0] == '.' || name[0] == '~' {
		return true
	}
	lower := strings.ToLower(name)
	for _, suf := range []string{".tmp", ".partial", ".crdownload"} {
		if strings.HasSuffix(lower, suf) {
			return true
		}
	}
	return strings.Contains(lower, ".torn-")
}
