package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LinkBelow returns the slash path (relative to root) of the first component of p
// below root that is a symbolic link, or "" when there is none or p is not under root.
func LinkBelow(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return ""
	}
	cur := root
	for _, c := range strings.Split(r, string(filepath.Separator)) {
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if rel, err := filepath.Rel(root, cur); err == nil {
				return filepath.ToSlash(rel)
			}
			return cur
		}
	}
	return ""
}
