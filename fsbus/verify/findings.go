package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/ledger"
)

// Findings fills out.Findings, out.Copies and the counts of errors and warnings: the
// one list of findings `ferry ledger verify` and `ferry doctor` both report (package
// fsbus/doctor starts its report with them, then adds its own checks). In this order: a git
// operation stopped in the repository holding the channel (its conflict markers
// explain the damage they cause, which is then not reported again), the ledger's
// problems, forks, lost appends and ignored entries, rival creates, links and key
// changes, torn tails moved aside, conflict copies of segments (merged or not) with the
// records found only in a copy readers do not merge, other writers' lines inside a
// segment, vanished records, and objects that are wrong, edited or a sync tool's copy.
// An error means something counts for nothing or can be lost; a warning needs
// attention; info needs nothing done. It returns an error only when the ledger
// directory cannot be read.
func (c *Channel) Findings(v *View, out *Report) error {
	r := &findingList{Findings: []Finding{}, Copies: []ConflictCopy{}}
	marked := c.doctorGit(r)
	c.doctorLedger(r, v, out, marked)
	doctorKeyChanges(r, out) // forgery.go
	if err := c.doctorCopies(r, v, out); err != nil {
		return err
	}
	c.doctorShrunk(r, out) // an error, once per writer (vanished.go)
	c.objectFindings(r, v, out)
	checkpointFindings(r, out)
	out.Findings, out.Copies, out.Errors, out.Warnings = r.Findings, r.Copies, r.Errors, r.Warnings
	return nil
}

// Finding levels: an error means something counts for nothing or can be lost (the CLI
// exits non-zero); a warning needs attention soon; info needs nothing done.
const (
	LevelError   = "error"
	LevelWarning = "warning"
	LevelInfo    = "info"
)

// Checks (Finding.Check) of the findings `ferry ledger verify` and `ferry doctor` share,
// one per kind of trouble a synced folder brings; package fsbus/doctor adds its own.
const (
	CheckTorn         = "torn"                 // a segment's last line has not fully arrived
	CheckFork         = "fork"                 // two records with one (writer, device, seq)
	CheckConflictCopy = "conflict_copy"        // a sync tool's copy of a segment (merged, or not read)
	CheckSignature    = "bad_signature"        // a record whose signature does not verify
	CheckUnknownKey   = "unknown_key"          // a record of a writer no key is bound to
	CheckMalformed    = ledger.KindMalformed   // a complete line that is not an entry
	CheckBrokenChain  = ledger.KindBrokenChain // a seq gap or a prev naming another record
	CheckHole         = ledger.KindHole        // NUL bytes with data after them
	CheckLost         = "lost"                 // appends this machine made that the folder lost
	CheckEdited       = KindEdited             // an object whose hash differs from its entry's
	CheckUnmerged     = "unmerged_copy"        // records only in a file readers do not merge
	CheckMisplaced    = "misplaced"            // another writer's line inside a segment
	CheckIgnored      = "ignored"              // entries the fold ignored (grant, level, rule)
	CheckObject       = "object"               // an object file whose signature or hash is wrong
	CheckGit          = "git"                  // a git rebase or merge stopped in the repository holding the channel
	CheckVanished     = KindVanished           // records this machine read that are in no file any more
	CheckCheckpoint   = "checkpoint"           // an owner's checkpoint that does not count, or a state that differs
)

// Finding is one thing `ferry doctor` or `ferry ledger verify` found, with a one-line
// fix.
type Finding struct {
	Check  string `json:"check"`
	Level  string `json:"level"`
	Path   string `json:"path,omitempty"` // slash-separated, relative to the channel
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
	// Lines are the records involved, as they stand on disk (both branches of a fork).
	Lines []string `json:"lines,omitempty"`
}

// ConflictCopy is a file in ledger/<writer>/ that is not the segment of the writer and
// device inside it: a sync tool's conflict copy, recognised by content (docs/design.md §2
// rule 8), whatever its name says.
type ConflictCopy struct {
	Path    string `json:"path"`
	Of      string `json:"of"` // the segment the records belong to ("<writer>/<device>", comma-separated when several)
	Records int    `json:"records"`
	// Only counts the records found in this copy and in no segment proper: Syncthing
	// prunes old copies (maxConflicts), so they are kept only while the copy is.
	Only int `json:"only"`
	// Merged is true when every record of the copy is read into the ledger (counted,
	// or reported as a fork or a bad signature); false for a copy readers do not read.
	Merged bool `json:"merged"`
}

