package fold

import (
	"encoding/json"
	"errors"
	"fmt"
)

// AskObject is asks/<id>.json: a question to the owner, written once and signed by the
// asker (docs/format.md §11).
type AskObject struct {
	Envelope
	Title          string `json:"title"`
	Recommendation string `json:"recommendation"`
	Reasoning      string `json:"reasoning,omitempty"`
}

// HandinObject is handins/<writer>/<id>.json: a reference to work handed in and a
// note, signed by its author (docs/format.md §11). The work stays in the work repo.
type HandinObject struct {
	Envelope
	Ref  string `json:"ref"`            // commit, branch or path, ≤ 500 characters
	Note string `json:"note,omitempty"` // ≤ 2,000 bytes
}

// ErrObjectTorn is returned (wrapped) by readObject for a file that has only partly
// arrived: empty, holding a NUL byte, or ending before its JSON value does — what a
// sync tool that writes in place, or a crash, leaves (docs/format.md §11). It
// wraps ErrObjectMissing, so the fold shows the thing as pending sync, as
// it does a segment's torn tail, until the rest arrives.
var ErrObjectTorn = fmt.Errorf("%w: file incomplete", ErrObjectMissing)

// ErrObjectUnreadable is returned (wrapped) by a Checkpoints reader for a file that is
// there but that this machine cannot read (permissions, an I/O error): no fact about
// the checkpoint, so never a dispute.
var ErrObjectUnreadable = errors.New("fsbus: object unreadable here")

// ErrObjectMissing is returned by readObject when the file has not arrived (yet).
var ErrObjectMissing = errors.New("fsbus: object not arrived")

// ResultObject is results/<id>.json: a submitted result — a reference to the work
// (commit, branch, hand-in id) and a short summary; never the work itself.
type ResultObject struct {
	Envelope
	Order     string `json:"order"`
	Reference string `json:"reference"`
	Summary   string `json:"summary,omitempty"`
	// Output is the structured result (ADR 0003 §5): one JSON value of at
	// most MaxOutput bytes, validated against the order's schema when it has one.
	Output json.RawMessage `json:"output,omitempty"`
}

// OrderObject is orders/<id>.json: an order's immutable body, signed by its author.
type OrderObject struct {
	Envelope
	Title    string   `json:"title"`
	Body     string   `json:"body,omitempty"`
	Labels   []string `json:"labels,omitempty"`
	Priority string   `json:"priority,omitempty"`
	Deps     []string `json:"deps,omitempty"`
	// Contract members sit beside the others, each optional.
	Contract
}

// Envelope is the common head of every object: v, id, author, device, sig
// (docs/design.md §2 "Ledger entry"). Kind-specific fields sit beside them.
type Envelope struct {
	V      int    `json:"v"`
	ID     string `json:"id"`
	Author string `json:"author"`
	Device string `json:"device"`
	Sig    string `json:"sig,omitempty"`
}
