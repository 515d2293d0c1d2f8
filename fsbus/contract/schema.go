package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/ijson"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/internal/textsafe"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// HasControl reports whether s holds a control character (C0, DEL, C1), a line
// separator or a bidi control (textsafe.Line) other than, when multiline, newline, tab
// and CR (textsafe.LinesCR): terminal escapes must not reach an owner's screen.
func HasControl(s string, multiline bool) bool {
	if multiline {
		return textsafe.LinesCR.Index(s) >= 0
	}
	return textsafe.Line.Index(s) >= 0
}

// ValidateOutput checks output against schema and returns one line per failure,
// "<instance location>: <reason>" (e.g. "/passed: got string, want boolean"), sorted
// as the validator reports them; nil when it validates. It returns invalid when the
// schema does not compile or output is not JSON.
func ValidateOutput(schema, output json.RawMessage) (lines []string, err error) {
	defer func() {
		// The validator is a library: whatever input makes it panic is refused as
		// invalid, never a crash of the process validating (ferry run, mcp serve).
		if r := recover(); r != nil {
			lines, err = nil, errs.Errorf(errs.Invalid, "", "validating the result: the validator failed: %v", r)
		}
	}()
	sch, err := compileSchema(schema)
	if err != nil {
		return nil, err
	}
	if err := checkNumbers(output, "the result", 0); err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(output))
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "pass the result as JSON", "result is not valid JSON")
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, errs.Errorf(errs.Invalid, "", "validating the result: %v", err)
	}
	seen := map[string]bool{}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		l := scrubControl(loc + ": " + oneLine(u.Error.String()))
		if !seen[l] && !strings.Contains(l, "validation failed") {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		lines = []string{scrubControl("/: " + oneLine(ve.Error()))}
	}
	return lines, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// scrubControl replaces the characters hasControl refuses on one line (terminal
// escapes, bidi overrides; textsafe.Line) by U+FFFD: validator messages quote the
// result's own values.
func scrubControl(s string) string {
	return textsafe.Line.Clean(s, func(rune) string { return "\uFFFD" })
}

// compileSchema compiles a result schema (draft 2020-12 unless it says otherwise).
// It returns invalid with the library's reason for a schema that does not compile.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if err := checkNumbers(raw, "the schema", maxSchemaNumber); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "pass a JSON Schema as JSON", "schema is not valid JSON")
	}
	if err := checkShape(doc); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	// A hierarchical URL with an empty path, so a relative $ref that names a
	// document resolves to another one (which refuseLoader refuses), never to this one.
	const loc = "ferry:///"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, errs.Errorf(errs.Invalid, "fix the schema", "schema: %v", err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "fix the schema (JSON Schema draft 2020-12 unless $schema says otherwise; no $ref to other documents)", "schema does not compile: %s", oneLine(err.Error()))
	}
	return sch, nil
}

// maxNumberText and maxExponent bound a number in a result or a schema: the validator
// computes with exact rationals (math/big), whose cost grows with the digits and the
// exponent, and which cannot hold 1e99999999 at all. A number of I-JSON is one an IEEE
// 754 double holds (RFC 7493 §2.2): 17 significant digits, exponents within ±308 (±324
// for subnormals); the bounds leave room around that.
const (
	maxNumberText = 64
	maxExponent   = 400
)

// maxSchemaDepth and maxSchemaRefs bound a result schema's shape. The validator has no
// work budget: compiling costs about the cube of the nesting depth (a 32 KiB schema of
// nested "not" took 45 s), and references that fan out (allOf or anyOf of two $refs,
// level after level) cost 2^levels evaluations at every validation (20 levels: 15 s and
// 1.9 GB). A result schema needs neither: 64 levels of JSON nesting are 32 of
// properties, and 16 references give at most 2^8 paths.
const (
	maxSchemaDepth = 64
	maxSchemaRefs  = 16
)

// checkShape returns invalid for a schema document (as jsonschema.UnmarshalJSON decodes
// it) nested deeper than maxSchemaDepth or holding more than maxSchemaRefs references
// ($ref, $dynamicRef, $recursiveRef members).
func checkShape(doc any) error {
	refs, deepest := 0, 0
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		deepest = max(deepest, depth)
		if depth > maxSchemaDepth {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				if k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef" {
					refs++
				}
				walk(x, depth+1)
			}
		case []any:
			for _, x := range t {
				walk(x, depth+1)
			}
		}
	}
	walk(doc, 1)
	switch {
	case deepest > maxSchemaDepth:
		return errs.Errorf(errs.Invalid, "flatten the schema: at most 64 levels of nesting", "the schema nests deeper than %d levels", maxSchemaDepth)
	case refs > maxSchemaRefs:
		return errs.Errorf(errs.Invalid, "inline the definitions or use fewer: at most 16 references", "the schema holds %d references ($ref, $dynamicRef, $recursiveRef), more than %d", refs, maxSchemaRefs)
	}
	return nil
}

