package fsbus

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// dispatchContract builds the contract of a new order: it fingerprints the pointers
// and the diff in the workspace, validates the schema, and checks a read-only order's
// diff. It returns the warnings to show the author.
func (s *Session) dispatchContract(opt *NewOrderOptions) (*fold.Contract, []string, error) {
	c := fold.Contract{Schema: opt.Schema, Task: opt.Task, ReadOnly: opt.ReadOnly, Windows: opt.Windows, Heavy: opt.Heavy, Hints: opt.Hints}
	if err := contract.ValidateContract(&c); err != nil {
		return nil, nil, err
	}
	if len(opt.Pointers) == 0 && opt.Diff == "" {
		return &c, nil, nil
	}
	ws, err := s.workspace()
	if err != nil {
		return nil, nil, err
	}
	specs := append([]string(nil), opt.Pointers...)
	if opt.Diff != "" {
		specs = append(specs, opt.Diff)
	}
	ptrs, warn, err := contract.FingerprintPointers(ws, specs, time.Now())
	if err != nil {
		return nil, nil, err
	}
	c.Pointers = ptrs
	if opt.Diff != "" {
		d := ptrs[len(ptrs)-1]
		d.FirstLine, d.LastLine = 0, 0
		c.Diff, c.Pointers = &d, ptrs[:len(ptrs)-1]
		if len(c.Pointers) == 0 {
			c.Pointers = nil
		}
		root, err := contract.OpenRoot(ws)
		if err != nil {
			return nil, nil, err
		}
		files, derr := contract.ReadDiffFiles(root, d.Path)
		root.Close()
		if derr != nil {
			return nil, nil, errs.Errorf(errs.Invalid, "point --diff at a unified diff (`git diff > review.diff`) with at least one changed line per file", "diff %s: %v", d.Path, derr)
		}
		if miss := contract.Uncovered(files, c.Pointers); len(miss) > 0 && c.ReadOnly {
			warn = append(warn, fmt.Sprintf("the diff does not cover %s: a reviewer whose checkout differs cannot fall back to the diff", strings.Join(miss, ", ")))
		}
	}
	return &c, warn, nil
}

// workspace resolves the session's workspace root (Session.Workspace, else the git
// top-level of the current directory, else the current directory).
func (s *Session) workspace() (string, error) {
	return contract.ResolveWorkspace(s.Workspace)
}
