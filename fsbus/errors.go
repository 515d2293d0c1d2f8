package fsbus

import (
	"errors"
	"fmt"
)

// Error categories shared by the CLI and the MCP server (docs/design.md §4).
const (
	CatDenied      = "denied"
	CatLocked      = "locked"
	CatNotFound    = "not_found"
	CatConflict    = "conflict"
	CatInvalid     = "invalid"
	CatStale       = "stale"
	CatRetryNeeded = "retry_needed"
	CatPaused      = "paused"
	CatSuperseded  = "superseded"
	CatInternal    = "internal"
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

// Category returns err's category: the *Error's, or "internal" for any other error.
func Category(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Category
	}
	return CatInternal
}

// IsCategory reports whether err is an *Error of category cat.
func IsCategory(err error, cat string) bool { return err != nil && Category(err) == cat }