// maxSchemaNumber bounds a schema's numbers: the validator reads length and count
// limits (maxLength, maxItems, …) as 64-bit integers, so 1e19 wraps to a negative
// limit; 2^53 is I-JSON's bound for exact integers (RFC 7493 §2.2).
const maxSchemaNumber = 1 << 53

// checkNumbers returns invalid for a number in doc (JSON) that an IEEE 754 double
// cannot hold, or longer than maxNumberText, or with an exponent past ±maxExponent, or
// (maxAbs > 0) larger in magnitude than maxAbs. what names doc in the message. A doc
// that is not JSON is left to the caller.
func checkNumbers(doc []byte, what string, maxAbs float64) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or not JSON: the caller says so
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		lit := string(n)
		bad := len(lit) > maxNumberText
		if !bad {
			_, ferr := strconv.ParseFloat(lit, 64)
			bad = ferr != nil
		}
		if i := strings.IndexAny(lit, "eE"); !bad && i >= 0 {
			e, eerr := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
			bad = eerr != nil || e > maxExponent || e < -maxExponent
		}
		if f, _ := strconv.ParseFloat(lit, 64); !bad && maxAbs > 0 && math.Abs(f) > maxAbs {
			bad = true
		}
		if bad {
			shown := lit
			if len(shown) > 24 {
				shown = shown[:24] + "…"
			}
			return errs.Errorf(errs.Invalid, "write numbers an IEEE 754 double holds (RFC 7493 §2.2): at most 64 characters, exponents within ±400, and in a schema at most 2^53",
				"%s holds the number %s, which is out of range", what, shown)
		}
	}
}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas are self-contained: %s is not loaded", url)
}

// refuseLoader refuses every $ref to another document: a result schema is
// self-contained, and validating it must read no file and no network.
type refuseLoader struct{}

// MaxJSONSlack bounds what whitespace may add to a JSON input over its compacted cap.
const MaxJSONSlack = 4

// leadJSON is how many bytes trimJSON drops before the value.
func leadJSON(raw []byte) int {
	left := bytes.TrimLeftFunc(raw, unicode.IsSpace)
	n := len(raw) - len(left)
	if bytes.HasPrefix(left, utf8BOM) {
		n += len(utf8BOM)
	}
	return n
}

// trimJSON is raw without surrounding white space and a BOM before the value.
func trimJSON(raw []byte) []byte {
	return bytes.TrimPrefix(bytes.TrimSpace(raw), utf8BOM)
}

// utf8BOM may stand before a JSON value given in a file (trimJSON drops it).
var utf8BOM = []byte("\xef\xbb\xbf")

// CheckIJSON returns invalid, naming what and the reason with its byte offset in raw,
// when raw (surrounding white space and a BOM aside) is JSON that is not I-JSON (RFC
// 7493): a member name given twice in one object, bytes that are not UTF-8, or a \u
// escape of a lone surrogate. Readers disagree on what such JSON says (the first or
// the last of two members; U+FFFD or a refusal), so ferry accepts none of it. Text
// that is not JSON at all passes: the caller's own decoding refuses it in its own
// words. A repeated name that looks like a secret is redacted (secretguard.RedactIJSON).
func CheckIJSON(raw []byte, what string) error {
	body := trimJSON(raw)
	var e *ijson.Error
	if !errors.As(ijson.Check(body), &e) || e.Kind == ijson.Syntax {
		return nil
	}
	at := *e
	at.Offset += int64(leadJSON(raw))
	return &errs.Error{Category: errs.Invalid, Message: what + " is not I-JSON: " + secretguard.RedactIJSON(&at),
		Hint: "give each member name once per object, in UTF-8, with surrogate escapes only in pairs (RFC 7493)", Err: e}
}

