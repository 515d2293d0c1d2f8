package fsbus

import "github.com/ferryhq/ferry/ledger"

// Primary is the primary role as folded (issue 3; primary_fold.go owns it).
type Primary struct {
	Holder string `json:"holder,omitempty"`
}

// Decision is one decision.record line.
type Decision struct {
	ID string `json:"id"`
}

// foldPrimary folds primary.take/release/brief and presence.standby entries.
func foldPrimary(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
}

// foldDecisions folds decision.record entries into st.Decisions, newest first.
func foldDecisions(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
}
