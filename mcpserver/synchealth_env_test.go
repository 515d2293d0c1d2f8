package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/synchealth"
	"github.com/ferryhq/ferry/mcpserver"
)

// The figures and transcripts of this package must not depend on a Syncthing of the
// machine running the tests (ferry_join and ferry_primary status report sync health,
// docs/sync.md "Sync health"): Syncthing's config is looked for only in a directory
// that does not exist, and no API is named in the environment.
func init() {
	os.Setenv("STHOMEDIR", filepath.Join(os.TempDir(), "ferry-tests-no-syncthing", "none"))
	os.Unsetenv("STCONFDIR")
	os.Unsetenv(synchealth.EnvURL)
	os.Unsetenv(synchealth.EnvKey)
}

// TestJoinAndPrimaryReportSync (docs/sync.md "Sync health"): ferry_join and
// ferry_primary status say whether writes are only stored here or delivered to every
// Syncthing peer.
func TestJoinAndPrimaryReportSync(t *testing.T) {
	busy := copyBusy(t)
	type syncOut struct {
		Sync *synchealth.Line `json:"sync"`
	}
	rg := newRig(t, mcpserver.FerryConfig{Agent: "cursor-laptop", Open: busy.open})
	check := func(want, note string) {
		t.Helper()
		for _, tool := range []string{"ferry_join", "ferry_primary"} {
			var out syncOut
			args := map[string]any{}
			if tool == "ferry_primary" {
				args["action"] = "status"
			}
			rg.ok(tool, args, &out)
			if out.Sync == nil || out.Sync.Delivery != want || !strings.Contains(out.Sync.Note, note) {
				t.Errorf("%s: sync %+v, want %s with %q", tool, out.Sync, want, note)
			}
		}
	}
	check(synchealth.Stored, "no Syncthing here")

	// A Syncthing on loopback shares the channel with one peer, connected, at 100%.
	const me, peer = "ME00000-X", "PEER000-X"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "k" {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		var out any
		switch r.URL.Path {
		case "/rest/system/status":
			out = map[string]any{"myID": me}
		case "/rest/config/folders":
			out = []map[string]any{{"id": "acme", "path": busy.dir, "maxConflicts": -1, "fsWatcherEnabled": true, "fsWatcherDelayS": 1,
				"devices": []map[string]string{{"deviceID": me}, {"deviceID": peer}}}}
		case "/rest/config/devices":
			out = []map[string]any{{"deviceID": peer, "name": "laptop"}}
		case "/rest/system/connections":
			out = map[string]any{"connections": map[string]any{peer: map[string]any{"connected": true}}}
		case "/rest/db/status":
			out = map[string]any{"state": "idle"}
		case "/rest/db/completion":
			out = map[string]any{"completion": 100}
		default:
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer srv.Close()
	t.Setenv(synchealth.EnvURL, srv.URL)
	t.Setenv(synchealth.EnvKey, "k")
	check(synchealth.Delivered, "1 of 1 peers connected, all at 100%")
	t.Setenv(synchealth.EnvKey, "wrong")
	check(synchealth.Stored, "refused the API key")
}