// findingList gathers findings, the conflict copies of segments found, and the counts
// of errors and warnings among the findings.
type findingList struct {
	Findings []Finding
	Copies   []ConflictCopy
	Errors   int
	Warnings int
}

func (r *findingList) add(f Finding) {
	switch f.Level {
	case LevelError:
		r.Errors++
	case LevelWarning:
		r.Warnings++
	}
	r.Findings = append(r.Findings, f)
}

// rebase or merge is stopped) are left to the git finding.
func (c *Channel) doctorLedger(r *findingList, v *View, vr *Report, marked map[string]bool) {
	for _, p := range vr.Ledger.Problems {
		if marked[p.Path] {
			continue
		}
		where := p.Path
		if p.Line > 0 {
			where = fmt.Sprintf("%s:%d", p.Path, p.Line)
		}
		switch p.Kind {
		case ledger.KindFork:
			continue // listed with both branches below
		case ledger.KindTorn:
			fix := "wait: the sync tool has not delivered the rest; if it stays, that writer's next append moves the tail aside to <device>.torn-<n>"
			if c.ownSegment(p.Path) {
				fix = "nothing to lose: this machine's next append moves the tail aside to <device>.torn-<n> and truncates"
			}
			r.add(Finding{Check: CheckTorn, Level: LevelWarning, Path: where, Detail: p.Detail, Fix: fix})
		case ledger.KindBadSignature:
			r.add(Finding{Check: CheckSignature, Level: LevelError, Path: where,
				Detail: fmt.Sprintf("%s/%s#%d: %s", p.Writer, p.Device, p.Seq, p.Detail),
				Fix:    verifyFixes[ledger.KindBadSignature]})
		case ledger.KindUnknownKey:
			r.add(Finding{Check: CheckUnknownKey, Level: LevelError, Path: where,
				Detail: fmt.Sprintf("%s/%s#%d: %s", p.Writer, p.Device, p.Seq, p.Detail),
				Fix:    strings.ReplaceAll(verifyFixes[ledger.KindUnknownKey], "NAME", p.Writer)})
		default: // malformed, broken_chain, hole, and any kind added later
			fix := verifyFixes[p.Kind]
			if fix == "" {
				fix = "restore the segment from another machine's copy of the folder if records are missing; never edit segments by hand"
			}
			r.add(Finding{Check: p.Kind, Level: LevelError, Path: where, Detail: p.Detail, Fix: fix})
		}
	}
	tips := map[[2]string]uint64{} // (writer, device) → highest seq kept
	if len(vr.Ledger.Forks) > 0 {
		for i := range v.Snapshot.Entries {
			e := &v.Snapshot.Entries[i]
			if k := [2]string{e.Writer, e.Device}; e.Seq > tips[k] {
				tips[k] = e.Seq
			}
		}
	}
	for _, f := range vr.Ledger.Forks {
		if marked[Rel(c.Root, ledger.SegmentPath(c.Root, f.Writer, f.Device))] {
			continue
		}
		lines := []string{"kept: " + entryLine(&f.Winner)}
		last := f.Winner.Seq
		for i := range f.Losers {
			lines = append(lines, "left out: "+entryLine(&f.Losers[i]))
			last = max(last, f.Losers[i].Seq)
		}
		fd := Finding{Check: CheckFork, Level: LevelError, Path: f.Writer + "/" + f.Device,
			Detail: fmt.Sprintf("%s/%s has %d records at seq %d: the branch with the lower hash (%s) counts, %d record(s) of the other branch are left out",
				f.Writer, f.Device, countFork(f), f.Seq, f.Winner.Hash(), len(f.Losers)),
			Fix:   "two machines write as one device (a cloned disk or restored backup): on the copy, delete the ferry device file in its config dir so it gets a device of its own",
			Lines: lines}
		// The writer has written on the kept branch past every record of the fork (ADR
		// 0007: the home that lost was told once and chained on): the fork is history,
		// kept as evidence, no longer an error. A clone still writing makes a new fork.
		if tip := tips[[2]string{f.Writer, f.Device}]; tip > last {
			fd.Level = LevelWarning
			fd.Detail = fmt.Sprintf("resolved (the kept branch goes on to seq %d): ", tip) + fd.Detail
			fd.Fix = "nothing to do: the left-out lines stay listed as evidence; if two machines still write as " + f.Device + ", delete the ferry device file on one of them"
		}
		r.add(fd)
	}
	for _, l := range vr.Lost {
		r.add(Finding{Check: CheckLost, Level: LevelError, Detail: l,
			Fix: "restore the segment from another machine's copy of the folder or a backup; never edit segments by hand"})
	}
	for _, ig := range vr.Ignored {
		r.add(Finding{Check: CheckIgnored, Level: LevelWarning,
			Detail: fmt.Sprintf("%s/%s#%d %s %s: %s", ig.Writer, ig.Device, ig.Seq, ig.Type, ig.Ref, ig.Reason),
			Fix:    VerifyFix("ignored", ig.Reason)}) // the fix its reason calls for
	}
}

