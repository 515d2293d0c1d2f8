package fold

import (
	"encoding/json"
)

// contractOf returns the contract an order folded from its object, or nil.
func (o *Order) ContractOrNil() *Contract {
	if o.Empty() {
		return nil
	}
	return &o.Contract
}

// Empty reports whether c carries nothing.
func (c *Contract) Empty() bool {
	return c == nil || (len(c.Pointers) == 0 && len(c.Schema) == 0 && c.Diff == nil && c.Task == "" &&
		!c.ReadOnly && c.Windows == nil && !c.Heavy && c.Hints == nil)
}

// Hints are the resources a heavy order expects (docs/runs.md "Heavy orders"): cores,
// memory and GPU memory in GB, and the expected run time in minutes.
type Hints struct {
	Cores           int     `json:"cores,omitempty"`
	RAMGB           float64 `json:"ram_gb,omitempty"`
	GPUMemGB        float64 `json:"gpu_mem_gb,omitempty"`
	ExpectedMinutes int     `json:"expected_minutes,omitempty"`
}

// Windows are an order's own windows, in seconds; zero means the channel default.
// ExecS runs from the claim and is renewed by progress and extend; LifetimeS caps the
// renewals; QueueS is how long the order may wait unclaimed (docs/format.md §14 "Windows").
type Windows struct {
	ExecS     int64 `json:"exec_s,omitempty"`
	LifetimeS int64 `json:"lifetime_s,omitempty"`
	QueueS    int64 `json:"queue_s,omitempty"`
}

// Contract is the optional contract an order carries (docs/format.md §11
// order object). Every member is optional and omitted when empty, so an order without
// a contract is byte-for-byte what format v1 wrote before. The JSON names are fixed:
// other parts of ferry (windows, unattended runs) read them.
type Contract struct {
	// Pointers are the files the order is about, fingerprinted at dispatch.
	Pointers []Pointer `json:"pointers,omitempty"`
	// Schema is a JSON Schema the submitted result's output must satisfy: a JSON
	// object (true, false and other values are refused at dispatch, invalid).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Diff points to a unified diff (itself a fingerprinted file) for review and
	// audit orders.
	Diff *Pointer `json:"diff,omitempty"`
	// Task is the kind of work (e.g. code_review, implementation), one portable name.
	Task string `json:"task,omitempty"`
	// ReadOnly marks a review or audit: the worker reads, never changes the files.
	ReadOnly bool `json:"read_only,omitempty"`
	// Windows overrides the channel's default windows for this order.
	Windows *Windows `json:"windows,omitempty"`
	// Heavy asks for the machine's job queue; Hints say what the run needs.
	Heavy bool   `json:"heavy,omitempty"`
	Hints *Hints `json:"hints,omitempty"`
}

func Short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// Pointer is one file an order's contract points to, fingerprinted at dispatch
// (docs/format.md §11 order object; ADR 0003). Path is workspace-relative
// with '/' separators. Size and SHA256 describe the content as hashed: for a text file
// (no NUL in the first 8 KiB) every CRLF is read as LF first, so a Windows checkout of
// the same commit verifies; Size is then the normalised length in bytes. SHA256 is
// "sha256:" + 64 lowercase hex. FirstLine/LastLine are the line range the author
// points at (1-based, inclusive; the whole file when no range was given; omitted for
// binary files). Commit is the workspace's `git rev-parse HEAD` at dispatch, omitted
// outside a git repository.
type Pointer struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	FirstLine int    `json:"first_line,omitempty"`
	LastLine  int    `json:"last_line,omitempty"`
	Commit    string `json:"commit,omitempty"`
}

// HasPointers reports whether o's contract names files to verify.
func (o *Order) HasPointers() bool { return len(o.Pointers) > 0 || o.Diff != nil }
