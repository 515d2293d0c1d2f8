package mcpserver_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/runner"
	"github.com/ferryhq/ferry/mcpserver"
)

// TestJoinReportsQueueShowReportsRunVia (docs/runs.md "Heavy orders"): ferry_join names
// this machine's job-queue command, an unusable one says so, and ferry_orders show
// says how an order would run here (an ordinary order: direct).
func TestJoinReportsQueueShowReportsRunVia(t *testing.T) {
	b := copyBusy(t)
	r := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(runner.EnvQueueCmd, self+" run --name {order} --")
	var joined struct {
		Queue string `json:"queue"`
	}
	r.ok("ferry_join", map[string]any{}, &joined)
	if joined.Queue != self+" run --name {order} --" {
		t.Errorf("join queue: %q", joined.Queue)
	}
	t.Setenv(runner.EnvQueueCmd, "no-such-queue-program")
	r.ok("ferry_join", map[string]any{}, &joined)
	if want := "unusable: "; len(joined.Queue) < len(want) || joined.Queue[:len(want)] != want {
		t.Errorf("join with an unusable queue: %q", joined.Queue)
	}
	var made, shown struct {
		Order struct {
			ID     string `json:"id"`
			RunVia string `json:"run_via"`
		} `json:"order"`
	}
	r.ok("ferry_orders", map[string]any{"action": "new", "title": "ordinary"}, &made)
	r.ok("ferry_orders", map[string]any{"action": "show", "id": made.Order.ID}, &shown)
	if shown.Order.RunVia != "direct" {
		t.Errorf("run_via of an ordinary order: %q", shown.Order.RunVia)
	}
}
