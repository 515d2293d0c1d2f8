package fold

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Planning the next owner's checkpoint (`ferry compact`, docs/format.md §20 "The cut").

// PlanInput is what PlanCheckpoint reads.
type PlanInput struct {
	In       FoldInput // the snapshot's entries and forks, project, master key, objects
	State    *State    // the snapshot folded
	Prev     *Counting // the newest counting checkpoint, nil for none
	PrevBase *Base     // its state, loaded and hash-checked
	// SeenMs returns when this machine first saw an entry, Unix ms on its clock (0: not
	// in its arrival log); SettledMs is now less the settle time (SettleText, for
	// messages); Advanced names the writers this machine saw a heartbeat of since.
	SeenMs     func(hash string) int64
	SettledMs  int64
	SettleText string
	Advanced   map[string]bool
	Force      bool
	Device     string
	// TakeOver is `ferry compact --take-over`: Device writes the next checkpoint
	// although the previous head names another compactor, once neither that device's
	// master segment nor its presence changed since GuardMs (DevicesSeen, the devices
	// of the presence files seen since).
	TakeOver    bool
	DevicesSeen map[string]bool
	// GuardMs is now less the larger of policy.settle_s and the settle time given: a
	// take-over waits out the policy's settle time whatever --settle says.
	GuardMs int64
	// Format is channel.toml's format: below 2, the compact is the first and every
	// segment of a seated, unretired writer must hold an agent.support naming 2, but
	// the compacting master's own segment (Device), which gets one with the checkpoint.
	Format int
	// Offset returns the byte offset after a record's line in its segment file (0 when
	// not found there).
	Offset func(writer, device, hash string) int64
}

// Plan is the next checkpoint before it is signed: nil Base when nothing new settled.
type Plan struct {
	Epoch     int
	Cut       Cut
	Base      *Base
	Chunks    [][]byte
	Head      *Head
	Unsettled []string // seated writers not seen to advance within the settle time
	// Unsupported are the segments ("writer/device") of seated, unretired writers
	// holding no agent.support naming format 2, at the first compact.
	Unsupported []string
}

