package mcpserver

import "testing"

// TestToolWords: hints written for the CLI name tool calls over MCP (issue 4: a
// failure's hint must be actionable by the agent that reads it).
func TestToolWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"not_found: no key for carol — run `ferry join --as carol --project acme` first", "not_found: no key for carol — run `ferry_join` first"},
		{"conflict: order is claimed — pick another open order (`ferry order list`)", "conflict: order is claimed — pick another open order (`ferry_orders` action list)"},
		{"denied: not seated — meanwhile read with --peek", "denied: not seated — meanwhile read with peek:true"},
		{"invalid: a message needs a recipient — pass --to NAME, --to master or --to all", "invalid: a message needs a recipient — pass to: an agent name, master or all"},
		{"conflict: held by alice — run `ferry primary standby` to be next; `ferry primary status` shows the rule", "conflict: held by alice — run `ferry_primary` action standby to be next; `ferry_primary` action status shows the rule"},
		{"denied: dave is not seated — ask the owner to run `ferry grant dave --level member`", "denied: dave is not seated — ask the owner to run `ferry grant dave --level member`"},
	} {
		if got := toolWords(tc.in); got != tc.want {
			t.Errorf("toolWords(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
