// Package doctor is `ferry doctor` (docs/sync.md): what a synced folder did to the
// channel as this machine sees it, each finding with a one-line fix. It starts from the
// findings `ferry ledger verify` reports (fsbus.Channel.Verify) and adds what waits for
// sync, writers' clocks, Syncthing's delivery and folder settings, contests and memory
// notes. It sits on top of the fsbus façade and uses its exported API only; it changes
// nothing in the channel.
package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/recheck"
	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/lazyre"
	"github.com/ferryhq/ferry/ledger"
)

// Checks (Finding.Check) `ferry doctor` makes beyond those it shares with `ferry
// ledger verify` (fsbus.CheckTorn …).
const (
	CheckOrphan         = "orphan_object"      // an object file no entry names (yet)
	CheckPending        = "pending_sync"       // an entry whose object or basis has not arrived
	CheckSkew           = "clock_skew"         // a writer's HLCs ran ahead of this machine's clock
	CheckSync           = "sync"               // Syncthing's view of delivery
	CheckSettings       = "sync_settings"      // Syncthing folder settings ferry recommends
	CheckContested      = "contested"          // a thing whose chain branched, with its winner
	CheckMemoryConflict = "memory_conflict"    // a conflict copy (or git conflict) of memory/*.md
	CheckStignore       = "stignore"           // ferry's .stignore not at the root of its Syncthing folder
	CheckChannelConfig  = "channel_config"     // channel.toml does not verify (docs/format.md §8)
	CheckDispute        = "checkpoint_dispute" // a dispute of the owner's checkpoint, or this machine's recheck of it
)

// OnlyChecks are the checks `ferry doctor` makes beyond the findings it shares
// with `ferry ledger verify` (Channel.Verify's verify.Report.Findings): the state of
// delivery and of this machine (what waits for sync, clocks, Syncthing and its
// settings), contests and memory notes. Every other check is in both.
var OnlyChecks = []string{CheckPending, CheckOrphan, CheckSkew, CheckSync, CheckSettings, CheckStignore, CheckContested, CheckMemoryConflict, CheckChannelConfig, CheckDispute}

// SkewRow is how far a writer's HLCs ran ahead of this machine's clock at arrival.
type SkewRow struct {
	Writer string `json:"writer"`
	AheadS int64  `json:"ahead_s"` // max over its entries of hlc − first seen here, seconds
}

// Pending counts what waits for the sync tool.
type Pending struct {
	Events  int `json:"events"`  // entries whose object file has not arrived
	Objects int `json:"objects"` // object files no entry names yet
	Basis   int `json:"basis"`   // lifecycle entries whose basis has not arrived
}

// Report is `ferry doctor`.
type Report struct {
	Project  string                `json:"project"`
	Channel  string                `json:"channel"`
	Errors   int                   `json:"errors"`
	Warnings int                   `json:"warnings"`
	Findings []verify.Finding      `json:"findings"`
	Copies   []verify.ConflictCopy `json:"conflict_copies"`
	Pending  Pending               `json:"pending"`
	Skew     []SkewRow             `json:"clock_skew"`
	Sync     *synchealth.Health    `json:"sync"`
}

// OK reports whether the doctor found no error.
func (r *Report) OK() bool { return r.Errors == 0 }

// Unmerged counts the conflict copies whose records readers do not read.
func (r *Report) Unmerged() int {
	n := 0
	for _, c := range r.Copies {
		if !c.Merged {
			n++
		}
	}
	return n
}

func (r *Report) add(f verify.Finding) {
	switch f.Level {
	case verify.LevelError:
		r.Errors++
	case verify.LevelWarning:
		r.Warnings++
	}
	r.Findings = append(r.Findings, f)
}

// Thresholds of the doctor's recommendations.
const (
	// SkewWarnS: a writer whose HLCs ran this many seconds ahead of this machine's clock
	// at arrival is reported (a warning; an error beyond the policy's max_skew_s).
	SkewWarnS = 60
	// RecommendedMaxConflicts: Syncthing should keep at least this many conflict copies
	// per file (its default), or all of them (-1), so no record is pruned unread.
	RecommendedMaxConflicts = 10
	// RecommendedWatcherDelayS: the watcher delay ferry recommends at most (seconds).
	RecommendedWatcherDelayS = 2
)