func countFork(f ledger.Fork) int {
	n := 1
	for _, e := range f.Losers {
		if e.Seq == f.Seq {
			n++
		}
	}
	return n
}

// entryLine is an entry's canonical line (its hash when it cannot be rebuilt).
func entryLine(e *ledger.Entry) string {
	b, err := e.Canonical()
	if err != nil {
		return e.Hash()
	}
	return string(b)
}

// ownSegment reports whether a slash path ledger/<writer>/<device>.jsonl is one this
// machine appends to.
func (c *Channel) ownSegment(p string) bool {
	parts := strings.Split(p, "/")
	if len(parts) != 3 || parts[2] != c.Device+".jsonl" {
		return false
	}
	return parts[1] == fold.MasterWriter && c.HasKey(fold.MasterWriter) || c.HasKey(parts[1])
}

// doctorCopies finds conflict copies in ledger/<writer>/ by content: a file whose
// records' (writer, device) segment path is not the file itself. Files readers read
// (*.jsonl) are merged; other files holding ledger lines are copies readers skip, and
// the records found in no file readers merge are an unmerged_copy error naming the name
// to rename the copy to. A record inside a segment proper whose (writer, device) is
// another's is misplaced: readers count it where it is (they trust the writer and
// device inside each line, docs/design.md §2 rule 8), but no ferry writer puts it there.
func (c *Channel) doctorCopies(r *findingList, v *View, vr *Report) error {
	dir := filepath.Join(c.Root, "ledger")
	writers, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	counted := map[string]bool{}
	for i := range v.Snapshot.Entries {
		counted[v.Snapshot.Entries[i].Hash()] = true
	}
	for _, f := range vr.Ledger.Forks {
		for i := range f.Losers {
			counted[f.Losers[i].Hash()] = true // reported with the fork
		}
	}
	rejected := map[string]bool{} // paths with records set aside (bad signature, unknown key)
	for _, p := range vr.Ledger.Problems {
		if p.Kind == ledger.KindBadSignature || p.Kind == ledger.KindUnknownKey {
			rejected[p.Path] = true
		}
	}
	// Records per file, and which files are a segment proper.
	type fileRecs struct {
		rel, abs string
		entries  []ledger.Entry
		of       map[string]bool // "<writer>/<device>"
		read     bool            // readers read it (*.jsonl)
	}
	var files []fileRecs
	inProper := map[string]bool{}
	for _, w := range writers {
		if !w.IsDir() || strings.HasPrefix(w.Name(), ".") {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(dir, w.Name()))
		if err != nil {
			return fmt.Errorf("listing %s: %w", w.Name(), err)
		}
		for _, e := range ents {
			name := e.Name()
			if e.Type().IsRegular() && tornName.MatchString(name) {
				size := int64(-1)
				if fi, err := e.Info(); err == nil {
					size = fi.Size()
				}
				r.add(Finding{Check: CheckTorn, Level: LevelInfo, Path: "ledger/" + w.Name() + "/" + name,
					Detail: fmt.Sprintf("a torn tail (%d bytes) its writer moved aside before appending", size),
					Fix:    "nothing to do: kept as evidence; it never counts"})
				continue
			}
			if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".tmp") {
				continue
			}
			abs := filepath.Join(dir, w.Name(), name)
			fr := fileRecs{rel: "ledger/" + w.Name() + "/" + name, abs: abs, of: map[string]bool{}, read: ledger.IsSegmentName(name)}
			entries, lines, err := scanLines(abs)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				continue // not a ledger file (or nothing complete in it yet)
			}
			fr.entries = entries
			proper := false
			for _, en := range entries {
				fr.of[en.Writer+"/"+en.Device] = true
				if ledger.IsOwnFile(c.Root, en.Writer, en.Device, abs) {
					proper = true
				}
			}
			if proper && fr.read { // the segment itself
				for i := range entries {
					en := &entries[i]
					inProper[en.Hash()] = true
					if !ledger.IsOwnFile(c.Root, en.Writer, en.Device, abs) {
						misplaced(r, fr.rel, lines[i], en, counted[en.Hash()])
					}
				}
				continue
			}
			files = append(files, fr)
		}
	}
	for _, fr := range files {
		// Merged: every record is read into the ledger — from this file (*.jsonl), or
		// for a file readers skip (a *.jsonl.bak, say) from other files.
		cp := ConflictCopy{Path: fr.rel, Of: strings.Join(slices.Sorted(maps.Keys(fr.of)), ","), Records: len(fr.entries), Merged: true}
		var unmerged []*ledger.Entry
		for i := range fr.entries {
			h := fr.entries[i].Hash()
			if !inProper[h] {
				cp.Only++
			}
			if !counted[h] && (!fr.read || !rejected[fr.rel]) {
				cp.Merged = false
				unmerged = append(unmerged, &fr.entries[i])
			}
		}
		r.Copies = append(r.Copies, cp)
		switch {
		case !cp.Merged && !fr.read:
			to := mergedName(fr.abs)
			r.add(Finding{Check: CheckUnmerged, Level: LevelError, Path: cp.Path,
				Detail: fmt.Sprintf("%d record(s) (%s) are in no file readers merge: this copy of %s's segment is not read, as its name does not end in .jsonl; they count for nothing until it is",
					len(unmerged), recordList(unmerged), cp.Of),
				Fix: fmt.Sprintf("rename it to %s (same folder) so ferry merges its records", path.Join(path.Dir(cp.Path), to))})
		case !cp.Merged:
			r.add(Finding{Check: CheckConflictCopy, Level: LevelError, Path: cp.Path,
				Detail: fmt.Sprintf("a copy of %s's segment: %d record(s), some neither counted nor reported", cp.Of, cp.Records),
				Fix:    "run `ferry ledger verify` for the records' problems"})
		case !fr.read: // skipped by readers, but every record counts from another file
			lvl, fix := LevelInfo, "nothing to do: every record is also in a segment; delete it or keep it as evidence"
			if cp.Only > 0 {
				lvl, fix = LevelWarning, "keep it (or the .jsonl copies holding its records): they are in no segment proper"
			}
			r.add(Finding{Check: CheckConflictCopy, Level: lvl, Path: cp.Path,
				Detail: fmt.Sprintf("a copy of %s's segment that readers skip (its name does not end in .jsonl); all %d record(s) are read from other files", cp.Of, cp.Records),
				Fix:    fix})
		case cp.Only > 0:
			r.add(Finding{Check: CheckConflictCopy, Level: LevelWarning, Path: cp.Path,
				Detail: fmt.Sprintf("a conflict copy of %s's segment, merged; %d of its %d record(s) are in no other file", cp.Of, cp.Only, cp.Records),
				Fix:    "keep the file (set Syncthing's maxConflicts to -1 so it is never pruned); its records count as they are"})
		default:
			r.add(Finding{Check: CheckConflictCopy, Level: LevelInfo, Path: cp.Path,
				Detail: fmt.Sprintf("a conflict copy of %s's segment, merged: all %d record(s) are also in the segment", cp.Of, cp.Records),
				Fix:    "nothing to do: ferry reads it; keep it as evidence"})
		}
	}
	return nil
}

