// Package mcpserver is ferry's Model Context Protocol server: hand-rolled JSON-RPC 2.0
// over stdio (one message per line), the MCP handshake, and ferry's tools, which call
// the same fsbus functions as the CLI (DESIGN §4, issue 4).
//
// # Transport
//
// One JSON-RPC message per line on stdin; lines of any length; a trailing "\r" is
// trimmed and a leading UTF-8 BOM stripped. Responses go to stdout, one per line, under
// one write lock, and nothing else ever does: logs go to the Options.Log writer
// (stderr). Request ids are echoed byte for byte. A line that is not JSON answers
// -32700 with id null; a request for an unknown method answers -32601; the server
// never exits on bad input. EOF cancels in-flight calls and returns.
//
// # Handshake
//
// initialize echoes the client's protocolVersion when it is one of
// SupportedVersions, else answers the newest; it never fails and never reads the
// channel. tools/list returns the same bytes for every agent, time and version.
package mcpserver