// Examine is `ferry doctor` on the channel as this machine sees it: every finding of
// Verify (verify.Report.Findings: torn tails, forks with both branches' lines, conflict
// copies of segments found by content, merged or not, records only in a copy readers
// do not merge, other writers' lines inside a segment, bad signatures and unknown
// keys, entries the fold ignored, object files that are wrong), then the OnlyChecks:
// object files that no entry names, what waits for sync, HLC skew of writers against
// this machine's clock at arrival, Syncthing's view of delivery (synchealth.Probe,
// within synchealth.Deadline) and its folder settings, contested things, and conflict
// copies of memory/*.md. Every finding has a one-line fix. It changes nothing in the channel;
// it returns an error only when the channel cannot be read.
func Examine(ctx context.Context, c *fsbus.Channel, v *fsbus.View) (*Report, error) {
	if c.Damage != nil && c.Damage.Pin == "" {
		// channel.toml does not verify and no pin says which key to trust: nothing
		// else can be checked (docs/format.md §8).
		r := &Report{Project: c.Project(), Channel: c.Root, Findings: []verify.Finding{}, Copies: []verify.ConflictCopy{}, Skew: []SkewRow{}}
		r.add(configFinding(c))
		return r, nil
	}
	vr, err := c.Verify(v)
	if err != nil {
		return nil, err
	}
	// The findings verify reports come first, unchanged; then the doctor's own checks.
	r := &Report{Project: c.Project(), Channel: c.Root, Findings: []verify.Finding{}, Copies: vr.Copies, Skew: []SkewRow{}}
	if c.Damage != nil {
		r.add(configFinding(c)) // channel.toml does not verify (docs/format.md §8)
	}
	for _, f := range vr.Findings {
		r.add(f)
	}
	checkPending(r, c, v)
	checkSkew(r, c, v)
	for _, ct := range v.State.Contested {
		lost := []string{}
		for _, l := range ct.Losers {
			lost = append(lost, l.By+": "+l.Type)
		}
		r.add(verify.Finding{Check: CheckContested, Level: verify.LevelInfo, Path: ct.Ref,
			Detail: fmt.Sprintf("%s branched: %s: %s won over %s", ct.Ref, ct.Winner.By, ct.Winner.Type, strings.Join(lost, ", ")),
			Fix:    "nothing to do: every machine folds the same winner; tell " + strings.Join(ct.Involved, ", ") + " if work was done twice"})
	}
	checkMemory(r, c)
	checkDisputes(r, c, v)
	r.Sync = synchealth.Probe(ctx, c.Root)
	checkSync(r, c)
	checkStignore(r, c)
	return r, nil
}

// checkDisputes reports the disputes standing against the owner's checkpoints
// (fold.StandingDisputes) and what this machine's background recheck of the newest one
// found (package fsbus/recheck; docs/format.md §20 "Checking").
func checkDisputes(r *Report, c *fsbus.Channel, v *fsbus.View) {
	cf := c.OwnerCheckpoint()
	if cf == nil {
		return
	}
	for _, d := range fold.StandingDisputes(v.Snapshot.Entries, v.State, cf.Chain) {
		r.add(verify.Finding{Check: CheckDispute, Level: verify.LevelError, Path: d.Hash,
			Detail: fmt.Sprintf("%s (device %s) disputes the owner's checkpoint of epoch %d (%s) under fold rules %d: first difference at %s; nothing is compacted or archived on it while the dispute stands", d.Writer, d.Device, d.Epoch, d.Hash, d.Rules, d.First),
			Fix:    "compare `ferry ledger verify --json` here and on " + d.Writer + "'s machine; repair what differs there (its build, its copy of the checkpoint's files) so its next recheck withdraws the dispute, or revoke or retire " + d.Writer + " if its fold is wrong"})
	}
	switch k := recheck.Kept(c); {
	case k == nil:
	case k.Outcome == recheck.Dispute:
		r.add(verify.Finding{Check: CheckDispute, Level: verify.LevelError, Path: k.Checkpoint,
			Detail: fmt.Sprintf("this machine's recheck of the owner's checkpoint of epoch %d (%s) at %s folded another state, first at %s%s", k.Epoch, k.Checkpoint, k.At, k.First, parenthesised(k.Detail)),
			Fix:    "tell the owner; `ferry ledger verify` here shows the difference"})
	default:
		r.add(verify.Finding{Check: CheckDispute, Level: verify.LevelInfo, Path: k.Checkpoint,
			Detail: fmt.Sprintf("this machine rechecked the owner's checkpoint of epoch %d at %s: %s%s", k.Epoch, k.At, k.Outcome, parenthesised(k.Detail)),
			Fix:    "nothing to do"})
	}
}

