// Package archive moves what a counting owner's checkpoint covers out of the live
// channel folder (docs/format.md §21 "Moving frozen files"): a chain's frozen files wholly
// at or below the cut of a counting checkpoint this machine first saw at least
// policy.archive_grace_s ago, and that no dispute names, go whole to archive/ledger/.
package archive

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// Due is the counting checkpoint whose cut frozen files may move below now.
type Due struct {
	Epoch int
	Entry string // the checkpoint entry's hash
	Cut   fold.Cut
}

// FindDue returns the highest counting checkpoint of cf (the last Load's owner's
// checkpoints) that this machine first saw count at least grace ago (seen, the
// epoch-seen file's lines, ckfile.Seen), or nil: with no counting chain, a chain folded
// under other fold rules, a rolled-back folder, or a dispute standing (disputed,
// fold.StandingDisputes; a dispute names the newest counting checkpoint, whose state
// is built on every older one's), nothing moves. Epochs
// below cf's chain are found by their heads: each head names its previous checkpoint's
// line, whose data names that checkpoint's head by hash (root is the channel folder). A
// head that is not here or does not hash to its name stops the walk (nil, no error:
// the files wait).
func FindDue(root string, cf *fold.ChannelFold, seen []ckfile.SeenEpoch, grace time.Duration, now time.Time, disputed bool) (*Due, error) {
	if cf == nil || cf.ReadOnly || len(cf.Chain) == 0 || disputed {
		return nil, nil
	}
	for _, p := range cf.Problems {
		if p.Kind == "rolled_back" {
			return nil, nil
		}
	}
	newest := cf.Chain[len(cf.Chain)-1]
	var pick *ckfile.SeenEpoch
	for i := len(seen) - 1; i >= 0; i-- {
		if seen[i].Epoch <= newest.Data.Epoch && !seen[i].At.After(now.Add(-grace)) {
			pick = &seen[i]
			break
		}
	}
	if pick == nil {
		return nil, nil
	}
	// Walk the chain down from its lowest checkpoint in cf to the picked epoch.
	low := cf.Chain[0]
	entry, head := low.Entry, low.Head
	for _, c := range cf.Chain {
		if c.Data.Epoch == pick.Epoch {
			entry, head = c.Entry, c.Head
		}
	}
	for d := low.Data.Epoch; entry.Hash() != pick.Entry && d > pick.Epoch; d-- {
		prev, ph, err := previous(root, head)
		if err != nil || prev == nil {
			return nil, err
		}
		entry, head = *prev, ph
	}
	if entry.Hash() != pick.Entry {
		return nil, nil // the epoch seen is not the one that counts here
	}
	return &Due{Epoch: pick.Epoch, Entry: pick.Entry, Cut: head.Cut}, nil
}

// previous reads the checkpoint h names as previous: its entry (from h's line) and
// its head, which must hash to the name the entry's data gives. nil when h names none
// or the head is not here.
func previous(root string, h *fold.Head) (*ledger.Entry, *fold.Head, error) {
	if len(h.Previous) == 0 {
		return nil, nil, nil
	}
	e, err := ledger.ParseLine(h.Previous)
	if err != nil {
		return nil, nil, fmt.Errorf("head of epoch %d: previous checkpoint line: %w", h.Epoch, err)
	}
	var d fold.CheckpointData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return nil, nil, fmt.Errorf("head of epoch %d: previous checkpoint data: %w", h.Epoch, err)
	}
	raw, err := ckfile.Dir{Root: root}.Head(d.Epoch, d.Head)
	if err != nil || ledger.HashBytes(raw) != d.Head {
		return nil, nil, nil
	}
	var ph fold.Head
	if err := json.Unmarshal(raw, &ph); err != nil {
		return nil, nil, fmt.Errorf("head %s: %w", fold.HeadPath(d.Epoch, d.Head), err)
	}
	return &e, &ph, nil
}

