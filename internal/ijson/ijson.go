// Package ijson checks that a JSON text is I-JSON (RFC 7493): one JSON value, encoded
// as UTF-8 with no invalid byte sequence (§2.1), no escape that names a surrogate
// half on its own (§2.1: "\ud800" with no low surrogate after it, or a low
// surrogate with no high one before it), and no object that names a member twice
// (§2.3). ferry refuses every JSON input that is not: a reader that keeps the first
// of two members, or that rewrites a bad byte to U+FFFD, would otherwise see another
// value than the one ferry acted on.
//
// Use it before decoding:
//
//	if err := ijson.Check(raw); err != nil {
//		var e *ijson.Error
//		errors.As(err, &e) // e.Kind, e.Offset, e.Path, e.Name
//	}
//
// The checking is github.com/go-json-experiment/json/jsontext's, which validates
// RFC 7493 by default (the package is encoding/json/jsontext from Go 1.27 on); this
// package adds the two-step order below and exact offsets for the message.
package ijson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Kind is how a text breaks the rule.
type Kind int

const (
	// Syntax: not one JSON value (RFC 8259).
	Syntax Kind = iota + 1
	// InvalidUTF8: a byte sequence that is not UTF-8 (RFC 7493 §2.1).
	InvalidUTF8
	// LoneSurrogate: a \u escape of a surrogate half not in a pair (RFC 7493 §2.1).
	LoneSurrogate
	// DuplicateName: an object names a member twice (RFC 7493 §2.3).
	DuplicateName
	// FoldedName: an object names two members that differ only in case (CheckFolded).
	FoldedName
)

// Error is the first way a text breaks the rule. Every text that breaks the encoding
// or the syntax reports that (Syntax, InvalidUTF8, LoneSurrogate: the text cannot be
// read as meant); only a text that is otherwise I-JSON reports DuplicateName.
type Error struct {
	Kind Kind
	// Offset is the byte offset in the input: of the bad byte, of the backslash of
	// the lone escape, or of the second member of the name.
	Offset int64
	// Path is the JSON Pointer (RFC 6901) of the object that names Name twice, ""
	// for the top level (DuplicateName only).
	Path string
	// Name is the member name given twice (DuplicateName), or the second of two that
	// differ only in case (FoldedName).
	Name string
	// Other is the first of two names that differ only in case (FoldedName only).
	Other string
	// Escape is the lone escape, e.g. `\ud800` (LoneSurrogate only).
	Escape string
	// Err is the underlying parser's error (Syntax only).
	Err error
}

// maxName bounds how much of a duplicated name Error quotes, in bytes.
const maxName = 40

func (e *Error) Error() string {
	switch e.Kind {
	case InvalidUTF8:
		return fmt.Sprintf("invalid UTF-8 at byte offset %d", e.Offset)
	case LoneSurrogate:
		what := "a high surrogate with no low surrogate after it"
		if r, _ := strconv.ParseUint(e.Escape[2:], 16, 16); r >= 0xdc00 {
			what = "a low surrogate with no high surrogate before it"
		}
		return fmt.Sprintf("lone surrogate %s at byte offset %d (%s)", e.Escape, e.Offset, what)
	case DuplicateName, FoldedName:
		where := "at the top level"
		if e.Path != "" {
			where = "in the object at " + strconv.QuoteToGraphic(e.Path)
		}
		if e.Kind == FoldedName {
			return fmt.Sprintf("member names %s and %s differ only in case %s (byte offset %d): readers that match names regardless of case see one member",
				strconv.QuoteToGraphic(cut(e.Other)), strconv.QuoteToGraphic(cut(e.Name)), where, e.Offset)
		}
		return fmt.Sprintf("duplicate member name %s %s (byte offset %d)", strconv.QuoteToGraphic(cut(e.Name)), where, e.Offset)
	}
	msg := "not one JSON value"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("not valid JSON: %s at byte offset %d", msg, e.Offset)
}

// cut bounds a quoted name to maxName bytes.
func cut(name string) string {
	if len(name) <= maxName {
		return name
	}
	i := maxName
	for i > 0 && !utf8.RuneStart(name[i]) {
		i--
	}
	return name[:i] + "…"
}

// Encoding reports whether e is of the text's encoding or syntax (every Kind but
// DuplicateName and FoldedName): JSON-RPC's parse error (-32700) rather than an
// invalid request.
func (e *Error) Encoding() bool { return e.Kind != DuplicateName && e.Kind != FoldedName }

