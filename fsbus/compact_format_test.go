package fsbus

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// formatWorld is a life world whose every seated writer wrote an hour ago and again
// now, so a compact with a 30-minute settle time covers the first writes and finds no
// unsettled writer; alice also wrote, an hour ago, from a second device with a build
// that writes no agent.support (the ledger's Append, below the session).
func formatWorld(t *testing.T) (*lifeWorld, string) {
	t.Helper()
	w := newLifeWorld(t)
	must[*fold.Order](t)(w.alice.NewOrder(NewOrderOptions{Title: "before"}))
	const old = "zq7oldb1"
	d := ledger.Draft{Type: fold.TypeMsgPost, Ref: fold.NewID(fold.PrefixMessage), Data: json.RawMessage(`{"object":"sha256:` + strings.Repeat("0", 64) + `","to":"all"}`)}
	if _, err := w.c.Ledger.Append("alice", old, d, w.alice.Signer, ledger.HLC{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Load(); err != nil { // this machine sees it an hour before the compact
		t.Fatal(err)
	}
	w.pass(time.Hour)
	for _, s := range []*Session{w.alice, w.bob, w.carol, w.otto} {
		must[*fold.Message](t)(s.TalkSend(TalkSendOptions{To: "master", Body: "still here"}))
	}
	return w, "alice/" + old
}

func channelBytes(t *testing.T, c *Channel) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Root, "channel.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The first compact refuses while a seated, unretired writer's segment holds no
// agent.support naming format 2, names the segment, and writes nothing.
func TestFirstCompactRefusesSegmentsWithoutSupport(t *testing.T) {
	t.Parallel()
	w, seg := formatWorld(t)
	before := channelBytes(t, w.c)
	_, err := w.master.Compact(CompactOptions{Settle: 30 * time.Minute, SettleSet: true})
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "agent.support") {
		t.Fatalf("compact: %v, want a conflict naming %s", err, seg)
	}
	if strings.Contains(err.Error(), "alice/"+w.c.Device) {
		t.Errorf("the refusal names a segment that holds an agent.support: %v", err)
	}
	if !bytes.Equal(channelBytes(t, w.c), before) {
		t.Error("channel.toml changed under a refused compact")
	}
	if _, err := os.Stat(filepath.Join(w.c.Root, "checkpoints")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(w.c.Root, "checkpoints")); len(ents) > 0 {
			t.Errorf("a refused compact wrote checkpoint files: %v", ents)
		}
	}
	v, err := w.c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(v.Snapshot.Entries, func(e ledger.Entry) bool { return e.Type == fold.TypeCheckpoint }) {
		t.Error("a refused compact wrote a checkpoint entry")
	}
}

