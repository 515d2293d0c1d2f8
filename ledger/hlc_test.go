package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// parseHLCReference is ParseHLC as it was before the hand-written parser: time.Parse on the clock part.
// It is the reference the hand-written parser must match on every input.
func parseHLCReference(s string) (HLC, error) {
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

// checkParseHLC fails t unless ParseHLC and ValidHLC agree with parseHLCReference on s:
// the same HLC when the reference accepts s, an error naming s (in %q) when it rejects it.
func checkParseHLC(t *testing.T, s string) {
	t.Helper()
	want, wantErr := parseHLCReference(s)
	got, err := ParseHLC(s)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("ParseHLC(%q) = %+v, %v; reference %+v, %v", s, got, err, want, wantErr)
	case err == nil && got != want:
		t.Fatalf("ParseHLC(%q) = %+v; reference %+v", s, got, want)
	case err != nil && (got != HLC{}):
		t.Fatalf("ParseHLC(%q) = %+v with error %v; want the zero HLC", s, got, err)
	case err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", s)):
		t.Fatalf("ParseHLC(%q) error %q does not quote the text", s, err)
	}
	if v := ValidHLC(s); v != (wantErr == nil) {
		t.Fatalf("ValidHLC(%q) = %v; reference error %v", s, v, wantErr)
	}
}

// hlcEdgeCases are the inputs TestParseHLCMatchesReference checks and FuzzParseHLC
// starts from: each field at and past its limits, leap years, every
// separator replaced, signs, spaces, non-ASCII digits, wrong lengths.
func hlcEdgeCases() []string {
	cases := []string{
		"2026-11-29T18:30:00.123Z/0003",
		"1970-01-01T00:00:00.000Z/0000",
		"1969-12-31T23:59:59.999Z/9999",
		"0000-01-01T00:00:00.000Z/0000",
		"0000-02-29T00:00:00.000Z/0000", // year 0 is a leap year
		"0001-01-01T00:00:00.000Z/0000",
		"9999-12-31T23:59:59.999Z/9999",
		"2024-02-29T12:00:00.000Z/0001", // leap day
		"2023-02-29T12:00:00.000Z/0001", // not a leap year
		"2023-02-28T23:59:59.999Z/0001",
		"2024-02-30T00:00:00.000Z/0000",
		"1900-02-29T00:00:00.000Z/0000", // century, not a leap year
		"2000-02-29T00:00:00.000Z/0000", // 400-year, a leap year
		"2100-02-29T00:00:00.000Z/0000",
		"2400-02-29T00:00:00.000Z/0000",
		"2026-04-31T00:00:00.000Z/0000", // day 31 of 30-day months
		"2026-06-31T00:00:00.000Z/0000",
		"2026-09-31T00:00:00.000Z/0000",
		"2026-11-31T00:00:00.000Z/0000",
		"2026-04-30T00:00:00.000Z/0000",
		"2026-01-31T00:00:00.000Z/0000",
		"2026-12-31T00:00:00.000Z/0000",
		"2026-12-32T00:00:00.000Z/0000",
		"2026-01-00T00:00:00.000Z/0000",
		"2026-00-10T00:00:00.000Z/0000",
		"2026-13-10T00:00:00.000Z/0000",
		"2026-99-99T99:99:99.999Z/9999",
		"2026-11-29T23:59:59.999Z/0000",
		"2026-11-29T24:00:00.000Z/0000",
		"2026-11-29T00:60:00.000Z/0000",
		"2026-11-29T00:00:60.000Z/0000", // no leap second
		"2026-11-29T00:00:59.999Z/0000",
		"2026-11-29T18:30:00.123Z/9999",
		"2026-11-29T18:30:00.123Z/10000",
		"2026-11-29T18:30:00.123Z/-001",
		"2026-11-29T18:30:00.123Z/+001",
		"2026-11-29T18:30:00.123Z/ 001",
		"2026-11-29T18:30:00.123Z/00a3",
		"2026-11-29T18:30:00,123Z/0003", // time.Parse takes a comma
		"2026-11-29T18:30:00.+12Z/0003", // and a signed fraction
		"2026-11-29T18:30:00.-00Z/0003",
		"2026-11-29T18:30:00.-01Z/0003",
		"2026-11-29T18:30:00.+-1Z/0003",
		"2026-11-29T18:30:00.--0Z/0003",
		"2026-11-29T18:30:00.++0Z/0003",
		"2026-11-29T18:30:00. 12Z/0003",
		"2026-11-29T18:30:00.12 Z/0003",
		"2026-11-29T18:30:00:123Z/0003",
		"+026-11-29T18:30:00.123Z/0003",
		"-026-11-29T18:30:00.123Z/0003",
		"2026-+1-29T18:30:00.123Z/0003",
		"2026-11-+9T18:30:00.123Z/0003",
		"2026-11-29T+8:30:00.123Z/0003",
		"2026-11-29T18:+0:00.123Z/0003",
		"2026-11-29T18:30:+0.123Z/0003",
		" 2026-11-29T18:30:00.123Z/003",
		"2026-11-29T18:30:00.123Z/003 ",
		"2026-11-29 18:30:00.123Z/0003",
		"2026-11-29t18:30:00.123Z/0003",
		"2026-11-29T18:30:00.123z/0003",
		"2026-11-29T18:30:00.123Z-0003",
		"2026/11/29T18:30:00.123Z/0003",
		"2026-11-29T18-30-00.123Z/0003",
		"2026-11-29T8:30:00.123Z/00003", // one-digit hour: time.Parse takes it, then extra text
		"2026-11-29T8:30:00.1234Z/0003",
		"2026-11-29T18:30:00.123Z//003",
		"2026-11-29T18:30:00.123+0000/0003",
		"2026-11-29T18:30:00.12Z/0003",
		"2026-11-29T18:30:00.1230Z/0003",
		"2026-11-29T18:30:00.123Z/003",
		"2026-11-29T18:30:00.123Z",
		"",
		"/",
		"２026-11-29T18:30:00.123Z/0003", // fullwidth digit
		"2026-11-29T18:30:00.123Z/００3",
		"2026-11-29T18:30:00.١٢٣Z/0003", // Arabic-Indic digits
		"2026-11-29T18:30:00.123Z/\x000003"[:hlcLen],
		"2026\x0011-29T18:30:00.123Z/0003",
		"2026-11-29T18:30:00.123Z/000\xff",
		"2026-11-29T18:30:00.123\u200bZ/03",
	}
	// Every field of a valid HLC at 0..9 in each digit position.
	base := "2024-02-29T23:59:59.999Z/9999"
	for i := 0; i < len(base); i++ {
		for _, c := range "0123456789+-., /:TZ" {
			cases = append(cases, base[:i]+string(c)+base[i+1:])
		}
	}
	return cases
}

