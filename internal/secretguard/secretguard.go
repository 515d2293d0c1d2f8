package secretguard

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/ijson"
	"github.com/ferryhq/ferry/internal/lazyre"
)

// The secret guard (docs/format.md §12 "Input caps and the secret guard"): every
// free-text field is scanned before anything is written, and text that looks like a
// credential is refused. Channel files are readable by whoever stores the synced
// folder; a credential belongs in the vault (`ferry secret put`,
// docs/adr/0009-vault.md), never in a message or a note.
//
// The detectors aim at what leaks in practice — provider tokens with a recognisable
// prefix, private key blocks, JWTs, `.env` lines, and long random values assigned to a
// name — and stay quiet on what ordinary engineering text is full of: sha256 and git
// hashes (hex), UUIDs, ferry ids, URLs, paths, short base64.

// secretHint is the hint of every refusal.
const secretHint = "keep credentials out of the channel: store the value with `ferry secret put NAME --to AGENT…` and refer to it by NAME"

// Error is returned (wrapped in an invalid *errs.Error) when a field looks like it
// holds a credential. It names the kind and the field, never the value.
type Error struct {
	Kind  string // e.g. "GitHub token"
	Field string // e.g. "message body"
	Line  int    // 1-based line of the field where it was found
}

func (e *Error) Error() string {
	return fmt.Sprintf("the %s looks like it holds %s %s (line %d); nothing was written", e.Field, article(e.Kind), e.Kind, e.Line)
}

// secretDetector finds one kind of credential. match returns the byte span [start,
// end) of the first hit in s, or -1, -1.
type secretDetector struct {
	kind  string
	match func(s string) (int, int)
}

// reDetector is a detector whose regexp alone decides; check, when set, vets each
// candidate match (its submatches) and may reject it.
//
// A rejected candidate does not hide what follows its name: the search resumes at the
// start of its last matched group (the value), so in `note: AWS_SECRET_ACCESS_KEY=…`
// the name the first try took as a value is tried as a name. A leading separator the
// regexp consumed (a space, a brace) is not part of the reported span.
func reDetector(kind, re string, check func(m []string) bool) secretDetector {
	rx := lazyre.New(re)
	return secretDetector{kind: kind, match: func(s string) (int, int) {
		for pos := 0; pos < len(s); {
			loc := rx.FindStringSubmatchIndex(s[pos:])
			if loc == nil {
				break
			}
			m := make([]string, len(loc)/2)
			last := -1
			for i := range m {
				if loc[2*i] >= 0 {
					m[i] = s[pos+loc[2*i] : pos+loc[2*i+1]]
					if i > 0 {
						last = loc[2*i]
					}
				}
			}
			start, end := pos+loc[0], pos+loc[1]
			if check == nil || check(m) {
				for start < end && strings.IndexByte(" \t\r\n,;:({[", s[start]) >= 0 {
					start++
				}
				return start, end
			}
			switch {
			case last > loc[0]:
				pos += last
			case loc[1] > loc[0]:
				pos += loc[1]
			default:
				pos += loc[0] + 1
			}
		}
		return -1, -1
	}}
}

