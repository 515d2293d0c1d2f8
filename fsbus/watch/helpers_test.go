package watch

import (
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/fsbustest"
)

// talkWorld is a channel with members alice, bob and carol, wendy a worker, dave
// joined but not granted, and the master's session.
type talkWorld struct {
	c                        *fsbus.Channel
	alice, bob, carol, wendy *fsbus.Session
	dave, master             *fsbus.Session
}

func newTalkWorld(t *testing.T) *talkWorld {
	t.Helper()
	c, ss := fsbustest.Channel(t, fsbustest.Options{Levels: map[string]string{
		"alice": "member", "bob": "member", "carol": "member", "wendy": "worker", "dave": ""}})
	return &talkWorld{c: c, alice: ss["alice"], bob: ss["bob"], carol: ss["carol"], wendy: ss["wendy"],
		dave: ss["dave"], master: ss[fold.MasterWriter]}
}

func (w *talkWorld) load(t *testing.T) *fsbus.View {
	t.Helper()
	v, err := fsbustest.Reopen(t, w.c).Load()
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