func parenthesised(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// doctorLedger reports the ledger's problems, forks and ignored entries. Problems and
// forks in the segments of marked (slash paths holding git conflict markers while a
// names, and lifecycle entries whose basis has not arrived.
//
// An object file the state knows (an order, its result, an ask, a message or a hand-in
// folded here or terminal at the owner's checkpoint) is no orphan, though no entry here
// names it: its entries are at or below the cut, or moved to archive/.
func checkPending(r *Report, c *fsbus.Channel, v *fsbus.View) {
	entries := c.ObjectEntries(v)
	for _, p := range slices.Sorted(maps.Keys(entries)) {
		e := entries[p]
		if isLink(p) {
			continue // reported as a link (doctorKeyChanges), never read
		}
		_, _, err := c.ReadObject(p)
		switch {
		case errors.Is(err, fold.ErrObjectTorn): // (wraps ErrObjectMissing) only a warning: Verify lists it as arriving, not as an error
			r.Pending.Events++
			r.add(verify.Finding{Check: CheckPending, Level: verify.LevelWarning, Path: relPath(c.Root, p),
				Detail: fmt.Sprintf("%s by %s names %s, which has only partly arrived (pending sync)", e.Type, e.Writer, relPath(c.Root, p)),
				Fix:    "wait for the sync tool to finish the file; if it stays cut short, restore it from the writer's machine"})
		case errors.Is(err, fold.ErrObjectMissing):
			r.Pending.Events++
			r.add(verify.Finding{Check: CheckPending, Level: verify.LevelWarning, Path: relPath(c.Root, p),
				Detail: fmt.Sprintf("%s by %s names %s, which has not arrived (pending sync)", e.Type, e.Writer, relPath(c.Root, p)),
				Fix:    "wait for the sync tool; if it never comes, the writer's machine still holds it — check its sync"})
		}
	}
	known := knownObjects(v.State)
	for _, p := range c.ObjectFiles() {
		if entries[p] != nil || known[strings.TrimSuffix(filepath.Base(p), ".json")] {
			continue // named by an entry here, or by the state (its entries at or below the owner's checkpoint's cut, or archived)
		}
		if base, _, ok := ledger.ParseCopyName(filepath.Base(p)); ok && strings.HasSuffix(base, ".json") {
			continue // a copy, reported with Verify's findings (objectFindings)
		}
		r.Pending.Objects++
		r.add(verify.Finding{Check: CheckOrphan, Level: verify.LevelWarning, Path: relPath(c.Root, p),
			Detail: relPath(c.Root, p) + " is named by no entry: invisible until its entry arrives",
			Fix:    "wait for the sync tool; if it stays after every machine synced, its writer stopped between the file and the entry (harmless; it may be deleted)"})
	}
	for _, o := range v.State.Orders {
		r.Pending.Basis += o.Pending
	}
	r.Pending.Basis += v.State.Primary.Pending
	if r.Pending.Basis > 0 {
		r.add(verify.Finding{Check: CheckPending, Level: verify.LevelWarning,
			Detail: fmt.Sprintf("%d lifecycle entries wait for the entry they build on (pending sync)", r.Pending.Basis),
			Fix:    "wait for the sync tool to deliver the other machines' segments"})
	}
}

// checkSkew reports writers whose entries carried HLCs ahead of this machine's clock
// when it first saw them.
func checkSkew(r *Report, c *fsbus.Channel, v *fsbus.View) {
	ahead := map[string]int64{}
	for i := range v.Snapshot.Entries {
		e := &v.Snapshot.Entries[i]
		seen := v.Arrivals.Seen(e.Hash())
		h, err := ledger.ParseHLC(e.HLC)
		if seen.IsZero() || err != nil {
			continue
		}
		if d := (h.Ms - seen.UnixMilli()) / 1000; d > ahead[e.Writer] {
			ahead[e.Writer] = d
		}
	}
	for _, w := range slices.Sorted(maps.Keys(ahead)) {
		d := ahead[w]
		if d < SkewWarnS {
			continue
		}
		r.Skew = append(r.Skew, SkewRow{Writer: w, AheadS: d})
		lvl := verify.LevelWarning
		if d > c.PolicyOf(v).MaxSkewS {
			lvl = verify.LevelError
		}
		r.add(verify.Finding{Check: CheckSkew, Level: lvl, Path: w,
			Detail: fmt.Sprintf("entries of %s were stamped up to %s ahead of this machine's clock when they arrived (a fast clock, or one absorbed from a writer with a fast clock)", w, fsbus.Span(d)),
			Fix:    "turn on network time (NTP) on the machines involved; order is kept by HLC either way"})
	}
}

// checkMemory lists conflict copies of memory/*.md — names a sync tool gives a copy
// (ledger.ParseCopyName) whose original is in memory/ (a per-author note such as
// notes-bob.md is no copy) — and notes with git conflict markers.
// A OneDrive-shaped name (<stem>-<MACHINE>.md) is only info: it may be a note named
// after its author.
func checkMemory(r *Report, c *fsbus.Channel) {
	dir := filepath.Join(c.Root, "memory")
	ents, _ := os.ReadDir(dir)
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") {
			continue
		}
		p := "memory/" + name
		if base, tool, ok := ledger.ParseCopyName(name); ok && names[base] {
			f := verify.Finding{Check: CheckMemoryConflict, Level: verify.LevelWarning, Path: p,
				Detail: fmt.Sprintf("a %s conflict copy of memory/%s: two machines edited it at once", tool, base),
				Fix:    "merge it into the original by hand, then delete the copy; prefer one note per author"}
			if tool == ledger.ToolOneDrive {
				f.Level = verify.LevelInfo
				f.Detail = fmt.Sprintf("named like a OneDrive conflict copy of memory/%s (or a note named after its author)", base)
				f.Fix = "if OneDrive made it, merge it into the original and delete it; otherwise nothing to do"
			}
			r.add(f)
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && gitMarkers.Match(b) {
			r.add(verify.Finding{Check: CheckMemoryConflict, Level: verify.LevelWarning, Path: p,
				Detail: "the note holds git conflict markers (<<<<<<< … >>>>>>>)",
				Fix:    "resolve the conflict in the note by hand and commit it"})
		}
	}
}