// secretDetectors are tried in order; the first hit names the kind.
var secretDetectors = []secretDetector{
	reDetector("private key block", `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`, nil),
	reDetector("age secret key", `AGE-SECRET-KEY-1[0-9A-Z]{58}`, nil),
	reDetector("AWS access key id", `\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`, nil),
	reDetector("GitHub token", `\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`, nil),
	reDetector("GitLab token", `\bglpat-[A-Za-z0-9_\-]{20,}`, nil),
	reDetector("Slack token", `\bxox[abprs]-[A-Za-z0-9-]{10,}`, nil),
	reDetector("Anthropic API key", `\bsk-ant-[A-Za-z0-9_\-]{20,}`, nil),
	reDetector("OpenAI-style API key", `\bsk-(?:proj-|svcacct-|admin-|live-|test-)?([A-Za-z0-9_\-]{20,})`, func(m []string) bool {
		return mixedToken(m[1])
	}),
	reDetector("Google API key", `\bAIza[0-9A-Za-z_\-]{35}`, nil),
	reDetector("JWT", `\b(eyJ[A-Za-z0-9_\-]{5,})\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{10,}`, func(m []string) bool {
		return jwtHeader(m[1])
	}),
	reDetector("password in a URL", `\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:([^/\s:@]{3,})@`, func(m []string) bool {
		return !placeholder(m[1])
	}),
	// NAME=value anywhere on a line (`creds: DB_PASSWORD=…`), and NAME: value as YAML
	// or JSON writes it (`password: …`, `{"api_key": "…"}`). m[1] is the name's opening
	// quote, m[3] the operator.
	reDetector(".env secret", `(?i)(?:^|[^A-Za-z0-9_.\-"'])(?:export[ \t]+|set[ \t]+)?(["']?)([A-Za-z0-9_.\-]*?(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH_?KEY)[A-Za-z0-9_.\-]*)["']?[ \t]*(=|:=|:)[ \t]*(?:"([^"\n]*)"|'([^'\n]*)'|([^\s#"',;}]*))`, func(m []string) bool {
		v := m[4] + m[5] + m[6]
		if m[3] == ":" && m[1] == "" && !strongValue(v) {
			return false // prose: "Token: expired", "secret: v2-rollout"
		}
		return envSecret(m[2], v)
	}),
	reDetector("high-entropy value assigned to a name", `([A-Za-z_][A-Za-z0-9_.\-]*)["']?[ \t]*(?:=|:=|:)[ \t]*["']?([A-Za-z0-9+/_\-]{20,}={0,2})["']?`, func(m []string) bool {
		return highEntropy(m[2])
	}),
}

// Find returns the kind of the first thing in s that looks like a credential and
// its byte offset, or "" and -1 when there is none. It never returns the value.
func Find(s string) (kind string, at int) {
	for _, d := range secretDetectors {
		if i, _ := d.match(s); i >= 0 {
			return d.kind, i
		}
	}
	return "", -1
}

// Redact replaces every credential-looking span of s with "[secret removed:
// KIND]" and reports how many it replaced. `ferry run` applies it to a process's output
// before it becomes a signed note, so a job that prints its environment cannot put a
// token in the channel, nor lose its result to the guard's refusal.
func Redact(s string) (string, int) {
	n := 0
	for _, d := range secretDetectors {
		for n < 1000 {
			i, j := d.match(s)
			if i < 0 {
				break
			}
			s = s[:i] + "[secret removed: " + d.kind + "]" + s[j:]
			n++
		}
	}
	return s, n
}

// RedactInputs replaces in text every credential-looking span of the caller's inputs —
// a command line's arguments, the strings of a tool call — with "[secret removed:
// KIND]": an error that quotes what it refuses (an unknown action, a name, an id, a
// path) never shows a token pasted into the wrong place. Only the caller's own strings
// are looked for, so what ferry generates (keys, hashes, signatures) is shown as it is
// even where it looks random; an input that is a key text is a key, not a secret.
func RedactInputs(text string, inputs []string) string {
	for _, in := range inputs {
		if keyText(in) {
			continue
		}
		for _, d := range secretDetectors {
			for rest := in; rest != ""; {
				i, j := d.match(rest)
				if i < 0 {
					break
				}
				text = replaceFold(text, rest[i:j], "[secret removed: "+d.kind+"]")
				if q := strconv.Quote(rest[i:j]); q[1:len(q)-1] != rest[i:j] {
					text = replaceFold(text, q[1:len(q)-1], "[secret removed: "+d.kind+"]")
				}
				rest = rest[j:]
			}
		}
	}
	return text
}

