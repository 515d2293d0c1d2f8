package search

import (
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
)

// primaryClock is a test clock the channel reads.
type primaryClock struct{ t time.Time }

func (c *primaryClock) now() time.Time { return c.t }

// primaryWorld is a channel on a test clock with agents seated at the given levels
// (name → level), and a session for each of them and the master.
func primaryWorld(t *testing.T, levels map[string]string) (*fsbus.Channel, *primaryClock, map[string]*fsbus.Session) {
	t.Helper()
	clk := &primaryClock{t: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)}
	c, ss := fsbustest.Channel(t, fsbustest.Options{Levels: levels, Now: clk.now})
	return c, clk, ss
}

// primaryLoad loads c as the next command would: reopened, everything folded.
func primaryLoad(t *testing.T, c *fsbus.Channel) *fsbus.View {
	t.Helper()
	v, err := fsbustest.Reopen(t, c).Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
