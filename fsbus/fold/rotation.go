package fold

import (
	"crypto/ed25519"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/ledger"
)

// MasterKeyAt is the key the master's entry e must be signed with.
func (st *State) MasterKeyAt(e *ledger.Entry) ed25519.PublicKey {
	return st.Masters.KeyAt(e.Device, e.Seq)
}

// MasterKeys returns the rotation chain's keys, channel.toml's first (FormatKey form).
func (st *State) MasterKeys() []string {
	if st.Masters == nil {
		return nil
	}
	out := make([]string, len(st.Masters.Keys))
	for i, k := range st.Masters.Keys {
		out[i] = ledger.FormatKey(k)
	}
	return out
}

// MasterKey returns the master's current public key: channel.toml's key moved along
// the rotation chain. Entries the master writes now must be signed with it.
func (st *State) MasterKey() ed25519.PublicKey { return st.Masters.current() }

func ResolveRotations(st *State, root ed25519.PublicKey, project string, rots []*ledger.Entry, ignore func(*ledger.Entry, string)) *MasterChain {
	m := &MasterChain{Keys: []ed25519.PublicKey{root}, bounds: []map[string]uint64{nil}, rots: []string{""}, on: map[string]bool{}, lost: map[string]bool{}}
	if len(rots) == 0 {
		return m
	}
	type rot struct {
		e   *ledger.Entry
		d   EntryData
		key ed25519.PublicKey
	}
	listed := map[string]bool{}
	list := func(e *ledger.Entry, why string) {
		if !listed[e.Hash()] {
			listed[e.Hash()] = true
			ignore(e, why)
		}
	}
	byBasis := map[string][]rot{}
	for _, e := range rots {
		d, ok := DecodeData(e)
		key, kerr := ledger.ParseKey(d.Key)
		if !ok || kerr != nil {
			list(e, "master.rotate with data that does not decode or a bad key")
			continue
		}
		byBasis[d.Basis] = append(byBasis[d.Basis], rot{e: e, d: d, key: key})
	}
	level := byBasis[""]
	for len(level) > 0 {
		cur := m.current()
		var valid []rot
		for _, r := range level {
			switch {
			case !sigcache.Verify(r.e, cur, project):
				list(r.e, "master.rotate not signed by the master key it rotates from ("+ledger.FormatKey(cur)+")")
			case !m.KeyAt(r.e.Device, r.e.Seq).Equal(cur):
				list(r.e, "master.rotate within the bounds of an earlier rotation")
			case m.has(ledger.FormatKey(r.key)):
				list(r.e, "master.rotate to a key already on the rotation chain")
			case r.d.Bounds[r.e.Device] != r.e.Seq:
				list(r.e, "master.rotate that does not bound its own segment at its own seq")
			default:
				valid = append(valid, r)
			}
		}
		if len(valid) == 0 {
			break
		}
		slices.SortFunc(valid, func(a, b rot) int { return strings.Compare(a.e.Hash(), b.e.Hash()) })
		win := valid[0]
		for _, l := range valid[1:] {
			m.lost[ledger.FormatKey(l.key)] = true
		}
		if len(valid) > 1 && st != nil {
			c := Contest{Ref: MasterWriter, Basis: m.Head, Involved: []string{MasterWriter},
				Winner: Step{Type: win.e.Type, By: win.e.Writer, HLC: win.e.HLC, Hash: win.e.Hash()}}
			for _, l := range valid[1:] {
				c.Losers = append(c.Losers, Step{Type: l.e.Type, By: l.e.Writer, HLC: l.e.HLC, Hash: l.e.Hash()})
				list(l.e, "master.rotate on a superseded branch: a competing rotation with a lower hash won")
			}
			st.Contested = append(st.Contested, c)
		}
		m.Keys = append(m.Keys, win.key)
		m.bounds, m.rots = append(m.bounds, win.d.Bounds), append(m.rots, win.e.Hash())
		m.on[win.e.Hash()] = true
		m.Head = win.e.Hash()
		level = byBasis[win.e.Hash()]
	}
	for _, e := range rots {
		if !m.on[e.Hash()] {
			list(e, "master.rotate off the rotation chain (its basis lost, was left out, or has not arrived)")
		}
	}
	return m
}

// ResolveMasters resolves the rotation chain from in.Master over the master.rotate
// entries among in.Entries, listing every rotation left out (with ignore) and adding a
// contest for competing rotations.
func ResolveMasters(st *State, in FoldInput, ignore func(*ledger.Entry, string)) *MasterChain {
	var rots []*ledger.Entry
	for i := range in.Entries {
		if e := &in.Entries[i]; e.Writer == MasterWriter && e.Type == TypeMasterRotate {
			rots = append(rots, e)
		}
	}
	return ResolveRotations(st, in.Master, in.Project, rots, ignore)
}

