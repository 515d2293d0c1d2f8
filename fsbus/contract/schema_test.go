package contract

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
)

// TestValidateOutputNumbers: a number an IEEE 754 double cannot hold, one longer than
// maxNumberText or one with an exponent past ±maxExponent is refused as invalid, in the
// result and in the schema, and never reaches the validator (whose exact rationals
// cannot hold 1e99999999 and grow with the exponent); ordinary numbers validate.
func TestValidateOutputNumbers(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{"score":{"type":"number","maximum":100}}}`)
	for _, out := range []string{
		`{"score":1e99999999}`,
		`{"score":-1e99999999}`,
		`{"score":2e308}`,
		`{"score":0e99999}`,
		`{"score":1e-999999}`,
		`{"score":0.` + strings.Repeat("0", 70) + `1}`,
		`{"score":1,"more":[1,2,{"x":1e500}]}`,
	} {
		lines, err := ValidateOutput(schema, json.RawMessage(out))
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "the result holds the number") || lines != nil {
			t.Errorf("result %.40s: lines %q, err %v; want invalid, out of range", out, lines, err)
		}
	}
	for _, sch := range []string{
		`{"type":"object","properties":{"a":{"minimum":1e99999999}}}`,
		`{"items":{"multipleOf":1e-999999}}`,
	} {
		lines, err := ValidateOutput(json.RawMessage(sch), json.RawMessage(`{"a":5}`))
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "the schema holds the number") || lines != nil {
			t.Errorf("schema %s: lines %q, err %v; want invalid, out of range", sch, lines, err)
		}
	}
	for _, ok := range []string{`{"score":1.5}`, `{"score":-0}`, `{"score":1e-300}`, `{"score":1E+2}`, `{"score":99.99999999999999}`} {
		if lines, err := ValidateOutput(schema, json.RawMessage(ok)); err != nil || lines != nil {
			t.Errorf("result %s: lines %q, err %v; want it to validate", ok, lines, err)
		}
	}
	if lines, err := ValidateOutput(schema, json.RawMessage(`{"score":1e3}`)); err != nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "/score: ") {
		t.Errorf("score 1e3 against maximum 100: lines %q, err %v; want one failure at /score", lines, err)
	}
}

// TestCompileSchemaRefusesOtherDocuments: a $ref to another document — absolute or
// relative — is refused when the schema compiles; nothing is loaded, and a relative one
// never resolves to the schema itself.
func TestCompileSchemaRefusesOtherDocuments(t *testing.T) {
	t.Parallel()
	for _, sch := range []string{
		`{"$ref":"other.json"}`,
		`{"properties":{"a":{"$ref":"report.json"}}}`,
		`{"$ref":"/etc/passwd"}`,
		`{"$ref":"result-schema.json"}`,
		`{"$ref":"https://example.com/s.json"}`,
		`{"$ref":"file:///etc/passwd"}`,
	} {
		_, err := compileSchema(json.RawMessage(sch))
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not loaded") {
			t.Errorf("schema %s: %v; want invalid, not loaded", sch, err)
		}
	}
	if _, err := compileSchema(json.RawMessage(`{"$defs":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`)); err != nil {
		t.Errorf("a $ref within the schema: %v", err)
	}
}

// TestCompileSchemaShape: a schema nested deeper than maxSchemaDepth, or holding more
// than maxSchemaRefs references (which the validator would follow 2^levels times), is
// refused at once as invalid; one within both compiles.
func TestCompileSchemaShape(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"not":`, 70) + `{}` + strings.Repeat(`}`, 70)
	fan := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
		for i := range n {
			fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
		}
		fmt.Fprintf(&b, `"d%d":{"type":"object"}}}`, n)
		return b.String()
	}
	for _, c := range []struct {
		name, schema, want string
	}{
		{"70 levels of not", deep, "nests deeper than 64 levels"},
		{"references fanning out 22 levels", fan(22), "45 references"},
		{"a maxLength past 2^53", `{"properties":{"a":{"type":"string","maxLength":1e19}}}`, "the schema holds the number 1e19"},
		{"a maxItems of 2^64", `{"maxItems":18446744073709551616}`, "the schema holds the number"},
	} {
		_, err := compileSchema(json.RawMessage(c.schema))
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want invalid with %q", c.name, err, c.want)
		}
	}
	for _, ok := range []string{
		strings.Repeat(`{"not":`, 30) + `{}` + strings.Repeat(`}`, 30),
		fan(7), // 1 + 14 references
		`{"properties":{"a":{"type":"number","maximum":9007199254740992}}}`,
	} {
		if _, err := compileSchema(json.RawMessage(ok)); err != nil {
			t.Errorf("schema %.60s…: %v", ok, err)
		}
	}
	// The results a fanning schema within the bound validates stay cheap to check.
	if lines, err := ValidateOutput(json.RawMessage(fan(7)), json.RawMessage(`{"a":1}`)); err != nil || lines != nil {
		t.Errorf("fan(7) against an object: %q, %v", lines, err)
	}
}
