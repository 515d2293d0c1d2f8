package ckfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// File is one checkpoint file to write: its path and bytes.
type File struct {
	Path string
	Data []byte
}

// NewFiles signs plan's head with s and returns the files the checkpoint adds under
// the channel folder root — the chunks not already there with the same bytes (chunks
// are shared across epochs), then the head — and the head's hash, making their
// directories. The caller writes them (written once) before the checkpoint entry.
func NewFiles(root string, plan *fold.Plan, s ledger.Signer) ([]File, string, error) {
	headBytes, headHash, err := fold.SignHead(plan.Head, s)
	if err != nil {
		return nil, "", err
	}
	var out []File
	for _, c := range plan.Chunks {
		p := filepath.Join(root, filepath.FromSlash(fold.ChunkPath(ledger.HashBytes(c))))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, c) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, "", err
		}
		out = append(out, File{Path: p, Data: c})
	}
	hp := filepath.Join(root, filepath.FromSlash(fold.HeadPath(plan.Epoch, headHash)))
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		return nil, "", err
	}
	return append(out, File{Path: hp, Data: headBytes}), headHash, nil
}

// checkCompactor refuses a compaction on a device that is not the compactor the
// previous head names, unless p.TakeOver; a take-over it refuses on the compactor
// itself, and while the compactor's master segment or presence changed within the
// settle time (docs/format.md §20 "Moving the compactor").
func checkCompactor(p fold.PlanInput) error {
	cp := p.Prev.Head.Compactor
	switch {
	case cp == p.Device && p.TakeOver:
		return errs.Errorf(errs.Invalid, "run `ferry compact` without --take-over", "this device (%s) is the compactor already: there is nothing to take over", p.Device)
	case cp == p.Device:
		return nil
	case !p.TakeOver:
		return errs.Errorf(errs.Denied, "run `ferry compact` on that machine; if it is gone for good, `ferry compact --take-over` here",
			"this device (%s) is not the compactor: the owner's checkpoint of epoch %d names device %s", p.Device, p.Prev.Data.Epoch, cp)
	case p.DevicesSeen[cp]:
		return errs.Errorf(errs.Conflict, "run `ferry compact` on that machine, or wait until it has been silent for the settle time",
			"the compactor (device %s) was seen within the settle time (%s): its presence changed; a take-over is for a compactor that is gone", cp, p.SettleText)
	}
	var newest *ledger.Entry // the compactor's newest master entry first seen here within the wait
	for i := range p.In.Entries {
		if e := &p.In.Entries[i]; e.Writer == fold.MasterWriter && e.Device == cp && p.SeenMs(e.Hash()) >= p.GuardMs && (newest == nil || e.Seq > newest.Seq) {
			newest = e
		}
	}
	if newest != nil {
		return errs.Errorf(errs.Conflict, "run `ferry compact` on that machine, or wait until it has been silent here for the settle time",
			"this machine first saw the compactor's (device %s) master entry seq %d within the settle time (%s); a take-over is for a compactor that is gone", cp, newest.Seq, p.SettleText)
	}
	return nil
}

