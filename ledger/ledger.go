package ledger

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"time"
)

// Options configure Open.
type Options struct {
	// Root is the channel directory; segments live under Root/ledger.
	Root string
	// LockDir is a machine-local directory (never synced) for the segment lock files.
	// Lock files are created on first use and never deleted (docs/design.md §2 rule 5).
	LockDir string
	// Project is the channel's project id, part of every signature's domain.
	Project string
	// MaxSkew bounds how far Append moves ahead of the wall clock; 0 means DefaultMaxSkew.
	MaxSkew time.Duration
	// Now is the wall clock; nil means time.Now.
	Now func() time.Time
}

// Draft is what a caller appends. The ledger fills v, writer, device, seq, hlc, prev
// and sig.
type Draft struct {
	Type string
	Ref  string
	Data json.RawMessage
	Idem string
}

// Problem is something a reader or Verify found wrong in a segment file. Problems
// never stop a read: the affected lines are left out of state and listed.
type Problem struct {
	Path   string `json:"path"`
	Line   int    `json:"line,omitempty"` // 1-based line number, 0 when not line-specific
	Kind   string `json:"kind"`           // one of the Kind* constants
	Writer string `json:"writer,omitempty"`
	Device string `json:"device,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Detail string `json:"detail"`
}

// Problem kinds.
const (
	KindTorn         = "torn"          // incomplete last line or NUL run: not yet arrived
	KindMalformed    = "malformed"     // a complete line that is not a valid entry
	KindBrokenChain  = "broken_chain"  // prev does not name the previous entry's hash, or seq gap
	KindBadSignature = "bad_signature" // signature does not verify against the writer's key
	KindUnknownKey   = "unknown_key"   // no key is bound to the writer
	KindFork         = "fork"          // two records with one (writer, device, seq)
	KindHole         = "hole"          // NUL bytes followed by more data: records after them are hidden (ADR 0007)
	KindCutMissing   = "cut_missing"   // no file holds the entry a floor (an owner's checkpoint's cut) names
)

// Fork is two or more different records with one (writer, device, seq) (docs/design.md §2
// rule 8). The branch whose first record has the lower hash counts; Losers holds every
// record of the other branches, never dropped silently.
type Fork struct {
	Writer string  `json:"writer"`
	Device string  `json:"device"`
	Seq    uint64  `json:"seq"`
	Winner Entry   `json:"winner"`
	Losers []Entry `json:"losers"`
}

// Snapshot is the merged reading of every segment.
type Snapshot struct {
	// Entries in (hlc, writer, device, seq) order, deduplicated by
	// (writer, device, seq, hash), losing fork branches removed.
	Entries []Entry
	// Problems found while reading (torn tails, malformed lines, broken chains).
	Problems []Problem
	// Forks found while merging.
	Forks []Fork
	// Floors are the floors the reading started from (ReadState.SetFloors), by writer
	// and device: Entries hold no record at or below them. Nil for a whole reading.
	Floors []Floor `json:"-"`
	// Below counts the records at or below a floor that were read and left out (from
	// conflict copies, or a file whose floor did not check), the floor's own entry
	// excepted: forks among them are decided by the floors unseen.
	Below int `json:"-"`
	// MaxHLC is the highest HLC among Entries (zero when empty).
	MaxHLC HLC
	// Added is set only by ReadIncremental when this snapshot extends the one the
	// previous call on the same ReadState returned (Base) by appends alone: Entries is
	// Base.Entries plus Added (in merged order), Forks are Base's, and only torn tails may
	// differ among Problems. Nil means the snapshot was merged from scratch
	// (callers then fold everything again).
	Added []Entry `json:"-"`
	// Base is the snapshot Added extends (nil when Added is nil).
	Base *Snapshot `json:"-"`
}

// KeyFunc returns the public key the roster binds to an entry's writer, or false when
// none is known.
type KeyFunc func(e *Entry) (ed25519.PublicKey, bool)

// Report is the result of Verify.
type Report struct {
	Segments int       `json:"segments"`
	Entries  int       `json:"entries"`
	Problems []Problem `json:"problems"`
	Forks    []Fork    `json:"forks"`
}

// OK reports whether Verify found nothing wrong (torn tails of others' segments, which
// are "not yet arrived", do not count).
func (r *Report) OK() bool {
	for _, p := range r.Problems {
		if p.Kind != KindTorn {
			return false
		}
	}
	return len(r.Forks) == 0
}

// Sentinel errors.
var (
	// ErrBadName is returned by Append when writer or device is not a portable name.
	ErrBadName = errors.New("ledger: bad writer or device name")
	// ErrLocked is returned by Append when the segment lock cannot be taken.
	ErrLocked = errors.New("ledger: segment lock unavailable")
	// ErrNotWritten is wrapped in Append's error when writing the entry's line failed:
	// no complete line of it is in the segment (a partial one is moved aside by the
	// next Append), so the entry never counts. An error without it, after the mark of
	// AppendMarked, may leave a complete line that counts (a failed fsync or close).
	ErrNotWritten = errors.New("ledger: entry not written")
)
