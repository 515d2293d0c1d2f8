package doctor

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
)

func testHome(t *testing.T) *fsbus.Home {
	t.Helper()
	d := t.TempDir()
	return &fsbus.Home{ConfigDir: filepath.Join(d, "config"), CacheDir: filepath.Join(d, "cache")}
}

// world is a channel "acme" on one machine with the owner's key, and the members
// named seated.
func world(t *testing.T, members ...string) *fsbus.Channel {
	t.Helper()
	c, err := fsbus.Init(testHome(t), fsbus.InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.As(fsbus.MasterWriter)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range members {
		if _, err := fsbus.Join(c, name, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Grant(fsbus.GrantOptions{Agent: name, Level: "member"}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// copyKey gives home to the key of (project, name) from home from, as `ferry key
// export` and `ferry key import` would.
func copyKey(t *testing.T, from, to *fsbus.Home, project, name string) {
	t.Helper()
	pass := []byte("test passphrase")
	b, err := from.ExportKey(project, name, pass)
	if err != nil {
		t.Fatal(err)
	}
	ik, err := fsbus.ReadExport(b, pass)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := to.StoreImported(ik); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies src into dst as a sync tool would: a file is never replaced by a
// shorter copy (segments only grow).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(target); err == nil && len(old) >= len(b) {
			return nil
		}
		return os.WriteFile(target, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A fake Syncthing REST API on loopback, serving what fsbus.Channel.SyncHealth reads.
const (
	stMe   = "AAAAAAA-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH"
	stPeer = "PEERONE-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH"
	stKey  = "test-api-key"
)

type fakeSyncthing struct {
	mu         sync.Mutex
	folderPath string
	connected  bool
	completion float64
	// maxConflicts and watcherDelayS are the folder's settings (10 and 10 by default).
	maxConflicts, watcherDelayS int
}

func (f *fakeSyncthing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
			{"id": "ferry-ch", "label": "acme", "path": f.folderPath, "paused": false, "maxConflicts": f.maxConflicts,
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
	for _, k := range []string{fsbus.EnvSyncthingURL, fsbus.EnvSyncthingKey, "STHOMEDIR", "STCONFDIR"} {
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
	t.Setenv(fsbus.EnvSyncthingURL, srv.URL)
	t.Setenv(fsbus.EnvSyncthingKey, stKey)
	return f, srv
}
