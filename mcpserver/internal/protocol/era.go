package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
)

// The two protocol eras (MCP 2026-07-28 "Versioning and Compatibility";
// docs/design.md §4).
//
// A request is modern when its params._meta carries the key MetaProtocolVersion,
// whatever the value; anything else follows the legacy rules of the version the last
// initialize negotiated. The era is decided per request, never per connection: a
// client may send server/discover, then initialize, then modern and legacy requests in
// any order.
//
// A modern request must name a version of ModernVersions (else -32022,
// CodeUnsupportedVersion, with data {supported, requested}) and carry
// MetaClientCapabilities as an object (else -32602). Its result carries resultType,
// the server's identity in _meta, and, for server/discover, tools/list, resources/list,
// resources/templates/list and resources/read, the cache hints ttlMs and cacheScope.
// It needs no initialize; ping and initialize do not exist in it (-32601).

// SupportedVersions are the MCP protocol versions of the legacy handshake this server
// speaks, oldest first; initialize echoes the client's when it is one of them, else
// answers the newest (docs/design.md §4).
var SupportedVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// LatestVersion is the newest supported protocol version.
var LatestVersion = SupportedVersions[len(SupportedVersions)-1]

// ModernVersions are the stateless protocol versions this server speaks (MCP
// 2026-07-28, SEP-2575): each request declares one in _meta.
var ModernVersions = []string{"2026-07-28"}

// The _meta keys of a modern request and result (MCP 2026-07-28, basic/index "_meta").
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// MCP error codes.
const (
	// CodeResourceNotFound answers resources/read of an unknown uri in the legacy era
	// (MCP 2025-11-25 and earlier); the modern era answers CodeInvalidParams instead.
	CodeResourceNotFound = -32002
	// CodeUnsupportedVersion answers a modern request whose protocol version the server
	// does not speak, with data {"supported":[…],"requested":"…"} (MCP 2026-07-28,
	// UnsupportedProtocolVersionError).
	CodeUnsupportedVersion = -32022
)

// Cache hints of the modern era (MCP 2026-07-28, CacheableResult). What never changes
// while the process lives — the discover result, the tool list, the resource templates
// — may be cached for an hour by anyone ("public": it holds no agent name,
// docs/design.md §4); what reads the channel is stale at once and belongs to this
// agent.
const (
	ttlStatic  = 3_600_000 // ms
	ttlChannel = 0
)

// Era is how one request is served.
type Era int

const (
	Legacy Era = iota
	Modern
)

// RequestEra decides the era of a request from its params (MCP 2026-07-28,
// basic/index "Per-request protocol fields"): modern when params._meta holds
// MetaProtocolVersion. A modern request that names a version this server does not speak
// gets a CodeUnsupportedVersion error; one whose version is not a string, or that lacks
// MetaClientCapabilities (an object), gets CodeInvalidParams. The version is checked
// first: the required fields of an unknown version are unknown.
func RequestEra(params json.RawMessage) (Era, *Error) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return Legacy, nil // no params, or params not an object: no _meta
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil {
		return Legacy, nil
	}
	raw, ok := meta[MetaProtocolVersion]
	if !ok {
		return Legacy, nil
	}
	var version string
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &version) != nil {
		return Modern, Errorf(CodeInvalidParams, "_meta %q must be a string such as %q", MetaProtocolVersion, ModernVersions[0])
	}
	if !slices.Contains(ModernVersions, version) {
		e := Errorf(CodeUnsupportedVersion, "unsupported protocol version %q", version)
		if slices.Contains(SupportedVersions, version) {
			e.Message += ": a legacy version is negotiated with initialize, without this _meta key"
		}
		e.Data, _ = Marshal(map[string]any{"supported": AllVersions(), "requested": version})
		return Modern, e
	}
	caps := bytes.TrimSpace(meta[MetaClientCapabilities])
	if len(caps) == 0 || caps[0] != '{' {
		return Modern, Errorf(CodeInvalidParams, "_meta %q is required (an object; {} declares none)", MetaClientCapabilities)
	}
	return Modern, nil
}

// RequestClientInfo returns the name and version of params._meta's
// MetaClientInfo, or "" when there is none (it is optional).
func RequestClientInfo(params json.RawMessage) (name, version string) {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var ci struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Meta[MetaClientInfo], &ci) != nil {
		return "", ""
	}
	return ci.Name, ci.Version
}