var gitMarkers = lazyre.New(`(?m)^<<<<<<< .*\n(?s:.*)^>>>>>>> `)

func checkSync(r *Report, c *fsbus.Channel) {
	h := r.Sync
	lvl := verify.LevelInfo
	switch {
	case h.InUse && h.Syncthing != synchealth.StateOK:
		lvl = verify.LevelError // the channel is in Syncthing, and Syncthing cannot be asked
	case h.InUse && (h.NoPeer() || (h.Folder != nil && h.Folder.Paused)):
		lvl = verify.LevelWarning
	case h.Syncthing == synchealth.StateError || h.Syncthing == synchealth.StateUnauthorized || h.Syncthing == synchealth.StateTimeout:
		lvl = verify.LevelWarning
	}
	fix := h.Fix
	if fix == "" {
		fix = "nothing to do"
	}
	r.add(verify.Finding{Check: CheckSync, Level: lvl, Detail: h.Syncthing + ", " + h.Delivery + ": " + h.Detail, Fix: fix})
	if !h.InUse || h.Folder == nil {
		return
	}
	f := h.Folder
	if f.MaxConflicts == 0 {
		r.add(verify.Finding{Check: CheckSettings, Level: verify.LevelError, Path: f.ID,
			Detail: fmt.Sprintf("Syncthing keeps no conflict copies in folder %s (maxConflicts 0): when two machines change a file at once, one side's changes are discarded", f.ID),
			Fix:    "set the folder's maxConflicts to -1 (keep all) in Syncthing (Edit Folder → Advanced)"})
	} else if f.MaxConflicts > 0 && f.MaxConflicts < RecommendedMaxConflicts {
		r.add(verify.Finding{Check: CheckSettings, Level: verify.LevelWarning, Path: f.ID,
			Detail: fmt.Sprintf("Syncthing keeps %d conflict copies per file in folder %s: records only in a pruned copy would be lost", f.MaxConflicts, f.ID),
			Fix:    "set the folder's maxConflicts to -1 (keep all) in Syncthing (Edit Folder → Advanced)"})
	}
	if !f.WatcherEnabled {
		r.add(verify.Finding{Check: CheckSettings, Level: verify.LevelWarning, Path: f.ID,
			Detail: fmt.Sprintf("the file watcher is off for folder %s: changes wait for the next full rescan", f.ID),
			Fix:    "turn on \"Watch for Changes\" for the folder in Syncthing"})
	} else if f.WatcherDelayS > RecommendedWatcherDelayS {
		r.add(verify.Finding{Check: CheckSettings, Level: verify.LevelInfo, Path: f.ID,
			Detail: fmt.Sprintf("the watcher waits %d s before sending changes in folder %s", f.WatcherDelayS, f.ID),
			Fix:    fmt.Sprintf("set fsWatcherDelayS to 1–%d in the folder's advanced settings for faster delivery", RecommendedWatcherDelayS)})
	}
	if root, _ := syncthingRoot(c, r.Sync); root != "" && !samePath(root, c.Root) {
		return // checkStignore reports what the folder root's .stignore needs
	}
	if b, err := os.ReadFile(filepath.Join(c.Root, ".stignore")); err != nil || !bytes.Contains(b, []byte(".ferry-*.tmp")) {
		r.add(verify.Finding{Check: CheckSettings, Level: verify.LevelWarning, Path: ".stignore",
			Detail: ".stignore on this machine does not hide ferry's temp files (Syncthing does not sync .stignore)",
			Fix:    "run `ferry join --as <agent>` once on this machine: it writes .stignore"})
	}
}

