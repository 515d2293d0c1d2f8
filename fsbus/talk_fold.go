package fsbus

import "github.com/ferryhq/ferry/ledger"

// Message is a message as folded (issue 3; talk_fold.go owns it).
type Message struct {
	ID string `json:"id"`
}

// foldTalk folds msg.post and msg.ack entries into st.Messages.
func foldTalk(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
}
