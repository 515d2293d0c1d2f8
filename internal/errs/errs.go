// Package errs holds the one error type every layer of ferry returns for a failure a
// user can act on: a stable category, a message, and a hint saying what to do next.
// The CLI maps the category to an exit code (docs/exit-codes.md) and the MCP server
// to a tool error (docs/design.md §4); anything that is not an *Error is internal.
package errs

import (
	"errors"
	"fmt"
)

// The categories of docs/design.md §4, shared by the CLI and the MCP server.
const (
	Denied      = "denied"
	Locked      = "locked"
	NotFound    = "not_found"
	Conflict    = "conflict"
	Invalid     = "invalid"
	Stale       = "stale"
	RetryNeeded = "retry_needed"
	Paused      = "paused"
	Superseded  = "superseded"
	Internal    = "internal"
)

// Error is an operation's failure: a stable category, a message, and a hint saying what
// to do next. Every fsbus operation returns *Error for failures a user can act on;
// anything else is an internal error.
type Error struct {
	Category string
	Message  string
	Hint     string
	Err      error // optional cause
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return e.Category + ": " + e.Message
	}
	return e.Category + ": " + e.Message + " — " + e.Hint
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error of category cat with a hint and a formatted message.
func Errorf(cat, hint, format string, args ...any) *Error {
	return &Error{Category: cat, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// CategoryOf returns err's category: the *Error's, or Internal for any other error.
func CategoryOf(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Category
	}
	return Internal
}

// Is reports whether err is an *Error of category cat.
func Is(err error, cat string) bool { return err != nil && CategoryOf(err) == cat }
