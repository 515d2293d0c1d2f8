package synchealth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/internal/fakesyncthing"
)

// Sync health against a fake Syncthing REST API on loopback: every state a probe can
// end in.

// channelDir is a channel folder inside a folder of its own, as a test's channel sits.
func channelDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "acme")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The fake names Syncthing's API by the variables Probe reads.
func TestFakeEnv(t *testing.T) {
	if fakesyncthing.EnvURL != EnvURL || fakesyncthing.EnvKey != EnvKey {
		t.Fatalf("fakesyncthing names %s and %s, synchealth reads %s and %s", fakesyncthing.EnvURL, fakesyncthing.EnvKey, EnvURL, EnvKey)
	}
}

func TestSyncHealthStates(t *testing.T) {
	root := channelDir(t)
	parent := filepath.Dir(root) // a folder above the channel holds it too

	t.Run("no syncthing", func(t *testing.T) {
		fakesyncthing.Isolate(t)
		h := Probe(context.Background(), root)
		if h.Syncthing != StateNone || h.InUse || h.Delivery != Stored || h.NoPeer() {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("delivered", func(t *testing.T) {
		_, _ = fakesyncthing.Serve(t, parent)
		h := Probe(context.Background(), root)
		if h.Syncthing != StateOK || !h.InUse || h.Delivery != Delivered || h.Connected != 1 || h.NoPeer() {
			t.Fatalf("got %+v", h)
		}
		if h.Folder == nil || h.Folder.ID != "ferry-ch" || h.Folder.State != "idle" || h.Folder.MaxConflicts != 10 || h.Folder.WatcherDelayS != 10 {
			t.Fatalf("folder %+v", h.Folder)
		}
		if len(h.Peers) != 1 || h.Peers[0].ID != "PEERONE" || h.Peers[0].Name != "laptop" || h.Peers[0].Completion != 100 {
			t.Fatalf("peers %+v", h.Peers)
		}
	})
	t.Run("peer behind", func(t *testing.T) {
		f, _ := fakesyncthing.Serve(t, root)
		f.Completion = 97.5
		h := Probe(context.Background(), root)
		if h.Delivery != Stored || h.Connected != 1 || !strings.Contains(h.Detail, "not yet at 100%") || h.Fix == "" {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("peers disconnected", func(t *testing.T) {
		f, _ := fakesyncthing.Serve(t, root)
		f.Connected = false
		h := Probe(context.Background(), root)
		if h.Syncthing != StateOK || h.Delivery != Stored || !h.NoPeer() || !strings.Contains(h.Detail, "no peer connected") {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("folder paused", func(t *testing.T) {
		f, _ := fakesyncthing.Serve(t, root)
		f.Paused = true
		h := Probe(context.Background(), root)
		if h.Delivery != Stored || !strings.Contains(h.Detail, "paused") {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("folder not shared", func(t *testing.T) {
		_, _ = fakesyncthing.Serve(t, t.TempDir())
		h := Probe(context.Background(), root)
		if h.Syncthing != StateNotShared || h.InUse || h.NoPeer() || h.Delivery != Stored || h.Fix == "" {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		_, _ = fakesyncthing.Serve(t, root)
		t.Setenv(EnvKey, "wrong")
		h := Probe(context.Background(), root)
		if h.Syncthing != StateUnauthorized || !strings.Contains(h.Detail, "refused the API key") || !strings.Contains(h.Fix, EnvKey) {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f, _ := fakesyncthing.Serve(t, root)
		f.Delay = time.Minute // released by the probe's deadline, not by this test's clock
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		h := Probe(ctx, root)
		if h.Syncthing != StateTimeout || h.Delivery != Stored {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("not running", func(t *testing.T) {
		_, srv := fakesyncthing.Serve(t, root)
		srv.Close()
		h := Probe(context.Background(), root)
		if h.Syncthing != StateUnreachable || h.InUse || !strings.Contains(h.Fix, "start Syncthing") {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("not loopback", func(t *testing.T) {
		fakesyncthing.Isolate(t)
		t.Setenv(EnvURL, "http://192.0.2.1:8384")
		t.Setenv(EnvKey, fakesyncthing.Key)
		h := Probe(context.Background(), root)
		if h.Syncthing != StateError || !strings.Contains(h.Detail, "loopback") {
			t.Fatalf("got %+v", h)
		}
	})
}

// config.xml found in Syncthing's home: its GUI address (0.0.0.0 asked on 127.0.0.1)
// and API key are used; when Syncthing is not running there, config.xml alone says the
// channel is in a Syncthing folder, so no peer is connected.
func TestSyncHealthConfigXML(t *testing.T) {
	root := channelDir(t)
	f, srv := fakesyncthing.Serve(t, root)
	t.Setenv(EnvURL, "")
	t.Setenv(EnvKey, "")
	home := t.TempDir()
	t.Setenv("STHOMEDIR", home)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	xmlText := `<configuration version="36">
    <folder id="ferry-ch" label="acme" path="` + root + `" type="sendreceive" fsWatcherEnabled="true" fsWatcherDelayS="1">
        <device id="` + fakesyncthing.Me + `"></device>
        <device id="` + fakesyncthing.Peer + `"></device>
        <maxConflicts>-1</maxConflicts>
        <paused>false</paused>
    </folder>
    <gui enabled="true" tls="false"><address>0.0.0.0:` + port + `</address><apikey>` + fakesyncthing.Key + `</apikey></gui>
</configuration>`
	if err := os.WriteFile(filepath.Join(home, "config.xml"), []byte(xmlText), 0o600); err != nil {
		t.Fatal(err)
	}
	h := Probe(context.Background(), root)
	if h.Syncthing != StateOK || h.Delivery != Delivered || h.Source != filepath.Join(home, "config.xml") {
		t.Fatalf("got %+v", h)
	}
	if len(f.Calls) == 0 {
		t.Fatal("the fake API was never asked")
	}
	srv.Close()
	h = Probe(context.Background(), root)
	if h.Syncthing != StateUnreachable || !h.InUse || !h.NoPeer() || h.Folder == nil || h.Folder.MaxConflicts != -1 || !strings.Contains(h.Detail, "not running") {
		t.Fatalf("got %+v", h)
	}

	if err := os.WriteFile(filepath.Join(home, "config.xml"), []byte("<configuration"), 0o600); err != nil {
		t.Fatal(err)
	}
	h = Probe(context.Background(), root)
	if h.Syncthing != StateError || !strings.Contains(h.Detail, "parsing Syncthing's") || h.InUse {
		t.Fatalf("got %+v", h)
	}
}
