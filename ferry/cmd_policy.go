package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/fold"
)

// PolicyCmd is `ferry policy show|set`: the channel's policy as it is in force, and the
// owner's changes to it (docs/format.md §8 "Policy changes").
type PolicyCmd struct {
	Show PolicyShowCmd `cmd:"" default:"withargs" help:"Print the policy in force: channel.toml overlaid by the newest policy.set, and the default of each key neither sets."`
	Set  PolicySetCmd  `cmd:"" help:"Change policy keys: writes a policy.set (owner only)."`
}

// PolicyShowCmd prints the effective policy.
type PolicyShowCmd struct{}

// Help is the long help.
func (c *PolicyShowCmd) Help() string {
	return "Prints every key of the policy in force, where each value comes from (channel.toml,\n" +
		"or the newest policy.set of the owner), and the keys this binary does not know\n" +
		"(kept, shown, not used). A key this binary knows that neither sets is shown as\n" +
		"not set, with its default (settle_s: 86400 s, 24 h) or what its absence means;\n" +
		"--json gives the keys set only."
}

// Run implements the command.
func (c *PolicyShowCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	ep := ch.EffectivePolicy(v)
	if g.JSON {
		return g.printJSON(ep)
	}
	printPolicy(g, ep)
	return nil
}

// printPolicy prints the table, one key a line, with the source of each value, and
// each key this binary knows that the table lacks, with what it is while unset.
func printPolicy(g *Globals, ep fold.EffectivePolicy) {
	keys := slices.Sorted(maps.Keys(ep.Table))
	unknown := map[string]bool{}
	for _, k := range ep.Unknown {
		unknown[k] = true
	}
	for _, k := range fold.PolicyKeyNames() {
		if _, set := ep.Table[k]; !set {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, ok := ep.Table[k]
		if !ok {
			g.printf("%-16s %-10s (not set: %s)\n", k, "-", fold.PolicyUnset(k))
			continue
		}
		note := ep.Source[k]
		if unknown[k] {
			note += ", unknown to this binary: kept, not used"
		}
		g.printf("%-16s %-10s (%s)\n", k, string(v), note)
	}
	if ep.Head != nil {
		g.printf("in force since policy.set %s (%s)\n", ep.Head.Hash, ep.Head.HLC)
	} else {
		g.printf("in force: channel.toml (no policy.set yet)\n")
	}
}

// PolicySetCmd writes a policy.set.
type PolicySetCmd struct {
	Assign []string `arg:"" name:"key=value" help:"Keys to change, e.g. silent_after_s=3600."`
}

// Help is the long help.
func (c *PolicySetCmd) Help() string {
	return "Writes a master-signed policy.set carrying the whole policy table with these keys\n" +
		"changed; it follows the newest policy.set, so every machine folds the same policy.\n" +
		"Known keys: " + strings.Join(fold.PolicyKeyNames(), ", ") + "; each takes an\n" +
		"integer of seconds, but compact_entries (a count) and compactor (the device id of\n" +
		"an owner machine: the next checkpoint hands compaction to it).\n" +
		"Other keys are kept as given (an integer, true, false or text) for later versions,\n" +
		"with a warning. A bad value writes nothing. Setting what the policy already says\n" +
		"writes nothing. channel.toml itself is never edited: its signature covers it."
}

// ownerAction marks policy.set the owner's (docs/format.md §13, the master row).
func (c *PolicySetCmd) ownerAction(*Globals) string { return "change the policy (policy.set)" }

// Run implements the command.
func (c *PolicySetCmd) Run(g *Globals) error {
	var as []fold.PolicyAssign
	for _, s := range c.Assign {
		a, err := fold.ParsePolicyAssign(s)
		if err != nil {
			return err
		}
		as = append(as, a)
	}
	s, err := g.Master()
	if err != nil {
		return err
	}
	r, err := s.SetPolicy(as)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, k := range fold.PolicyKeyNames() {
		known[k] = true
	}
	for _, a := range as {
		if !known[a.Key] {
			fprintf(g.stderr, "ferry: warning: policy key %s is unknown to this binary: kept in the table for later versions, not used here (keys it knows: %s)\n",
				a.Key, strings.Join(fold.PolicyKeyNames(), ", "))
		}
	}
	if g.JSON {
		return g.printJSON(r)
	}
	if r.Written == "" {
		g.printf("✔ policy unchanged: it already says so (nothing written)\n")
		return nil
	}
	g.printf("✔ policy set: %s\n", strings.Join(r.Changed, ", "))
	printPolicy(g, r.EffectivePolicy)
	return nil
}