// misplaced reports record e, found at line of the segment rel (another writer's or
// device's segment), as misplaced. ferry's writers append only to their own segment
// (docs/format.md §10), so the line was put there by hand, by a tool joining files, or
// by someone who can write to the folder; readers still count it (counted) on its own
// signature, as they would in any file of the ledger.
func misplaced(r *findingList, rel string, line int, e *ledger.Entry, counted bool) {
	what := "it counts as " + e.Writer + "'s record, on its own signature, as it would in any file of the ledger"
	if !counted {
		what = "it is read like any other line (its own findings say whether it counts)"
	}
	r.add(Finding{Check: CheckMisplaced, Level: LevelWarning, Path: fmt.Sprintf("%s:%d", rel, line),
		Detail: fmt.Sprintf("a line of %s/%s#%d (%s) inside the segment of another writer or device: %s", e.Writer, e.Device, e.Seq, e.Type, what),
		Fix:    fmt.Sprintf("no ferry writer appends to another's segment: if %s did not write it elsewhere, find who added the line (keep the file as evidence); leave it in place, since deleting a line of a segment breaks its chain", e.Writer)})
}

// mergedName returns a file name in abs's directory that readers merge (it ends in
// .jsonl; ledger.IsSegmentName), that no file has yet, and that no device's segment
// could have (so writers treat it as a copy): the copy's name with ".jsonl" appended,
// or with " (copy N).jsonl" appended when that name is taken or is not one readers read.
func mergedName(abs string) string {
	dir, name := filepath.Split(abs)
	free := func(n string) bool {
		_, err := os.Lstat(filepath.Join(dir, n))
		return ledger.IsSegmentName(n) && !ledger.ValidName(strings.TrimSuffix(n, ".jsonl")) && errors.Is(err, os.ErrNotExist)
	}
	if n := name + ".jsonl"; free(n) {
		return n
	}
	base := strings.ReplaceAll(name, ".torn-", ".torn_") // a name holding ".torn-" is never read
	for i := 1; ; i++ {
		if n := fmt.Sprintf("%s (copy %d).jsonl", base, i); free(n) {
			return n
		}
	}
}

