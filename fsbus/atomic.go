package fsbus

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/ferryhq/ferry/internal/fsutil"
)

// writeNew writes data to path only if path does not exist yet (objects are written
// once, docs/design.md §2 rule 2). It returns an error wrapping fs.ErrExist otherwise.
func writeNew(path string, data []byte) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("writing %s: %w", path, fs.ErrExist)
	}
	return fsutil.WriteFile(path, data, 0o644)
}
