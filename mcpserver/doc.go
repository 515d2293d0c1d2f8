// Package mcpserver is ferry's Model Context Protocol server: hand-rolled JSON-RPC 2.0
// over stdio (one message per line), the MCP handshake, and ferry's tools, which call
// the same fsbus functions as the CLI (docs/design.md §4).
//
// # Transport
//
// One JSON-RPC message per line on stdin; lines of any length; a trailing "\r" is
// trimmed and a leading UTF-8 BOM stripped. Responses go to stdout, one per line, under
// one write lock, and nothing else ever does: logs go to the Options.Log writer
// (stderr). Request ids are echoed byte for byte. A line that is not JSON answers
// -32700 with id null; a request for an unknown method answers -32601; the server
// never exits on bad input. Batches only when 2025-03-26 was negotiated. At EOF calls
// already read are answered (for up to DrainTimeout) and long-polls, which wait with
// EOFContext, end at once.
//
// # Protocol versions
//
// The era is decided per request (mcpserver/internal/protocol, which holds the wire:
// JSON-RPC messages, error codes, versions): a request whose params._meta carries
// protocol.MetaProtocolVersion is modern (protocol.ModernVersions, the stateless
// 2026-07-28 revision: server/discover, resultType, cache hints, -32022 for a version
// it does not speak); anything else follows the legacy handshake of
// protocol.SupportedVersions, where initialize echoes the client's version when it is
// one of them, else answers the newest; it never fails and never reads the channel,
// and a legacy request before it is refused.
// tools/list returns the same tools array for every agent, time and version.
// docs/mcp.md has the table per version and every error code.
package mcpserver
