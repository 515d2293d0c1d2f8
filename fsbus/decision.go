package fsbus

import (
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// DecisionRecord records a decision (decision.record, orchestrator level; docs/design.md §2):
// one line, trimmed, 1–200 bytes, held in the entry itself (data.line; no
// object file) under a fresh d- id in ref. Errors: invalid for a bad line; denied
// below orchestrator; conflict for a key used with other arguments. A replayed key
// returns the decision the first call recorded and writes nothing.
func (s *Session) DecisionRecord(line, key string) (*fold.Decision, error) {
	line = strings.TrimSpace(line)
	if err := checkShortLine("decision", line, fold.MaxDecisionLine); err != nil {
		return nil, err
	}
	args := argsHash(primaryCall{Call: fold.TypeDecisionRecord, Data: fold.PrimaryData{Line: line}})
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if ref, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			id = ref
			return nil, nil, err
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeDecisionRecord); err != nil {
			return nil, nil, err
		}
		id = fold.NewID(fold.PrefixDecision)
		d := fold.PrimaryData{Line: line}
		if key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: fold.TypeDecisionRecord, Ref: id, Data: mustJSON(d), Idem: key}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	st := s.viewWithEntry(v, e).State
	for i := range st.Decisions {
		if st.Decisions[i].ID == id {
			return &st.Decisions[i], nil
		}
	}
	return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify`", "decision %s is not in the state after writing it", id)
}
