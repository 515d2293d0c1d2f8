package ledger

import (
	"bytes"
	"math"
	"unicode/utf8"
	"unsafe"
)

// This file is trustedEntry's fast path (the local index, docs/format.md §18): a new process opens
// the local index and rebuilds every entry from its canonical line, which
// encoding/json does at several microseconds and a dozen allocations per line. The
// lines a read records are nearly always the ones Append writes, so a hand parser
// that accepts exactly that shape, and leaves everything else to json.Unmarshal,
// gives the same Entry without the cost.

// trustedMembers are the members an entry line may hold, in RFC 8785 order (docs/design.md §2
// rule 9; all ASCII, so UTF-16 order is byte order). Each is written `"name":`.
var trustedMembers = [...][]byte{
	[]byte(`"data":`), []byte(`"device":`), []byte(`"hlc":`), []byte(`"idem":`),
	[]byte(`"prev":`), []byte(`"ref":`), []byte(`"seq":`), []byte(`"sig":`),
	[]byte(`"type":`), []byte(`"v":`), []byte(`"writer":`),
}

// Indexes into trustedMembers.
const (
	mData = iota
	mDevice
	mHLC
	mIdem
	mPrev
	mRef
	mSeq
	mSig
	mType
	mV
	mWriter
)

// trustedRequired are the members parseTrusted needs present (the bits of their indexes).
const trustedRequired = 1<<mDevice | 1<<mHLC | 1<<mSeq | 1<<mType | 1<<mV | 1<<mWriter

// maxTrustedDigits bounds seq and v: 15 decimal digits stay below 2^53 (maxExactInt),
// so they are exact in RFC 8785 and cannot overflow uint64.
const maxTrustedDigits = 15

// maxDataDepth bounds the nesting of objects and arrays in data the fast path
// checks; deeper data goes to json.Unmarshal.
const maxDataDepth = 64

// parseTrusted decodes raw when it is one JSON object with no white space whose
// members are the known entry members (some of data, idem, prev, ref, sig; all of
// device, hlc, seq, type, v, writer) in RFC 8785 order, each once; whose strings are
// printable ASCII without escapes; seq and v plain non-negative integers of at most 15
// digits; and data, when present, an object in the canonical form [checkCanonical]
// recognises. It reports false for every other input, valid or not, and the caller
// then decodes raw with json.Unmarshal; for the inputs it accepts, the Entry equals
// the one json.Unmarshal fills (TestTrustedEntryMatchesJSON, FuzzTrustedEntry).
//
// The strings of the result and its Data share raw's memory (unsafe.String, no
// copies). That is sound because raw is never written once it is an entry's raw:
// ApplyChunk hands out capacity-clipped slices of a chunk the caller does not change
// afterwards, and nothing in this package writes into Entry.raw (it is read, hashed,
// and copied by append into new buffers). Data is clipped to its length, so an
// append to it copies rather than writes over the members that follow.
//
// known is set exactly when parseCanonical would accept raw: every check it makes
// beyond the shape above is repeated (non-empty writer, device and type, v and seq
// at least 1, a valid HLC, no empty optional string).
func parseTrusted(raw []byte) (Entry, bool) {
	n := len(raw)
	if n < 2 || raw[0] != '{' || raw[n-1] != '}' {
		return Entry{}, false
	}
	var e Entry
	known := true
	seen := 0 // bits of the members found
	next := 0 // index in trustedMembers of the first member allowed next
	i := 1    // position in raw
	for {
		m := -1
		for k := next; k < len(trustedMembers); k++ {
			if bytes.HasPrefix(raw[i:], trustedMembers[k]) {
				m = k
				break
			}
		}
		if m < 0 { // an unknown, misplaced or repeated member, or no member at all
			return Entry{}, false
		}
		i += len(trustedMembers[m])
		seen |= 1 << m
		next = m + 1
		switch m {
		case mData:
			if i >= n || raw[i] != '{' {
				return Entry{}, false // null, another type, or nothing
			}
			end, ok := checkCanonical(raw, i, 0)
			if !ok {
				return Entry{}, false
			}
			e.Data = raw[i:end:end]
			i = end
		case mSeq, mV:
			v, end, ok := plainUint(raw, i)
			if !ok {
				return Entry{}, false
			}
			if m == mSeq {
				e.Seq = v
			} else {
				if v > math.MaxInt { // json.Unmarshal refuses it (32-bit int)
					return Entry{}, false
				}
				e.V = int(v)
			}
			known = known && v >= 1
			i = end
		default:
			s, end, ok := plainString(raw, i)
			if !ok {
				return Entry{}, false
			}
			known = known && s != "" // required: parseCanonical refuses it; optional: it omits it
			switch m {
			case mDevice:
				e.Device = s
			case mHLC:
				e.HLC = s
			case mIdem:
				e.Idem = s
			case mPrev:
				e.Prev = s
			case mRef:
				e.Ref = s
			case mSig:
				e.Sig = s
			case mType:
				e.Type = s
			case mWriter:
				e.Writer = s
			}
			i = end
		}
		if i >= n {
			return Entry{}, false
		}
		if raw[i] == '}' {
			if i != n-1 {
				return Entry{}, false
			}
			break
		}
		if raw[i] != ',' {
			return Entry{}, false
		}
		i++
	}
	if seen&trustedRequired != trustedRequired {
		return Entry{}, false
	}
	e.raw = raw[:n:n]
	e.known = known && ValidHLC(e.HLC)
	return e, true
}