// recordList names records as writer/device#seq, the first few of them.
func recordList(es []*ledger.Entry) string {
	const most = 5
	var parts []string
	for i, e := range es {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(es)-most))
			break
		}
		parts = append(parts, fmt.Sprintf("%s/%s#%d", e.Writer, e.Device, e.Seq))
	}
	return strings.Join(parts, ", ")
}

// doctorShrunk reports records this machine has read (its arrival log holds their
// hashes) that are in no file of ledger/ any more: a segment cut short, zero-filled or
// replaced by an older copy — of any writer, not only this machine's own. Per
// writer it names the count, the arrival numbers and the writer's
// segments now in the folder, with the last seq each holds. An error: a cut line can
// undo a revocation on every machine that never read it.
func (c *Channel) doctorShrunk(r *findingList, vr *Report) {
	for _, g := range vr.Vanished {
		if g.Archived {
			r.add(Finding{Check: CheckVanished, Level: LevelWarning, Path: "ledger/" + g.Writer, Detail: g.String(),
				Fix: "`ferry ledger verify --archive DIR` with the folder `ferry archive move` wrote tells which: records there are not reported"})
			continue
		}
		r.add(Finding{Check: CheckVanished, Level: LevelError, Path: "ledger/" + g.Writer, Detail: g.String(),
			Fix: fmt.Sprintf("restore %s's segment from another machine's copy of the folder or a backup (the copy holding the most records), or ask %s's machine to sync again; a cut line can undo a grant or a revocation on machines that never read it; never edit segments by hand", g.Writer, g.Writer)})
	}
}

// tornName matches a torn tail moved aside: <device>.torn-<n>.
var tornName = lazyre.New(`\.torn-[0-9]+$`)

