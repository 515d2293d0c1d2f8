package fsbus

import (
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
)

// Symbolic links inside a channel (docs/threat-model.md "Paths and links"). A synced
// folder is writable by anything on any machine sharing it: a link planted at orders/
// or ledger/<writer>/ would make the next write land outside the channel (in a home
// directory, another project). ferry never writes through a link below the channel root
// — the root itself is the user's choice and may be a link — and `ferry ledger verify`
// and `ferry doctor` list every link they find. Reads need no such rule: what a link
// points at counts only if it verifies against a signed entry, like any other file.

// checkLinks returns invalid when a path a write is about to touch — each object file
// of objs and the writer's own segment — or a directory between it and the channel
// root is a symbolic link. Components that do not exist yet are fine (they are made as
// real directories).
func (s *Session) checkLinks(objs []pendingObject) error {
	paths := []string{s.Ledger.CurrentPath(s.Name, s.Device)}
	for _, o := range objs {
		paths = append(paths, o.path)
	}
	for _, p := range paths {
		if l := fsutil.LinkBelow(s.Root, p); l != "" {
			return errs.Errorf(errs.Invalid, "replace the link with a real directory or file; `ferry doctor` lists every link in the channel",
				"%s in the channel is a symbolic link: ferry never writes through links (nothing was written)", l)
		}
	}
	return nil
}
