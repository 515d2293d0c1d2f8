package mcpserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
)

// The paging helpers every read shares (docs/design.md §4 caps: 20 items, 4,000
// characters).

func TestFit(t *testing.T) {
	t.Parallel()
	item := strings.Repeat("x", 300)
	build := func(k int) any {
		out := make([]string, k)
		for i := range out {
			out[i] = item
		}
		return out
	}
	k := fit(20, build)
	if chars(build(k)) > maxChars || chars(build(k+1)) <= maxChars {
		t.Errorf("fit chose %d items of 300 characters: %d characters, %d with one more", k, chars(build(k)), chars(build(k+1)))
	}
	// One item always fits, however large: a page that never advances would loop.
	if got := fit(3, func(k int) any { return strings.Repeat("y", 9000*k) }); got != 1 {
		t.Errorf("fit of oversized items = %d, want 1", got)
	}
	if got := fit(0, build); got != 0 {
		t.Errorf("fit of nothing = %d", got)
	}
}

func TestParsePage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cursor string
		n      int
		want   int
		err    bool
	}{{"", 5, 0, false}, {"p3", 5, 3, false}, {"p5", 5, 5, false}, {"p6", 5, 0, true}, {"p-1", 5, 0, true}, {"3", 5, 0, true}, {"px", 5, 0, true}} {
		got, err := parsePage(c.cursor, c.n)
		if got != c.want || (err != nil) != c.err || (err != nil && !errs.Is(err, errs.Invalid)) {
			t.Errorf("parsePage(%q, %d) = %d, %v", c.cursor, c.n, got, err)
		}
	}
	if pageCursor(7) != "p7" {
		t.Errorf("pageCursor(7) = %q", pageCursor(7))
	}
}

func TestBoundPrimary(t *testing.T) {
	t.Parallel()
	ps := &fsbus.PrimaryStatus{State: "held", Holder: "alice"}
	for i := 0; i < 30; i++ {
		ps.Standbys = append(ps.Standbys, fsbus.StandbyRow{Name: fmt.Sprintf("agent-%02d", i), Liveness: "alive"})
	}
	for i := 0; i < 10; i++ {
		ps.Contests = append(ps.Contests, fold.Contest{Ref: fmt.Sprint("contest-", i), Involved: []string{strings.Repeat("z", 600)}})
	}
	ps = boundPrimary(ps)
	if len(ps.Standbys) > maxItems || len(ps.Contests) > primaryContests || chars(ps) > maxChars {
		t.Errorf("bounded: %d standbys, %d contests, %d characters", len(ps.Standbys), len(ps.Contests), chars(ps))
	}
	if len(ps.Contests) > 0 && ps.Contests[len(ps.Contests)-1].Ref != "contest-9" {
		t.Errorf("the newest contest was dropped: %v", ps.Contests[len(ps.Contests)-1].Ref)
	}
}

// TestCheckStateNamesEvery: every order state the fold knows is a filter, and the hint
// for one it does not know lists them all, from the same list.
func TestCheckStateNamesEvery(t *testing.T) {
	for _, s := range append(fold.OrderStates(), "", "active", "ready") {
		if err := checkState(s); err != nil {
			t.Errorf("checkState(%q) = %v", s, err)
		}
	}
	err := checkState("done")
	e, ok := errs.From(err)
	if !errs.Is(err, errs.Invalid) || !ok {
		t.Fatalf("checkState(done) = %v, want invalid", err)
	}
	for _, s := range fold.OrderStates() {
		if !strings.Contains(e.Hint, s) {
			t.Errorf("the hint %q leaves out %s", e.Hint, s)
		}
	}
}
