package fsbus

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/errs"
)

// Sync health against a fake Syncthing REST API on loopback: every state a
// probe can end in, and the take refused while Syncthing reports no connected peer.

const (
	stMe   = "AAAAAAA-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH"
	stPeer = "PEERONE-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH"
	stKey  = "test-api-key"
)

// fakeSyncthing serves the REST endpoints SyncHealth reads.
type fakeSyncthing struct {
	mu         sync.Mutex
	folderPath string
	paused     bool // the folder
	connected  bool
	completion float64
	// maxConflicts and watcherDelayS are the folder's settings (10 and 10 by default).
	maxConflicts, watcherDelayS int
	delay                       time.Duration
	calls                       []string
}

func (f *fakeSyncthing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.URL.Path)
	delay := f.delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if r.Header.Get("X-API-Key") != stKey {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out any
	switch r.URL.Path {
	case "/rest/system/status":
		out = map[string]any{"myID": stMe}
	case "/rest/config/folders":
		out = []map[string]any{
			{"id": "other", "path": "/nowhere/else", "devices": []map[string]string{{"deviceID": stMe}}},
			{"id": "ferry-ch", "label": "acme", "path": f.folderPath, "paused": f.paused, "maxConflicts": f.maxConflicts,
				"fsWatcherEnabled": true, "fsWatcherDelayS": f.watcherDelayS,
				"devices": []map[string]string{{"deviceID": stMe}, {"deviceID": stPeer}}},
		}
	case "/rest/config/devices":
		out = []map[string]any{{"deviceID": stMe, "name": "here"}, {"deviceID": stPeer, "name": "laptop"}}
	case "/rest/system/connections":
		out = map[string]any{"connections": map[string]any{stPeer: map[string]any{"connected": f.connected, "paused": false}}}
	case "/rest/db/status":
		if r.URL.Query().Get("folder") != "ferry-ch" {
			http.Error(w, "no such folder", http.StatusNotFound)
			return
		}
		out = map[string]any{"state": "idle", "needFiles": 0, "needBytes": 0}
	case "/rest/db/completion":
		if r.URL.Query().Get("device") != stPeer {
			http.Error(w, "no such device", http.StatusNotFound)
			return
		}
		out = map[string]any{"completion": f.completion, "needItems": 0}
	default:
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// isolateSyncthing points every Syncthing lookup of the test at nothing: no config.xml
// of the developer's machine, no API from the environment.
func isolateSyncthing(t *testing.T) {
	t.Helper()
	empty := t.TempDir()
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "LOCALAPPDATA", "APPDATA", "USERPROFILE"} {
		t.Setenv(k, empty)
	}
	for _, k := range []string{EnvSyncthingURL, EnvSyncthingKey, "STHOMEDIR", "STCONFDIR"} {
		t.Setenv(k, "")
	}
}

// stServer starts the fake on loopback, sharing the folder dir (connected, at 100%).
func stServer(t *testing.T, dir string) (*fakeSyncthing, *httptest.Server) {
	t.Helper()
	isolateSyncthing(t)
	f := &fakeSyncthing{folderPath: dir, connected: true, completion: 100, maxConflicts: 10, watcherDelayS: 10}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv(EnvSyncthingURL, srv.URL)
	t.Setenv(EnvSyncthingKey, stKey)
	return f, srv
}

func TestSyncHealthStates(t *testing.T) {
	ch, _, _ := primaryWorld(t, nil)
	parent := filepath.Dir(ch.Root) // a folder above the channel holds it too

	t.Run("no syncthing", func(t *testing.T) {
		isolateSyncthing(t)
		h := ch.SyncHealth(context.Background())
		if h.Syncthing != SyncNone || h.InUse || h.Delivery != DeliveryStored || h.NoPeer() {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("delivered", func(t *testing.T) {
		_, _ = stServer(t, parent)
		h := ch.SyncHealth(context.Background())
		if h.Syncthing != SyncOK || !h.InUse || h.Delivery != DeliveryDelivered || h.Connected != 1 || h.NoPeer() {
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
		f, _ := stServer(t, ch.Root)
		f.completion = 97.5
		h := ch.SyncHealth(context.Background())
		if h.Delivery != DeliveryStored || h.Connected != 1 || !strings.Contains(h.Detail, "not yet at 100%") || h.Fix == "" {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("peers disconnected", func(t *testing.T) {
		f, _ := stServer(t, ch.Root)
		f.connected = false
		h := ch.SyncHealth(context.Background())
		if h.Syncthing != SyncOK || h.Delivery != DeliveryStored || !h.NoPeer() || !strings.Contains(h.Detail, "no peer connected") {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("folder paused", func(t *testing.T) {
		f, _ := stServer(t, ch.Root)
		f.paused = true
		h := ch.SyncHealth(context.Background())
		if h.Delivery != DeliveryStored || !strings.Contains(h.Detail, "paused") {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("folder not shared", func(t *testing.T) {
		_, _ = stServer(t, t.TempDir())
		h := ch.SyncHealth(context.Background())
		if h.Syncthing != SyncNotShared || h.InUse || h.NoPeer() || h.Delivery != DeliveryStored || h.Fix == "" {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		_, _ = stServer(t, ch.Root)
		t.Setenv(EnvSyncthingKey, "wrong")
		h := ch.SyncHealth(context.Background())
		if h.Syncthing != SyncUnauthorized || !strings.Contains(h.Detail, "refused the API key") || !strings.Contains(h.Fix, EnvSyncthingKey) {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f, _ := stServer(t, ch.Root)
		f.delay = time.Minute // released by the probe's deadline, not by this test's clock
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		h := ch.SyncHealth(ctx)
		if h.Syncthing != SyncTimeout || h.Delivery != DeliveryStored {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("not running", func(t *testing.T) {
		_, srv := stServer(t, ch.Root)
		srv.Close()
		h := ch.SyncHealth(context.Background())
		if h.Syncthing != SyncUnreachable || h.InUse || !strings.Contains(h.Fix, "start Syncthing") {
			t.Fatalf("got %+v", h)
		}
	})
	t.Run("not loopback", func(t *testing.T) {
		isolateSyncthing(t)
		t.Setenv(EnvSyncthingURL, "http://192.0.2.1:8384")
		t.Setenv(EnvSyncthingKey, stKey)
		h := ch.SyncHealth(context.Background())
		if h.Syncthing != SyncError || !strings.Contains(h.Detail, "loopback") {
			t.Fatalf("got %+v", h)
		}
	})
}

// config.xml found in Syncthing's home: its GUI address (0.0.0.0 asked on 127.0.0.1)
// and API key are used; when Syncthing is not running there, config.xml alone says the
// channel is in a Syncthing folder, so no peer is connected.
func TestSyncHealthConfigXML(t *testing.T) {
	ch, _, _ := primaryWorld(t, nil)
	f, srv := stServer(t, ch.Root)
	t.Setenv(EnvSyncthingURL, "")
	t.Setenv(EnvSyncthingKey, "")
	home := t.TempDir()
	t.Setenv("STHOMEDIR", home)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	xmlText := `<configuration version="36">
    <folder id="ferry-ch" label="acme" path="` + ch.Root + `" type="sendreceive" fsWatcherEnabled="true" fsWatcherDelayS="1">
        <device id="` + stMe + `"></device>
        <device id="` + stPeer + `"></device>
        <maxConflicts>-1</maxConflicts>
        <paused>false</paused>
    </folder>
    <gui enabled="true" tls="false"><address>0.0.0.0:` + port + `</address><apikey>` + stKey + `</apikey></gui>
</configuration>`
	if err := os.WriteFile(filepath.Join(home, "config.xml"), []byte(xmlText), 0o600); err != nil {
		t.Fatal(err)
	}
	h := ch.SyncHealth(context.Background())
	if h.Syncthing != SyncOK || h.Delivery != DeliveryDelivered || h.Source != filepath.Join(home, "config.xml") {
		t.Fatalf("got %+v", h)
	}
	if len(f.calls) == 0 {
		t.Fatal("the fake API was never asked")
	}
	srv.Close()
	h = ch.SyncHealth(context.Background())
	if h.Syncthing != SyncUnreachable || !h.InUse || !h.NoPeer() || h.Folder == nil || h.Folder.MaxConflicts != -1 || !strings.Contains(h.Detail, "not running") {
		t.Fatalf("got %+v", h)
	}

	if err := os.WriteFile(filepath.Join(home, "config.xml"), []byte("<configuration"), 0o600); err != nil {
		t.Fatal(err)
	}
	h = ch.SyncHealth(context.Background())
	if h.Syncthing != SyncError || !strings.Contains(h.Detail, "parsing Syncthing's") || h.InUse {
		t.Fatalf("got %+v", h)
	}
}

// A take on grounds of silence is refused while Syncthing reports no connected peer,
// and allowed again once a peer connects; status says which rule applies.
func TestPrimaryTakeRefusedWithoutPeers(t *testing.T) {
	c, clk, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator"})
	f, _ := stServer(t, c.Root)
	f.connected = false
	if _, err := ss["alice"].PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	primaryLoad(t, c) // this machine sees alice's take now
	clk.advance(31 * time.Minute)
	v := primaryLoad(t, c)
	ps := c.PrimaryStatus(v).WithSync(c.SyncHealth(context.Background()))
	if ps.Liveness != Silent || ps.Rule != "holder not heard from for 31 min, but Syncthing reports no connected peer: take refused until a peer connects" ||
		ps.Sync == nil || ps.Sync.Delivery != DeliveryStored {
		t.Fatalf("status %+v", ps)
	}
	n := primaryEntries(t, c)
	_, err := ss["bob"].PrimaryTake("")
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "primary is held by alice, not heard from for 31 min, but Syncthing reports no connected peer") {
		t.Fatalf("take while no peer is connected: %v", err)
	}
	if primaryEntries(t, c) != n {
		t.Fatal("a refused take wrote an entry")
	}
	// The owner's explicit act is never blocked.
	if ps, err := ss[MasterWriter].PrimaryTake(""); err != nil || ps.Holder != MasterWriter {
		t.Fatalf("the owner's take: %v", err)
	}
	if _, err := ss[MasterWriter].PrimaryRelease(""); err != nil {
		t.Fatal(err)
	}
	if _, err := ss["alice"].PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	primaryLoad(t, c)
	clk.advance(31 * time.Minute)
	f.mu.Lock()
	f.connected = true
	f.mu.Unlock()
	v = primaryLoad(t, c)
	if ps := c.PrimaryStatus(v).WithSync(c.SyncHealth(context.Background())); ps.Rule != "holder silent (heard from 31 min ago): an orchestrator may take over" || ps.Sync.Delivery != DeliveryDelivered {
		t.Fatalf("status with a peer connected: %+v", ps)
	}
	if ps, err := ss["bob"].PrimaryTake(""); err != nil || ps.Holder != "bob" {
		t.Fatalf("take once a peer is connected: %v %+v", err, ps)
	}
}

// Without Syncthing the take rule is unchanged: silence alone allows it.
func TestPrimaryTakeWithoutSyncthingUnchanged(t *testing.T) {
	c, clk, ss := primaryWorld(t, map[string]string{"alice": "orchestrator", "bob": "orchestrator"})
	isolateSyncthing(t)
	if _, err := ss["alice"].PrimaryTake(""); err != nil {
		t.Fatal(err)
	}
	primaryLoad(t, c)
	clk.advance(31 * time.Minute)
	if ps, err := ss["bob"].PrimaryTake(""); err != nil || ps.Holder != "bob" {
		t.Fatalf("take of a silent holder without Syncthing: %v %+v", err, ps)
	}
}
