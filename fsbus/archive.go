package fsbus

import (
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/archive"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// MoveFrozen moves to archive/ledger/ the frozen files of this writer's chain on this
// device, or with all (master only) of every chain, that a counting checkpoint past its
// grace covers (docs/format.md §21 "Moving frozen files"); it returns the paths written.
func (s *Session) MoveFrozen(all bool) ([]string, error) {
	if all && s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner", "only the master moves other writers' files")
	}
	if !all && len(ledger.ChainFiles(s.Root, s.Name, s.Device)) < 2 {
		return nil, nil
	}
	v, err := s.Load()
	if err != nil {
		return nil, err
	}
	moved, _, err := s.moveFrozen(v, all)
	return moved, err
}

// moveFrozen is MoveFrozen over the view v of the last Load (archive.Run).
func (s *Session) moveFrozen(v *View, all bool) (moved, waiting []string, err error) {
	if s.ownerCheckpoint == nil {
		return nil, nil, nil
	}
	var chains []ledger.Chain // nil: every chain the cut names
	if !all {
		chains = []ledger.Chain{{Writer: s.Name, Device: s.Device}}
	}
	grace, disputed := s.archiveRules(v)
	return archive.Run(s.Ledger, s.ownerCheckpoint, s.epochSeenPath(), grace, s.now(), disputed, chains)
}

// archiveRules returns the archive grace in force in v and whether a dispute of the
// owner's checkpoint stands.
func (s *Session) archiveRules(v *View) (time.Duration, bool) {
	grace := time.Duration(s.EffectivePolicy(v).Policy.ArchiveGraceSeconds()) * time.Second
	return grace, s.ownerCheckpoint != nil && len(fold.StandingDisputes(v.Snapshot.Entries, v.State, s.ownerCheckpoint.Chain)) > 0
}

// ArchiveMove is `ferry archive move DIR`: archive.MoveOut of the channel's archive/ to
// dir, returning the paths written and the files refused, one line each. Errors as
// MoveOut's, and denied for anyone but the master.
func (s *Session) ArchiveMove(dir string) (moved, refused []string, err error) {
	if s.Name != fold.MasterWriter {
		return nil, nil, errs.Errorf(errs.Denied, "run it as the owner", "only the master takes the archive out of the folder")
	}
	v, err := s.Load()
	if err != nil {
		return nil, nil, err
	}
	grace, disputed := s.archiveRules(v)
	return archive.MoveOut(s.Ledger, s.ownerCheckpoint, dir, grace, s.now(), disputed)
}
