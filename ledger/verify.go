package ledger

import (
	"errors"
	"fmt"
)

// ReadVerified is Read with every record's signature checked against keys (for
// Options.Project) before chains and forks are resolved. A record whose writer has a
// key and whose signature does not verify is reported as KindBadSignature and left out,
// so a forged record can never win a fork against signed ones nor break a chain it is
// not part of. A record whose writer has no key (keys returns false) is kept and
// reported as KindUnknownKey: the caller decides what an unseated writer's entries
// mean. It returns an error when keys is nil or Options.Project is empty, and the
// errors of Read.
func (l *Ledger) ReadVerified(keys KeyFunc) (*Snapshot, error) {
	if err := l.checkVerify(keys); err != nil {
		return nil, err
	}
	s, _, err := l.read(keys, l.opts.Project)
	return s, err
}

// Verify checks the whole ledger: it reports everything ReadVerified does — torn tails,
// malformed lines, broken chains, forks, unknown keys, bad signatures — and counts the
// segment files read and the entries that count (Report.Entries = len of the verified
// snapshot's Entries; records with bad signatures and fork losers are not counted).
// It returns an error when keys is nil or Options.Project is empty, or when a
// directory or file cannot be read; problems in the data are never errors.
func (l *Ledger) Verify(keys KeyFunc) (*Report, error) {
	if err := l.checkVerify(keys); err != nil {
		return nil, err
	}
	s, segments, err := l.read(keys, l.opts.Project)
	if err != nil {
		return nil, err
	}
	return &Report{Segments: segments, Entries: len(s.Entries), Problems: s.Problems, Forks: s.Forks}, nil
}

func (l *Ledger) checkVerify(keys KeyFunc) error {
	if keys == nil {
		return errors.New("ledger: verifying: no key function")
	}
	if l.opts.Project == "" {
		return errors.New("ledger: verifying: no project id configured")
	}
	return nil
}

// checkSig reports whether record r may take part in chain resolution, appending a
// problem to probs when its key is unknown (kept) or its signature fails (left out).
func checkSig(r *record, keys KeyFunc, project string, probs *[]Problem) bool {
	pub, ok := keys(&r.e)
	if !ok {
		*probs = append(*probs, chainProblem(r, KindUnknownKey, fmt.Sprintf("no key is bound to writer %s", r.e.Writer)))
		return true
	}
	if err := r.e.VerifySig(pub, project); err != nil {
		*probs = append(*probs, chainProblem(r, KindBadSignature, fmt.Sprintf("entry %s: %v", r.e.Hash(), err)))
		return false
	}
	return true
}
