package ledger

import (
	"fmt"
	"time"
)

// HLC text layout (docs/format.md §6): YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN, fixed width, UTC,
// sorting as text. NNNN is a decimal counter 0000–9999 within one millisecond.
const (
	hlcTimeLayout = "2006-01-02T15:04:05.000Z"
	hlcLen        = len(hlcTimeLayout) + 5
	// MaxCounter is the largest HLC counter; one more moves the clock part on by 1 ms.
	MaxCounter = 9999
	// DefaultMaxSkew is how far a writer may move ahead of its own wall clock by
	// absorbing others' HLCs (docs/design.md §2 "Ledger entry").
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

// ParseHLC parses HLC text (docs/format.md §6): exactly 29 bytes,
// YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN, ASCII digits at fixed positions, read as UTC.
//
// It accepts exactly the text that time.Parse accepted for this layout before this
// hand-written parser replaced it (ledger/hlc_test.go keeps that version as
// the reference and compares both on every input): year 0000–9999, month 01–12, the
// day within the month of that year (Gregorian leap years), hour < 24, minute < 60,
// second < 60 (no leap second). Like time.Parse it also takes ',' for the decimal point
// and a sign before the milliseconds ("+12" is 12 ms, "-00" is 0 ms); such text is not
// canonical (String gives it back with ".012"/".000") and Append never writes it.
//
// The error names the text in %q and says what is wrong: the form, a field out of range
// ("month", "day", "hour", "minute", "second", "fractional second") or a non-decimal
// counter. It never allocates on success.
func ParseHLC(s string) (HLC, error) {
	h, why := parseHLC(s)
	switch why {
	case "":
		return h, nil
	case hlcBadForm:
		return HLC{}, fmt.Errorf("ledger: hlc %q is not YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN", s)
	case hlcBadCounter:
		return HLC{}, fmt.Errorf("ledger: hlc %q has a non-decimal counter", s)
	default:
		return HLC{}, fmt.Errorf("ledger: hlc %q: %s out of range", s, why)
	}
}

// ValidHLC reports whether s parses as HLC text (see ParseHLC). It does not allocate.
func ValidHLC(s string) bool { _, why := parseHLC(s); return why == "" }

// Reasons parseHLC gives for rejecting text; any other non-empty reason names the
// field that is out of range.
const (
	hlcBadForm    = "form"
	hlcBadCounter = "counter"
)

// daysInMonth is the length of each month of a common year, January first.
var daysInMonth = [12]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// parseHLC is ParseHLC without the error value: it returns the parsed HLC and "", or
// the zero HLC and why the text was rejected (hlcBadForm, hlcBadCounter or the name of
// the field out of range).
func parseHLC(s string) (HLC, string) {
	// 0123456789012345678901234567 8
	// YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN
	if len(s) != hlcLen || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
		s[16] != ':' || (s[19] != '.' && s[19] != ',') || s[23] != 'Z' || s[24] != '/' {
		return HLC{}, hlcBadForm
	}
	year, ok1 := hlcDigits(s[0:4])
	month, ok2 := hlcDigits(s[5:7])
	day, ok3 := hlcDigits(s[8:10])
	hour, ok4 := hlcDigits(s[11:13])
	minute, ok5 := hlcDigits(s[14:16])
	sec, ok6 := hlcDigits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return HLC{}, hlcBadForm
	}
	if month < 1 || month > 12 {
		return HLC{}, "month"
	}
	if hour >= 24 {
		return HLC{}, "hour"
	}
	if minute >= 60 {
		return HLC{}, "minute"
	}
	if sec >= 60 {
		return HLC{}, "second"
	}
	// The milliseconds: three digits, or time.Parse's atoi form of a sign and two digits.
	frac, ok := hlcDigits(s[21:23])
	if !ok {
		return HLC{}, hlcBadForm
	}
	switch c := s[20]; {
	case '0' <= c && c <= '9':
		frac += 100 * int(c-'0')
	case c == '+':
	case c == '-':
		if frac != 0 {
			return HLC{}, "fractional second"
		}
	default:
		return HLC{}, hlcBadForm
	}
	leap := year%4 == 0 && (year%100 != 0 || year%400 == 0)
	if n := daysInMonth[month-1]; day < 1 || day > n && !(month == 2 && leap && day == 29) {
		return HLC{}, "day"
	}
	counter, ok := hlcDigits(s[25:29])
	if !ok {
		return HLC{}, hlcBadCounter
	}
	ms := ((daysFromCivil(year, month, day)*24+int64(hour))*60+int64(minute))*60 + int64(sec)
	return HLC{Ms: ms*1000 + int64(frac), Counter: counter}, ""
}

// hlcDigits reads s, all ASCII decimal digits, as a number; ok is false if any byte is
// not one.
func hlcDigits(s string) (n int, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysFromCivil returns the number of days from 1970-01-01 to the proleptic Gregorian
// date year-month-day (month 1–12, year ≥ 0), negative before 1970. The algorithm is
// Howard Hinnant's days_from_civil ("chrono-Compatible Low-Level Date Algorithms"),
// with the year shifted by one 400-year era so every division is of a non-negative
// number.
func daysFromCivil(year, month, day int) int64 {
	y := year + 400
	if month <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400     // [0, 399]
	mp := (month + 9) % 12 // March = 0
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return int64(era-1)*146097 + int64(doe) - 719468
}

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
