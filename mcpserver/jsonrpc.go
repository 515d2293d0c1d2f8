package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/fsbus"
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

// RPCError is a JSON-RPC error object. Handlers return it (or wrap it) to choose the
// code; any other error becomes CodeInternalError.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// rpcErrorf builds an *RPCError.
func rpcErrorf(code int, format string, args ...any) *RPCError {
	return &RPCError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// asRPCError returns err's *RPCError, or an internal error carrying its text.
func asRPCError(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	return &RPCError{Code: CodeInternalError, Message: err.Error()}
}

// message is one incoming JSON-RPC message: a request (id present), a notification
// (no id) or a response from the client (result or error; ignored here).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// isNotification reports whether m carries no id (JSON-RPC 2.0 §4.1).
func (m *message) isNotification() bool { return len(m.ID) == 0 }

// validID reports whether a raw id is a string or an integer (MCP forbids null ids;
// fractional and structured ids are refused too).
func validID(id json.RawMessage) bool {
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

// response is one outgoing JSON-RPC response.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// refuseNonIJSON is the answer to a message that is not I-JSON (RFC 7493), err being
// ijson.Check's: nothing of it is acted on, since a reader that keeps the first of two
// members, or reads a bad byte as U+FFFD, would see another request than the one this
// server would run. It answers -32700 with id null for a text that is not JSON, not
// UTF-8 or has a lone surrogate escape; -32600 for a member name given twice at any
// depth, echoing the id only when the top level has exactly one "id" member and it is
// valid (else null). A notification — JSON whose top level is an object with no "id" —
// gets no answer (nil, JSON-RPC 2.0 §4.1).
func refuseNonIJSON(b []byte, err error) *response {
	ids, object := topLevel(b, "id")
	if object && len(ids) == 0 {
		return nil
	}
	why := fsbus.IJSONReason(err) // it quotes a repeated name
	var e *ijson.Error
	if !errors.As(err, &e) || e.Encoding() {
		return &response{JSONRPC: "2.0", ID: nullID, Error: rpcErrorf(CodeParseError, "parse error: %s", why)}
	}
	id := nullID
	if len(ids) == 1 && validID(ids[0]) {
		id = ids[0]
	}
	rule := "a member name may appear once in each object (RFC 7493 §2.3)"
	if e.Kind == ijson.FoldedName {
		rule = "member names of one object must differ by more than case"
	}
	return &response{JSONRPC: "2.0", ID: id, Error: rpcErrorf(CodeInvalidRequest, "invalid request: %s; %s", why, rule)}
}

// topLevel returns the raw values of every top-level member of b named name, in
// order, and whether b is a JSON object at all (the syntax alone: bad UTF-8 and lone
// surrogates pass, encoding/json reading them as U+FFFD, which no name ferry asks for
// contains).
func topLevel(b []byte, name string) (vals []json.RawMessage, object bool) {
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
