package ledger

import (
	"fmt"
	"time"
)

// HLC text layout (DESIGN §2 "HLC"): YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN, fixed width, UTC,
// sorting as text. NNNN is a decimal counter 0000–9999 within one millisecond.
const (
	hlcTimeLayout = "2006-01-02T15:04:05.000Z"
	hlcLen        = len(hlcTimeLayout) + 5
	// MaxCounter is the largest HLC counter; one more moves the clock part on by 1 ms.
	MaxCounter = 9999
	// DefaultMaxSkew is how far a writer may move ahead of its own wall clock by
	// absorbing others' HLCs (DESIGN §2).
	DefaultMaxSkew = time.Hour
)

// HLC is a parsed hybrid logical clock value: wall milliseconds since the Unix epoch
// and a counter within that millisecond.
type HLC struct {
	Ms      int64
	Counter int
}

// String formats h as fixed-width HLC text.
func (h HLC) String() string {
	return fmt.Sprintf("%s/%04d", time.UnixMilli(h.Ms).UTC().Format(hlcTimeLayout), h.Counter)
}

// Less reports whether h sorts before o.
func (h HLC) Less(o HLC) bool {
	return h.Ms < o.Ms || (h.Ms == o.Ms && h.Counter < o.Counter)
}

// ParseHLC parses HLC text. It returns an error naming the text when it is not of the
// fixed-width form.
func ParseHLC(s string) (HLC, error) {
	if len(s) != hlcLen || s[hlcLen-5] != '/' {
		return HLC{}, fmt.Errorf("ledger: hlc %q is not YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN", s)
	}
	t, err := time.Parse(hlcTimeLayout, s[:hlcLen-5])
	if err != nil {
		return HLC{}, fmt.Errorf("ledger: hlc %q: %w", s, err)
	}
	n := 0
	for _, c := range s[hlcLen-4:] {
		if c < '0' || c > '9' {
			return HLC{}, fmt.Errorf("ledger: hlc %q has a non-decimal counter", s)
		}
		n = n*10 + int(c-'0')
	}
	return HLC{Ms: t.UnixMilli(), Counter: n}, nil
}

// ValidHLC reports whether s parses as HLC text.
func ValidHLC(s string) bool { _, err := ParseHLC(s); return err == nil }

// NextHLC returns the HLC a writer stamps on its next entry: strictly after last (its
// own previous entry) and after every observed HLC that is not more than maxSkew ahead
// of now, and never behind now. Observed values further ahead are not absorbed; they
// are returned in skewed so the caller can report them.
//
// The rule is the classic hybrid logical clock (Kulkarni et al. 2014) with a decimal
// counter: when the counter would pass MaxCounter the millisecond moves on by one.
func NextHLC(now time.Time, maxSkew time.Duration, last HLC, observed ...HLC) (next HLC, skewed []HLC) {
	wall := now.UnixMilli()
	limit := wall + maxSkew.Milliseconds()
	hi := last
	for _, o := range observed {
		if o.Ms > limit {
			skewed = append(skewed, o)
			continue
		}
		if hi.Less(o) {
			hi = o
		}
	}
	if wall > hi.Ms {
		return HLC{Ms: wall}, skewed
	}
	next = HLC{Ms: hi.Ms, Counter: hi.Counter + 1}
	if next.Counter > MaxCounter {
		next = HLC{Ms: hi.Ms + 1}
	}
	return next, skewed
}