// TestParseHLCMatchesReference: the hand-written parser accepts and rejects
// exactly what time.Parse did, with the same value, on the edge cases and on every day of
// a leap and a common year at several years across 0000–9999.
func TestParseHLCMatchesReference(t *testing.T) {
	t.Parallel()
	for _, s := range hlcEdgeCases() {
		checkParseHLC(t, s)
	}
	for _, year := range []int{0, 1, 4, 100, 399, 400, 1582, 1899, 1900, 1969, 1970, 2000, 2023, 2024, 2100, 9996, 9999} {
		for month := 0; month <= 13; month++ {
			for day := 0; day <= 32; day++ {
				checkParseHLC(t, fmt.Sprintf("%04d-%02d-%02dT12:34:56.789Z/0042", year, month, day))
			}
		}
	}
	for _, hms := range []string{"00:00:00.000", "23:59:59.999", "12:00:00.500", "24:00:00.000", "23:60:00.000", "23:59:60.000", "00:00:00.001"} {
		checkParseHLC(t, "2024-12-31T"+hms+"Z/0000")
		checkParseHLC(t, "0000-01-01T"+hms+"Z/0000")
		checkParseHLC(t, "9999-12-31T"+hms+"Z/0000")
	}
}

// TestParseHLCErrors: a rejected text gives the zero HLC and an error that quotes it and
// names the problem.
func TestParseHLCErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"2026-11-29T18:30:00.123Z", "is not YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN"},
		{"2026-11-29 18:30:00.123Z/0003", "is not YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN"},
		{"2026-13-29T18:30:00.123Z/0003", "month out of range"},
		{"2023-02-29T18:30:00.123Z/0003", "day out of range"},
		{"2026-11-29T24:30:00.123Z/0003", "hour out of range"},
		{"2026-11-29T18:60:00.123Z/0003", "minute out of range"},
		{"2026-11-29T18:30:60.123Z/0003", "second out of range"},
		{"2026-11-29T18:30:00.-12Z/0003", "fractional second out of range"},
		{"2026-11-29T18:30:00.123Z/00a3", "has a non-decimal counter"},
	} {
		h, err := ParseHLC(c.in)
		if err == nil || (h != HLC{}) {
			t.Errorf("ParseHLC(%q) = %+v, %v; want an error", c.in, h, err)
			continue
		}
		if want := fmt.Sprintf("ledger: hlc %q", c.in); !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseHLC(%q) error %q; want %q … %q", c.in, err, want, c.want)
		}
	}
}

// TestParseHLCNoAlloc: parsing valid text does not allocate (it runs once per
// restored record).
func TestParseHLCNoAlloc(t *testing.T) {
	s := "2026-11-29T18:30:00.123Z/0003"
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ParseHLC(s); err != nil || !ValidHLC(s) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ParseHLC allocates %v times per call; want 0", n)
	}
}

// FuzzParseHLC: for any string, ParseHLC and ValidHLC agree with the
// time.Parse reference — same acceptance, same value. Seeds: hlcEdgeCases, plus
// ledger/testdata/fuzz/FuzzParseHLC.
func FuzzParseHLC(f *testing.F) {
	for _, s := range hlcEdgeCases() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParseHLC(t, s)
		// Texts of the right length reach the field checks; a fuzzed string rarely is, so
		// also try it laid over a valid HLC.
		if len(s) < hlcLen {
			base := "2024-02-29T23:59:59.999Z/9999"
			for _, at := range []int{0, 5, 8, 11, 14, 17, 19, 25} {
				if at+len(s) <= hlcLen {
					checkParseHLC(t, base[:at]+s+base[at+len(s):])
				}
			}
		}
	})
}

var sinkHLC HLC

// BenchmarkParseHLC measures ParseHLC on valid text, the path taken once per record
// restored from the local index (ledger/trusted.go); BenchmarkParseHLCReference is the
// time.Parse version it replaced.
func BenchmarkParseHLC(b *testing.B) {
	benchParse(b, ParseHLC)
}

func BenchmarkParseHLCReference(b *testing.B) {
	benchParse(b, parseHLCReference)
}

func benchParse(b *testing.B, parse func(string) (HLC, error)) {
	s := "2026-11-29T18:30:00.123Z/0003"
	b.ReportAllocs()
	for b.Loop() {
		h, err := parse(s)
		if err != nil {
			b.Fatal(err)
		}
		sinkHLC = h
	}
}
