package fsbus

import (
	"fmt"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/pause"
	"github.com/ferryhq/ferry/internal/errs"
)

// Input caps (docs/format.md §12 "Input caps and the secret guard"): every free-text
// input has one, checked before anything is written, the same for the CLI and MCP (both
// call these functions). The constants live beside the code that uses them; Caps is the
// one table of all of them, which docs/format.md "Input caps" lists and TestCapsDoc
// keeps in step.

// MaxRPCRequest is the longest JSON-RPC request line `ferry mcp serve` reads, in bytes
// (16 MiB); a longer line is consumed to its end and answered with -32600.
const MaxRPCRequest = 16 << 20

// Units of a cap.
const (
	unitBytes = "bytes"
	UnitChars = "characters"
)

// InputCap is one row of the table.
type InputCap struct {
	Field string // as refusals name it
	Limit int
	Unit  string // UnitBytes or UnitChars
}

// caps is every input cap, in the order docs/format.md lists them.
var caps = []InputCap{
	{"order title", MaxTitle, UnitChars},
	{"order body", MaxOrderBody, unitBytes},
	{"message body", fold.MaxMessageBody, unitBytes},
	{"progress note", MaxNote, unitBytes},
	{"result summary", MaxNote, unitBytes},
	{"result reference", MaxReference, unitBytes},
	{"result output", contract.MaxOutput, unitBytes},
	{"review, release, cancel, extend note", MaxNote, unitBytes},
	{"fail reason", MaxNote, unitBytes},
	{"ask title", MaxAskTitle, UnitChars},
	{"ask recommendation", MaxAskText, UnitChars},
	{"ask reasoning", MaxAskText, UnitChars},
	{"answer note", MaxNote, unitBytes},
	{"hand-in reference", MaxReference, UnitChars},
	{"hand-in note", MaxNote, unitBytes},
	{"decision line", fold.MaxDecisionLine, UnitChars},
	{"brief objective, each constraint", fold.MaxBriefLine, UnitChars},
	{"presence doing line", maxDoing, unitBytes},
	{"order schema", contract.MaxSchema, unitBytes},
	{"search query", MaxSearchQuery, UnitChars},
	{"idempotency key", maxIdemKey, unitBytes},
	{"secret value", MaxSecretValue, unitBytes},
	{"secret name", fold.MaxSecretName, UnitChars},
	{"pause reason", pause.MaxReason, UnitChars},
	{"JSON-RPC request line", MaxRPCRequest, unitBytes},
}

// checkCap returns an invalid error naming field, its size and the cap when s is over
// limit (measured in unit), else nil. hint says what to do instead.
func checkCap(field, s string, limit int, unit, hint string) error {
	n := len(s)
	if unit == UnitChars {
		n = utf8.RuneCountInString(s)
	}
	if n <= limit {
		return nil
	}
	return capError(field, n, limit, unit, hint)
}

// capError is the refusal of an input over its cap: "<field> is <n> <unit>; the limit
// is <limit>".
func capError(field string, n, limit int, unit, hint string) error {
	if hint == "" {
		hint = fmt.Sprintf("keep it to at most %d %s", limit, unit)
	}
	return errs.Errorf(errs.Invalid, hint, "%s is %d %s; the limit is %d", field, n, unit, limit)
}

// Search bounds.
const (
	MaxSearchQuery   = 200 // characters
	SearchSnippet    = 160 // characters of text around the first word found
	DefaultSearchMax = 20  // hits per page when no limit is given
	MaxSearchLimit   = 100 // hits per page at most
)