// PlanCheckpoint decides the next checkpoint: a cut covering, per segment, the longest
// prefix of the kept chain this machine first saw at least Settle ago (never below the
// previous cut), closed under reference, and the state folded there from the previous
// checkpoint's. It refuses (conflict) while seated writers were not seen to advance
// within the settle time, unless Force.
func PlanCheckpoint(p PlanInput) (*Plan, error) {
	entries := p.In.Entries
	plan := &Plan{Epoch: 1}
	if p.Prev != nil {
		plan.Epoch = p.Prev.Data.Epoch + 1
	}
	advanced := maps.Clone(p.Advanced)
	if advanced == nil {
		advanced = map[string]bool{}
	}
	for i := range entries {
		if p.SeenMs(entries[i].Hash()) > p.SettledMs {
			advanced[entries[i].Writer] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.State.Agents)) {
		if a := p.State.Agents[name]; a.Seated && !a.Retired && !advanced[name] {
			plan.Unsettled = append(plan.Unsettled, name)
		}
	}
	if len(plan.Unsettled) > 0 && !p.Force {
		wait := "wait until they have synced"
		if p.SettleText == "0s" {
			wait = "give a longer --settle (with 0s nothing shows a writer advancing)"
		}
		return nil, errs.Errorf(errs.Conflict, wait+", retire them, or compact with --force (their entries not yet here land above the cut, and those on things the checkpoint holds as final are superseded)",
			"seated writers not seen to advance %s: %s", SettleWindow(p.SettleText), strings.Join(plan.Unsettled, ", "))
	}

	if p.Format < 2 {
		plan.Unsupported = SegmentsWithoutSupport(entries, p.State, 2, MasterWriter+"/"+p.Device)
		if len(plan.Unsupported) > 0 && !p.Force {
			return nil, errs.Errorf(errs.Conflict, "upgrade ferry where those writers run and let each write once, retire them, or compact with --force (a build that reads format 1 only then refuses the channel)",
				"the first compact moves the channel to format 2, and these segments hold no agent.support naming format 2: %s", strings.Join(plan.Unsupported, ", "))
		}
	}

	ordered := make([]*ledger.Entry, len(entries))
	for i := range entries {
		ordered[i] = &entries[i]
	}
	slices.SortFunc(ordered, func(a, b *ledger.Entry) int {
		if c := strings.Compare(a.Writer, b.Writer); c != 0 {
			return c
		}
		if c := strings.Compare(a.Device, b.Device); c != 0 {
			return c
		}
		return int(a.Seq) - int(b.Seq)
	})
	limit := map[[2]string]uint64{}
	stop := map[[2]string]bool{}
	for _, e := range ordered {
		k := [2]string{e.Writer, e.Device}
		if stop[k] {
			continue
		}
		if p.PrevBase != nil && p.PrevBase.Cut.Below(e.Writer, e.Device, e.Seq) {
			continue // settled by the previous cut (the arrival log may no longer hold it)
		}
		if s := p.SeenMs(e.Hash()); s == 0 || s > p.SettledMs {
			stop[k] = true
			continue
		}
		limit[k] = e.Seq
	}
	if p.PrevBase != nil {
		for _, c := range p.PrevBase.Cut {
			k := [2]string{c.Writer, c.Device}
			limit[k] = max(limit[k], c.Seq)
		}
	}
	cut := CutOf(entries, func(w, d string) (uint64, bool) { m, ok := limit[[2]string{w, d}]; return m, ok })
	cut = CloseCutFrom(entries, p.In.Forks, cut, p.State.ObjectPending, p.PrevBase)
	if p.PrevBase != nil {
		if err := cut.Covers(p.PrevBase.Cut); err != nil {
			return nil, errs.Errorf(errs.Conflict, "run `ferry doctor`", "the cut closed under reference falls below the previous checkpoint's: %v", err)
		}
		if slices.EqualFunc(cut, p.PrevBase.Cut, func(a, b CutPoint) bool { return a.Writer == b.Writer && a.Device == b.Device && a.Hash == b.Hash }) {
			plan.Epoch--
			return plan, nil // nothing new has settled
		}
	}
	if len(cut) == 0 {
		return plan, nil
	}
	for i := range cut {
		if p.Offset != nil {
			cut[i].Offset = p.Offset(cut[i].Writer, cut[i].Device, cut[i].Hash)
		}
	}
	at, _, probs := Split(entries, p.In.Forks, cut, nil)
	for _, c := range probs {
		if c.Kind == "missing" && !anchoredBelow(c, at, p.PrevBase) {
			return nil, errs.Errorf(errs.Conflict, "run `ferry doctor`", "segment %s/%s: %s", c.Writer, c.Device, c.Detail)
		}
	}
	st, lines := nextState(p.In, p.PrevBase, at)
	base, err := deriveNext(st, lines, plan.Epoch, cut)
	if err != nil {
		return nil, err
	}
	compactor := p.Device
	if d := handOver(st, p.PrevBase, at); d != "" && !p.TakeOver {
		compactor = d // a take-over names its own device, whatever the policy named since
	}
	var refs StateRefs
	if plan.Chunks, refs, err = StateChunks(base); err != nil {
		return nil, err
	}
	if plan.Head, err = NewHead(p.In.Project, base, refs, compactor, entries, p.Prev); err != nil {
		return nil, fmt.Errorf("checkpoint head: %w", err)
	}
	plan.Cut, plan.Base = cut, base
	return plan, nil
}

// anchoredBelow reports whether Split's missing record c lies at or below prev's cut
// of a chain whose records at (Split's) reach prev's point: prev's state stands for
// the records there, which may have moved to archive/ (docs/format.md §21).
func anchoredBelow(c CutProblem, at []ledger.Entry, prev *Base) bool {
	pp, ok := prev.cutAt(c.Writer, c.Device)
	if !ok || c.Seq > pp.Seq {
		return false
	}
	for i := range at {
		if e := &at[i]; e.Writer == c.Writer && e.Device == c.Device &&
			((e.Seq == pp.Seq && e.Hash() == pp.Hash) || (e.Seq == pp.Seq+1 && e.Prev == pp.Hash)) {
			return true
		}
	}
	return false
}

