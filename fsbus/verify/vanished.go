package verify

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// Vanished records. A record this machine read (its arrival log holds it) that is in
// no file of the folder any more was cut from its segment — a truncated line can undo a
// revocation on every machine that never read it. It is an error in `ferry ledger
// verify` and `ferry doctor` on every machine that read it, so the owner learns to
// restore the segment from such a machine. The fold does not keep counting the vanished
// records (the folder is what every machine folds alike); see docs/threat-model.md
// "Truncated segments".

// KindVanished is the Report kind of records this machine read that are gone.
const KindVanished = "vanished"

// Vanished is one writer's records this machine read that no file of the folder holds.
type Vanished struct {
	Writer  string `json:"writer"`
	Records int    `json:"records"`
	// First and Last are the arrival numbers (this machine's arrival log) of the
	// earliest and latest record gone.
	First uint64 `json:"first_arrival"`
	Last  uint64 `json:"last_arrival"`
	// Segments names the writer's segment files now in the folder, each with the last
	// seq it holds ("ledger/master/k3f9x2ab.jsonl up to seq 7").
	Segments []string `json:"segments"`
	// Archived says that they may be records at or below the owner's checkpoint that
	// left the folder with its archive (`ferry archive move`): every chain of the
	// writer the newest counting cut names is anchored to it in the folder, every
	// record gone arrived here no later than each of those chains' cut records (so
	// none is above a cut), and the record of the writer this machine read last is
	// still here (a segment cut short loses its last records first). A warning then,
	// not an error.
	Archived bool `json:"archived,omitempty"`
}

// String is the one-line description verify prints and doctor reports.
func (g Vanished) String() string {
	if g.Archived {
		return fmt.Sprintf("%d record(s) of %s this machine already read (arrivals %d–%d) are in no file of the folder or its archive: records at or below the owner's checkpoint that left with `ferry archive move`, or a segment cut short below its last record", g.Records, g.Writer, g.First, g.Last)
	}
	where := "no segment of " + g.Writer + " is in the folder"
	if len(g.Segments) > 0 {
		where = "its segments now: " + strings.Join(g.Segments, ", ")
	}
	return fmt.Sprintf("%d record(s) of %s this machine already read (arrivals %d–%d) are in no file of the folder: a segment of %s was cut short, zero-filled or replaced by an older copy (%s)",
		g.Records, g.Writer, g.First, g.Last, g.Writer, where)
}

// VanishedRecords lists, per writer, the records v's arrival log holds that no file
// under ledger/ of the folder or its archives holds. Writers in skip (this machine's own
// segments, already reported as Lost with their seqs) are left out so each loss is
// reported once. cut is the newest counting owner's checkpoint's (nil: none): it
// decides Vanished.Archived.
func (c *Channel) VanishedRecords(v *View, skip map[string]bool, cut fold.Cut) ([]Vanished, error) {
	out := []Vanished{}
	if v.Arrivals == nil {
		return out, nil
	}
	onDisk, err := recordsOnDisk(append([]string{c.Root}, c.Archives...))
	if err != nil {
		return nil, err
	}
	gone, last := map[string][]uint64{}, map[string]uint64{}
	v.Arrivals.Ingested(func(hash, writer string, n uint64) {
		last[writer] = max(last[writer], n)
		if !onDisk[hash] && writer != "" && !skip[writer] {
			gone[writer] = append(gone[writer], n)
		}
	})
	anchored := anchoredWriters(v.Snapshot, cut)
	// Per writer, the lowest arrival number here of the records its chains' cut points
	// name: a record of a chain arrives after the records before it in its file, so
	// one numbered no higher than every cut record of its writer is at or below the
	// cut of its own chain (0: a cut record this log does not number).
	cutArrival := map[string]uint64{}
	for _, p := range cut {
		n := v.Arrivals.Number(p.Hash)
		if a, seen := cutArrival[p.Writer]; !seen || n < a {
			cutArrival[p.Writer] = n
		}
	}
	for _, w := range slices.Sorted(maps.Keys(gone)) {
		ns := gone[w]
		slices.Sort(ns)
		g := Vanished{Writer: w, Records: len(ns), First: ns[0], Last: ns[len(ns)-1], Segments: []string{},
			Archived: anchored[w] && ns[len(ns)-1] < last[w] && ns[len(ns)-1] <= cutArrival[w]}
		segs, _ := filepath.Glob(filepath.Join(c.Root, "ledger", w, "*.jsonl"))
		for _, p := range segs {
			desc := Rel(c.Root, p)
			if dev, ok := strings.CutSuffix(filepath.Base(p), ".jsonl"); ok {
				if tip := v.chainTip(w, dev); tip != nil {
					desc += fmt.Sprintf(" up to seq %d", tip.Seq)
				}
			}
			g.Segments = append(g.Segments, desc)
		}
		out = append(out, g)
	}
	return out, nil
}

