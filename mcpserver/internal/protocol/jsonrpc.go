package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/internal/ijson"
)

// JSON-RPC 2.0 error codes (JSON-RPC 2.0 §5.1).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeServerBusy (implementation-defined range, JSON-RPC 2.0 §5.1): too many
	// requests in flight; retry after one has answered.
	CodeServerBusy = -32000
)

// Error is a JSON-RPC error object. Handlers return it (or wrap it) to choose the
// code; any other error becomes CodeInternalError (AsError).
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err's *Error, or an internal error carrying its text.
func AsError(err error) *Error {
	var re *Error
	if errors.As(err, &re) {
		return re
	}
	return &Error{Code: CodeInternalError, Message: err.Error()}
}

// Message is one incoming JSON-RPC message: a request (id present), a notification
// (no id) or a response from the client (result or error; ignored here).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// IsNotification reports whether m carries no id (JSON-RPC 2.0 §4.1).
func (m *Message) IsNotification() bool { return len(m.ID) == 0 }

// ValidID reports whether a raw id is a string or an integer (MCP forbids null ids;
// fractional and structured ids are refused too).
func ValidID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		if json.Unmarshal(id, &n) != nil {
			return false
		}
		_, err := n.Int64()
		return err == nil
	}
	return false
}

// Response is one outgoing JSON-RPC response.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// NullID is the id of a response to a message whose id is unknown or unusable.
var NullID = json.RawMessage("null")

// RefuseNonIJSON is the answer to a message that is not I-JSON (RFC 7493), err being
// ijson.Check's and reason the text that says why (its repeated name redacted): nothing of it is acted on, since a reader that keeps the first of two
// members, or reads a bad byte as U+FFFD, would see another request than the one this
// server would run. It answers -32700 with id null for a text that is not JSON, not
// UTF-8 or has a lone surrogate escape; -32600 for a member name given twice at any
// depth, echoing the id only when the top level has exactly one "id" member and it is
// valid (else null). A notification — JSON whose top level is an object with no "id" —
// gets no answer (nil, JSON-RPC 2.0 §4.1).
func RefuseNonIJSON(b []byte, err error, reason string) *Response {
	ids, object := TopLevel(b, "id")
	if object && len(ids) == 0 {
		return nil
	}
	var e *ijson.Error
	if !errors.As(err, &e) || e.Encoding() {
		return &Response{JSONRPC: "2.0", ID: NullID, Error: Errorf(CodeParseError, "parse error: %s", reason)}
	}
	id := NullID
	if len(ids) == 1 && ValidID(ids[0]) {
		id = ids[0]
	}
	rule := "a member name may appear once in each object (RFC 7493 §2.3)"
	if e.Kind == ijson.FoldedName {
		rule = "member names of one object must differ by more than case"
	}
	return &Response{JSONRPC: "2.0", ID: id, Error: Errorf(CodeInvalidRequest, "invalid request: %s; %s", reason, rule)}
}

// TopLevel returns the raw values of every top-level member of b named name, in
// order, and whether b is a JSON object at all (the syntax alone: bad UTF-8 and lone
// surrogates pass, encoding/json reading them as U+FFFD, which no name ferry asks for
// contains).
func TopLevel(b []byte, name string) (vals []json.RawMessage, object bool) {
	if !json.Valid(b) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			break
		}
		if t == name {
			vals = append(vals, v)
		}
	}
	return vals, true
}

// DecodeMessage decodes one JSON-RPC message: a line, or one element of a batch. It
// returns the message to handle (ok), or the error response for what is not a message
// (bad): -32700 with id null for what is not JSON; -32600 for JSON that is not a
// request, echoing its id when that id is usable (JSON-RPC 2.0 §5.1). A response from
// the client, to a request this server never sends, is neither: it is ignored. A
// message that is not I-JSON, or whose objects name two members that differ only in
// case (which encoding/json reads as one), is never handled (RefuseNonIJSON, with the
// text reason makes of ijson's error).
func DecodeMessage(b []byte, reason func(error) string) (m Message, ok bool, bad *Response) {
	if err := ijson.CheckFolded(b); err != nil {
		return m, false, RefuseNonIJSON(b, err, reason(err))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		if !json.Valid(b) {
			return m, false, &Response{JSONRPC: "2.0", ID: NullID, Error: Errorf(CodeParseError, "parse error: %v", err)}
		}
		id := NullID
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(b, &probe) == nil && ValidID(probe.ID) {
			id = probe.ID // usable: echo it so the client can match the error
		}
		return m, false, &Response{JSONRPC: "2.0", ID: id, Error: Errorf(CodeInvalidRequest, "invalid request: %v", err)}
	}
	if m.Method == "" {
		if len(m.Result) > 0 || len(m.Error) > 0 {
			return m, false, nil // a response to a request we never sent: ignore
		}
		id := m.ID
		if !ValidID(id) {
			id = NullID
		}
		return m, false, &Response{JSONRPC: "2.0", ID: id, Error: Errorf(CodeInvalidRequest, "invalid request: no method")}
	}
	return m, true, nil
}

// EncodeResponse is the compact JSON of one response; one that cannot be encoded
// becomes an internal error with the same id.
func EncodeResponse(r Response) []byte {
	b, err := Marshal(r)
	if err != nil {
		b, _ = Marshal(Response{JSONRPC: "2.0", ID: r.ID, Error: Errorf(CodeInternalError, "encoding response: %v", err)})
	}
	return b
}

// Marshal is compact JSON without HTML escaping, so ids and texts go out byte for byte
// as they came in ("<" stays "<", never "\u003c").
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
