package fold

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDisputeFirstIsAnIDOrAToken: a dispute's first is "cut", a thing id, or
// "(state)" — a reason naming this machine's paths, or a member's free text with
// newlines, never reaches the entry or a display.
func TestDisputeFirstIsAnIDOrAToken(t *testing.T) {
	for in, want := range map[string]string{
		"cut":        "cut",
		"o-1a2b3c4d": "o-1a2b3c4d",
		"(the state does not load: chunk /home/alice/x.json)": "(state)",
		"o-1\nfake status line":                               "(state)",
		strings.Repeat("a", 65):                               "(state)",
		"":                                                    "(state)",
	} {
		if got := disputeFirst(in); got != want {
			t.Errorf("disputeFirst(%q) = %q, want %q", in, got, want)
		}
	}
	d := DisputeDraft(Dispute{Hash: "sha256:00", Epoch: 1, Rules: RulesVersion, First: "(the state does not load: /home/alice)"}, false)
	var data DisputeData
	if err := json.Unmarshal(d.Data, &data); err != nil || data.First != "(state)" || strings.Contains(string(d.Data), "alice") {
		t.Fatalf("draft data %s: %v", d.Data, err)
	}
}