// CheckFolded is Check, and also refuses an object naming two members that differ only
// in case ("method" and "METHOD"): encoding/json matches a struct field's name
// regardless of case and keeps the last such member, so a reader that matches names
// exactly would see another call than the one decoded (bytes.EqualFold's folding,
// which is encoding/json's). For texts decoded into Go structs: a protocol message and
// its arguments.
func CheckFolded(b []byte) error {
	if err := Check(b); err != nil {
		return err
	}
	d := jsontext.NewDecoder(bytes.NewReader(b))
	var names []map[string]string // per open object: folded name → name as given
	for {
		k, n := d.StackIndex(d.StackDepth())
		isName := k == '{' && n%2 == 0
		at := d.InputOffset()
		tok, err := d.ReadToken()
		if err != nil {
			return nil // io.EOF: Check passed, so the text ends here
		}
		switch tok.Kind() {
		case '{':
			names = append(names, map[string]string{})
			continue
		case '}':
			names = names[:len(names)-1]
			continue
		}
		if !isName {
			continue
		}
		name := tok.String()
		key := foldName(name)
		seen := names[len(names)-1]
		if other, ok := seen[key]; ok {
			for at < int64(len(b)) && bytes.IndexByte([]byte(" \t\r\n,"), b[at]) >= 0 {
				at++
			}
			return &Error{Kind: FoldedName, Offset: at, Path: string(d.StackPointer().Parent()), Name: name, Other: other}
		}
		seen[key] = name
	}
}

// foldName maps s to one member of each rune's simple case-folding orbit (the
// smallest), so that foldName(x) == foldName(y) exactly when bytes.EqualFold(x, y).
func foldName(s string) string {
	var b strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// Check returns nil when b is one JSON value (surrounding white space allowed) that is
// I-JSON, and an *Error otherwise.
func Check(b []byte) error {
	if jsontext.Value(b).IsValid() { // RFC 7493 by default, with a pooled decoder
		return nil
	}
	// Then, to say why: first the syntax and the encoding alone, so that a text that
	// breaks them reports that wherever a duplicate name stands before the bad byte.
	if err := read(b, jsontext.AllowDuplicateNames(true)); err != nil {
		return encodingError(b, err)
	}
	err := read(b)
	if err == nil { // never, as both use one parser: refused all the same
		return &Error{Kind: Syntax, Err: errors.New("refused by the I-JSON check")}
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
		return &Error{Kind: DuplicateName, Offset: se.ByteOffset, Path: string(se.JSONPointer.Parent()), Name: se.JSONPointer.LastToken()}
	}
	return encodingError(b, err) // no other error is left once the first read passed
}

// read decodes b as one value followed by nothing.
func read(b []byte, opts ...jsontext.Options) error {
	d := jsontext.NewDecoder(bytes.NewReader(b), opts...)
	if _, err := d.ReadValue(); err != nil {
		if err == io.EOF {
			return &jsontext.SyntacticError{Err: io.ErrUnexpectedEOF}
		}
		return err
	}
	end := d.InputOffset()
	if _, err := d.ReadToken(); err != io.EOF {
		if err == nil {
			for end < int64(len(b)) && bytes.IndexByte([]byte(" \t\r\n"), b[end]) >= 0 {
				end++
			}
			err = &jsontext.SyntacticError{ByteOffset: end, Err: errors.New("more than one JSON value")}
		}
		return err
	}
	return nil
}

// encodingError turns the parser's error into an *Error. The parser reports the
// offset of the bad byte itself, or of the backslash of a lone surrogate escape; an
// invalid UTF-8 byte outside a string it calls an invalid character, which it is too.
func encodingError(b []byte, err error) *Error {
	e := &Error{Kind: Syntax, Err: err}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		e.Offset, e.Err = se.ByteOffset, se.Err
	}
	at := int(e.Offset)
	if at < 0 || at >= len(b) {
		return e
	}
	if r, ok := hex4(b, at+2); ok && b[at] == '\\' && b[at+1] == 'u' && utf16.IsSurrogate(r) {
		return &Error{Kind: LoneSurrogate, Offset: e.Offset, Escape: string(b[at : at+6])}
	}
	if r, n := utf8.DecodeRune(b[at:]); r == utf8.RuneError && n <= 1 {
		return &Error{Kind: InvalidUTF8, Offset: e.Offset}
	}
	return e
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return rune(v), err == nil
}
