package mcpserver

import "testing"

// BenchmarkNewFerry is what `ferry mcp serve` does before it answers initialize once
// the channel is named: the server and its tool table, from the embedded schemas
// (ADR 0018).
func BenchmarkNewFerry(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := NewFerry(FerryConfig{Agent: "bench-agent"}); err != nil {
			b.Fatal(err)
		}
	}
}