// Prepare decides the next checkpoint of the channel folder root from cf (the last
// Load's checkpoints; nil for none) and p (Prev and PrevBase are filled here): it
// refuses while a checkpoint of the chain does not count here yet and may still
// (fold.ChannelFold.Replacement; one that has not counted for the settle time the next
// checkpoint replaces) or on a device that is not the compactor (checkCompactor),
// loads the previous state (hash-checked), plans the cut and the state (fold.PlanCheckpoint), signs the head
// with s, and returns the checkpoint entry's draft and the files to write before it.
// A nil draft and no error: nothing new has settled.
func Prepare(root string, cf *fold.ChannelFold, s ledger.Signer, p fold.PlanInput) (*ledger.Draft, []File, *fold.CompactResult, error) {
	res := &fold.CompactResult{Settle: p.SettleText}
	var chain []fold.Counting
	var replace *fold.CheckpointProblem
	if cf != nil {
		var b *fold.CheckpointProblem
		chain = cf.Chain
		if replace, b = cf.Replacement(p.SeenMs, p.GuardMs); b != nil {
			hint := "wait for sync to bring the checkpoint's files, or restore them from another machine (`ferry doctor` names them), then compact"
			switch {
			case b.Stops:
				hint += "; once its entry has been here for the settle time (policy.settle_s) without it counting, `ferry compact` replaces it"
			case b.Kind == "state":
				hint = "run `ferry ledger verify` on a machine that holds the history below the cut: it restores the chunks it recomputes; or wait for sync to bring them, then compact"
			}
			return nil, nil, res, errs.Errorf(errs.Conflict, hint,
				"the owner's checkpoint of epoch %d (%s) does not count here yet: %s; a compaction now would write its epoch again", b.Epoch, b.Hash, b.Detail)
		}
	}
	if p.TakeOver && len(chain) == 0 {
		return nil, nil, res, errs.Errorf(errs.Invalid, "run `ferry compact` without --take-over: the first checkpoint names its own device",
			"no owner's checkpoint names a compactor yet: there is nothing to take over")
	}
	if d := fold.PolicyCompactorOf(p.State); len(chain) == 0 && d != "" && d != p.Device {
		return nil, nil, res, errs.Errorf(errs.Denied, "run `ferry compact` on that machine, or `ferry policy set compactor="+p.Device+"` here first",
			"policy.compactor names device %s for the first checkpoint; this device is %s", d, p.Device)
	}
	if len(chain) > 0 {
		p.Prev = &chain[len(chain)-1]
		if err := checkCompactor(p); err != nil {
			return nil, nil, res, err
		}
		if ds := fold.StandingDisputes(p.In.Entries, p.State, chain); len(ds) > 0 {
			var who []string
			for _, d := range ds {
				who = append(who, fmt.Sprintf("%s (epoch %d, first difference at %s)", d.Writer, d.Epoch, d.First))
			}
			return nil, nil, res, errs.Errorf(errs.Conflict, "run `ferry ledger verify` here and on the disputer's machine; repair what differs (its build or its copy of the checkpoint's files), or revoke or retire a disputer whose fold is wrong",
				"the owner's checkpoint is disputed: %s; nothing is compacted on a disputed state", strings.Join(who, "; "))
		}
		var err error
		if p.PrevBase, err = fold.LoadBase(*p.Prev, Dir{Root: root}); err != nil {
			return nil, nil, res, errs.Errorf(errs.Invalid, "run `ferry doctor`; restore the checkpoint's files from another machine",
				"the owner's checkpoint of epoch %d does not load: %v", p.Prev.Data.Epoch, err)
		}
	}
	p.Offset = func(writer, device, hash string) int64 {
		return ledger.ChainLineEnd(root, writer, device, hash)
	}
	plan, err := fold.PlanCheckpoint(p)
	if err != nil {
		return nil, nil, res, err
	}
	res.Epoch, res.Unsettled, res.Unsupported = plan.Epoch, plan.Unsettled, plan.Unsupported
	if plan.Base == nil {
		return nil, nil, res, nil
	}
	if replace != nil && replace.Epoch != plan.Epoch {
		return nil, nil, res, fmt.Errorf("the checkpoint to replace (%s) is of epoch %d, the next one of %d", replace.Hash, replace.Epoch, plan.Epoch)
	}
	files, headHash, err := NewFiles(root, plan, s)
	if err != nil {
		return nil, nil, res, err
	}
	b := plan.Base
	res.Head, res.Chunks, res.Written, res.Segments = fold.HeadPath(plan.Epoch, headHash), len(plan.Chunks), len(files)-1, len(plan.Cut)
	res.Covered, res.Lines, res.Terminal = b.Entries, len(b.Lines), len(b.Orders)+len(b.Asks)
	d := fold.CheckpointData{Epoch: plan.Epoch, Head: headHash, Rules: fold.RulesVersion}
	if p.Prev != nil {
		d.Basis, d.TakeOver = p.Prev.Entry.Hash(), p.TakeOver
	}
	if replace != nil {
		d.Replaces, res.Replaces = replace.Hash, replace.Hash
	}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, nil, res, err
	}
	return &ledger.Draft{Type: fold.TypeCheckpoint, Ref: fold.TypeCheckpoint, Data: data}, files, res, nil
}
