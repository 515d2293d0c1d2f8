package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/ferryhq/ferry/fsbus"
)

// pausedReads are the calls a paused machine's server still answers
// (docs/threat-model.md "The owner's key, locked keys and the pause switch"): read-only
// status, so an agent can learn why it is stopped and what the channel looks like.
// Everything else — writes, acknowledging reads (ferry_talk read, ferry_catchup mark
// what they return as seen), gateway tools — answers `paused`. tool → the actions
// allowed ("" = any call of the tool).
var pausedReads = map[string][]string{
	"ferry_status":    {""},
	"ferry_primary":   {"status"},
	"ferry_ask_human": {"status"},
	"ferry_orders":    {"list", "show"},
}

// pauseGate answers paused when this machine (or the channel's project on it) is paused
// (fsbus.Home.CheckPaused) and the call is not a read-only status call. No tool lifts a
// pause: `ferry resume` is CLI only.
func (f *Ferry) pauseGate(_ context.Context, tool string, args json.RawMessage) error {
	var home *fsbus.Home
	project := ""
	if ch, err := f.channel(); err == nil {
		home, project = ch.Home, ch.Project()
	} else if f.own[tool] {
		return err // what the tool would answer; opening again would only repeat it
	} else if home, err = fsbus.LocalHome(); err != nil {
		return nil // a gateway tool needs no channel: only the machine-wide switch applies
	}
	if home.Paused(project) == nil {
		return nil
	}
	if allowed, ok := pausedReads[tool]; ok {
		var a struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(args, &a)
		for _, act := range allowed {
			if act == "" || act == a.Action {
				return nil
			}
		}
	}
	return home.CheckPaused(project, tool+" call")
}