// anchoredWriters returns the writers every chain of which that cut names is anchored
// to it in snap: snap holds the cut's record, or the chain's record above it names it
// as prev (ledger.AnchorCut's rule).
func anchoredWriters(snap *ledger.Snapshot, cut fold.Cut) map[string]bool {
	out := map[string]bool{}
	if snap == nil || len(cut) == 0 {
		return out
	}
	held := map[ledger.Chain]bool{}
	for i := range snap.Entries {
		e := &snap.Entries[i]
		if p, ok := cut.At(e.Writer, e.Device); ok && ((e.Seq == p.Seq && e.Hash() == p.Hash) || (e.Seq == p.Seq+1 && e.Prev == p.Hash)) {
			held[ledger.Chain{Writer: e.Writer, Device: e.Device}] = true
		}
	}
	for _, p := range cut {
		if a, seen := out[p.Writer]; !seen || a {
			out[p.Writer] = held[ledger.Chain{Writer: p.Writer, Device: p.Device}]
		}
	}
	return out
}

// recordsOnDisk returns the hashes of every complete record in a file readers read
// (ledger.IsSegmentName) of <root>/ledger/<writer>/ for each of roots: the channel
// folder's segments and conflict copies, then (roots after the first) the archive
// folders' chain files (ledger.ParseSegmentName).
func recordsOnDisk(roots []string) (map[string]bool, error) {
	onDisk := map[string]bool{}
	for i, root := range roots {
		dir := filepath.Join(root, "ledger")
		writers, err := os.ReadDir(dir)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		for _, w := range writers {
			if !w.IsDir() || strings.HasPrefix(w.Name(), ".") {
				continue
			}
			ents, err := os.ReadDir(filepath.Join(dir, w.Name()))
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", w.Name(), err)
			}
			for _, e := range ents {
				// Only files readers read hold records: a line stashed in any other
				// name (a .tmp, a torn tail, notes.txt) is gone for the fold.
				if _, _, own := ledger.ParseSegmentName(e.Name()); !e.Type().IsRegular() || !ledger.IsSegmentName(e.Name()) || (i > 0 && !own) {
					continue // archive folders are read for the chains' own files only
				}
				entries, _, err := scanLines(filepath.Join(dir, w.Name(), e.Name()))
				if err != nil {
					return nil, err
				}
				for i := range entries {
					onDisk[entries[i].Hash()] = true
				}
			}
		}
	}
	return onDisk, nil
}

// LostSegments lists this machine's segments (of the writers names, on c.Device) that
// hold fewer entries than it appended: hwm is the seq its writes are known to have
// reached (the high-water mark), have the tip seq in the view checked. The view was
// read before the mark: a write acknowledged since is in the file, so a segment short
// in the view is read again, after the mark, before it is called lost.
func (c *Channel) LostSegments(names []string, hwm, have func(name string) uint64) []string {
	out := []string{}
	for _, name := range names {
		mark, got := hwm(name), have(name)
		seg := ledger.SegmentPath(c.Root, name, c.Device)
		if got < mark {
			if tip, err := ledger.ChainTip(c.Root, name, c.Device); err == nil && tip != nil {
				got = max(got, tip.Seq)
			}
		}
		if got < mark {
			out = append(out, fmt.Sprintf("%s: this machine appended up to seq %d, the folder holds up to seq %d", Rel(c.Root, seg), mark, got))
		}
	}
	return out
}

// LostWriters returns the writers whose segments Lost names (ledger/<writer>/…).
func LostWriters(lost []string) map[string]bool {
	out := map[string]bool{}
	for _, l := range lost {
		if rest, ok := strings.CutPrefix(filepath.ToSlash(l), "ledger/"); ok {
			if w, _, ok := strings.Cut(rest, "/"); ok {
				out[w] = true
			}
		}
	}
	return out
}