// scanLines parses the complete lines of a file that are ledger entries (others are
// skipped: Read reports them for *.jsonl files) and returns them with their 1-based
// line numbers.
func scanLines(p string) ([]ledger.Entry, []int, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", p, err)
	}
	defer f.Close()
	var out []ledger.Entry
	var nums []int
	br := bufio.NewReaderSize(f, 256<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' && bytes.IndexByte(line, 0) < 0 {
			if e, perr := ledger.ParseLine(bytes.TrimSpace(line)); perr == nil {
				out = append(out, e)
				nums = append(nums, n)
			}
		}
		if err != nil {
			break
		}
	}
	return out, nums, nil
}

// objectFindings reports objects whose signature or parse fails (Report.Objects),
// objects whose hash differs from their entry's (Edited), and sync tools' copies of
// objects, which readers never read.
func (c *Channel) objectFindings(r *findingList, v *View, vr *Report) {
	for _, o := range vr.Objects {
		r.add(Finding{Check: CheckObject, Level: LevelError, Detail: o,
			Fix: verifyFixes["object"]})
	}
	for _, e := range vr.Edited {
		r.add(Finding{Check: CheckEdited, Level: LevelError, Detail: e, Fix: verifyFixes[KindEdited]})
	}
	entries := ObjectEntries(c.Root, v.Snapshot)
	for _, p := range AllObjectFiles(c.Root) {
		if entries[p] != nil {
			continue
		}
		name := filepath.Base(p)
		base, tool, ok := ledger.ParseCopyName(name)
		if !ok || !strings.HasSuffix(base, ".json") {
			continue // an orphan (doctorPending)
		}
		// A sync tool's copy of an object: never an entry's
		// object, whatever it holds.
		orig := filepath.Join(filepath.Dir(p), base)
		f := Finding{Check: CheckConflictCopy, Level: LevelWarning, Path: Rel(c.Root, p),
			Detail: fmt.Sprintf("a %s conflict copy of %s: readers never read it", tool, Rel(c.Root, orig)),
			Fix:    fmt.Sprintf("compare it with %s; once the original is intact (no object finding for it), delete the copy", Rel(c.Root, orig))}
		if _, err := os.Stat(orig); errors.Is(err, os.ErrNotExist) {
			f.Detail = fmt.Sprintf("a %s conflict copy of %s, which is not in the folder: readers never read the copy", tool, Rel(c.Root, orig))
			f.Fix = fmt.Sprintf("wait for the sync tool; if %s never arrives, check the copy and rename it to %s", Rel(c.Root, orig), base)
		}
		r.add(f)
	}
}

// doctorPending reports entries whose object has not (fully) arrived, objects no entry
var gitMarkers = lazyre.New(`(?m)^<<<<<<< .*\n(?s:.*)^>>>>>>> `)

// gitOps are the marks git leaves in its directory while an operation is stopped,
// with the operation's name and how to finish it.
var gitOps = []struct{ mark, name, fix string }{
	{"rebase-merge", "rebase", "git rebase --abort (or finish it: git rebase --continue)"},
	{"rebase-apply", "rebase", "git rebase --abort (or finish it: git rebase --continue)"},
	{"MERGE_HEAD", "merge", "git merge --abort (or finish it: git commit)"},
	{"CHERRY_PICK_HEAD", "cherry-pick", "git cherry-pick --abort (or finish it: git cherry-pick --continue)"},
}

