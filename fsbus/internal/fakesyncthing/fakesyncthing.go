// Package fakesyncthing serves, on loopback, the part of Syncthing's REST API that
// fsbus/synchealth reads, for tests:
//
//	f, srv := fakesyncthing.Serve(t, ch.Root) // the folder is shared with Peer, connected, at 100%
//	f.Lock()
//	f.Connected = false
//	f.Unlock()
//	srv.Close() // Syncthing not running
//
// Serve and Isolate point the test's environment at the fake (or at nothing), so no
// Syncthing of the machine running the tests is asked.
package fakesyncthing

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Device ids and the API key the fake answers to.
const (
	Me   = "AAAAAAA-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH" // this machine
	Peer = "PEERONE-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH" // the one peer, named "laptop"
	Key  = "test-api-key"
)

// The environment variables Syncthing's API is named by (synchealth.EnvURL and
// synchealth.EnvKey; a test of synchealth checks they agree).
const (
	EnvURL = "SYNCTHING_API_URL"
	EnvKey = "SYNCTHING_API_KEY"
)

// Fake answers /rest/system/status, /rest/config/folders, /rest/config/devices,
// /rest/system/connections, /rest/db/status and /rest/db/completion for two folders:
// "other" at /nowhere/else, and "ferry-ch" at FolderPath, shared by Me and Peer. A
// request without the X-API-Key Key is refused with 403. The mutex is held while a
// request is answered: hold it to change the fields while the server runs.
type Fake struct {
	sync.Mutex
	FolderPath string
	Paused     bool // the folder
	Connected  bool // Peer
	Completion float64
	// MaxConflicts and WatcherDelayS are the folder's settings.
	MaxConflicts, WatcherDelayS int
	// Delay holds every answer back this long (or until the request is cancelled).
	Delay time.Duration
	// Calls lists the paths asked, in order.
	Calls []string
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.Lock()
	f.Calls = append(f.Calls, r.URL.Path)
	delay := f.Delay
	f.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if r.Header.Get("X-API-Key") != Key {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	f.Lock()
	defer f.Unlock()
	var out any
	switch r.URL.Path {
	case "/rest/system/status":
		out = map[string]any{"myID": Me}
	case "/rest/config/folders":
		out = []map[string]any{
			{"id": "other", "path": "/nowhere/else", "devices": []map[string]string{{"deviceID": Me}}},
			{"id": "ferry-ch", "label": "acme", "path": f.FolderPath, "paused": f.Paused, "maxConflicts": f.MaxConflicts,
				"fsWatcherEnabled": true, "fsWatcherDelayS": f.WatcherDelayS,
				"devices": []map[string]string{{"deviceID": Me}, {"deviceID": Peer}}},
		}
	case "/rest/config/devices":
		out = []map[string]any{{"deviceID": Me, "name": "here"}, {"deviceID": Peer, "name": "laptop"}}
	case "/rest/system/connections":
		out = map[string]any{"connections": map[string]any{Peer: map[string]any{"connected": f.Connected, "paused": false}}}
	case "/rest/db/status":
		if r.URL.Query().Get("folder") != "ferry-ch" {
			http.Error(w, "no such folder", http.StatusNotFound)
			return
		}
		out = map[string]any{"state": "idle", "needFiles": 0, "needBytes": 0}
	case "/rest/db/completion":
		if r.URL.Query().Get("device") != Peer {
			http.Error(w, "no such device", http.StatusNotFound)
			return
		}
		out = map[string]any{"completion": f.Completion, "needItems": 0}
	default:
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// Isolate points every Syncthing lookup of the test at nothing: no config.xml of the
// machine running it (HOME and the OS's config and state directories are an empty
// temp dir), no API from the environment.
func Isolate(t testing.TB) {
	t.Helper()
	empty := t.TempDir()
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "LOCALAPPDATA", "APPDATA", "USERPROFILE"} {
		t.Setenv(k, empty)
	}
	for _, k := range []string{EnvURL, EnvKey, "STHOMEDIR", "STCONFDIR"} {
		t.Setenv(k, "")
	}
}

// Serve isolates the test (Isolate), starts a Fake on loopback sharing the folder dir
// (Peer connected, at 100%; maxConflicts 10, watcher delay 10 s) and names it in the
// environment with Key. The server is closed when the test ends.
func Serve(t testing.TB, dir string) (*Fake, *httptest.Server) {
	t.Helper()
	Isolate(t)
	f := &Fake{FolderPath: dir, Connected: true, Completion: 100, MaxConflicts: 10, WatcherDelayS: 10}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv(EnvURL, srv.URL)
	t.Setenv(EnvKey, Key)
	return f, srv
}
