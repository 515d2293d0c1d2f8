package mcpserver

import "testing"

// TestToolWords: hints written for the CLI name tool calls over MCP (ADR 0002 §8: a
// failure's hint must be actionable by the agent that reads it).
func TestToolWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"not_found: no key for carol — run `ferry join --as carol --project acme` first", "not_found: no key for carol — run `ferry_join` first"},
		{"conflict: order is claimed — pick another open order (`ferry order list`)", "conflict: order is claimed — pick another open order (`ferry_orders` action list)"},
		{"denied: not seated — meanwhile read with --peek", "denied: not seated — meanwhile read with peek:true"},
		{"invalid: a message needs a recipient — pass --to NAME, --to master or --to all", "invalid: a message needs a recipient — pass to: an agent name, master or all"},
		{"conflict: held by alice — run `ferry primary standby` to be next; `ferry primary status` shows the rule", "conflict: held by alice — run `ferry_primary` action standby to be next; `ferry_primary` action status shows the rule"},
		{"denied: dave is not seated — ask the owner to run `ferry grant dave --level member`", "denied: dave is not seated — ask the owner to run `ferry grant dave --level member`"},
		// MCP reads no file, so no hint names @FILE.
		{"invalid: schema is not valid JSON — pass one JSON value (or @FILE holding one)", "invalid: schema is not valid JSON — pass one JSON value"},
		{"invalid: empty message — give the message text, or --body @FILE", "invalid: empty message — give the message text"},
		{"invalid: order o-1 has a result schema; the submit carries no result — pass the structured result with --result JSON|@FILE (MCP: result)", "invalid: order o-1 has a result schema; the submit carries no result — pass the structured result in result (JSON)"},
		{"invalid: x — pass --note TEXT|@FILE", "invalid: x — pass --note TEXT"},
		{"invalid: x — read it from @FILE", "invalid: x — read it from the value inline"},
		{"denied: bob is not the author — tell the author (`ferry talk send --to alice 'order o-1: a pointed file changed'`)", "denied: bob is not the author — tell the author (`ferry_talk` action send to alice)"},
	} {
		if got := toolWords(tc.in); got != tc.want {
			t.Errorf("toolWords(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
