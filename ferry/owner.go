package main

import (
	"os"

	"github.com/alecthomas/kong"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// ownerCommand is implemented by every command whose action is the owner's alone: the
// master row of the level table (docs/format.md §13: grant.set, grant.revoke,
// policy.set, ask.answer, release.approve, master.rotate), retiring another agent (the
// same table's retire rule: of others, master), and re-pinning the master key on this
// machine (§13 "The pin"). runIO asks the selected command before it runs and refuses
// it (requireMaster) when --as or FERRY_AGENT names anyone but master; --as on the
// command line wins over FERRY_AGENT, so `--as master` acts as the owner whatever the
// environment says. TestPermissionMatrixMasterOnly walks the kong model and fails for a
// master action whose command does not implement this.
type ownerCommand interface {
	// ownerAction names what this invocation does as the owner ("seat agents"), or is ""
	// when it acts as the agent --as names (an agent retiring itself).
	ownerAction(g *Globals) string
}

// checkOwner refuses the command kong selected when it is an ownerCommand acting as the
// owner and --as or FERRY_AGENT names another writer. It also records in g where --as
// came from, for the refusal's words.
func checkOwner(kctx *kong.Context, g *Globals) error {
	g.asFrom = "FERRY_AGENT"
	if os.Getenv("FERRY_AGENT") != g.As {
		g.asFrom = "--as"
	}
	for _, p := range kctx.Path {
		if p.Flag != nil && p.Flag.Name == "as" && !p.Resolved {
			g.asFrom = "--as"
			if g.As == "" {
				// An empty --as would silently override FERRY_AGENT and act as the owner.
				return errs.Errorf(errs.Invalid, "name the agent (`--as NAME`), or `--as master` for the owner; drop --as for the default",
					"--as needs a name; it was given empty")
			}
		}
	}
	n := kctx.Selected()
	if n == nil || !n.Target.CanAddr() {
		return nil
	}
	oc, ok := n.Target.Addr().Interface().(ownerCommand)
	if !ok {
		return nil
	}
	if action := oc.ownerAction(g); action != "" {
		return g.requireMaster(action)
	}
	return nil
}

// requireMaster is nil when this command acts as the owner (no --as, or --as master)
// and else the one refusal of an owner's action under another name: denied, naming the
// name, where it came from, and how to act as the owner.
func (g *Globals) requireMaster(action string) error {
	if g.As == "" || g.As == fold.MasterWriter {
		return nil
	}
	if g.asFrom == "FERRY_AGENT" {
		return errs.Errorf(errs.Denied,
			"on the machine holding the master key, pass --as master (it overrides FERRY_AGENT) or unset FERRY_AGENT",
			"%s may not %s: only the owner (master) may, and this command acts as %s (FERRY_AGENT=%s)", g.As, action, g.As, g.As)
	}
	return errs.Errorf(errs.Denied,
		"on the machine holding the master key, drop --as "+g.As+" or pass --as master",
		"%s may not %s: only the owner (master) may, and this command acts as %s (--as %s)", g.As, action, g.As, g.As)
}
