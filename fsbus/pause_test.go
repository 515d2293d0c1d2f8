package fsbus

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/pause"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestPauseSwitch: scopes, the machine-wide switch first, a damaged file still pauses,
// resume lifts all or one, bad input changes nothing (docs/format.md §18).
func TestPauseSwitch(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if h.Paused("acme") != nil || len(h.Pauses()) != 0 {
		t.Fatal("paused before any pause")
	}
	if _, err := h.Pause("acme", "deploy freeze", now); err != nil {
		t.Fatal(err)
	}
	if p := h.Paused("acme"); p == nil || p.Project != "acme" || p.Reason != "deploy freeze" {
		t.Fatalf("acme: %+v", p)
	}
	if h.Paused("other") != nil {
		t.Fatal("a project's pause paused another")
	}
	if _, err := h.Pause("", "", now); err != nil {
		t.Fatal(err)
	}
	if p := h.Paused("other"); p == nil || p.Project != "" {
		t.Fatalf("machine-wide: %+v", p)
	}
	if err := h.CheckPaused("other", "primary take"); !errs.Is(err, errs.Paused) || !strings.Contains(err.Error(), "this machine is paused since 2026-11-29 12:00 UTC: primary take refused") {
		t.Fatalf("CheckPaused: %v", err)
	}
	lifted, err := h.Resume("acme")
	if err != nil || len(lifted) != 1 || lifted[0].Project != "acme" || h.Paused("acme") == nil {
		t.Fatalf("resume acme: %+v, %v (the machine-wide pause must still hold)", lifted, err)
	}
	if lifted, err := h.Resume(""); err != nil || len(lifted) != 1 || h.Paused("acme") != nil {
		t.Fatalf("resume all: %+v, %v", lifted, err)
	}
	// A damaged switch still pauses, naming the damage; resume removes it.
	if err := os.MkdirAll(h.ConfigDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pause.File(h.ConfigDir, ""), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p := h.Paused("acme"); p == nil || !strings.Contains(p.Reason, "damaged") {
		t.Fatalf("damaged switch: %+v", p)
	}
	if _, err := h.Resume(""); err != nil || h.Paused("acme") != nil {
		t.Fatalf("resume of a damaged switch: %v", err)
	}
	// Bad input: nothing set.
	for _, c := range []struct{ project, reason string }{{"Bad Id", ""}, {"", "two\nlines"}, {"", "\x1b[31m"}, {"", strings.Repeat("r", pause.MaxReason+1)}} {
		if _, err := h.Pause(c.project, c.reason, now); !errs.Is(err, errs.Invalid) {
			t.Errorf("Pause(%q, %q): %v, want invalid", c.project, c.reason, err)
		}
	}
	if len(h.Pauses()) != 0 {
		t.Fatal("a refused pause set a switch")
	}
}