// With --force the first compact passes the segments without one, lists them, and
// moves channel.toml to format 2: the file differs from the format-1 one only in its
// format and sig lines, verifies, and a new process opens the channel.
func TestFirstCompactForcedRewritesChannelToml(t *testing.T) {
	t.Parallel()
	w, seg := formatWorld(t)
	before := channelBytes(t, w.c)
	r, err := w.master.Compact(CompactOptions{Settle: 30 * time.Minute, SettleSet: true, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entry == "" || r.Format != 2 || len(r.Unsupported) != 1 || r.Unsupported[0] != seg {
		t.Fatalf("compact: %+v, want a checkpoint, format 2 and %s unsupported", r, seg)
	}
	after := channelBytes(t, w.c)
	bl, al := strings.Split(string(before), "\n"), strings.Split(string(after), "\n")
	if len(bl) != len(al) {
		t.Fatalf("channel.toml has %d lines, was %d:\n%s", len(al), len(bl), after)
	}
	for i := range bl {
		if bl[i] == al[i] {
			continue
		}
		if !(strings.HasPrefix(bl[i], "format = ") && al[i] == "format = 2") && !(strings.HasPrefix(bl[i], "sig = ") && strings.HasPrefix(al[i], "sig = ")) {
			t.Errorf("line %d changed: %q → %q", i+1, bl[i], al[i])
		}
	}
	if cfg, ok := verifyConfigBytes(after); !ok || cfg.Format != 2 {
		t.Fatalf("the rewritten channel.toml does not verify as format 2: %+v %v", cfg, ok)
	}
	c2 := reopen(t, w.c)
	if c2.Config.Format != 2 {
		t.Fatalf("a new process reads format %d", c2.Config.Format)
	}
	if _, err := c2.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Load(); err != nil { // the compacting process goes on
		t.Fatal(err)
	}
	// A second compact leaves channel.toml alone.
	w.pass(time.Hour)
	if _, err := w.master.Compact(CompactOptions{Settle: 30 * time.Minute, SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(channelBytes(t, w.c), after) {
		t.Error("a later compact rewrote channel.toml")
	}
	// A format-2 channel.toml whose signature does not verify is refused by readers.
	p := filepath.Join(w.c.Root, "channel.toml")
	bad := bytes.Replace(after, []byte(`title = "`), []byte(`title = "x`), 1)
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testHome(t), w.c.Root); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not signed by its master key") {
		t.Fatalf("open of a format-2 channel.toml with a bad signature: %v", err)
	}
}

// TestFirstCompactLeavesNoStaleText: after the first compact, the text ferry init
// wrote for humans — channel.toml's comment lines and PROTOCOL.md — names no format
// but the channel's, calls channel.toml written only once nowhere, and PROTOCOL.md
// lists the checkpoints/ folder the compact wrote.
func TestFirstCompactLeavesNoStaleText(t *testing.T) {
	t.Parallel()
	w, _ := formatWorld(t)
	if r, err := w.master.Compact(CompactOptions{Settle: 30 * time.Minute, SettleSet: true, Force: true}); err != nil || r.Format != 2 {
		t.Fatalf("compact: %+v, %v", r, err)
	}
	var comments []string
	for _, line := range strings.Split(string(channelBytes(t, w.c)), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			comments = append(comments, line)
		}
	}
	protocol, err := os.ReadFile(filepath.Join(w.c.Root, "PROTOCOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"channel.toml's comments": strings.Join(comments, "\n"), "PROTOCOL.md": string(protocol)} {
		for _, stale := range []string{"format 1", "format = 1", "written once by `ferry init`"} {
			if strings.Contains(text, stale) {
				t.Errorf("%s says %q at format 2:\n%s", name, stale, text)
			}
		}
	}
	if len(comments) == 0 || !strings.Contains(comments[0], "ferry compact") {
		t.Errorf("channel.toml's header does not say the first compact rewrites it: %q", comments)
	}
	if !strings.Contains(string(protocol), "- checkpoints/") || !strings.Contains(string(protocol), "2 from the owner's first `ferry compact`") {
		t.Errorf("PROTOCOL.md names neither checkpoints/ nor format 2:\n%s", protocol)
	}
}

// Once channel.toml is at format 2, no write carries an agent.support: not the
// first write after the compact to a segment whose support is below the cut (a
// reading from the cut does not hold it), nor a first write to a new segment.
func TestNoSupportOnceFormat2(t *testing.T) {
	t.Parallel()
	w, _ := formatWorld(t)
	if _, err := w.master.Compact(CompactOptions{Settle: 30 * time.Minute, SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	count := func(s *Session, device string) int { // over the chain's own files (format.md §21)
		dir := filepath.Dir(ledger.SegmentPath(w.c.Root, s.Name, device))
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if d, _, ok := ledger.ParseSegmentName(e.Name()); ok && d == device {
				n += bytes.Count(mustReadFile(t, filepath.Join(dir, e.Name())), []byte(`"type":"`+fold.TypeAgentSupport+`"`))
			}
		}
		return n
	}
	as := func(c *Channel, name string) *Session {
		s, err := c.As(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := count(w.alice, w.c.Device)
	for _, s := range []*Session{as(reopened(t, w.c), "alice"), w.alice} { // a new process, and one that read before
		must[*fold.Order](t)(s.NewOrder(NewOrderOptions{Title: "after"}))
	}
	if got := count(w.alice, w.c.Device); got != before {
		t.Errorf("alice's segment holds %d agent.support after the compact, %d before", got, before)
	}
	const fresh = "zq7newd2"
	c2 := reopened(t, w.c)
	c2.Device = fresh
	must[*fold.Order](t)(as(c2, "bob").NewOrder(NewOrderOptions{Title: "from a new device"}))
	if got := count(w.bob, fresh); got != 0 {
		t.Errorf("a new segment on a format-2 channel holds %d agent.support", got)
	}
}

// A retired writer's segments need no agent.support.
func TestFirstCompactPassesRetiredWriters(t *testing.T) {
	t.Parallel()
	w, _ := formatWorld(t)
	if _, err := w.master.Retire("alice"); err != nil {
		t.Fatal(err)
	}
	r, err := w.master.Compact(CompactOptions{Settle: 30 * time.Minute, SettleSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entry == "" || r.Format != 2 || len(r.Unsupported) != 0 {
		t.Fatalf("compact: %+v", r)
	}
}

// After a master rotation the first compact signs channel.toml with the key it names,
// the one the rotation kept on this machine; the file verifies and names the same key.
func TestFirstCompactAfterRotation(t *testing.T) {
	t.Parallel()
	w, _ := formatWorld(t)
	before := channelBytes(t, w.c)
	if _, err := w.master.RotateMaster(); err != nil {
		t.Fatal(err)
	}
	m, err := w.c.As(fold.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Compact(CompactOptions{Settle: 30 * time.Minute, SettleSet: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	after := channelBytes(t, w.c)
	cfg, ok := verifyConfigBytes(after)
	if old, _ := verifyConfigBytes(before); !ok || cfg.Format != 2 || cfg.Master != old.Master {
		t.Fatalf("channel.toml after a rotation: %+v verifies %v", cfg, ok)
	}
	if _, err := reopen(t, w.c).Load(); err != nil {
		t.Fatal(err)
	}
}
