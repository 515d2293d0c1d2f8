package fsbus

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
)

// JoinResult is what Join reports.
type JoinResult struct {
	Agent   string `json:"agent"`
	Project string `json:"project"`
	Key     string `json:"key"`
	Created bool   `json:"key_created"` // a new key was made on this machine
	Wrote   bool   `json:"announced"`   // an agent.join entry was written (false: already announced)
	Seated  bool   `json:"seated"`
	Level   string `json:"level"`
	// Next is the one command the owner runs to seat the agent ("" once seated).
	Next string `json:"next,omitempty"`
}

// Join makes (or reuses) the agent's key on this machine, writes .stignore, and
// announces the agent with agent.join carrying its public key, app and machine. It is
// idempotent: a join whose key, app and machine are already announced writes nothing.
// It returns invalid for a bad name and for "master".
func Join(c *Channel, name, app string) (*JoinResult, error) {
	return join(c, name, app, false)
}

// JoinReporting is Join for a client that only reports its own name (an MCP session's
// clientInfo.name): reported fills in the app of a key announced without one, and never
// replaces the app the agent was joined with (`ferry join --app`, `ferry connect APP`),
// which `ferry agents` keeps showing.
func JoinReporting(c *Channel, name, reported string) (*JoinResult, error) {
	return join(c, name, reported, true)
}

func join(c *Channel, name, app string, reported bool) (*JoinResult, error) {
	if err := fold.CheckName("agent name", name); err != nil {
		return nil, err
	}
	if name == fold.MasterWriter {
		return nil, errs.Errorf(errs.Invalid, "pick an agent name such as claude-code-laptop", "%q is the owner's writer name", name)
	}
	if name == fold.ToAll {
		return nil, errs.Errorf(errs.Invalid, "pick an agent name such as claude-code-laptop", "%q is reserved: `ferry talk send --to all` addresses everyone", name)
	}
	if err := c.checkPresent(); err != nil {
		return nil, err
	}
	if err := writeStignore(c.Root); err != nil {
		return nil, err
	}
	app = PortableLabel(app)
	if err := secretguard.Check("app name", app); err != nil {
		return nil, err // before a key is made: a refusal changes nothing
	}
	res := &JoinResult{Agent: name, Project: c.Project()}
	var signer ledger.KeySigner
	var err error
	if c.Home.HasKey(c.Project(), name) {
		signer, err = c.Home.LoadKey(c.Project(), name)
	} else {
		signer, err = c.Home.NewKey(c.Project(), name)
		res.Created = true
	}
	if err != nil {
		return nil, err
	}
	res.Key = ledger.FormatKey(signer.Public())
	machine, _ := os.Hostname()
	machine = portableHost(machine)
	s := &Session{Channel: c, Name: name, Signer: signer}
	e, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		a := v.State.Agents[name]
		if a != nil && a.Seated && a.Key != res.Key {
			return nil, nil, errs.Errorf(errs.Conflict,
				fmt.Sprintf("pick a name of its own for this agent, e.g. `ferry join --as %s-%s`", name, machine),
				"%s is already seated in %s with another key (%s); this machine's key is %s", name, c.Project(), a.Key, res.Key)
		}
		if a != nil && a.JoinKey == res.Key {
			if was := a.Joins[res.Key][0]; app == "" || (reported && was != "") {
				app = was // no app given, or only a client's name: keep the one announced
			}
			if a.Joins[res.Key] == [2]string{app, machine} {
				return nil, nil, nil
			}
		}
		d := fold.EntryData{Key: res.Key, App: app, Machine: machine}
		return &ledger.Draft{Type: fold.TypeAgentJoin, Ref: name, Data: mustJSON(d)}, nil, nil
	})
	if err != nil {
		if res.Created {
			c.Home.removeKey(c.Project(), name) // a refused join leaves no key behind
		}
		return nil, err
	}
	res.Wrote = e.Seq > 0
	res.Level = fold.LevelNone.String()
	if a := v.State.Agents[name]; a != nil && a.Seated && a.Key == res.Key {
		res.Seated, res.Level = true, a.Level
	} else {
		res.Next = fmt.Sprintf("ferry grant %s --level member --project %s", name, c.Project())
	}
	return res, nil
}

