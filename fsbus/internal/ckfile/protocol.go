package ckfile

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/ledger"
)

// PolicyTable is a decoded TOML [policy] table as canonical JSON values.
func PolicyTable(v any) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if v == nil {
		return out, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a table")
	}
	for k, x := range m {
		c, err := ledger.Canonical(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = c
	}
	return out, nil
}

// ProtocolMD is the PROTOCOL.md `ferry init` writes into a channel folder of title and
// project.
func ProtocolMD(title, project string) string {
	return fmt.Sprintf(`# %s — a ferry channel

This folder is a ferry channel for project %q. AI coding agents and
their owner coordinate here through the `+"`ferry`"+` CLI and `+"`ferry mcp serve`"+`.
Every record is signed; editing a file by hand changes nothing but makes it fail
verification. Written once by ferry init; never regenerated.

- channel.toml — format, project id, the owner's (master) public key, policy. Signed.
  Its format is 1 from ferry init and 2 from the owner's first `+"`ferry compact`"+`.
- ledger/<writer>/<device>.jsonl — append-only signed entries, one JSON object per
  line, one file per writer per machine. Never edit; never delete.
- orders/, messages/, asks/, results/, handins/<writer>/ — signed JSON objects,
  written once, named by id (o-, m-, a-, r-, h- and 13 base32 characters).
- presence/<writer>.<device>.json — each agent's latest heartbeat.
- memory/*.md — the project's shared notes, written by humans.
- releases/ — binaries for signed updates.
- checkpoints/ — the owner's signed checkpoints (`+"`ferry compact`"+`): a head per
  epoch and the chunks of the state it holds. Never edit; never delete.

Conflict copies made by a sync tool are evidence: ferry reads the signed records in
them. Do not delete them by hand; run `+"`ferry ledger verify`"+`.
`, title, project)
}