// AllVersions is every version the server speaks, newest first: the modern ones by
// per-request _meta, the legacy ones by initialize.
func AllVersions() []string {
	out := slices.Clone(ModernVersions)
	for i := len(SupportedVersions) - 1; i >= 0; i-- {
		out = append(out, SupportedVersions[i])
	}
	return out
}

// RemovedInModern reports whether method is a legacy method the 2026-07-28 revision
// dropped; a modern request for one gets -32601 with a hint.
func RemovedInModern(method string) bool { return removedInModern[method] }

var removedInModern = map[string]bool{
	"initialize": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// cacheable reports whether a method's modern result carries ttlMs and cacheScope, and
// which (MCP 2026-07-28, CacheableResult).
func cacheable(method string) (ttl int, scope string, ok bool) {
	switch method {
	case "server/discover", "tools/list", "resources/templates/list":
		return ttlStatic, "public", true
	case "resources/list", "resources/read":
		return ttlChannel, "private", true
	}
	return 0, "", false
}

// ModernResult returns result (any JSON object) with the members every modern result
// carries added at the end: resultType "complete", the cache hints of method when it
// has them, and the server's identity in _meta (MCP 2026-07-28 Result,
// ResultMetaObject). The members of result itself are kept byte for byte, so the
// tools array of tools/list is the same in both eras.
func ModernResult(method string, result any, server Implementation) (json.RawMessage, error) {
	b, err := Marshal(result)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, Errorf(CodeInternalError, "result of %s is not an object", method)
	}
	extra := map[string]any{"resultType": "complete", "_meta": map[string]any{MetaServerInfo: server}}
	if ttl, scope, ok := cacheable(method); ok {
		extra["ttlMs"], extra["cacheScope"] = ttl, scope
	}
	// A member the result already has (a tool's own _meta, say) is not duplicated.
	var have map[string]json.RawMessage
	_ = json.Unmarshal(b, &have)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if _, dup := have[k]; !dup {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := append([]byte(nil), b[:len(b)-1]...)
	empty := len(bytes.TrimSpace(b[1:len(b)-1])) == 0
	for _, k := range keys {
		if !empty {
			out = append(out, ',')
		}
		empty = false
		kb, _ := Marshal(k)
		vb, err := Marshal(extra[k])
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, kb...), ':'), vb...)
	}
	return append(out, '}'), nil
}

// Implementation is a server's or a client's name and version (MCP "Implementation":
// serverInfo, clientInfo).
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Capabilities are the server capabilities of initialize and server/discover: tools
// always, resources only when the server has them; nothing changes while the process
// lives, so nothing announces changes.
func Capabilities(resources bool) map[string]any {
	c := map[string]any{"tools": map[string]any{"listChanged": false}}
	if resources {
		c["resources"] = map[string]any{"subscribe": false, "listChanged": false}
	}
	return c
}

// Discover is the result of server/discover (MCP 2026-07-28 DiscoverResult, before the
// modern members ModernResult adds): every version the server speaks, newest first,
// its capabilities and its instructions ("" leaves them out).
func Discover(capabilities map[string]any, instructions string) map[string]any {
	res := map[string]any{"supportedVersions": AllVersions(), "capabilities": capabilities}
	if instructions != "" {
		res["instructions"] = instructions
	}
	return res
}

// InitializeParams is what the server reads of initialize's params.
type InitializeParams struct {
	ProtocolVersion string         `json:"protocolVersion"`
	ClientInfo      Implementation `json:"clientInfo"`
}

// Negotiate is the version initialize answers to a client asking for requested: that
// one when it is one of SupportedVersions, else LatestVersion — never an error (MCP
// lifecycle: the client decides whether it can go on).
func Negotiate(requested string) string {
	if slices.Contains(SupportedVersions, requested) {
		return requested
	}
	return LatestVersion
}

// InitializeResult is initialize's result (the legacy handshake).
type InitializeResult struct {
	Capabilities    map[string]any `json:"capabilities"`
	Instructions    string         `json:"instructions,omitempty"`
	ProtocolVersion string         `json:"protocolVersion"`
	ServerInfo      Implementation `json:"serverInfo"`
}