// syncthingRoot returns the root of the Syncthing folder holding the channel, and how
// it was found: the folder path Syncthing's REST API reports ("api"), else the nearest
// directory at or above the channel holding a .stfolder marker (Syncthing puts one at
// every folder root: "marker"). "" when neither says.
func syncthingRoot(c *fsbus.Channel, h *synchealth.Health) (root, how string) {
	if h != nil && h.Folder != nil && h.Folder.Path != "" {
		p := h.Folder.Path
		if rest, ok := strings.CutPrefix(p, "~"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, rest)
			}
		}
		if abs, err := filepath.Abs(p); err == nil {
			return filepath.Clean(abs), "api"
		}
	}
	for d := c.Root; ; {
		if _, err := os.Stat(filepath.Join(d, ".stfolder")); err == nil {
			return d, "marker"
		}
		up := filepath.Dir(d)
		if up == d {
			return "", ""
		}
		d = up
	}
}

// samePath reports whether a and b name one directory (by path, or by file identity
// when both exist: symlinks, case-insensitive file systems).
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// StignoreLines returns the lines the .stignore at the root of a Syncthing folder
// needs when the channel is the folder's subdirectory relPath (slash-separated):
// ferry's patterns (the channel's own .stignore) anchored at the channel, since
// Syncthing reads .stignore only at the folder root.
func StignoreLines(relPath string) []string {
	p := "/" + strings.Trim(relPath, "/")
	return []string{"(?d)" + p + "/**.ferry-*.tmp", "(?d)" + p + "/**.torn-*"}
}

// checkStignore reports a channel that is a subdirectory of its Syncthing folder
// (found through the REST API or a .stfolder marker above it) whose folder root's
// .stignore lacks ferry's patterns: the channel's own .stignore is then ignored, and
// ferry's temp files and torn tails would be synced.
func checkStignore(r *Report, c *fsbus.Channel) {
	root, how := syncthingRoot(c, r.Sync)
	if root == "" || samePath(root, c.Root) {
		return
	}
	relp, err := filepath.Rel(root, c.Root)
	if err != nil || relp == ".." || strings.HasPrefix(relp, ".."+string(filepath.Separator)) {
		return
	}
	relp = filepath.ToSlash(relp)
	want := StignoreLines(relp)
	have := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(root, ".stignore")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			have[strings.TrimSpace(l)] = true
		}
	}
	// Unanchored patterns at the root match in every directory: enough too.
	if have["(?d).ferry-*.tmp"] && have["(?d)*.torn-*"] {
		return
	}
	var missing []string
	for _, l := range want {
		if !have[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return
	}
	src := "a .stfolder marker"
	if how == "api" {
		src = "Syncthing's API"
	}
	r.add(verify.Finding{Check: CheckStignore, Level: verify.LevelWarning, Path: ".stignore",
		Detail: fmt.Sprintf("the channel is the subfolder %s of the Syncthing folder %s (from %s): Syncthing reads .stignore only at the folder root, so the channel's own .stignore has no effect and ferry's temp files and torn tails get synced", relp, root, src),
		Fix:    fmt.Sprintf("share the channel folder itself in Syncthing, or add these lines to %s on every machine: %s", filepath.Join(root, ".stignore"), strings.Join(missing, "  "))})
}

