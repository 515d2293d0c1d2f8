package fsbus

import "github.com/ferryhq/ferry/ledger"

// Ask is a question to the owner as folded (issue 3; ask_fold.go owns it).
type Ask struct {
	ID string `json:"id"`
}

// foldAsks folds ask.raise and ask.answer chains into st.Asks.
func foldAsks(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
}