// keyText reports whether s is a public key's text, "ed25519:" and 32 bytes of
// unpadded base64url (docs/format.md §5): what ferry prints, not a secret.
func keyText(s string) bool {
	rest, ok := strings.CutPrefix(s, "ed25519:")
	if !ok {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil && len(raw) == ed25519.PublicKeySize
}

// replaceFold replaces every span of text that equals old regardless of case (an id
// is lowercased before it is quoted, and an AWS key id is upper case) with repl.
func replaceFold(text, old, repl string) string {
	if old == "" {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		if i+len(old) <= len(text) && strings.EqualFold(text[i:i+len(old)], old) {
			b.WriteString(repl)
			i += len(old)
			continue
		}
		b.WriteByte(text[i])
		i++
	}
	return b.String()
}

// Check refuses s when it looks like it holds a credential: an invalid *errs.Error
// wrapping a *SecretError that names the kind and field (and the line) but never the
// value, with a hint pointing to `ferry secret put`. nil otherwise.
func Check(field, s string) error {
	kind, at := Find(s)
	if kind == "" {
		return nil
	}
	se := &Error{Kind: kind, Field: field, Line: 1 + strings.Count(s[:at], "\n")}
	return &errs.Error{Category: errs.Invalid, Message: se.Error(), Hint: secretHint, Err: se}
}

// Quote is strconv.Quote(s) for an error message, unless s looks like it holds a
// credential: then "(text that looks like a KIND, not shown)", so an error about bad
// input (a label, a recipient, a name) never echoes a token someone pasted in the
// wrong place (never echo it).
func Quote(s string) string {
	if kind, _ := Find(s); kind != "" {
		return "(text that looks like " + article(kind) + " " + kind + ", not shown)"
	}
	return strconv.Quote(s)
}

func article(kind string) string {
	if kind != "" && strings.ContainsRune("AEIOaeio", rune(kind[0])) {
		return "an"
	}
	return "a"
}

// mixedToken reports whether t looks like a random token rather than a hyphenated word
// list: it has a digit and a letter, and either at most two hyphens or at least 40
// characters of mixed case.
func mixedToken(t string) bool {
	var digit, letter bool
	for _, r := range t {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			letter = true
		}
	}
	if !digit || !letter {
		return false
	}
	// A word list (sk-ask-the-owner-2) has hyphens; so do real project keys
	// (sk-proj-…, base64url), which are long and mix both cases.
	return strings.Count(t, "-") < 3 || len(t) >= 40 && strings.ToLower(t) != t && strings.ToUpper(t) != t
}

// strongValue reports whether an unquoted YAML-style value looks like a password rather
// than a word: at least 8 characters, no spaces, a letter and a digit or symbol, and not
// a kebab-case identifier (v2-rollout-plan).
func strongValue(v string) bool {
	if len(v) < 8 || strings.ContainsAny(v, " \t") || kebab.MatchString(v) {
		return false
	}
	var letter, other bool
	for _, r := range v {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			letter = true
		} else {
			other = true
		}
	}
	return letter && other
}

var kebab = lazyre.New(`^[a-z0-9]+(?:-[a-z0-9]+)+$`)

// jwtHeader reports whether h (base64url) decodes to a JSON object with "alg".
func jwtHeader(h string) bool {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(h, "="))
	if err != nil {
		return false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m["alg"]
	return ok
}

// envSecret reports whether NAME=value is a secret-named variable set to a real value.
// Names of where a secret lives (…_FILE, …_PATH, …_URL) and placeholder values are not.
func envSecret(name, value string) bool {
	up := strings.ToUpper(name)
	for _, suf := range []string{"_FILE", "_PATH", "_DIR", "_URL", "_URI", "_ENDPOINT", "_NAME", "_ID", "_TYPE", "_LENGTH", "_TTL", "_EXPIRY", "_HEADER"} {
		if strings.HasSuffix(up, suf) {
			return false
		}
	}
	return len(value) >= 6 && !placeholder(value)
}

// codeRef matches a dotted identifier (settings.db_password): a reference in code.
var codeRef = lazyre.New(`^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+;?$`)

// placeholder reports whether v is obviously not a real secret: a reference to another
// variable or a template, a path, a run of one character, or a stock filler word.
func placeholder(v string) bool {
	l := strings.ToLower(strings.Trim(v, `"' `))
	switch {
	case l == "":
		return true
	case strings.HasPrefix(l, "$"), strings.HasPrefix(l, "%") && strings.HasSuffix(l, "%"),
		strings.HasPrefix(l, "<") && strings.HasSuffix(l, ">"), strings.Contains(l, "{{"),
		strings.HasPrefix(l, "/"), strings.HasPrefix(l, "./"), strings.HasPrefix(l, "~/"),
		strings.HasPrefix(l, "..."), strings.HasSuffix(l, "..."):
		return true
	case strings.Trim(l, string(l[0])) == "":
		return true // xxxxxx, ******
	case strings.ContainsAny(l, "()[]{}"), codeRef.MatchString(l):
		return true // code: os.getenv("TOKEN"), settings.db_password, process.env.token
	}
	for _, w := range []string{"changeme", "change-me", "change_me", "example", "placeholder", "redacted",
		"replace", "your", "dummy", "sample", "todo", "fixme", "not-set", "notset", "unset", "[secret removed"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	switch l {
	case "true", "false", "none", "null", "nil", "undefined", "empty", "secret", "password", "token", "test":
		return true
	}
	return false
}

// highEntropy reports whether v looks like a random secret: at least 20 characters,
// letters and digits mixed, not hex (hashes and commit ids are hex), and a Shannon
// entropy of at least 4.2 bits per character (3.9 from 32 characters up, where a
// finite sample's estimate falls short of its alphabet's).
func highEntropy(v string) bool {
	v = strings.TrimRight(v, "=")
	if len(v) < 20 || isHex(v) || ulidRe.MatchString(v) || sriRe.MatchString(v) || identifierLike(v) {
		return false
	}
	var upper, lower, digit bool
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		}
	}
	if !digit || !(upper || lower) || (!upper && strings.ContainsAny(v, "-_") && strings.Count(v, "-")+strings.Count(v, "_") > 2) {
		return false // ids-like-this-2026 and snake_case_names_1
	}
	limit := 4.2
	if len(v) >= 32 {
		limit = 3.9
	}
	return shannon(v) >= limit && !base64Text(v)
}