// Move moves the frozen files of each chain that lie wholly at or below its point in
// due's cut (ledger.Ledger.MoveFrozenChain) and returns the archive paths written. A
// chain the cut does not name keeps its files. The first error stops the moves.
func Move(l *ledger.Ledger, due *Due, chains []ledger.Chain) ([]string, error) {
	if due == nil {
		return nil, nil
	}
	var moved []string
	for _, c := range chains {
		p, ok := due.Cut.At(c.Writer, c.Device)
		if !ok {
			continue
		}
		m, err := l.MoveFrozenChain(c.Writer, c.Device, p.Seq)
		moved = append(moved, m...)
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// CutChains returns the chains due's cut names, in its order.
func CutChains(due *Due) []ledger.Chain {
	if due == nil {
		return nil
	}
	out := make([]ledger.Chain, 0, len(due.Cut))
	for _, p := range due.Cut {
		out = append(out, ledger.Chain{Writer: p.Writer, Device: p.Device})
	}
	return out
}

// Run finds the checkpoint due (FindDue, over the epoch-seen file seenPath) and moves
// the frozen files of chains below it (Move), returning the archive paths written as
// slash paths relative to the channel folder. With chains nil it moves every chain the
// cut names and returns too, as "<writer>/<device>", the chains with no own file of
// the due epoch or later (Waiting).
func Run(l *ledger.Ledger, cf *fold.ChannelFold, seenPath string, grace time.Duration, now time.Time, disputed bool, chains []ledger.Chain) (moved, waiting []string, err error) {
	due, err := FindDue(l.Root(), cf, ckfile.Seen(seenPath), grace, now, disputed)
	if err != nil || due == nil {
		return nil, nil, err
	}
	if chains == nil {
		chains = CutChains(due)
		for _, c := range Waiting(l.Root(), due) {
			waiting = append(waiting, c.Writer+"/"+c.Device)
		}
	}
	moved, err = Move(l, due, chains)
	for i := range moved {
		if r, rerr := filepath.Rel(l.Root(), moved[i]); rerr == nil {
			moved[i] = filepath.ToSlash(r)
		}
	}
	return moved, waiting, err
}

// Waiting returns the chains due's cut names that have no own file of due's epoch or
// a later one under root: nobody has shown that they will not append to their older
// files again, so those stay.
func Waiting(root string, due *Due) []ledger.Chain {
	var out []ledger.Chain
	for _, c := range CutChains(due) {
		rolled := false
		for _, f := range ledger.ChainFiles(root, c.Writer, c.Device) {
			if _, e, ok := ledger.ParseSegmentName(filepath.Base(f)); ok && e >= uint64(due.Epoch) {
				rolled = true
			}
		}
		if !rolled {
			out = append(out, c)
		}
	}
	return out
}

// Gaps returns the chains to read from the archive folders (ledger.Ledger.SetArchived)
// after a whole reading of l whose problems are probs (with
// fold.ChannelFold.AnchorCut applied, so the seq gaps a counting cut covers are gone):
// have, the chains read from there already, and every chain with a broken-chain
// problem (ledger.KindBrokenChain) that has files in the channel's archive/ or a folder
// ledger.Ledger.SetArchiveDirs named — records a checkpoint that stopped counting let
// move (docs/format.md §21 "When a checkpoint stops counting"). It returns nil when
// that adds none to have: the reading stands.
func Gaps(l *ledger.Ledger, probs []ledger.Problem, have []ledger.Chain) []ledger.Chain {
	out := slices.Clone(have)
	var archived []ledger.Chain
	listed := false
	for _, p := range probs {
		c := ledger.Chain{Writer: p.Writer, Device: p.Device}
		if p.Kind != ledger.KindBrokenChain || c.Writer == "" || slices.Contains(out, c) {
			continue
		}
		if !listed {
			archived, listed = l.ArchivedChains(), true
		}
		if slices.Contains(archived, c) {
			out = append(out, c)
		}
	}
	if len(out) == len(have) {
		return nil
	}
	return out
}

// MoveOut moves the files of the channel's archive/ledger/ to dir, outside the channel
// folder (`ferry archive move DIR`, docs/format.md §21 "Taking the archive out"), each
// with ledger.Ledger.MoveArchived, and returns the paths written and, one line each,
// the files refused and why: a file a counting checkpoint's cut does not cover (newest,
// the cut of the newest counting checkpoint of the last Load), or one archived less
// than grace ago (its modification time: when the machine that moved it wrote it;
// a sync tool keeps it). With no counting checkpoint, a rolled-back folder, a read-only
// build, or a dispute standing (disputed) nothing moves: it returns conflict. The
// first I/O error stops the moves; a dir inside the channel folder is invalid.
func MoveOut(l *ledger.Ledger, cf *fold.ChannelFold, dir string, grace time.Duration, now time.Time, disputed bool) (moved, refused []string, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, nil, errs.Errorf(errs.Invalid, "name a folder outside the channel", "archive folder: %v", err)
	}
	inside := func(root, dir string) bool {
		r, err := filepath.Rel(root, dir)
		return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
	}
	if inside(l.Root(), dir) {
		return nil, nil, errs.Errorf(errs.Invalid, "name a folder outside the channel folder: inside it, the sync tool carries it on", "archive folder %s is inside the channel folder %s", dir, l.Root())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, errs.Errorf(errs.Invalid, "name a folder this user can create and write", "archive folder %s: %v", dir, err)
	}
	// By its real path too: a symbolic link on the way may lead back into the folder.
	realDir, err1 := filepath.EvalSymlinks(dir)
	realRoot, err2 := filepath.EvalSymlinks(l.Root())
	if err := errors.Join(err1, err2); err != nil || inside(realRoot, realDir) {
		return nil, nil, errs.Errorf(errs.Invalid, "name a folder outside the channel folder: inside it, the sync tool carries it on", "archive folder %s leads into the channel folder %s (%v)", dir, l.Root(), err)
	}
	if cf == nil || cf.ReadOnly || len(cf.Chain) == 0 {
		return nil, nil, errs.Errorf(errs.Conflict, "compact first (`ferry compact`)", "no owner's checkpoint counts here: nothing in archive/ is covered")
	}
	for _, p := range cf.Problems {
		if p.Kind == "rolled_back" {
			return nil, nil, errs.Errorf(errs.Conflict, "`ferry ledger verify` names the checkpoint files to restore", "the owner's checkpoint was rolled back here: nothing moves until it is restored")
		}
	}
	if disputed {
		return nil, nil, errs.Errorf(errs.Conflict, "`ferry ledger verify` shows the dispute; nothing moves until it is withdrawn", "a dispute of the owner's checkpoint stands")
	}
	cut := cf.Chain[len(cf.Chain)-1].Head.Cut
	base := filepath.Join(l.Root(), "archive", "ledger")
	writers, err := os.ReadDir(base)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	for _, w := range writers {
		if !w.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(base, w.Name()))
		if err != nil {
			return moved, refused, err
		}
		for _, e := range ents {
			file := filepath.Join(base, w.Name(), e.Name())
			rel := "archive/ledger/" + w.Name() + "/" + e.Name()
			device, _, ok := ledger.ParseSegmentName(e.Name())
			p, covered := cut.At(w.Name(), device)
			info, ierr := e.Info()
			switch {
			case !ok || !e.Type().IsRegular() || !fold.ValidName(w.Name()):
				refused = append(refused, rel+": not a chain file")
				continue
			case !covered:
				refused = append(refused, rel+": the newest counting checkpoint's cut does not name its chain")
				continue
			case ierr != nil:
				return moved, refused, ierr
			case info.ModTime().After(now.Add(-grace)):
				refused = append(refused, fmt.Sprintf("%s: archived %s, less than policy.archive_grace_s ago", rel, info.ModTime().UTC().Format(time.RFC3339)))
				continue
			}
			to, reason, err := l.MoveArchived(w.Name(), device, file, dir, p.Seq)
			if err != nil {
				return moved, refused, err
			}
			if reason != "" {
				refused = append(refused, rel+": "+reason)
				continue
			}
			moved = append(moved, to)
		}
	}
	return moved, refused, nil
}

// Dirs returns dirs (`--archive DIR`) as absolute paths, or not_found naming the first
// that is not a directory.
func Dirs(dirs []string) ([]string, error) {
	abs := make([]string, 0, len(dirs))
	for _, d := range dirs {
		a, err := filepath.Abs(d)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(a); err == nil && !fi.IsDir() {
				err = errors.New("not a directory")
			}
		}
		if err != nil {
			return nil, errs.Errorf(errs.NotFound, "name the folder `ferry archive move` wrote (it holds ledger/)", "archive folder %s: %v", d, err)
		}
		abs = append(abs, a)
	}
	return abs, nil
}
