package fold

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// The dispute of an owner's checkpoint (docs/format.md §20 "Disputes", ADR 0019 §7).
//
// A `checkpoint.dispute` entry (member level, ref "checkpoint") says that its writer's
// machine folded the entries at or below a counting checkpoint's cut under the fold
// rules data.rules to another state than the checkpoint's: data.checkpoint is the
// checkpoint entry's hash, data.epoch its epoch, data.first the lowest thing id whose
// state differs ("cut" when the cut is not closed under reference, a parenthesised
// reason when the state does not load). The same writer withdraws it with a later
// `checkpoint.dispute` naming the same checkpoint with data.withdrawn true, written
// once its machine folds the checkpoint's state after all.
//
// A dispute names the newest counting checkpoint its machine folds: a state that
// differs at an older checkpoint differs at every one built on it, and the newest is
// the one every process starts from and the next compaction builds on. A dispute
// stands while it is counted, names the newest counting checkpoint, is the newest
// dispute entry (merged order) of its writer for that checkpoint and is not
// withdrawn, and its writer is seated and not retired. A newer counting checkpoint
// ends the disputes of older ones; a machine that still folds another state disputes
// the newer one at its next recheck. Every reader decides this against the same
// checkpoint, whether it read the ledger whole or from the cut. A standing dispute stops
// `ferry compact` (nothing is built or archived on a disputed state); the owner ends
// one by repairing what the disputer reads, or by revoking or retiring a disputer
// whose fold is wrong.

// TypeCheckpointDispute is the dispute of an owner's checkpoint.
const TypeCheckpointDispute = "checkpoint.dispute"

// DisputeData is a checkpoint.dispute entry's data.
type DisputeData struct {
	Checkpoint string `json:"checkpoint"` // the checkpoint entry's hash
	Epoch      int    `json:"epoch"`
	Rules      int    `json:"rules"`
	First      string `json:"first,omitempty"`
	Withdrawn  bool   `json:"withdrawn,omitempty"`
}

// DisputeDraft is the draft of a dispute of d, or of its withdrawal.
// A first that is no thing id (a reason why the state does not load, which may name
// this machine's paths) is written as "(state)".
func DisputeDraft(d Dispute, withdrawn bool) ledger.Draft {
	b, _ := json.Marshal(DisputeData{Checkpoint: d.Hash, Epoch: d.Epoch, Rules: d.Rules, First: disputeFirst(d.First), Withdrawn: withdrawn}) // strings, ints and a bool always marshal
	return ledger.Draft{Type: TypeCheckpointDispute, Ref: TypeCheckpoint, Data: b}
}

// StandingDispute is a dispute that stands (see above).
type StandingDispute struct {
	Dispute
	Writer string `json:"writer"`
	Device string `json:"device"`
	Entry  string `json:"entry"` // the dispute entry's hash
	HLC    string `json:"hlc"`
}

// StandingDisputes lists the disputes among entries (a snapshot's, merged order) that
// stand against the newest checkpoint of chain under st (the snapshot folded), sorted
// by writer.
func StandingDisputes(entries []ledger.Entry, st *State, chain []Counting) []StandingDispute {
	if len(chain) == 0 {
		return []StandingDispute{}
	}
	top := chain[len(chain)-1]
	inChain := map[string]int{top.Entry.Hash(): top.Data.Epoch}
	newest := map[[2]string]*StandingDispute{} // (writer, checkpoint) → newest, nil when withdrawn
	for i := range entries {
		e := &entries[i]
		if e.Type != TypeCheckpointDispute || e.Ref != TypeCheckpoint {
			continue
		}
		var d DisputeData
		if json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		epoch, ok := inChain[d.Checkpoint]
		if counted, _ := st.Counted.Get(e.Hash()); !ok || !counted {
			continue
		}
		k := [2]string{e.Writer, d.Checkpoint}
		if d.Withdrawn {
			newest[k] = nil
			continue
		}
		newest[k] = &StandingDispute{Dispute: Dispute{Epoch: epoch, Hash: d.Checkpoint, Rules: d.Rules, First: disputeFirst(d.First)},
			Writer: e.Writer, Device: e.Device, Entry: e.Hash(), HLC: e.HLC}
	}
	out := []StandingDispute{}
	for _, d := range newest {
		if d == nil {
			continue
		}
		if a := st.Agents[d.Writer]; d.Writer != MasterWriter && (a == nil || !a.Seated || a.Retired) {
			continue
		}
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b StandingDispute) int { return strings.Compare(a.Writer, b.Writer) })
	return out
}

// DisputeWanted reports whether writer's dispute of the checkpoint entry hash (with
// withdrawn, its withdrawal) says something new under st (entries, merged order, and
// chain as StandingDisputes takes them): hash is the newest counting checkpoint, and
// writer's dispute of it does not stand already (for a withdrawal: does stand).
func DisputeWanted(entries []ledger.Entry, st *State, chain []Counting, writer, hash string, withdrawn bool) bool {
	if len(chain) == 0 || chain[len(chain)-1].Entry.Hash() != hash {
		return false
	}
	standing := slices.ContainsFunc(StandingDisputes(entries, st, chain), func(x StandingDispute) bool { return x.Writer == writer })
	return standing == withdrawn
}

// disputeFirst is first as a dispute carries it: "cut", a thing id (ValidName), or
// "(state)" for anything else, so a member's free text never reaches a display.
func disputeFirst(first string) string {
	if first == "cut" || (len(first) <= 64 && ValidName(first)) {
		return first
	}
	return "(state)"
}