// handOver is the device policy.compactor names in st (the state at the next cut,
// folded from prev over at) when the policy.set that names it lies above prev's cut:
// a hand-over the owner decided since the last checkpoint, which the next head names
// as compactor (docs/format.md §20 "Moving the compactor"). "" when there is none.
// A take-over writes a policy.set naming its own device, so the policy does not keep
// naming the compactor it replaced.
func handOver(st *State, prev *Base, at []ledger.Entry) string {
	to := PolicyCompactorOf(st)
	if to == "" || prev == nil {
		return to // the first checkpoint: ckfile.Prepare refuses on any other device
	}
	for i := range at {
		if e := &at[i]; e.Hash() == st.Policy.Hash {
			if prev.Cut.Below(e.Writer, e.Device, e.Seq) {
				return "" // the policy is the previous cut's
			}
			return to
		}
	}
	return ""
}

// PolicyCompactor is the policy key that hands the compactor over to another device.
const PolicyCompactor = "compactor"

// PolicyCompactorOf is the device policy.compactor names in st, "" when none (or not a
// device name). Before the first checkpoint it names the only device that may write it.
func PolicyCompactorOf(st *State) string {
	var d string
	if st == nil || st.Policy == nil || json.Unmarshal(st.Policy.Table[PolicyCompactor], &d) != nil || !ValidName(d) {
		return ""
	}
	return d
}

// CompactResult is what Compact wrote.
type CompactResult struct {
	Epoch int `json:"epoch"`
	// Entry is the checkpoint entry's hash; empty when nothing new had settled and
	// nothing was written.
	Entry string `json:"entry,omitempty"`
	Head  string `json:"head,omitempty"` // the head file, relative to the channel folder
	// Chunks is how many chunks the state has, Written how many of them were new files.
	Chunks  int `json:"chunks"`
	Written int `json:"written"`
	// Segments the cut names; Covered the entries at or below it; Lines those the
	// state keeps verbatim; Terminal the things it holds as final.
	Segments int `json:"segments"`
	Covered  int `json:"covered"`
	Lines    int `json:"lines"`
	Terminal int `json:"terminal"`
	// Unsettled are the seated writers not seen to advance within the settle time
	// (compacted past with Force).
	Unsettled []string `json:"unsettled,omitempty"`
	Settle    string   `json:"settle"`
	// Format is channel.toml's format after the compact; Unsupported the segments
	// holding no agent.support naming 2 that the first compact passed with Force.
	Format      int      `json:"format"`
	Unsupported []string `json:"unsupported,omitempty"`
	// Replaces is the checkpoint entry the new one replaces (CheckpointData.Replaces).
	Replaces string `json:"replaces,omitempty"`
	// Archived are the frozen files moved to archive/ after it (slash paths relative to
	// the channel folder), Waiting the "<writer>/<device>" chains the newest checkpoint
	// past its archive grace names with no file of its epoch yet: their files stay until
	// the writer writes again or is retired (docs/format.md §21 "Moving frozen files").
	Archived []string `json:"archived,omitempty"`
	Waiting  []string `json:"waiting,omitempty"`
}

// SettleWindow phrases a settle time (a time.Duration's text, as PlanInput.SettleText
// and CompactResult.Settle hold it) for "seated writers not seen to advance …": "in
// the last 24h", or "since just now" for 0s, whose window holds nothing.
func SettleWindow(settle string) string {
	if settle == "0s" {
		return "since just now"
	}
	return "in the last " + ShortDuration(settle)
}

// ShortDuration is a time.Duration's text without zero minutes and seconds after a
// larger unit: "24h" for 24h0m0s, "1h30m" for 1h30m0s.
func ShortDuration(d string) string {
	if strings.HasSuffix(d, "m0s") {
		d = strings.TrimSuffix(d, "0s")
	}
	if strings.HasSuffix(d, "h0m") {
		d = strings.TrimSuffix(d, "0m")
	}
	return d
}
