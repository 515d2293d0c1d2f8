package mcpserver

import (
	"slices"

	"github.com/ferryhq/ferry/internal/errs"
)

// Tool groups (docs/design.md §4 "Opt-in groups"). The core group is always served
// (except with ReadOnly); the others only when FerryConfig.Groups names them, so by
// default they cost no token.
const (
	GroupCore   = "core"
	GroupAdmin  = "admin"  // ferry_search, ferry_get, ferry_status, ferry_update
	GroupLegacy = "legacy" // the predecessor's eight read tools
	// GroupGateway forwards the tools of the MCP servers of FerryConfig.Gateway
	// (docs/mcp.md "Gateway"); its tools are known only at run time.
	GroupGateway = "gateway"
)

// OptInGroups are the groups FerryConfig.Groups may name, sorted.
var OptInGroups = []string{GroupAdmin, GroupGateway, GroupLegacy}

// ReadOnlyInstructions are the server instructions of `--read-only`, which serves the
// legacy read tools only (≤ 250 tokens like Instructions; the budget test holds them
// to it).
const ReadOnlyInstructions = `ferry (read-only): your team's channel in a synced folder; nothing here writes.
channel_status and discover first; list_tasks and get_task for orders; read_memory for the project's notes; list_ledger, list_learnings, list_engines for history.
Lists are capped at 20 rows: pass a result's next as cursor for more; detail:true adds fields.`

// surface decides what the server serves from cfg.Groups and cfg.ReadOnly: the tools
// (core, then each opted-in group; with ReadOnly the legacy group alone), the
// instructions, and the groups and mode the capabilities resource reports (when the CLI
// left them empty). The tools array is a function of the groups only — never of the
// agent, the time or the machine — so it is byte-identical for every combination
// (docs/design.md §4). Errors: invalid for a group name not in OptInGroups, and for
// ReadOnly with admin (read-only serves the legacy tools only).
func (f *Ferry) surface() (tools []*Tool, instructions string, err error) {
	groups := []string{}
	for _, g := range f.cfg.Groups {
		if !slices.Contains(OptInGroups, g) {
			return nil, "", errs.Errorf(errs.Invalid, "use --tools admin, --tools gateway or --tools legacy", "unknown tool group %q", g)
		}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	caps := &f.cfg.Capabilities
	if f.cfg.ReadOnly {
		for _, g := range []string{GroupAdmin, GroupGateway} {
			if slices.Contains(groups, g) {
				return nil, "", errs.Errorf(errs.Invalid, "drop --tools "+g+", or --read-only", "--read-only serves the legacy read tools only")
			}
		}
		if caps.Mode == "" {
			caps.Mode = "read-only"
		}
		if len(caps.Groups) == 0 {
			caps.Groups = []string{GroupLegacy}
		}
		return f.legacyTools(), ReadOnlyInstructions, nil
	}
	if len(caps.Groups) == 0 {
		caps.Groups = append([]string{GroupCore}, groups...)
	}
	tools = f.idempotent(f.tools())
	for _, g := range groups {
		switch g {
		case GroupAdmin:
			tools = append(tools, f.adminTools()...)
		case GroupLegacy:
			tools = append(tools, f.legacyTools()...)
		case GroupGateway:
			// Run-time tools: NewFerry hands f.gateway to the server as Options.More.
			f.gatewayOn = true
		}
	}
	return tools, Instructions, nil
}