// LocalAgents lists, sorted, the agents of v this machine holds a key for whose newest
// agent.join with that key announced app (compared as PortableLabel makes it); retired
// agents and the master are left out. `ferry connect APP` without --as reuses the one
// it finds (`ferry connect --help`).
func (c *Channel) LocalAgents(v *View, app string) []string {
	app = PortableLabel(app)
	var out []string
	for _, name := range c.Home.Keys(c.Project()) {
		a := v.State.Agents[name]
		if name == fold.MasterWriter || a == nil || a.Retired {
			continue
		}
		pub, err := c.Home.PublicKey(c.Project(), name)
		if err != nil {
			continue
		}
		if j, ok := a.Joins[ledger.FormatKey(pub)]; ok && j[0] == app {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// PortableLabel makes an app or client name portable: lowercase [a-z0-9-], spaces,
// dots and underscores as '-', at most 40 bytes ("E2E mcp-go" → "e2e-mcp-go"). The
// CLI's --app and an MCP client's name end up alike.
func PortableLabel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() == 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == ' ' || r == '_' || r == '.':
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// portableHost lowercases a host name to [a-z0-9-].
func portableHost(h string) string {
	out := make([]byte, 0, len(h))
	for i := 0; i < len(h); i++ {
		ch := h[i]
		switch {
		case ch >= 'A' && ch <= 'Z':
			out = append(out, ch+32)
		case ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9', ch == '-':
			out = append(out, ch)
		case ch == '.':
			i = len(h)
		}
	}
	if len(out) == 0 {
		return runtime.GOOS
	}
	if len(out) > 40 {
		out = out[:40]
	}
	return string(out)
}

// GrantOptions are the arguments of Grant.
type GrantOptions struct {
	Agent  string
	Level  string
	Scopes []string
	// Key seats this public key instead of the one the agent announced.
	Key string
}

// Grant seats an agent (master only): a grant.set entry binding its public key, a
// level and optional scopes. For an agent already granted, the entry names for each
// segment of that writer the master has seen the last seq the previous grant still
// covers (docs/design.md §2). It is idempotent: the same level, key and scopes write nothing.
// Errors: denied when s is not the master; not_found when the agent has not joined and
// no key is given; invalid for a bad level or key; conflict when the agent is retired
// (retirement is final: a new name is seated instead).
func (s *Session) Grant(opt GrantOptions) (*fold.Agent, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner on the machine that holds the master key", "only the master grants levels")
	}
	lvl, err := fold.ParseLevel(opt.Level)
	if err != nil {
		return nil, err
	}
	if err := fold.CheckName("agent name", opt.Agent); err != nil {
		return nil, err
	}
	scopes := slices.Clone(opt.Scopes)
	slices.Sort(scopes)
	_, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		a := v.State.Agents[opt.Agent]
		if a != nil && a.Retired {
			return nil, nil, errs.Errorf(errs.Conflict,
				fmt.Sprintf("retirement is final: seat a new name instead (`ferry join --as %s-2`, then `ferry grant %s-2 --level %s`)", opt.Agent, opt.Agent, lvl),
				"agent %s is retired; a grant would not bring it back", opt.Agent)
		}
		key := opt.Key
		if key == "" {
			if a == nil || a.JoinKey == "" {
				return nil, nil, errs.Errorf(errs.NotFound, fmt.Sprintf("the agent runs `ferry join --as %s` first, or pass --key", opt.Agent), "%s has not joined this channel", opt.Agent)
			}
			key = a.JoinKey
		}
		if _, err := ledger.ParseKey(key); err != nil {
			return nil, nil, errs.Errorf(errs.Invalid, "pass the key `ferry key show` prints", "%v", err)
		}
		if a != nil && a.Seated && a.Key == key && a.LevelRank == lvl && slices.Equal(a.Scopes, scopes) {
			return nil, nil, nil
		}
		if a != nil && a.Seated && a.Key != key && opt.Key == "" {
			// The newest join announces another key than the seated one: rebinding the
			// name must be a deliberate act, never a side effect of a level change.
			return nil, nil, errs.Errorf(errs.Conflict,
				fmt.Sprintf("if %s really moved to a new key, re-seat it with `ferry grant %s --level %s --key %s`", opt.Agent, opt.Agent, lvl, key),
				"%s is seated with key %s, but its newest join announces %s", opt.Agent, a.Key, key)
		}
		d := fold.EntryData{Agent: opt.Agent, Key: key, Level: lvl.String(), Scopes: scopes}
		if a != nil && len(a.Grants) > 0 {
			d.Bounds, d.BoundHashes, d.Basis = a.Bounds(), boundHashes(v, a), a.GrantHead
		}
		return &ledger.Draft{Type: fold.TypeGrantSet, Ref: opt.Agent, Data: mustJSON(d)}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return s.agentAfter(v, opt.Agent)
}

// Revoke ends an agent's grant (master only): its later entries, and entries in
// segments the master has not seen, count for nothing. Errors: denied when s is not
// the master; not_found when the agent was never granted.
func (s *Session) Revoke(agent string) (*fold.Agent, error) {
	if s.Name != fold.MasterWriter {
		return nil, errs.Errorf(errs.Denied, "run it as the owner on the machine that holds the master key", "only the master revokes grants")
	}
	_, v, err := s.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		a := v.State.Agents[agent]
		if a == nil || len(a.Grants) == 0 {
			return nil, nil, errs.Errorf(errs.NotFound, "see `ferry agents`", "%s was never granted", agent)
		}
		if !a.Seated {
			return nil, nil, nil
		}
		d := fold.EntryData{Agent: agent, Bounds: a.Bounds(), BoundHashes: boundHashes(v, a), Basis: a.GrantHead}
		return &ledger.Draft{Type: fold.TypeGrantRevoke, Ref: agent, Data: mustJSON(d)}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return s.agentAfter(v, agent)
}

func (s *Session) agentAfter(_ *View, name string) (*fold.Agent, error) {
	v, err := s.Load()
	if err != nil {
		return nil, err
	}
	return v.State.Agents[name], nil
}

// boundHashes returns, per segment of a, the hash of the record at the seq a.bounds()
// names for it, as this view folded it (data.bound_hashes of a grant, revoke or
// retire this binary writes).
func boundHashes(v *View, a *fold.Agent) map[string]string {
	out := map[string]string{}
	for dev, seq := range a.Segs {
		if tip := v.chainTip(a.Name, dev); tip != nil && tip.Seq == seq {
			out[dev] = tip.Hash()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
