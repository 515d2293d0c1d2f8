package search

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
)

// testHome is a Home of the test's own: keys and caches in a temporary directory.
func testHome(t *testing.T) *fsbus.Home {
	t.Helper()
	d := t.TempDir()
	return &fsbus.Home{ConfigDir: filepath.Join(d, "config"), CacheDir: filepath.Join(d, "cache")}
}

// primaryClock is a test clock the channel reads.
type primaryClock struct{ t time.Time }

func (c *primaryClock) now() time.Time { return c.t }

// primaryWorld is a channel on a test clock with agents seated at the given levels
// (name → level), and a session for each of them and the master.
func primaryWorld(t *testing.T, levels map[string]string) (*fsbus.Channel, *primaryClock, map[string]*fsbus.Session) {
	t.Helper()
	clk := &primaryClock{t: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)}
	c, err := fsbus.Init(testHome(t), fsbus.InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	c.Now = clk.now // the ledger's HLCs read it too
	m, err := c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	ss := map[string]*fsbus.Session{fold.MasterWriter: m}
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		if _, err := fsbus.Join(c, name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Grant(fsbus.GrantOptions{Agent: name, Level: levels[name]}); err != nil {
			t.Fatal(err)
		}
		if ss[name], err = c.As(name); err != nil {
			t.Fatal(err)
		}
	}
	return c, clk, ss
}

// primaryLoad loads c as the next command would: reopened, everything folded.
func primaryLoad(t *testing.T, c *fsbus.Channel) *fsbus.View {
	t.Helper()
	n, err := fsbus.Open(c.Home, c.Root)
	if err != nil {
		t.Fatal(err)
	}
	n.Now, n.Boot = c.Now, c.Boot
	v, err := n.Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
