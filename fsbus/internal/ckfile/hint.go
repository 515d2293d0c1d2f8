package ckfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// Hint is the checkpoint a new process reads from (docs/format.md §20 "Reading from the
// cut"): its epoch, head hash and the floors of its cut. It is only a guess: the fold
// (fold.FoldFloored) checks it against the entries above the cut and the process reads
// whole when it does not hold.
type Hint struct {
	Epoch  int
	Head   string
	Floors []ledger.Floor
}

// FindHint guesses the counting checkpoint of the channel folder root from the epoch
// this machine has seen count (the file seen, CheckEpoch's) or, on a machine that has
// seen none, the highest epoch among the heads under checkpoints/. The head is read
// (bounded, no links) and decoded without checking its signature. ok is false when
// there is no head to read from.
func FindHint(root, seen string) (Hint, bool) {
	epoch, _ := readSeen(seen)
	dirs, err := os.ReadDir(filepath.Join(root, "checkpoints"))
	if err != nil {
		return Hint{}, false
	}
	type cand struct {
		epoch int
		name  string
	}
	var cands []cand
	for _, d := range dirs {
		e, rest, ok := strings.Cut(d.Name(), "-")
		n, err := strconv.Atoi(e)
		if !ok || err != nil || n < 1 || len(rest) != 16 || !d.IsDir() {
			continue
		}
		if epoch == 0 || n == epoch {
			cands = append(cands, cand{n, d.Name()})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return b.epoch - a.epoch })
	for _, c := range cands {
		if epoch == 0 && c.epoch != cands[0].epoch {
			break
		}
		raw, err := readBounded(filepath.Join(root, "checkpoints", c.name, "head.json"), headMax)
		if err != nil {
			continue
		}
		hash := ledger.HashBytes(raw)
		if fold.HeadPath(c.epoch, hash) != "checkpoints/"+c.name+"/head.json" {
			continue
		}
		e, cut, err := headEpochCut(raw)
		if err != nil || e != c.epoch {
			continue
		}
		return Hint{Epoch: c.epoch, Head: hash, Floors: fold.Floors(cut)}, true
	}
	return Hint{}, false
}

// headEpochCut decodes a head's epoch and cut alone, and stops reading once it has
// both: a head's members are in RFC 8785 order (compactor, cut, epoch, …, things), so
// the thing-chunk list, which grows with the terminal things, is never decoded. It
// returns an error for a head that is not a JSON object or names neither.
func headEpochCut(raw []byte) (int, fold.Cut, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, nil, fmt.Errorf("head: not a JSON object")
	}
	var (
		epoch          int
		cut            fold.Cut
		haveE, haveCut bool
	)
	for dec.More() && !(haveE && haveCut) {
		t, err := dec.Token()
		if err != nil {
			return 0, nil, err
		}
		var v any
		switch t {
		case "epoch":
			v, haveE = &epoch, true
		case "cut":
			v, haveCut = &cut, true
		default:
			var skip json.RawMessage
			v = &skip
		}
		if err := dec.Decode(v); err != nil {
			return 0, nil, err
		}
	}
	if !haveE || !haveCut {
		return 0, nil, fmt.Errorf("head: no epoch or cut")
	}
	return epoch, cut, nil
}

// Floored is one process's reading from the cut: the hint it reads from (nil before
// the first Floors) and Miss, why it reads whole (the last fold could not use the
// floors, or it compacts or verifies).
type Floored struct {
	Hint *Hint
	Miss error
	// Cache is the machine-local directory where a marker per head says that this
	// machine loaded its state in full (the canonical check included):
	// state-checked-<first 32 hex of the head hash>. Empty: no markers.
	Cache string
}

// Floors returns the floors the next reading of the channel folder root starts from:
// none for a thorough reading, after a miss, or with no checkpoint to read from; else
// the hint's, found at the first call (FindHint; seen is CheckEpoch's file) and moved
// on by each whole fold from a newer counting checkpoint (Fold).
func (f *Floored) Floors(root, seen string, thorough bool) []ledger.Floor {
	if f.Hint == nil {
		h, _ := FindHint(root, seen)
		f.Hint = &h
	}
	if thorough || f.Miss != nil {
		return nil
	}
	return f.Hint.Floors
}

// Fold folds in (snap's entries and forks) with the owner's checkpoints of the folder
// root: from the hint's when snap was read from its floors (fold.FoldFloored; on a miss
// f.Miss says why and the caller reads whole), else from the newest counting one
// (fold.FoldChannel), which becomes the hint of the next reading unless thorough. It
// returns nil when snap holds no checkpoint entry and was read whole: fold everything.
// After a miss the fold it returns stands for nothing: the caller reads whole.
func (f *Floored) Fold(root string, in fold.FoldInput, snap *ledger.Snapshot, thorough bool) *fold.ChannelFold {
	in.Entries, in.Forks = snap.Entries, snap.Forks
	var cf *fold.ChannelFold
	if snap.Floors != nil && f.Hint != nil {
		marker := ""
		if f.Cache != "" {
			marker = filepath.Join(f.Cache, "state-checked-"+strings.TrimPrefix(f.Hint.Head, "sha256:")[:32])
		}
		_, err := os.Stat(marker)
		checked := marker != "" && err == nil
		cf, f.Miss = fold.FoldFloored(in, snap, Dir{Root: root}, f.Hint.Epoch, f.Hint.Head, checked)
		if cf != nil && !checked && marker != "" {
			_ = fsutil.WriteFile(marker, nil, 0o644) // a failure costs the next process the check again
		}
	}
	if cf != nil {
		return cf
	}
	if !slices.ContainsFunc(fold.WithForkedCheckpoints(snap.Entries, snap.Forks), func(e ledger.Entry) bool { return e.Type == fold.TypeCheckpoint && e.Writer == fold.MasterWriter }) {
		return nil
	}
	cf = fold.FoldChannel(in, Dir{Root: root})
	if u := cf.Used; u >= 0 && snap.Floors == nil && !cf.ReadOnly && !thorough && (f.Hint == nil || f.Hint.Head != cf.Chain[u].Data.Head) {
		f.Hint = &Hint{Epoch: cf.Chain[u].Data.Epoch, Head: cf.Chain[u].Data.Head, Floors: fold.Floors(cf.Chain[u].Head.Cut)}
		f.Miss = nil
	}
	return cf
}
