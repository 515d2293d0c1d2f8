// Package errs holds the one error type every layer of ferry returns for a failure a
// user can act on: a stable category, a message, and a hint saying what to do next.
// The CLI maps the category to an exit code (docs/exit-codes.md) and the MCP server
// to a tool error (docs/design.md §4); anything that is not an *Error is internal.
package errs

import (
	"errors"
	"fmt"
)

// Category is an error's stable name: the CLI's exit code and the MCP tool error's
// category follow from it. Its values are those of docs/design.md §4.
type Category string

// The categories of docs/design.md §4, shared by the CLI and the MCP server.
const (
	Denied      Category = "denied"
	Locked      Category = "locked"
	NotFound    Category = "not_found"
	Conflict    Category = "conflict"
	Invalid     Category = "invalid"
	Stale       Category = "stale"
	RetryNeeded Category = "retry_needed"
	Paused      Category = "paused"
	Superseded  Category = "superseded"
	Internal    Category = "internal"
)

// Error is an operation's failure: a stable category, a message, and a hint saying what
// to do next. Every fsbus operation returns *Error for failures a user can act on;
// anything else is an internal error.
type Error struct {
	Category Category
	Message  string
	Hint     string
	Err      error // optional cause
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return string(e.Category) + ": " + e.Message
	}
	return string(e.Category) + ": " + e.Message + " — " + e.Hint
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error of category cat with a hint and a formatted message.
func Errorf(cat Category, hint, format string, args ...any) *Error {
	return &Error{Category: cat, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// CategoryOf returns err's category: the *Error's, or Internal for any other error.
func CategoryOf(err error) Category {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Category
	}
	return Internal
}

// Is reports whether err is an *Error of category cat.
func Is(err error, cat Category) bool { return err != nil && CategoryOf(err) == cat }

// WithHint returns err with more added to its hint ("; " between), as a copy: the
// *Error err holds is left as it was. An err that is not an *Error is returned as is.
func WithHint(err error, more string) error {
	var fe *Error
	if !errors.As(err, &fe) {
		return err
	}
	c := *fe
	if c.Hint == "" {
		c.Hint = more
	} else {
		c.Hint += "; " + more
	}
	return &c
}

// From returns the *Error err is or wraps, as errors.As finds it, and whether there
// is one.
func From(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}
