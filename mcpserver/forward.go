package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/ferryhq/ferry/mcpserver/gateway"
)

// gatewayTools serves a gateway's tools as run-time tools (Options.More): each
// forwarded tool under its gateway name, its result passed on as the server gave it
// (gateway.Gateway.Forward). A server that fails is logged and left out.
type gatewayTools struct{ g *gateway.Gateway }

func (s gatewayTools) Tools(ctx context.Context) []*Tool {
	named, _ := s.g.Named(ctx, "")
	tools := make([]*Tool, len(named))
	for i, n := range named {
		tools[i] = &Tool{
			Name:        n.Name,
			Description: n.Description(),
			InputSchema: n.InputSchema(),
			Call: func(ctx context.Context, args json.RawMessage) (any, error) {
				raw, err := s.g.Forward(ctx, n, args)
				if err != nil {
					return nil, err
				}
				return RawToolResult(raw), nil
			},
		}
	}
	return tools
}

// ferryToolNames are the names of every ferry tool of every group.
var ferryToolNames = sync.OnceValue(func() []string {
	f := &Ferry{}
	var names []string
	for _, ts := range [][]*Tool{f.tools(), f.adminTools(), f.legacyTools()} {
		for _, t := range ts {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	return names
})

// FerryToolNames are the names of ferry's own tools in every group (core, admin,
// legacy): a gateway never serves a forwarded tool under one of them, whichever groups
// are on (gateway.Options.Reserved), so `ferry mcp list` and `ferry mcp serve` name
// the tools alike.
func FerryToolNames() []string { return slices.Clone(ferryToolNames()) }