// plainString reads the JSON string starting at raw[i] when all its bytes are
// printable ASCII (0x20–0x7e) other than '"' and '\\'. It returns the string (over
// raw's memory) and the position after the closing quote.
func plainString(raw []byte, i int) (string, int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(raw); j++ {
		c := raw[j]
		if c == '"' {
			if j == i+1 {
				return "", j + 1, true
			}
			return unsafe.String(&raw[i+1], j-i-1), j + 1, true
		}
		if c < 0x20 || c > 0x7e || c == '\\' {
			return "", 0, false
		}
	}
	return "", 0, false
}

// plainUint reads a non-negative integer of at most maxTrustedDigits digits, without
// a leading zero, starting at raw[i]. It returns its value and the position after it.
// A fraction or exponent that follows is left for the caller to refuse.
func plainUint(raw []byte, i int) (uint64, int, bool) {
	var v uint64
	j := i
	for j < len(raw) && raw[j] >= '0' && raw[j] <= '9' {
		v = v*10 + uint64(raw[j]-'0')
		j++
	}
	if d := j - i; d == 0 || d > maxTrustedDigits || (d > 1 && raw[i] == '0') {
		return 0, 0, false
	}
	return v, j, true
}

// checkCanonical reports whether the JSON value starting at raw[i] is valid and
// already in RFC 8785 canonical form, within a subset that covers what ferry writes:
// no white space; object keys printable ASCII without escapes, strictly increasing
// (so byte order is the RFC's UTF-16 order, and no key repeats); strings of valid
// UTF-8 whose only escapes are the ones RFC 8785 §3.2.2.2 writes (\" \\ \b \f \n \r
// \t, and \u00xx in lower case for the other control characters); numbers plain
// integers of at most 15 digits, no leading zero, no "-0" (below 2^53, so written the
// same by the RFC's number serialization); true, false and null; at most
// maxDataDepth levels. It returns the position after the value. False means outside
// the subset, not necessarily invalid or not canonical.
func checkCanonical(raw []byte, i, depth int) (int, bool) {
	if i >= len(raw) {
		return 0, false
	}
	switch c := raw[i]; {
	case c == '{':
		if depth >= maxDataDepth {
			return 0, false
		}
		i++
		if i < len(raw) && raw[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for {
			_, end, ok := plainString(raw, i)
			if !ok || (prev != nil && bytes.Compare(prev, raw[i+1:end-1]) >= 0) {
				return 0, false
			}
			prev = raw[i+1 : end-1]
			if end >= len(raw) || raw[end] != ':' {
				return 0, false
			}
			if i, ok = checkCanonical(raw, end+1, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case '}':
				return i + 1, true
			case ',':
				i++
			default:
				return 0, false
			}
		}
	case c == '[':
		if depth >= maxDataDepth {
			return 0, false
		}
		i++
		if i < len(raw) && raw[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = checkCanonical(raw, i, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case ']':
				return i + 1, true
			case ',':
				i++
			default:
				return 0, false
			}
		}
	case c == '"':
		return canonicalString(raw, i)
	case c == '-':
		if i+1 < len(raw) && raw[i+1] == '0' { // "-0" is written "0"; "-01" is not JSON
			return 0, false
		}
		_, end, ok := plainUint(raw, i+1)
		return end, ok
	case c >= '0' && c <= '9':
		_, end, ok := plainUint(raw, i)
		return end, ok
	case bytes.HasPrefix(raw[i:], []byte("true")):
		return i + 4, true
	case bytes.HasPrefix(raw[i:], []byte("false")):
		return i + 5, true
	case bytes.HasPrefix(raw[i:], []byte("null")):
		return i + 4, true
	}
	return 0, false
}

// canonicalString checks the string starting at raw[i] as checkCanonical describes
// and returns the position after its closing quote.
func canonicalString(raw []byte, i int) (int, bool) {
	for j := i + 1; j < len(raw); {
		c := raw[j]
		switch {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if j+1 >= len(raw) {
				return 0, false
			}
			switch raw[j+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(raw) || raw[j+2] != '0' || raw[j+3] != '0' {
					return 0, false
				}
				hi, lo := raw[j+4], raw[j+5]
				if hi != '0' && hi != '1' || !(lo >= '0' && lo <= '9' || lo >= 'a' && lo <= 'f') {
					return 0, false
				}
				switch v := (hi-'0')<<4 | hexVal(lo); v {
				case '\b', '\f', '\n', '\r', '\t': // written with their short escapes
					return 0, false
				}
				j += 6
			default:
				return 0, false
			}
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(raw[j:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false
			}
			j += size
		}
	}
	return 0, false
}

// hexVal is the value of a lower-case hex digit.
func hexVal(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// ParseCanonicalLine is ParseLine, with the same result, for a line that is most
// likely in its canonical form already (the lines of an owner's checkpoint's state,
// docs/format.md §20): a line of the usual shape is decoded by parseTrusted over the
// line's memory (the caller never writes to it afterwards) and hashed as it is,
// without canonicalizing it again; any other line goes through ParseLine.
func ParseCanonicalLine(line []byte) (Entry, error) {
	if e, ok := parseTrusted(line); ok && e.known {
		e.hash = HashBytes(line)
		return e, nil
	}
	return parseLine(line)
}

// KeptLine returns the entry's line as read (its RFC 8785 form, Canonical) and its hash
// when FromKeptLine rebuilds exactly this entry from them: the line has the shape
// parseTrusted decodes and every field equals what it decodes (known aside: it only
// says that the signing message may be cut from the line, which parseTrusted decides
// from the line alone). ok is false for an entry built in memory, changed since it was
// read, or of another shape; a cache keeps such an entry field by field instead.
func (e *Entry) KeptLine() (line []byte, hash string, ok bool) {
	if e.raw == nil {
		return nil, "", false
	}
	p, ok := parseTrusted(e.raw)
	if !ok || p.V != e.V || p.Writer != e.Writer || p.Device != e.Device ||
		p.Seq != e.Seq || p.HLC != e.HLC || p.Prev != e.Prev || p.Type != e.Type || p.Ref != e.Ref ||
		p.Idem != e.Idem || p.Sig != e.Sig || (p.Data == nil) != (e.Data == nil) || !bytes.Equal(p.Data, e.Data) {
		return nil, "", false
	}
	return e.raw, e.Hash(), true
}

// FromKeptLine rebuilds the entry whose KeptLine gave line and hash, over line's
// memory (parseTrusted: the caller never writes to line afterwards). hash is taken as
// given: the caller has checked the bytes it keeps them in. ok is false when line does
// not have the shape KeptLine keeps.
func FromKeptLine(line []byte, hash string) (Entry, bool) {
	e, ok := parseTrusted(line)
	if !ok {
		return Entry{}, false
	}
	e.hash = hash
	return e, true
}