// gitDirOf returns the git directory of the repository holding dir ("" when none):
// the first .git found going up, a directory or a "gitdir: PATH" file (a worktree
// or submodule).
func gitDirOf(dir string) string {
	for d := dir; ; {
		p := filepath.Join(d, ".git")
		if fi, err := os.Stat(p); err == nil {
			if fi.IsDir() {
				return p
			}
			b, err := os.ReadFile(p)
			if g, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:"); err == nil && ok {
				g = strings.TrimSpace(g)
				if !filepath.IsAbs(g) {
					g = filepath.Join(d, g)
				}
				return g
			}
			return ""
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// doctorGit reports a rebase, merge or cherry-pick stopped in the git repository
// holding the channel: the files with conflict markers are that
// operation's, not damaged segments. It returns the channel files (slash paths) that
// hold conflict markers, whose ledger problems are then not reported on their own. The
// finding goes first: it explains the others.
func (c *Channel) doctorGit(r *findingList) map[string]bool {
	marked := map[string]bool{}
	gd := gitDirOf(c.Root)
	if gd == "" {
		return marked
	}
	for _, op := range gitOps {
		if _, err := os.Stat(filepath.Join(gd, op.mark)); err != nil {
			continue
		}
		_ = filepath.WalkDir(c.Root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && gitMarkers.Match(b) {
				marked[Rel(c.Root, p)] = true
			}
			return nil
		})
		detail := fmt.Sprintf("a git %s is in progress in the repository holding the channel (%s)", op.name, filepath.Dir(gd))
		if len(marked) > 0 {
			detail += "; its conflict markers are in " + strings.Join(slices.Sorted(maps.Keys(marked)), ", ") + ": ferry reads those lines as damage until it ends"
		}
		fix := op.fix + "; if a ledger segment conflicts, abort: two machines use one device id — `ferry sync --git` names the steps"
		f := Finding{Check: CheckGit, Level: LevelError, Detail: detail, Fix: fix}
		r.Findings = append([]Finding{f}, r.Findings...)
		r.Errors++
		return marked
	}
	return marked
}

// doctorSync reports Syncthing's view and its folder settings.

// checkedChannel is what the checks of findings.go, forgery.go and vanished.go read of
// a channel: its root, this machine's device, the project and whether this home holds
// a key.
type Channel struct {
	Root, Device string
	ProjectName  string                 `json:"-"`
	HasKey       func(name string) bool `json:"-"`
	// Archives are the archive folders whose ledger/ holds moved files: the channel's
	// archive/ and those `--archive DIR` named.
	Archives []string `json:"-"`
}

// Project is the channel's project.
func (c *Channel) Project() string { return c.ProjectName }

// checkedView is what the checks read of a view: the merged ledger, the fold, this
// machine's arrival log and each chain's tip.
type View struct {
	Snapshot *ledger.Snapshot
	State    *fold.State
	Arrivals *arrivals.Log
	Tip      func(writer, device string) *ledger.Entry `json:"-"`
}

func (v *View) chainTip(writer, device string) *ledger.Entry { return v.Tip(writer, device) }

// checkpointFindings lists the owner's checkpoint problems and the dispute: a pending
// head is a warning (it has not arrived), the rest errors.
func checkpointFindings(r *findingList, out *Report) {
	for _, p := range out.Checkpoints {
		lvl, fix := LevelError, "tell the owner; restore the checkpoint's files and the master's segment from a machine that has them"
		switch p.Kind {
		case "state":
			fix = "`ferry ledger verify` on a machine that holds the history below the cut restores the chunks it recomputes; or restore them from a machine that has them"
		case "rolled_back":
			fix = "restore the checkpoint's files and the master's segment from a machine that has them; the detail says how to let the checkpoint go when none has"
		case "pending":
			lvl, fix = LevelWarning, "wait for the sync tool to deliver the checkpoint's files"
		case "absent":
			lvl, fix = LevelInfo, "nothing to do here; to check that history, `ferry ledger verify --archive DIR` with the folder `ferry archive move` wrote"
		case "replaced":
			lvl, fix = LevelInfo, "nothing to do: the machine that replaced it found it not counting for the settle time (docs/format.md §20 \"Replacing a checkpoint that does not count\")"
		case "rules":
			fix = "upgrade ferry on this machine"
		}
		detail := fmt.Sprintf("%s (epoch %d, %s): %s", p.Hash, p.Epoch, p.Kind, p.Detail)
		if p.Hash == "" { // a problem of the records below the cuts, not of one checkpoint
			detail = p.Kind + ": " + p.Detail
		}
		r.add(Finding{Check: CheckCheckpoint, Level: lvl, Detail: detail, Fix: fix})
	}
	if d := out.Dispute; d != nil {
		r.add(Finding{Check: CheckCheckpoint, Level: LevelError,
			Detail: fmt.Sprintf("the owner's checkpoint of epoch %d (%s) holds another state than this machine folds from the entries at or below its cut under fold rules %d: first difference at %s", d.Epoch, d.Hash, d.Rules, d.First),
			Fix:    "tell the owner: nothing may be archived to this checkpoint; compare `ferry ledger verify --json` on the owner's machine"})
	}
}
