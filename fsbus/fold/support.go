package fold

import (
	"encoding/json"
	"slices"

	"github.com/ferryhq/ferry/ledger"
)

// TypeAgentSupport is a writer's statement of the channel formats its build reads and
// writes (docs/format.md §12, §20): ref the writer's own name, data.formats a sorted
// array of distinct integers. The fold keeps and verifies it like any entry and
// otherwise ignores it; the first `ferry compact` reads it to know that every segment
// is written by a build that reads format 2.
const TypeAgentSupport = "agent.support"

// SupportData is an agent.support entry's data.
type SupportData struct {
	Formats []int `json:"formats"`
}

// SupportDraft is writer's agent.support naming the formats 1 to newest.
func SupportDraft(writer string, newest int) ledger.Draft {
	d := SupportData{}
	for f := 1; f <= newest; f++ {
		d.Formats = append(d.Formats, f)
	}
	b, _ := json.Marshal(d) // a struct of ints always marshals
	return ledger.Draft{Type: TypeAgentSupport, Ref: writer, Data: b}
}

// SupportFormats returns the formats the agent.support entry e names; false when e is
// no agent.support, its ref is not its writer, or data.formats is not a sorted array
// of distinct positive integers.
func SupportFormats(e *ledger.Entry) ([]int, bool) {
	if e.Type != TypeAgentSupport || e.Ref != e.Writer {
		return nil, false
	}
	var d SupportData
	if json.Unmarshal(e.Data, &d) != nil || len(d.Formats) == 0 {
		return nil, false
	}
	for i, f := range d.Formats {
		if f < 1 || (i > 0 && f <= d.Formats[i-1]) {
			return nil, false
		}
	}
	return d.Formats, true
}

// HasSupport reports whether the segment (writer, device) holds, among entries, an
// agent.support naming format.
func HasSupport(entries []ledger.Entry, writer, device string, format int) bool {
	for i := range entries {
		e := &entries[i]
		if e.Writer == writer && e.Device == device && e.Type == TypeAgentSupport {
			if fs, ok := SupportFormats(e); ok && slices.Contains(fs, format) {
				return true
			}
		}
	}
	return false
}

// SegmentsWithoutSupport lists, sorted as "writer/device", the segments among entries
// of the master and of every seated, unretired agent of st that hold no counted
// agent.support naming format. The segment skip ("writer/device") is left out: the
// caller writes one there with its next entry.
func SegmentsWithoutSupport(entries []ledger.Entry, st *State, format int, skip string) []string {
	has, segs := map[string]bool{}, map[string]bool{}
	for i := range entries {
		e := &entries[i]
		k := e.Writer + "/" + e.Device
		if a := st.Agents[e.Writer]; e.Writer != MasterWriter && (a == nil || !a.Seated || a.Retired) {
			continue
		}
		segs[k] = true
		if c, _ := st.Counted.Get(e.Hash()); c {
			if fs, ok := SupportFormats(e); ok && slices.Contains(fs, format) {
				has[k] = true
			}
		}
	}
	var out []string
	for k := range segs {
		if !has[k] && k != skip {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
