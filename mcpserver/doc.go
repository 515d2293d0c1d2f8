// Package mcpserver will hold ferry's hand-rolled JSON-RPC 2.0 stdio MCP server
// (`ferry mcp serve`, DESIGN §4). It calls the same fsbus functions as the CLI.
// It is empty until issue 4; nothing here is wired into the CLI yet.
package mcpserver
