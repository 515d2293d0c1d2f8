package fsbus

import (
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// `ferry compact`: the owner signs where the past ends (docs/format.md §20, ADR 0019).

// CompactOptions are the options of Compact.
type CompactOptions struct {
	// Settle overrides policy.settle_s when SettleSet: only entries this machine first
	// saw at least that long ago are covered.
	Settle    time.Duration
	SettleSet bool
	// Force compacts although seated writers were not seen to advance within the
	// settle time, or a seated writer's segment holds no agent.support naming format 2.
	Force bool
	// TakeOver writes the checkpoint on this device although it is not the compactor,
	// once the compactor was silent for the settle time, then a policy.set naming this
	// device as policy.compactor; the new head names it.
	TakeOver bool
}

// Compact writes the owner's next checkpoint: the state at a cut covering every entry
// this machine first saw at least the settle time ago, closed under reference, folded
// from the previous counting checkpoint's state. Only the master on the compactor
// device compacts; a channel read under other fold rules, or with the master key
// locked, writes nothing.
func (s *Session) Compact(opt CompactOptions) (*fold.CompactResult, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner on the machine that holds the master key", "only the master compacts the ledger")
	}
	s.floored.Miss = errors.New("compact folds from the previous checkpoint over every entry above its cut")
	res := &fold.CompactResult{}
	e, _, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		*res = fold.CompactResult{}
		// Every chain's frozen files move first, from this reading; a failure only warns.
		archived, waiting, aerr := s.moveFrozen(v, true)
		if aerr != nil {
			s.Home.warn("archive", "ferry: warning: moving frozen files: "+aerr.Error())
		}
		d, objs, err := s.planCompact(v, opt, res)
		res.Archived, res.Waiting = archived, waiting
		return d, objs, err
	})
	if err == nil && e.Seq != 0 {
		res.Entry = e.Hash()
		if rerr := ckfile.RememberEpoch(s.epochSeenPath(), res.Epoch, res.Entry, s.now()); rerr != nil {
			s.Home.warn("epoch-seen", "ferry: warning: "+rerr.Error())
		}
		if opt.TakeOver { // the policy names the new compactor too (docs/format.md §20 "Moving the compactor")
			_, err = s.SetPolicy([]fold.PolicyAssign{{Key: fold.PolicyCompactor, Value: s.Device}})
		}
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// planCompact decides the checkpoint under the channel lock (Session.write).
func (s *Session) planCompact(v *View, opt CompactOptions, res *fold.CompactResult) (*ledger.Draft, []pendingObject, error) {
	settle := time.Duration(s.EffectivePolicy(v).Policy.SettleSeconds()) * time.Second
	guard := s.now().Add(-max(settle, opt.Settle)).UnixMilli() // a take-over's: never shortened by --settle
	if opt.SettleSet {
		settle = opt.Settle
	}
	settled := s.now().Add(-settle).UnixMilli()
	advanced, devices := map[string]bool{}, map[string]bool{}
	for _, p := range v.Presence {
		advanced[p.Writer] = advanced[p.Writer] || p.SeenMs >= settled
		devices[p.Device] = devices[p.Device] || p.SeenMs >= guard
	}
	if l := fsutil.LinkBelow(s.Root, filepath.Join(s.Root, "checkpoints", "chunks")); l != "" {
		return nil, nil, errs.Errorf(errs.Invalid, "replace the link with a real directory; `ferry doctor` lists every link in the channel",
			"%s in the channel is a symbolic link: ferry never writes through links (nothing was written)", l)
	}
	d, files, r, err := ckfile.Prepare(s.Root, s.ownerCheckpoint, s.Signer, fold.PlanInput{
		In:    fold.FoldInput{Project: s.Project(), Master: s.MasterKey, Objects: s.objects(), Entries: v.Snapshot.Entries, Forks: v.Snapshot.Forks},
		State: v.State, Advanced: advanced, Force: opt.Force, Device: s.Device, TakeOver: opt.TakeOver, DevicesSeen: devices, GuardMs: guard,
		SeenMs: func(hash string) int64 {
			if t := v.Arrivals.Seen(hash); !t.IsZero() {
				return t.UnixMilli()
			}
			return 0
		},
		SettledMs: settled, SettleText: fold.ShortDuration(settle.String()), Format: s.Config.Format,
	})
	if r != nil {
		*res = *r
	}
	if err == nil && d != nil && s.Config.Format < 2 { // the first compact: format 2 first
		err = s.toFormat2()
	}
	res.Format = s.Config.Format
	var objs []pendingObject
	for _, f := range files {
		objs = append(objs, pendingObject{path: f.Path, data: f.Data, verbatim: true})
	}
	return d, objs, err
}

// toFormat2 rewrites channel.toml as format 2, master-signed (docs/format.md §20
// "Format 2"): the one rewrite of a file written once.
func (s *Session) toFormat2() error {
	out, err := ckfile.ToFormat(s.Root, 2, channelDomain, s.Project(), s.Signer, func(k ed25519.PublicKey) (ledger.KeySigner, bool) {
		return s.Home.keys().OldKey(s.Project(), fold.MasterWriter, k)
	})
	if err != nil {
		return err
	}
	s.Config.Format, s.configSeen = 2, stampOf(filepath.Join(s.Root, "channel.toml"))
	s.Home.keepVerifiedConfig(s.Project(), s.Root, out)
	return nil
}
