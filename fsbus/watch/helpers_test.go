package watch

import (
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
)

// testHome is a Home of the test's own: keys and caches in a temporary directory.
func testHome(t *testing.T) *fsbus.Home {
	t.Helper()
	d := t.TempDir()
	return &fsbus.Home{ConfigDir: filepath.Join(d, "config"), CacheDir: filepath.Join(d, "cache")}
}

// talkWorld is a channel with members alice, bob and carol, wendy a worker, dave
// joined but not granted, and the master's session.
type talkWorld struct {
	c                        *fsbus.Channel
	alice, bob, carol, wendy *fsbus.Session
	dave, master             *fsbus.Session
}

func newTalkWorld(t *testing.T) *talkWorld {
	t.Helper()
	h := testHome(t)
	c, err := fsbus.Init(h, fsbus.InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	w := &talkWorld{c: c}
	for _, n := range []string{"alice", "bob", "carol", "wendy", "dave"} {
		if _, err := fsbus.Join(c, n, "test"); err != nil {
			t.Fatal(err)
		}
	}
	w.master = w.as(t, fold.MasterWriter)
	for n, lvl := range map[string]string{"alice": "member", "bob": "member", "carol": "member", "wendy": "worker"} {
		if _, err := w.master.Grant(fsbus.GrantOptions{Agent: n, Level: lvl}); err != nil {
			t.Fatal(err)
		}
	}
	w.alice, w.bob, w.carol, w.wendy, w.dave = w.as(t, "alice"), w.as(t, "bob"), w.as(t, "carol"), w.as(t, "wendy"), w.as(t, "dave")
	return w
}

func (w *talkWorld) as(t *testing.T, name string) *fsbus.Session {
	t.Helper()
	s, err := w.c.As(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (w *talkWorld) load(t *testing.T) *fsbus.View {
	t.Helper()
	v, err := reopened(t, w.c).Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (w *talkWorld) send(t *testing.T, from *fsbus.Session, to, body string) *fold.Message {
	t.Helper()
	m, err := from.TalkSend(fsbus.TalkSendOptions{To: to, Body: body})
	if err != nil {
		t.Fatalf("%s → %s: %v", from.Name, to, err)
	}
	return m
}

func (w *talkWorld) read(t *testing.T, s *fsbus.Session, opt fsbus.TalkReadOptions) *fsbus.TalkReadResult {
	t.Helper()
	r, err := s.TalkRead(opt)
	if err != nil {
		t.Fatalf("%s reads: %v", s.Name, err)
	}
	return r
}

// reopened opens c's channel again with the same home and clock, as the next ferry
// command would: its first Load folds everything.
func reopened(t *testing.T, c *fsbus.Channel) *fsbus.Channel {
	t.Helper()
	n, err := fsbus.Open(c.Home, c.Root)
	if err != nil {
		t.Fatal(err)
	}
	n.Now, n.Boot = c.Now, c.Boot
	return n
}