// CompactJSON parses raw as one JSON value and returns it compacted. The limit, in
// bytes, applies to the compacted form (what the channel stores), so indentation does
// not count; raw itself may be at most maxJSONSlack times limit, so whitespace cannot
// make it parse megabytes. It returns invalid naming what for anything else, and for
// JSON that is not I-JSON (RFC 7493: a member name twice in one object, invalid UTF-8,
// a lone surrogate escape), naming why and where.
func CompactJSON(raw []byte, limit int, what string) (json.RawMessage, error) {
	given := raw
	raw = trimJSON(raw)
	if len(raw) > MaxJSONSlack*limit {
		return nil, errs.Errorf(errs.Invalid, "keep it small; the work itself stays in the work repo",
			"%s is %d bytes before compaction; the limit is %d compacted (and %d as written)", what, len(raw), limit, MaxJSONSlack*limit)
	}
	if err := CheckIJSON(given, what); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil || !json.Valid(raw) {
		return nil, errs.Errorf(errs.Invalid, "pass one JSON value (or @FILE holding one)", "%s is not valid JSON", what)
	}
	if buf.Len() > limit {
		return nil, errs.Errorf(errs.Invalid, "keep it small; the work itself stays in the work repo", "%s is %d bytes compacted; the limit is %d", what, buf.Len(), limit)
	}
	return buf.Bytes(), nil
}

// jsonKind names the kind of the JSON value starting with b.
func jsonKind(b byte) string {
	switch b {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// ValidateContract checks the fields the caller sets directly (not the pointers, which
// FingerprintPointers builds). It returns invalid naming the field.
func ValidateContract(c *fold.Contract) error {
	if c.Task != "" && !fold.ValidName(strings.ReplaceAll(c.Task, "_", "-")) {
		return errs.Errorf(errs.Invalid, "a task type is a short name such as code_review or implementation", "bad task type %q", c.Task)
	}
	if w := c.Windows; w != nil {
		for _, v := range []struct {
			name string
			s    int64
		}{{"exec_s", w.ExecS}, {"lifetime_s", w.LifetimeS}, {"queue_s", w.QueueS}} {
			if v.s < 0 || v.s > maxWindowS {
				return errs.Errorf(errs.Invalid, "windows are seconds between 1 and 30 days; 0 keeps the channel default", "window %s = %d", v.name, v.s)
			}
		}
		if w.ExecS > 0 && w.LifetimeS > 0 && w.LifetimeS < w.ExecS {
			return errs.Errorf(errs.Invalid, "the lifetime caps the renewals of the execution window: make it at least as long", "lifetime_s %d is shorter than exec_s %d", w.LifetimeS, w.ExecS)
		}
		if *w == (fold.Windows{}) {
			c.Windows = nil
		}
	}
	if h := c.Hints; h != nil {
		bad := h.Cores < 0 || h.Cores > 4096 || h.ExpectedMinutes < 0 || h.ExpectedMinutes > 60*24*30 ||
			h.RAMGB < 0 || h.RAMGB > 1<<20 || h.GPUMemGB < 0 || h.GPUMemGB > 1<<20 ||
			math.IsNaN(h.RAMGB) || math.IsNaN(h.GPUMemGB)
		if bad {
			return errs.Errorf(errs.Invalid, "hints are non-negative: cores, ram_gb, gpu_mem_gb, expected_minutes", "hints out of range")
		}
		if *h == (fold.Hints{}) {
			c.Hints = nil
		}
	}
	if len(c.Schema) > 0 {
		canon, err := CompactJSON(c.Schema, MaxSchema, "schema")
		if err != nil {
			return err
		}
		if canon[0] != '{' {
			// docs/format.md §11: the schema is an object. true/false are valid JSON
			// Schemas but say nothing a result could be checked against;
			// arrays, strings and numbers are no schema.
			return errs.Errorf(errs.Invalid, `pass a JSON Schema object, e.g. {"type":"object","required":["passed"]}`, "schema is %s, not a JSON object", jsonKind(canon[0]))
		}
		if _, err := compileSchema(canon); err != nil {
			return err
		}
		c.Schema = canon
	}
	return nil
}

// Limits of a contract.
const (
	// MaxSchema is the largest result schema (bytes of its canonical form).
	MaxSchema = 32 << 10
	// MaxOutput is the largest structured output of a result (bytes of its canonical form).
	MaxOutput = 64 << 10
	// maxWindowS is the longest window an order may set (seconds: 30 days).
	maxWindowS = 30 * 24 * 3600
	// SchemaAttempts is how many schema failures a contract allows: the first
	// SchemaAttempts-1 answer retry_needed, the last records validation_failed.
	SchemaAttempts = 3
)