// clampToCut applies each rotation above base's cut with the cut as its bound on every
// master segment the cut names (docs/format.md §20 "Bounds below the cut"): a bound
// below the cut, or none, for such a segment is raised to the cut, so the master's
// entries at or below the cut keep the key they had there; each raise is noted in
// st.Finality. A rotation among the state's lines is applied as the state was folded
// with it: with the bounds base.RaisedBounds keeps for it (an earlier cut raised
// them), else as written. (The lines keep entries the fold ignored too, so raising
// the bounds of a rotation at or below the cut could let in one its old key signed
// after the rotation.)
func (m *MasterChain) clampToCut(st *State, base *Base) {
	m.raisedAt = make([]bool, len(m.Keys))
	for i := 1; i < len(m.Keys); i++ {
		if b, ok := base.RaisedBounds[m.rots[i]]; ok {
			m.bounds[i], m.raisedAt[i] = b, true
			continue
		}
		if base.HasLine(m.rots[i]) {
			continue // applied as written when the state was folded
		}
		for _, p := range base.Cut {
			if b, named := m.bounds[i][p.Device]; p.Writer != MasterWriter || (named && b >= p.Seq) {
				continue
			}
			m.bounds[i] = maps.Clone(m.bounds[i])
			if m.bounds[i] == nil {
				m.bounds[i] = map[string]uint64{}
			}
			m.bounds[i][p.Device], m.raisedAt[i] = p.Seq, true
			st.finality(fmt.Sprintf("bound of master/%s raised to the cut in rotation %s", p.Device, m.rots[i]))
		}
	}
}

// MasterBounds are the bounds a master.rotate written now names: per master segment the
// highest seq among entries (a snapshot's) and, when cf has a counting checkpoint, its
// newest cut's seq for that segment. A reading from the cut holds no record at or
// below it, and a segment with nothing above the cut (an old compactor's) would
// otherwise get no bound, which puts its every entry, checkpoint entries included,
// under the new key.
func MasterBounds(entries []ledger.Entry, cf *ChannelFold) map[string]uint64 {
	bounds := map[string]uint64{}
	for i := range entries {
		if x := &entries[i]; x.Writer == MasterWriter && x.Seq > bounds[x.Device] {
			bounds[x.Device] = x.Seq
		}
	}
	if cf != nil && len(cf.Chain) > 0 {
		for _, p := range cf.Chain[len(cf.Chain)-1].Head.Cut {
			if p.Writer == MasterWriter && p.Seq > bounds[p.Device] {
				bounds[p.Device] = p.Seq
			}
		}
	}
	return bounds
}

// raisedOf returns the bounds rotation hash is applied with when a cut raised them.
func (m *MasterChain) raisedOf(hash string) (map[string]uint64, bool) {
	if m == nil {
		return nil, false
	}
	for i, r := range m.raisedAt {
		if r && m.rots[i] == hash {
			return m.bounds[i], true
		}
	}
	return nil, false
}

// badSig is the reason a master entry that failed verification is ignored.
func (m *MasterChain) badSig(e *ledger.Entry, project string) string {
	for i, k := range m.Keys {
		if i < len(m.Keys)-1 && !k.Equal(m.KeyAt(e.Device, e.Seq)) && sigcache.Verify(e, k, project) {
			return fmt.Sprintf("signed by master key %s after a rotation moved trust from it (seq %d of device %s is past the rotation's bound)",
				ledger.FormatKey(k), e.Seq, e.Device)
		}
	}
	return "signature does not verify against the master key"
}

// skip reports whether pass 1 of the fold leaves e alone: a rotation that is not on
// the chain (resolveMasters listed it).
func (m *MasterChain) skip(e *ledger.Entry) bool {
	return e.Type == TypeMasterRotate && !m.on[e.Hash()]
}

func (m *MasterChain) has(key string) bool {
	if m == nil {
		return false
	}
	for _, k := range m.Keys {
		if ledger.FormatKey(k) == key {
			return true
		}
	}
	return false
}

// has reports whether key (in FormatKey form) is on the chain.
// hasOrLost reports whether key is on the chain or was brought in by a rotation that
// lost to a competing one.
func (m *MasterChain) HasOrLost(key string) bool {
	return m.has(key) || (m != nil && m.lost[key])
}

// current is the newest master key.
func (m *MasterChain) current() ed25519.PublicKey {
	if m == nil || len(m.Keys) == 0 {
		return nil
	}
	return m.Keys[len(m.Keys)-1]
}

// KeyAt is the master key an entry of the master's segment device at seq must be
// signed with.
func (m *MasterChain) KeyAt(device string, seq uint64) ed25519.PublicKey {
	if m == nil || len(m.Keys) == 0 {
		return nil
	}
	for k := len(m.Keys) - 1; k > 0; k-- {
		if b, named := m.bounds[k][device]; !named || seq > b {
			return m.Keys[k]
		}
	}
	return m.Keys[0]
}

// MasterChain is the resolved chain of master keys: keys[0] is channel.toml's key,
// keys[i] the key rotation i moved trust to, bounds[i] that rotation's bounds.
type MasterChain struct {
	Keys   []ed25519.PublicKey `json:"-"`
	bounds []map[string]uint64
	rots   []string // rots[i] is the hash of rotation i (rots[0] "": channel.toml)
	// raisedAt[i]: rotation i is applied with bounds a cut raised (clampToCut).
	raisedAt []bool
	on       map[string]bool // hashes of the rotations on the chain
	Head     string          `json:"-"` // hash of the newest rotation on the chain ("" when none)
	// lost holds the new keys of valid rotations that lost to a competing one (signed
	// by a key of the chain, so by the same owner): a machine pinned to one follows
	// the chain instead of being locked out.
	lost map[string]bool
}
