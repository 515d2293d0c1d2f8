package fold

import (
	"regexp"
	"testing"
)

// idPattern is the id grammar of docs/design.md §2 rule 2 as a regular expression;
// ValidID checks it by hand.
var idPattern = regexp.MustCompile(`^[omarhd]-[0-9a-hjkmnp-tv-z]{13}$`)

func TestValidIDMatchesItsPattern(t *testing.T) {
	for _, s := range []string{
		"", "o-", "o-k3f9x2abq7mze", "d-0000000000000", "x-k3f9x2abq7mze", "o_k3f9x2abq7mze",
		"o-k3f9x2abq7mz", "o-k3f9x2abq7mzee", "o-K3F9X2ABQ7MZE", "o-k3f9x2abq7mzi",
		"o-k3f9x2abq7mzl", "o-k3f9x2abq7mzo", "o-k3f9x2abq7mzu", "o-k3f9x2abq7mz\xff", "\xffo-k3f9x2abq7mz",
		NewID("m-"), NewID("a-"), NewID("r-"), NewID("h-"),
	} {
		if got, want := ValidID(s), idPattern.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}

func FuzzValidID(f *testing.F) {
	f.Add("o-k3f9x2abq7mze")
	f.Add("o-k3f9x2abq7mzu")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidID(s), idPattern.MatchString(s); got != want {
			t.Fatalf("ValidID(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
