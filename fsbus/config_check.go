package fsbus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
)

// A channel.toml edited by hand (docs/format.md §8): its signature covers every key, so
// every command refuses it; `ferry doctor` opens it anyway (OpenUnverified) to check
// the rest with the master key pinned on this machine and to name what changed, by
// comparing with the last channel.toml this machine verified (kept in the cache).

// ErrConfigUnverified is wrapped by the error Open returns when channel.toml decodes
// but its signature does not verify against the master key it names.
var ErrConfigUnverified = errors.New("channel.toml is not signed by its master key")

// ConfigDamage is what OpenUnverified found wrong with channel.toml.
type ConfigDamage struct {
	// Pin is the master key pinned on this machine for the project ("" when none:
	// nothing can be verified, and the Channel has no ledger).
	Pin string `json:"pin,omitempty"`
	// Key is the master key the rest of the channel is checked with: channel.toml's
	// when its rotation chain reaches the pin, else the pin.
	Key string `json:"key,omitempty"`
	// Compared says whether this machine held a verified copy to compare with;
	// Changed then lists the keys that differ from it (a table's keys dotted:
	// "policy.max_skew_s"), Copy is that copy's path.
	Compared bool     `json:"compared"`
	Changed  []string `json:"changed,omitempty"`
	Copy     string   `json:"copy,omitempty"`
	// Edited holds, for each changed policy key, the value the edited file gives it
	// (JSON): what `ferry policy set` would be given instead.
	Edited map[string]string `json:"edited,omitempty"`
}

// verifiedConfigPath is where this machine keeps the last channel.toml of root it
// verified (docs/format.md §18).
func (h *Home) verifiedConfigPath(project, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(h.StateDir(project), "channel-"+hex.EncodeToString(sum[:8])+".toml")
}

// keepVerifiedConfig saves raw, a channel.toml that just verified, as the copy doctor
// compares with, unless the copy already holds it. A cache: a failure warns once.
func (h *Home) keepVerifiedConfig(project, root string, raw []byte) {
	p := h.verifiedConfigPath(project, root)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, raw) {
		return
	}
	if err := fsutil.WriteFile(p, raw, 0o644); err != nil {
		h.CacheNotSaved(p, err)
	}
}

// OpenUnverified opens dir for `ferry doctor` when channel.toml does not verify (Open's
// error wraps ErrConfigUnverified): Channel.Damage says what is wrong. With a pin on
// this machine the Channel reads the ledger with the pinned master key (channel.toml's
// key when its rotation chain reaches the pin) and the last verified channel.toml's
// settings when this machine kept one; it never moves the pin. With no pin it has no
// ledger: nothing can be verified. A channel.toml that verifies opens as Open does;
// one that does not decode is Open's error.
func OpenUnverified(h *Home, dir string) (*Channel, error) {
	cfg, mk, root, err := readConfig(dir)
	if err == nil {
		return Open(h, dir)
	}
	if !errors.Is(err, ErrConfigUnverified) {
		return nil, err
	}
	dmg := &ConfigDamage{}
	c := &Channel{Root: root, Config: cfg, Home: h, Damage: dmg}
	// The project whose pin and copy apply: the file's, or, when the file's project
	// was edited too, the one this machine maps to the folder.
	project := cfg.Project
	if m, perr := h.Projects(); perr == nil {
		for p, d := range m {
			if filepath.Clean(d) == root && p != project && !keyfile.Exists(h.verifiedConfigPath(project, root)) {
				project = p
			}
		}
	}
	if cp := h.verifiedConfigPath(project, root); keyfile.Exists(cp) {
		if old, rerr := os.ReadFile(cp); rerr == nil {
			if vcfg, ok := verifyConfigBytes(old); ok {
				raw, _ := os.ReadFile(filepath.Join(root, "channel.toml"))
				oldAll, _ := ckfile.DecodeConfigMap(old)
				curAll, derr := ckfile.DecodeConfigMap(raw)
				if derr == nil {
					dmg.Compared, dmg.Copy, dmg.Changed = true, cp, ckfile.ChangedKeys(oldAll, curAll)
					if pt, ok := curAll["policy"].(map[string]any); ok {
						for _, k := range dmg.Changed {
							if sub, ok := strings.CutPrefix(k, "policy."); ok && pt[sub] != nil {
								if b, err := ledger.Canonical(pt[sub]); err == nil {
									if dmg.Edited == nil {
										dmg.Edited = map[string]string{}
									}
									dmg.Edited[sub] = string(b)
								}
							}
						}
					}
				}
				// The rest is checked with what the owner signed.
				c.Config = vcfg
				if k, kerr := ledger.ParseKey(vcfg.Master); kerr == nil {
					mk = k
				}
			}
		}
	}
	pin, err := h.pinned(c.Config.Project)
	if err != nil {
		return nil, err
	}
	dmg.Pin = pin
	if pin == "" {
		return c, nil
	}
	pk, err := ledger.ParseKey(pin)
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "restore "+h.pinPath(c.Config.Project)+" from a backup, or pin again with `ferry master repin`", "the pinned master key is damaged: %v", err)
	}
	c.MasterKey = mk
	if mk == nil || (ledger.FormatKey(mk) != pin && !masterRotations(c).HasOrLost(pin)) {
		c.MasterKey = pk
	}
	dmg.Key = ledger.FormatKey(c.MasterKey)
	if c.Device, err = h.Device(); err != nil {
		return nil, err
	}
	if err := c.openLedger(); err != nil {
		return nil, err
	}
	return c, nil
}

// verifyConfigBytes decodes and verifies a channel.toml's bytes.
func verifyConfigBytes(raw []byte) (Config, bool) {
	var cfg Config
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	if _, err := toml.Decode(string(raw), &cfg); err != nil {
		return cfg, false
	}
	all, err := ckfile.DecodeConfigMap(raw)
	if err != nil {
		return cfg, false
	}
	if cfg.PolicyTable, err = ckfile.PolicyTable(all["policy"]); err != nil {
		return cfg, false
	}
	mk, err := ledger.ParseKey(cfg.Master)
	if err != nil {
		return cfg, false
	}
	body, err := ledger.Canonical(all)
	if err != nil {
		return cfg, false
	}
	return cfg, ledger.VerifyDomain(mk, channelDomain, cfg.Project, body, cfg.Sig) == nil
}
