package mcpserver_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/mcpserver"
)

// TestOrdersLifecycleActions: ferry_orders release, extend and fail, the fail reason
// required, list state=ready hiding an order whose dependency is not accepted, and the
// heartbeat of the holder's own server expiring its claim once the execution window
// passed by this machine's clock.
func TestOrdersLifecycleActions(t *testing.T) {
	t.Parallel()
	b := copyBusy(t)
	var now atomic.Int64
	now.Store(busyClock.UnixMilli())
	b.ch.Now = func() time.Time { return time.UnixMilli(now.Load()) }
	holder := newRig(t, mcpserver.FerryConfig{Agent: "codex-laptop", Open: b.open})

	type one struct {
		Order struct {
			ID       string `json:"id"`
			State    string `json:"state"`
			Holder   string `json:"holder"`
			Progress []string
		} `json:"order"`
	}
	var made one
	holder.ok("ferry_orders", map[string]any{"action": "new", "title": "Rotate the signing key"}, &made)
	id := made.Order.ID
	s, err := b.ch.As("codex-laptop")
	if err != nil {
		t.Fatal(err)
	}
	dep, err := s.NewOrder(fsbus.NewOrderOptions{Title: "Announce the new key", Deps: []string{id}})
	if err != nil {
		t.Fatal(err)
	}

	var got one
	holder.ok("ferry_orders", map[string]any{"action": "claim", "id": id}, nil)
	holder.ok("ferry_orders", map[string]any{"action": "extend", "id": id, "note": "waiting on the HSM"}, &got)
	if got.Order.State != string(fold.StateClaimed) || len(got.Order.Progress) != 1 || !strings.Contains(got.Order.Progress[0], "waiting on the HSM") {
		t.Fatalf("extend: %+v", got.Order)
	}
	got = one{}
	holder.ok("ferry_orders", map[string]any{"action": "release", "id": id}, &got)
	if got.Order.State != string(fold.StateOpen) || got.Order.Holder != "" {
		t.Fatalf("release: %+v", got.Order)
	}
	holder.ok("ferry_orders", map[string]any{"action": "claim", "id": id}, nil)
	if text := holder.fail("ferry_orders", map[string]any{"action": "fail", "id": id}); !strings.Contains(text, "action fail needs note") {
		t.Fatalf("fail without a reason: %s", text)
	}

	// ready: the dependent order is not claimable while its dependency runs.
	var list struct {
		Orders []struct {
			ID string `json:"id"`
		} `json:"orders"`
	}
	holder.ok("ferry_orders", map[string]any{"action": "list", "state": "ready"}, &list)
	for _, r := range list.Orders {
		if r.ID == dep.ID || r.ID == id {
			t.Fatalf("list ready shows %s: %+v", r.ID, list.Orders)
		}
	}
	if text := holder.fail("ferry_orders", map[string]any{"action": "claim", "id": dep.ID}); !strings.Contains(text, "waits for "+id) {
		t.Fatalf("claim of a not-ready order: %s", text)
	}

	// Five hours pass on this machine; the next write's heartbeat settles the window.
	now.Add((5 * time.Hour).Milliseconds())
	holder.ok("ferry_talk", map[string]any{"action": "post", "to": "all", "text": "back"}, nil)
	holder.ok("ferry_orders", map[string]any{"action": "show", "id": id}, &got)
	if got.Order.State != string(fold.StateTimedOut) {
		t.Fatalf("after the window: state %s, want timed_out", got.Order.State)
	}
	if text := holder.fail("ferry_orders", map[string]any{"action": "extend", "id": id}); !strings.Contains(text, "does not hold") {
		t.Fatalf("extend after expiry: %s", text)
	}
	holder.ok("ferry_orders", map[string]any{"action": "claim", "id": id}, nil)
	holder.ok("ferry_orders", map[string]any{"action": "fail", "id": id, "note": "the HSM is gone"}, &got)
	if got.Order.State != string(fold.StateFailed) {
		t.Fatalf("fail: %+v", got.Order)
	}
}
