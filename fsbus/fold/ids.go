package fold

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
)

// Crockford is the lowercase Crockford base32 alphabet (no i, l, o, u).
const Crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// Id prefixes of objects and decisions (docs/design.md §2 rule 2).
const (
	PrefixOrder    = "o-"
	PrefixMessage  = "m-"
	PrefixAsk      = "a-"
	PrefixResult   = "r-"
	PrefixHandin   = "h-"
	PrefixDecision = "d-"
)

// idLen is the number of base32 characters after an id's prefix (65 random bits).
const IDLen = 13

// DeviceLen is the number of base32 characters of a device id (40 random bits).
const DeviceLen = 8

// RandomBase32 returns n Crockford characters carrying 5n random bits.
func RandomBase32(n int) string {
	var buf [16]byte
	if _, err := rand.Read(buf[:]); err != nil {
		panic(fmt.Sprintf("fsbus: reading random bytes: %v", err)) // crypto/rand never fails on supported OSes
	}
	hi, lo := binary.BigEndian.Uint64(buf[:8]), binary.BigEndian.Uint64(buf[8:])
	out := make([]byte, n)
	for i := range n {
		out[i] = Crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}

// NewID returns a fresh object id: prefix + 13 lowercase Crockford base32 characters
// (65 random bits), e.g. "o-k3f9x2abq7mze".
func NewID(prefix string) string { return prefix + RandomBase32(IDLen) }

// NewDeviceID returns a fresh 8-character device id (40 random bits).
func NewDeviceID() string { return RandomBase32(DeviceLen) }

// ValidID reports whether s is a full object id of any prefix: one of o, m, a, r, h,
// d, a '-', then IDLen Crockford characters (^[omarhd]-[0-9a-hjkmnp-tv-z]{13}$).
func ValidID(s string) bool {
	if len(s) != 2+IDLen || !strings.ContainsRune("omarhd", rune(s[0])) || s[1] != '-' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if strings.IndexByte(Crockford, s[i]) < 0 {
			return false
		}
	}
	return true
}

// ValidName reports whether s is a portable writer, device or project name:
// [a-z0-9-], at most 63 characters, starting with a letter or digit, not a reserved
// Windows name (docs/design.md §2 rule 10). It is ledger.ValidName, so both layers agree.
func ValidName(s string) bool { return ledger.ValidName(s) }

func CheckName(kind, s string) error {
	if !ValidName(s) {
		return errs.Errorf(errs.Invalid, "use 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
			"%s %s is not a portable name", kind, secretguard.Quote(s))
	}
	// A portable name can still be token-shaped (glpat-…, xoxb-…, sk-…): names are
	// written in the clear into entries, objects and file names (secret guard).
	return secretguard.Check(kind, s)
}

// ResolveID resolves a full id or a unique prefix of one among known ids, as git does
// (docs/design.md §2 rule 2). It returns a not_found error when nothing matches and an invalid
// error listing the candidates when the prefix is ambiguous.
func ResolveID(kind, q string, known []string) (string, error) {
	return resolveIDIn(kind, q, known, "", 0)
}

// resolveID is resolveID over the state's ids: listHint (default: `ferry KIND list`)
// says where the ids are listed, and a not_found error, while objects are still
// arriving (pending sync, docs/design.md §2 rule 6), says so — the id's entry may be on its way
// with them.
func (st *State) resolveID(kind, q string, known []string, listHint string) (string, error) {
	return resolveIDIn(kind, q, known, listHint, st.pendingObjects())
}

// pendingObjects counts the things whose entry has arrived here but whose object file
// has not, or only partly (ErrObjectMissing): a sync in progress.
func (st *State) pendingObjects() int {
	n := 0
	for _, o := range st.Orders {
		if o.Missing {
			n++
		}
	}
	for _, m := range st.Messages {
		if m.Pending {
			n++
		}
	}
	for _, a := range st.Asks {
		if a.Missing {
			n++
		}
	}
	for _, h := range st.Handins {
		if h.Missing {
			n++
		}
	}
	return n
}

