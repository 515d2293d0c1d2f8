// Package fsbustest builds channels for the tests of the packages on top of fsbus, as
// net/http/httptest does for a server: a home of the test's own, a channel with agents
// seated at the levels asked for, and a channel opened again as the next command would
// open it. Everything lives in the test's temporary directories.
package fsbustest

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
)

// Home is a Home of the test's own: keys under config/, caches under cache/.
func Home(t testing.TB) *fsbus.Home {
	t.Helper()
	d := t.TempDir()
	return &fsbus.Home{ConfigDir: filepath.Join(d, "config"), CacheDir: filepath.Join(d, "cache")}
}

// Options shape the channel Channel builds.
type Options struct {
	Project string // the project id; "acme" when empty
	// Levels names the agents to join and the level each is granted (worker, member,
	// orchestrator); an empty level joins the agent without a grant.
	Levels map[string]string
	// Now is the channel's clock, set before anything is written (the ledger's HLCs
	// read it too); nil is the wall clock.
	Now func() time.Time
}

// Channel inits a channel in a home of its own, joins each agent of opt.Levels (in
// name order) and grants it its level, and returns the channel and a session for each
// agent and the master.
func Channel(t testing.TB, opt Options) (*fsbus.Channel, map[string]*fsbus.Session) {
	t.Helper()
	project := opt.Project
	if project == "" {
		project = "acme"
	}
	c, err := fsbus.Init(Home(t), fsbus.InitOptions{Dir: filepath.Join(t.TempDir(), project), Project: project})
	if err != nil {
		t.Fatal(err)
	}
	if opt.Now != nil {
		c.Now = opt.Now
	}
	m, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	ss := map[string]*fsbus.Session{fold.MasterWriter: m}
	for _, name := range slices.Sorted(maps.Keys(opt.Levels)) {
		if _, err := fsbus.Join(c, name, "test"); err != nil {
			t.Fatal(err)
		}
		if lvl := opt.Levels[name]; lvl != "" {
			if _, err := m.Grant(fsbus.GrantOptions{Agent: name, Level: lvl}); err != nil {
				t.Fatal(err)
			}
		}
		if ss[name], err = c.As(name); err != nil {
			t.Fatal(err)
		}
	}
	return c, ss
}

// Reopen opens c's channel again with the same home and clocks, as the next ferry
// command would: its first Load folds everything, nothing carried over in memory.
func Reopen(t testing.TB, c *fsbus.Channel) *fsbus.Channel {
	t.Helper()
	n, err := fsbus.Open(c.Home, c.Root)
	if err != nil {
		t.Fatal(err)
	}
	n.Now, n.Boot = c.Now, c.Boot
	return n
}
