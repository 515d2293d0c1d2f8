package fsbus

import "github.com/ferryhq/ferry/ledger"

// Handin is a hand-in reference as folded (issue 3; handin_fold.go owns it).
type Handin struct {
	ID string `json:"id"`
}

// foldHandins folds handin.add entries into st.Handins.
func foldHandins(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
}
