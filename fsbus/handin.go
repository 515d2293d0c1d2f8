package fsbus

import (
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/ledger"
)

// handinCall is what data.args hashes for `handin add` (docs/format.md §15).
type handinCall struct {
	Call string `json:"call"`
	Note string `json:"note,omitempty"`
	Ref  string `json:"ref"`
}

// HandinAdd names work handed in (handin.add, worker level — the one thing a worker
// writes besides its join and acks; docs/design.md §2): ref is a commit, branch or
// path (one line, trimmed, 1–500 characters), the note at most 2,000 bytes. It publishes the
// signed object handins/<s>/<h-id>.json, then appends handin.add naming the object's
// hash. A submit may name the hand-in's id (or a unique prefix) as its reference.
// Errors: invalid for a bad ref or note; denied below worker; conflict for a key used
// with other arguments. A replayed key returns the first call's hand-in and writes
// nothing.
func (s *Session) HandinAdd(ref string, opt NoteOptions) (*fold.Handin, error) {
	ref, note, key := strings.TrimSpace(ref), strings.TrimSpace(opt.Note), opt.Key
	if err := checkShortLine("reference", ref, MaxReference); err != nil {
		return nil, err
	}
	if err := checkCap("hand-in note", note, MaxNote, unitBytes, "keep the note short; the work stays in the work repo"); err != nil {
		return nil, err
	}
	args := argsHash(handinCall{Call: fold.TypeHandinAdd, Note: note, Ref: ref})
	var id string
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		if r, replay, err := s.checkIdem(v.State, key, args); err != nil || replay {
			id = r
			return nil, nil, err
		}
		if err := fold.CheckLevel(s.Name, v.State.LevelOf(s.Name), fold.TypeHandinAdd); err != nil {
			return nil, nil, err
		}
		id = fold.NewID(fold.PrefixHandin)
		obj := &fold.HandinObject{Envelope: fold.Envelope{V: 1, ID: id, Author: s.Name, Device: s.Device}, Ref: ref, Note: note}
		data, hash, err := sealObject(obj, func(sig string) { obj.Sig = sig }, s.Signer, s.Project())
		if err != nil {
			return nil, nil, err
		}
		d := fold.EntryData{Object: hash}
		if key != "" {
			d.Args = args
		}
		return &ledger.Draft{Type: fold.TypeHandinAdd, Ref: id, Data: mustJSON(d), Idem: key},
			[]pendingObject{{path: verify.ObjectPath(s.Root, s.Name, id), data: data}}, nil
	})
	if err != nil {
		return nil, err
	}
	if h := s.viewWithEntry(v, e).State.Handins[id]; h != nil {
		return h, nil
	}
	return nil, errs.Errorf(errs.Internal, "run `ferry ledger verify`", "hand-in %s is not in the state after writing it", id)
}

// handinRefRe matches a reference written as a hand-in id or a prefix of one.
var handinRefRe = lazyre.New(`^h-[0-9a-hjkmnp-tv-z]{1,13}$`)

// resolveHandinRef returns a submit's reference with a hand-in id prefix resolved to the
// full id. A reference that is not shaped like a hand-in id (h- and Crockford base32
// characters) is returned unchanged. Errors: not_found when no such hand-in has
// arrived here, invalid when the prefix is ambiguous. Hand-ins are never removed, so
// resolving outside the channel lock is safe.
func (s *Session) resolveHandinRef(ref string) (string, error) {
	if !handinRefRe.MatchString(ref) {
		return ref, nil
	}
	v, err := s.Load()
	if err != nil {
		return "", err
	}
	h, err := v.State.FindHandin(ref)
	if err != nil {
		return "", err
	}
	return h.ID, nil
}
