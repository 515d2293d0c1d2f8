package fold

import (
	"errors"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// Handin is a hand-in as folded (docs/design.md §2): a reference to work handed in —
// a commit, branch or path in the work repo, never the work itself — and a note, from
// the object handins/<writer>/<id>.json that its handin.add entry names.
type Handin struct {
	ID   string `json:"id"` // h- id, the entry's ref
	By   string `json:"by"`
	Ref  string `json:"ref"` // commit, branch or path ("" while Missing)
	Note string `json:"note,omitempty"`
	HLC  string `json:"hlc"`
	// Missing is true while the object file has not arrived (pending sync).
	Missing bool `json:"missing,omitempty"`
	hash    string
}

// foldHandins folds handin.add entries into st.Handins. An entry counts when its ref is
// an h- id and the object it names is the file handins/<writer>/<ref>.json with that
// hash, that id and that author; a file not yet arrived leaves the hand-in Missing. Two
// entries under one id resolve like a fork: the lower entry hash counts.
func foldHandins(st *State, in FoldInput, entries []*ledger.Entry, ignore func(*ledger.Entry, string)) {
	first := map[string]*ledger.Entry{}
	for _, e := range entries {
		if e.Type != TypeHandinAdd {
			continue // other handin.* types: not folded by this binary
		}
		if !ValidID(e.Ref) || !strings.HasPrefix(e.Ref, PrefixHandin) {
			ignore(e, "handin.add with a bad hand-in id")
			continue
		}
		d := st.dataOf(e)
		h := &Handin{ID: e.Ref, By: e.Writer, HLC: e.HLC, hash: e.Hash()}
		if !loadHandinObject(h, in, d.Object) {
			ignore(e, "hand-in object differs from the hash its handin.add names")
			continue
		}
		if prev := st.Handins[e.Ref]; prev != nil {
			if prev.hash < h.hash {
				ignore(e, "second handin.add for an existing hand-in id")
				continue
			}
			ignore(first[e.Ref], "second handin.add for an existing hand-in id")
		}
		st.Handins[e.Ref], first[e.Ref] = h, e
	}
}

// loadHandinObject fills h from its object file. It reports false when the file
// exists but its hash, id or author differs from what the entry says; a file not yet
// arrived leaves h Missing.
func loadHandinObject(h *Handin, in FoldInput, object string) bool {
	if object == "" {
		return false
	}
	if in.Objects == nil {
		h.Missing = true
		return true
	}
	c, hash, err := in.Objects(h.By, h.ID)
	if err != nil {
		if errors.Is(err, ErrObjectMissing) {
			h.Missing = true
			return true
		}
		return false
	}
	if hash != object {
		return false
	}
	var obj HandinObject
	if err := JSONUnmarshal(c, &obj); err != nil || obj.ID != h.ID || obj.Author != h.By {
		return false
	}
	h.Ref, h.Note = obj.Ref, obj.Note
	return true
}