func resolveIDIn(kind, q string, known []string, listHint string, pending int) (string, error) {
	if listHint == "" {
		listHint = "list them with `ferry " + kind + " list`"
	}
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" {
		return "", errs.Errorf(errs.Invalid, "give the "+kind+" id or a unique prefix of it", "empty %s id", kind)
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
		msg, hint := fmt.Sprintf("no %s %q", kind, q), listHint
		if pending > 0 {
			msg = fmt.Sprintf("%s %q not found yet: %d %s still arriving (sync in progress)", kind, q, pending, areObjects(pending))
			hint = "retry when the sync tool has finished; " + listHint
		}
		if near := nearIDs(q, known); len(near) > 0 {
			msg += "; did you mean " + strings.Join(near, " or ") + "?"
		}
		return "", &errs.Error{Category: errs.NotFound, Message: msg, Hint: hint}
	case 1:
		return hits[0], nil
	}
	slices.Sort(hits)
	return "", errs.Errorf(errs.Invalid, "candidates: "+strings.Join(hits, ", "),
		"%s id prefix %q is ambiguous (%d candidates)", kind, q, len(hits))
}

// maxNear is how many ids a did-you-mean names at most.
const maxNear = 3

// nearIDs returns the known ids closest to q, a query that matches none (at most
// maxNear, in id order): those fewest edits from q, compared as a prefix (a mistyped
// prefix is as likely as a mistyped whole id) when that is at most 2 (1 for a query
// shorter than 8), else those sharing the longest prefix of at least 4 characters after
// the kind prefix with it. q is compared whole when it carries a kind prefix ("o-…"),
// else with each id's part after its prefix. A query of fewer than 4 characters gets
// no suggestion: too many ids are that close to it.
func nearIDs(q string, known []string) []string {
	withPrefix := len(q) > 2 && q[1] == '-'
	body := q
	if withPrefix {
		body = q[2:]
	}
	if len(body) < 4 {
		return nil
	}
	maxDist := min(2, len(body)/4)
	// nearest: the ids fewest edits away (within maxDist); sharing: those with the
	// longest shared prefix (at least 4).
	var nearest, sharing []string
	bestDist, bestLCP := maxDist+1, 3
	for _, id := range known {
		if len(id) < 3 {
			continue
		}
		target := id[2:]
		if withPrefix {
			target = id // a wrong kind letter is one edit
		}
		switch d := prefixDistance(q, target); {
		case d > maxDist:
		case d < bestDist:
			bestDist, nearest = d, []string{id}
		case d == bestDist:
			nearest = append(nearest, id)
		}
		if withPrefix && q[:2] != id[:2] {
			continue
		}
		switch l := commonPrefix(body, id[2:]); {
		case l < 4:
		case l > bestLCP:
			bestLCP, sharing = l, []string{id}
		case l == bestLCP:
			sharing = append(sharing, id)
		}
	}
	ids := nearest
	if len(ids) == 0 {
		ids = sharing
	}
	slices.Sort(ids)
	return ids[:min(len(ids), maxNear)]
}

// prefixDistance is the fewest single-character insertions, deletions and
// substitutions (Levenshtein) that turn q into some prefix of s.
func prefixDistance(q, s string) int {
	prev := make([]int, len(s)+1) // prev[j]: distance of q[:i-1] to s[:j]
	cur := make([]int, len(s)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(q); i++ {
		cur[0] = i
		for j := 1; j <= len(s); j++ {
			sub := prev[j-1]
			if q[i-1] != s[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	best := len(q)
	for _, d := range prev {
		best = min(best, d)
	}
	return best
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// areObjects is "object is" or "objects are", agreeing with n.
func areObjects(n int) string {
	if n == 1 {
		return "object is"
	}
	return "objects are"
}
