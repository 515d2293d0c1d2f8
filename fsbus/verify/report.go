package verify

import (
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// OK reports whether no finding is an error (as `ferry doctor` decides it).
func (r *Report) OK() bool { return r.Errors == 0 }

// Report is `ferry ledger verify`: the ledger's own checks plus what the fold
// ignored and objects whose signature or hash is wrong.
type Report struct {
	Ledger  *ledger.Report `json:"ledger"`
	Ignored []fold.Ignored `json:"ignored"`
	Objects []string       `json:"objects"`
	// Lost lists this machine's own segments that hold fewer entries than it appended
	// (a segment overwritten, zero-filled or restored from an old backup).
	Lost []string `json:"lost"`
	// Vanished lists, per writer, records this machine read that no file of the
	// folder holds any more (vanished.go): an error.
	Vanished []Vanished `json:"vanished"`
	// Arriving lists object files that have only partly arrived (ErrObjectTorn): the
	// sync tool is still writing them; not a problem.
	Arriving []string `json:"arriving,omitempty"`
	// Edited lists object files whose hash differs from the one their entry names
	// (flagged, never shown).
	Edited []string `json:"edited"`
	// Links lists symbolic links inside the channel (writes through them are
	// refused).
	Links []string `json:"links"`
	// KeyChanges lists seated names announced with another key (not an error).
	KeyChanges []KeyChange `json:"key_changes"`
	// Rivals lists ids created by two writers (rival.go): one create is
	// forged or replayed; an error naming every writer.
	Rivals []fold.Contest `json:"rivals"`
	// Checkpoints are the owner's checkpoint entries that do not count or whose state
	// could not be used, and a folder rolled back below an epoch this machine saw;
	// Dispute is the first counting checkpoint whose state differs from the one folded
	// again here from the entries at or below its cut (docs/format.md §20 "Checking").
	Checkpoints []fold.CheckpointProblem `json:"checkpoints,omitempty"`
	Dispute     *fold.Dispute            `json:"dispute,omitempty"`
	// Fixes maps each kind listed (a problem kind, "ignored: <reason>", "object", "lost",
	// key_change) to its one-line fix (forgery.go).
	Fixes map[string]string `json:"fixes"`
	// Findings is everything above, and the conflict copies of segments, the records
	// only in a copy readers do not merge and other writers' lines inside a segment, as
	// findings with a level and a fix: the list `ferry ledger verify` prints and
	// `ferry doctor` starts with (findings.go).
	Findings []Finding `json:"findings"`
	// Copies lists the files in ledger/<writer>/ that are not the segment of the records
	// inside (conflict copies, found by content).
	Copies []ConflictCopy `json:"conflict_copies"`
	// Errors and Warnings count the findings of each level.
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
}
