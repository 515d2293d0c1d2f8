package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestCategoryOf(t *testing.T) {
	base := Errorf(Conflict, "read again", "order %s is taken", "o-1")
	wrapped := fmt.Errorf("claiming: %w", base)
	for _, tc := range []struct {
		err  error
		want Category
	}{
		{base, Conflict},
		{wrapped, Conflict},
		{errors.New("disk on fire"), Internal},
		{nil, Internal},
	} {
		if got := CategoryOf(tc.err); got != tc.want {
			t.Errorf("CategoryOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	if !Is(wrapped, Conflict) || Is(wrapped, Denied) || Is(nil, Internal) {
		t.Error("Is disagrees with CategoryOf")
	}
	if got, want := base.Error(), "conflict: order o-1 is taken — read again"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestWithHint(t *testing.T) {
	base := Errorf(Denied, "ask the owner", "alice may not ack")
	got := WithHint(fmt.Errorf("acking: %w", base), "meanwhile read with --peek")
	var fe *Error
	if !errors.As(got, &fe) || fe.Hint != "ask the owner; meanwhile read with --peek" || fe.Category != Denied {
		t.Fatalf("WithHint gave %v", got)
	}
	if base.Hint != "ask the owner" {
		t.Errorf("WithHint changed the error it copied: hint %q", base.Hint)
	}
	if !errors.As(WithHint(&Error{Category: Invalid, Message: "m"}, "h"), &fe) || fe.Hint != "h" {
		t.Errorf("an empty hint becomes %q, want h", fe.Hint)
	}
	plain := errors.New("plain")
	if WithHint(plain, "h") != plain {
		t.Error("WithHint changed an error that is not an *Error")
	}
}
