package mcpserver

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
)

// The tools' schemas are generated from the Go types of their arguments and results by
// invopop/jsonschema (schemagen_test.go) and committed in schemas.json, so no process
// reflects over types to list its tools: a tools array is the same bytes for every
// build of one source, and `go test ./mcpserver -run TestSchemasGenerated -update`
// writes the file again after a type changes (the test fails while it is stale).

//go:embed schemas.json
var schemasJSON []byte

// schemas is schemas.json decoded: "input <Go type>" and "output <Go type>"
// (schemaKey) to the compact schema.
var schemas = sync.OnceValue(func() map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(schemasJSON, &m); err != nil {
		panic("mcpserver: schemas.json: " + err.Error())
	}
	return m
})

// schemaOf returns the generated schema of kind ("input" or "output") for v's type. It
// panics when schemas.json has none (a type added since the file was generated: every
// test fails until it is regenerated). Tests swap it for the generator.
var schemaOf = func(kind string, v any) json.RawMessage {
	s, ok := schemas()[schemaKey(kind, v)]
	if !ok {
		panic(fmt.Sprintf("mcpserver: schemas.json has no %s schema for %T: run go test ./mcpserver -run TestSchemasGenerated -update", kind, v))
	}
	return s
}

// schemaKey is the schemas.json key of kind for v's type: its pointers, and the named
// type's package path and name (two packages may name a type alike), or its literal.
func schemaKey(kind string, v any) string {
	t := reflect.TypeOf(v)
	stars := ""
	for t != nil && t.Kind() == reflect.Pointer {
		stars += "*"
		t = t.Elem()
	}
	name := fmt.Sprint(t)
	if t != nil && t.PkgPath() != "" {
		name = t.PkgPath() + "." + t.Name()
	}
	return kind + " " + stars + name
}

// inputSchema is the JSON Schema of a tool's arguments of v's type: compact for MCP
// clients (docs/design.md §4): everything inlined (no $ref/$defs), no $schema or $id,
// no additionalProperties; keys sorted, so the bytes are stable.
func inputSchema(v any) json.RawMessage { return schemaOf("input", v) }

// outputSchema is the JSON Schema of a tool's result of v's type cut to its top level,
// so the whole tools array fits its cap (docs/design.md §4: ≤ 6,000 characters for the
// core tools): it declares every top-level member of the result with its type, a list
// with the type of its items; descriptions, enums, bounds, required and the members of
// nested objects are left out. The results themselves are unchanged.
func outputSchema(v any) json.RawMessage { return schemaOf("output", v) }