// configFinding is the doctor's finding about a channel.toml that does not verify
// (fsbus.Channel.Damage, set by fsbus.OpenUnverified).
func configFinding(c *fsbus.Channel) verify.Finding {
	d := c.Damage
	f := verify.Finding{Check: CheckChannelConfig, Level: verify.LevelError, Path: "channel.toml"}
	restore := "restore channel.toml from another machine or a backup (never edit it: its signature covers every key)"
	switch {
	case d.Pin == "":
		f.Detail = "channel.toml is not signed by its master key, and this machine has pinned no master key for project " + c.Config.Project +
			": nothing in the channel can be verified here, so nothing else was checked"
		f.Fix = restore + "; then run `ferry doctor` again"
		return f
	case !d.Compared:
		f.Detail = "channel.toml is not signed by its master key; this machine kept no verified copy, so which keys changed is unknown; the rest was checked with the pinned master key " + d.Key
	case len(d.Changed) == 0:
		f.Detail = "channel.toml is not signed by its master key, though its keys equal the last verified copy's (" + d.Copy + "): its signature was changed; the rest was checked with the pinned master key " + d.Key
	default:
		f.Detail = fmt.Sprintf("channel.toml is not signed by its master key: changed since this machine last verified it: %s; the rest was checked with the pinned master key %s and the verified copy's settings",
			strings.Join(d.Changed, ", "), d.Key)
	}
	policyOnly := d.Compared && len(d.Changed) > 0
	for _, k := range d.Changed {
		policyOnly = policyOnly && strings.HasPrefix(k, "policy.")
	}
	switch {
	case policyOnly:
		var sets []string
		for _, k := range d.Changed {
			k = strings.TrimPrefix(k, "policy.")
			val := "VALUE"
			if v, ok := d.Edited[k]; ok {
				val = v
			}
			sets = append(sets, k+"="+val)
		}
		f.Fix = restore + ", then make the policy change with `ferry policy set " + strings.Join(sets, " ") + "` (owner only)"
		if d.Copy != "" {
			f.Fix = "copy " + d.Copy + " back to channel.toml (the last verified one), then make the policy change with `ferry policy set " + strings.Join(sets, " ") + "` (owner only)"
		}
	case d.Copy != "":
		f.Fix = "copy " + d.Copy + " back to channel.toml (the last verified one) or " + restore + "; policy changes are made with `ferry policy set KEY=VALUE` (owner only)"
	default:
		f.Fix = restore + "; policy changes are made with `ferry policy set KEY=VALUE` (owner only)"
	}
	return f
}

// relPath is p relative to root, slash-separated (p itself when it is not below root).
func relPath(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}

// isLink reports whether p itself is a symbolic link (Lstat: never followed): doctor
// reads no object file that is one, as Verify lists it (fsbus.CheckLink).
func isLink(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// knownObjects returns the ids of the objects st knows: orders (those terminal at the
// owner's checkpoint too) and their results, asks, messages and hand-ins.
func knownObjects(st *fold.State) map[string]bool {
	known := map[string]bool{}
	for id, o := range st.AllOrders() {
		known[id] = true
		if o.Result != nil && o.Result.Result != "" {
			known[o.Result.Result] = true
		}
	}
	for id := range st.AllAsks() {
		known[id] = true
	}
	for id := range st.Messages {
		known[id] = true
	}
	for id := range st.Handins {
		known[id] = true
	}
	return known
}
