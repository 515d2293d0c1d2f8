// Package schematest checks MCP tool results against their output schemas in tests: a
// schema closed at its top level (additionalProperties false), so a top-level member
// of a result the schema does not declare fails however much else of the schema is
// cut (docs/mcp.md "Budget"). The validator is github.com/google/jsonschema-go, the
// official MCP SDK's; only tests import this package.
package schematest

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// Closed resolves an outputSchema as a tool lists it, with additionalProperties false
// at its top level.
func Closed(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("outputSchema is not a JSON object: %w", err)
	}
	m["additionalProperties"] = false
	closed, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(closed, &s); err != nil {
		return nil, fmt.Errorf("outputSchema does not decode as a JSON Schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("outputSchema does not resolve: %w", err)
	}
	return rs, nil
}
