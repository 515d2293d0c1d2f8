// Package protocol is the wire of ferry's MCP server and client: JSON-RPC 2.0 messages
// and error codes, and the MCP protocol eras — the legacy handshake (initialize,
// SupportedVersions) and the stateless 2026-07-28 revision (ModernVersions, decided per
// request by RequestEra). It knows no channel: nothing here imports fsbus.
//
// A server decodes each line with DecodeMessage, decides its era with RequestEra,
// answers initialize with Negotiate and InitializeResult, server/discover with
// Discover, and wraps every modern result with ModernResult; errors are *Error values
// (Errorf), encoded with EncodeResponse. Marshal is the encoding of every message:
// compact JSON, no HTML escaping, so ids and texts go out as they came in.
//
// docs/mcp.md has the table per version and every error code.
package protocol
