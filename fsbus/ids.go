package fsbus

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// crockford is the lowercase Crockford base32 alphabet (no i, l, o, u).
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// Id prefixes of objects and decisions (DESIGN §2 rule 2).
const (
	PrefixOrder    = "o-"
	PrefixMessage  = "m-"
	PrefixAsk      = "a-"
	PrefixResult   = "r-"
	PrefixHandin   = "h-"
	PrefixDecision = "d-"
)

// IDLen is the number of base32 characters after an id's prefix (65 random bits).
const IDLen = 13

// DeviceLen is the number of base32 characters of a device id (40 random bits).
const DeviceLen = 8

var (
	idRe = regexp.MustCompile(`^[omarhd]-[0-9a-hjkmnp-tv-z]{13}$`)
)

// randomBase32 returns n Crockford characters carrying 5n random bits.
func randomBase32(n int) string {
	var buf [16]byte
	if _, err := rand.Read(buf[:]); err != nil {
		panic(fmt.Sprintf("fsbus: reading random bytes: %v", err)) // crypto/rand never fails on supported OSes
	}
	hi, lo := binary.BigEndian.Uint64(buf[:8]), binary.BigEndian.Uint64(buf[8:])
	out := make([]byte, n)
	for i := range n {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}

// NewID returns a fresh object id: prefix + 13 lowercase Crockford base32 characters
// (65 random bits), e.g. "o-k3f9x2abq7mze".
func NewID(prefix string) string { return prefix + randomBase32(IDLen) }

// NewDeviceID returns a fresh 8-character device id (40 random bits).
func NewDeviceID() string { return randomBase32(DeviceLen) }

// ValidID reports whether s is a full object id of any prefix.
func ValidID(s string) bool { return idRe.MatchString(s) }

// ValidName reports whether s is a portable writer, device or project name:
// [a-z0-9-], at most 63 characters, starting with a letter or digit, not a reserved
// Windows name (DESIGN §2 rule 10). It is ledger.ValidName, so both layers agree.
func ValidName(s string) bool { return ledger.ValidName(s) }

func checkName(kind, s string) error {
	if !ValidName(s) {
		return Errorf(CatInvalid, "use 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
			"%s %s is not a portable name", kind, Quote(s))
	}
	// A portable name can still be token-shaped (glpat-…, xoxb-…, sk-…): names are
	// written in the clear into entries, objects and file names (secret guard).
	return CheckSecret(kind, s)
}

// resolveID resolves a full id or a unique prefix of one among known ids, as git does
// (DESIGN §2 rule 2). It returns a not_found error when nothing matches and an invalid
// error listing the candidates when the prefix is ambiguous.
func resolveID(kind, q string, known []string) (string, error) {
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" {
		return "", Errorf(CatInvalid, "give the "+kind+" id or a unique prefix of it", "empty %s id", kind)
	}
	var hits []string
	for _, id := range known {
		if id == q {
			return id, nil
		}
		if strings.HasPrefix(id, q) || strings.HasPrefix(id[2:], q) {
			hits = append(hits, id)
		}
	}
	switch len(hits) {
	case 0:
		return "", Errorf(CatNotFound, "list them with `ferry "+kind+" list`", "no %s %q", kind, q)
	case 1:
		return hits[0], nil
	}
	sort.Strings(hits)
	return "", Errorf(CatInvalid, "candidates: "+strings.Join(hits, ", "),
		"%s id prefix %q is ambiguous (%d candidates)", kind, q, len(hits))
}
