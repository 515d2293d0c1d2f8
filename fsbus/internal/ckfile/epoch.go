package ckfile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// CheckEpoch compares the counting chain with the highest epoch this machine has seen,
// kept in the file path (config/checkpoints/<project>, Seen's lines, docs/format.md
// §18): a lower one is a folder rolled back (restored from an old copy),
// and the same epoch counting another checkpoint one whose checkpoint was replaced or
// lost, each reported loudly (kind rolled_back); a higher one is remembered. err says
// that it could not be remembered (the check then compares with the last epoch
// remembered).
func CheckEpoch(path string, cf *fold.ChannelFold, now time.Time) (probs []fold.CheckpointProblem, err error) {
	top, hash := 0, ""
	if n := len(cf.Chain); n > 0 {
		top, hash = cf.Chain[n-1].Data.Epoch, cf.Chain[n-1].Entry.Hash()
	}
	seen, seenHash := readSeen(path)
	letGo := fmt.Sprintf("restore the checkpoint's files and the master's segment from another machine (if no machine holds them any more, removing %s lets the next compaction replace the checkpoint once the settle time has passed, and what was final at its cut may then change)", path)
	switch {
	case top < seen:
		return []fold.CheckpointProblem{{Hash: seenHash, Epoch: seen, Kind: "rolled_back",
			Detail: fmt.Sprintf("this machine has seen the owner's checkpoint of epoch %d (%s) count, and the folder's counting checkpoints end at epoch %d: the folder was rolled back or restored from an old copy, or the checkpoint's files were lost; %s", seen, seenHash, top, letGo)}}, nil
	case top == seen && seenHash != "" && hash != seenHash:
		return []fold.CheckpointProblem{{Hash: seenHash, Epoch: seen, Kind: "rolled_back",
			Detail: fmt.Sprintf("this machine has seen the owner's checkpoint of epoch %d (%s) count, and %s counts at that epoch now: it was replaced (ADR 0020) or its entry lost, and what was final at its cut may have changed; if that is known and accepted, remove %s", seen, seenHash, hash, path)}}, nil
	case top > seen:
		return nil, RememberEpoch(path, top, hash, now)
	}
	return nil, nil
}

// SeenEpoch is one line of CheckEpoch's file: an epoch this machine has seen count,
// its checkpoint entry's hash and when this machine first saw it count.
type SeenEpoch struct {
	Epoch int
	Entry string
	At    time.Time
}

// seenKeep bounds the lines CheckEpoch's file keeps: the newest epochs seen.
const seenKeep = 64

// Seen reads the epochs the file path remembers, lowest first: lines
// "<epoch> <entry hash> <first seen, unix seconds>"; a line of the two first fields
// only (written by builds before the third) was first seen at the file's mtime. Lines
// that do not parse are left out; a missing or unreadable file remembers none.
func Seen(path string) []SeenEpoch {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []SeenEpoch
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 && len(f) != 3 {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil || n < 1 {
			continue
		}
		se := SeenEpoch{Epoch: n, Entry: f[1]}
		if len(f) == 3 {
			sec, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				continue
			}
			se.At = time.Unix(sec, 0)
		} else if fi, err := os.Stat(path); err == nil {
			se.At = fi.ModTime()
		}
		if len(out) > 0 && out[len(out)-1].Epoch >= n {
			continue
		}
		out = append(out, se)
	}
	return out
}

// readSeen reads the highest epoch and its entry hash the file path remembers (0, ""
// for none).
func readSeen(path string) (int, string) {
	s := Seen(path)
	if len(s) == 0 {
		return 0, ""
	}
	return s[len(s)-1].Epoch, s[len(s)-1].Entry
}

// RememberEpoch records in the file path that this machine has seen the checkpoint of
// epoch, entry hash, count, first at now, unless it remembers that epoch or a higher
// one already: the compactor calls it once its checkpoint is written, so a head
// deleted before its next reading is a rollback there, never a checkpoint it may
// replace. The file keeps the newest seenKeep epochs (the archive grace is counted
// from their times, docs/format.md §21).
func RememberEpoch(path string, epoch int, hash string, now time.Time) error {
	seen := Seen(path)
	if n := len(seen); n > 0 && seen[n-1].Epoch >= epoch {
		return nil
	}
	seen = append(seen, SeenEpoch{Epoch: epoch, Entry: hash, At: now})
	if len(seen) > seenKeep {
		seen = seen[len(seen)-seenKeep:]
	}
	var b strings.Builder
	for _, s := range seen {
		fmt.Fprintf(&b, "%d %s %d\n", s.Epoch, s.Entry, s.At.Unix())
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("could not remember checkpoint epoch %d: %w", epoch, err)
	}
	if err := fsutil.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("could not remember checkpoint epoch %d in %s: %w", epoch, path, err)
	}
	return nil
}

// Recheck folds every counting checkpoint of cf again from in (a snapshot's entries
// and forks) and returns cf's problems with the segments whose records at or below a
// cut are missing here, and the first dispute (fold.Recompute). With reread (in came
// from a reading from the cut, or the ledger l reads archived files in doesn't hold) l
// is read whole and folded again first: recomputing needs every record below the cuts.
// A chain missing its records at or below a cut because none of its records up to
// there is here (moved to an archive this folder does not hold) is kind "absent",
// unless whole (every chain must run from its first entry): then, like a record of
// another hash at the cut's seq, it is kind "cut".
func Recheck(root string, cf *fold.ChannelFold, in fold.FoldInput, l *ledger.Ledger, reread, whole bool) ([]fold.CheckpointProblem, *fold.Dispute, error) {
	if reread {
		snap, err := l.Read()
		if err != nil {
			return nil, nil, err
		}
		in.Entries, in.Forks = snap.Entries, snap.Forks
		cf = fold.FoldChannel(in, Dir{Root: root})
	}
	probs := slices.Clone(cf.Problems)
	d, missing, err := fold.Recompute(in, cf.Chain, Dir{Root: root})
	if err != nil {
		return nil, nil, err
	}
	lowest := map[ledger.Chain]uint64{}
	for i := range in.Entries {
		e := &in.Entries[i]
		k := ledger.Chain{Writer: e.Writer, Device: e.Device}
		if s, ok := lowest[k]; !ok || e.Seq < s {
			lowest[k] = e.Seq
		}
	}
	for _, m := range missing {
		switch low, ok := lowest[ledger.Chain{Writer: m.Writer, Device: m.Device}]; {
		case m.Kind == "pending":
			probs = append(probs, fold.CheckpointProblem{Kind: "pending", Detail: m.Detail + "; the state is checked once it is here"})
		case !whole && (!ok || low > m.Seq):
			probs = append(probs, fold.CheckpointProblem{Kind: "absent", Detail: fmt.Sprintf("segment %s/%s: no record up to seq %d is here (archived): the state is checked where the archive is, with `ferry ledger verify --archive DIR`", m.Writer, m.Device, m.Seq)})
		default:
			probs = append(probs, fold.CheckpointProblem{Kind: "cut", Detail: fmt.Sprintf("segment %s/%s seq %d: %s; the state cannot be folded again here", m.Writer, m.Device, m.Seq, m.Detail)})
		}
	}
	return probs, d, nil
}

// ReadOnlyError is the refusal of every write while a counting checkpoint was folded
// under other fold rules than this build's.
func ReadOnlyError() error {
	return errs.Errorf(errs.Denied, "upgrade ferry on this machine (`ferry update`), then try again",
		"this build folds under fold rules %d and the channel's owner's checkpoint was folded under other rules: it reads the channel and writes nothing", fold.RulesVersion)
}