// ulidRe matches a ULID (26 Crockford base32 characters, a 48-bit time first): an id.
var ulidRe = lazyre.New(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)

// sriRe matches a Subresource Integrity hash (sha512-<base64>, W3C SRI): a digest.
var sriRe = lazyre.New(`^(?:sha1|sha256|sha384|sha512)-[A-Za-z0-9+/]+$`)

// identPiece splits a value into camelCase words, upper-case runs and digit runs.
var identPiece = lazyre.New(`[A-Z]+[a-z]*|[a-z]+|[0-9]+`)

// wordPiece is a piece shaped like a word: Capitalised or lower case, or a short
// acronym (JIRA, HTTP).
var wordPiece = lazyre.New(`^(?:[A-Z]?[a-z]{2,}|[A-Z]{2,6})$`)

// identifierLike reports whether v is made of words — a branch, a path, a Go test or
// handler name (feature/JIRA-1234-fix-login-flow2, internal/pkg/handlers/v2/OrderSubmit,
// TestIncrementalFoldMatchesFold3283736891) — rather than random characters: its letter
// pieces average at least 4 letters and at least 85% of its letters are in pieces that
// look like words (a vowel, no run of four consonants). TestIdentifierLikeSparesRandomTokens
// holds it to no false pass over 60,000 random 40-character mixed-case tokens; short
// or lower-case-and-digit random tokens pass more often (a few in 10,000 at 20
// mixed-case characters), the price of not refusing every branch and test name.
func identifierLike(v string) bool {
	letters, good, pieces := 0, 0, 0
	for _, p := range identPiece.FindAllString(v, -1) {
		if p[0] >= '0' && p[0] <= '9' {
			continue
		}
		letters += len(p)
		pieces++
		if wordLike(p) {
			good += len(p)
		}
	}
	return letters > 0 && letters >= 4*pieces && good*100 >= 85*letters
}

func wordLike(p string) bool {
	if !wordPiece.MatchString(p) {
		return false
	}
	vowel, run := false, 0
	for _, c := range strings.ToLower(p) {
		if strings.ContainsRune("aeiouy", c) {
			vowel, run = true, 0
		} else if run++; run > 3 {
			return false
		}
	}
	return vowel
}

// base64Text reports whether v is base64 (either alphabet, padding optional) of
// printable text: encoded prose or config, not a random key.
func base64Text(v string) bool {
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(strings.TrimRight(v, "="))
		if err != nil || len(b) == 0 {
			continue
		}
		text := 0
		for _, c := range b {
			if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
				text++
			}
		}
		return text == len(b)
	}
	return false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}

// shannon is the entropy of s's byte distribution in bits per byte.
func shannon(s string) float64 {
	var n [256]int
	for i := 0; i < len(s); i++ {
		n[s[i]]++
	}
	h := 0.0
	for _, c := range n {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// RedactIJSON is the text of err, an ijson.Check error, with a repeated member name that
// looks like a credential redacted (Redact) before the text quotes and cuts it.
func RedactIJSON(err error) string {
	var e *ijson.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	c := *e
	c.Name, _ = Redact(c.Name)
	c.Other, _ = Redact(c.Other)
	return c.Error()
}
