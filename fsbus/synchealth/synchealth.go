// Package synchealth asks Syncthing, when it carries a channel, what it says about
// delivery (docs/design.md §2 rule 7):
//
//	h := synchealth.Probe(ctx, ch.Root)
//	if h.NoPeer() { … } // Syncthing carries the channel and no peer is connected
//
// Probe asks Syncthing's REST API on this machine's loopback interface only, within
// Deadline for the whole probe, and never fails: a missing Syncthing, a refused key or
// a timeout are states of the Health it returns, each with a one-line Detail and Fix.
package synchealth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Deadline bounds one Probe, every request included (5 s).
const Deadline = 5 * time.Second

// Environment variables that point ferry at Syncthing's REST API. Both set: ferry does
// not look for Syncthing's config.xml. One set: it overrides that part of config.xml.
const (
	EnvURL = "SYNCTHING_API_URL" // e.g. http://127.0.0.1:8384
	EnvKey = "SYNCTHING_API_KEY"
)

// The states of Health.Syncthing.
const (
	StateNone         = "none"         // no Syncthing config on this machine and no SYNCTHING_API_URL/KEY
	StateNotShared    = "not_shared"   // Syncthing runs here, but no folder of it holds the channel
	StateUnreachable  = "unreachable"  // nothing answers at the GUI/API address (Syncthing not running?)
	StateUnauthorized = "unauthorized" // the API refused the key (401/403)
	StateTimeout      = "timeout"      // no answer within Deadline
	StateError        = "error"        // an answer ferry cannot use (bad JSON, 5xx, non-loopback address)
	StateOK           = "ok"           // the folder and its peers were read
)

// Delivery states: "stored" means written to this machine's disk (every write is, once
// it returns); "delivered" means Syncthing reports every peer sharing the folder
// connected and at 100% completion for it — a peer that is paused, disconnected, or
// behind, or no Syncthing to ask, leaves it at "stored".
const (
	Stored    = "stored"
	Delivered = "delivered"
)

// Health is this machine's view of how the channel travels (`ferry doctor`,
// ferry_join, `ferry primary status`). It is never an error: a missing Syncthing, a
// refused key or a timeout are states, each with a one-line Detail and Fix.
type Health struct {
	// Syncthing is one of the State* states above.
	Syncthing string `json:"syncthing"`
	// InUse is true when a Syncthing folder on this machine holds the channel (from the
	// REST API, or from config.xml when the API does not answer).
	InUse bool `json:"in_use"`
	// Delivery is "stored" or "delivered" (see Stored).
	Delivery string `json:"delivery"`
	// Detail says what was found in one line; Fix what to do about it ("" when nothing).
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
	// Source names where the API address and key came from: "env", a config.xml path, or "".
	Source string  `json:"source,omitempty"`
	Folder *Folder `json:"folder,omitempty"`
	Peers  []Peer  `json:"peers"`
	// Connected counts the folder's peers Syncthing reports connected.
	Connected int `json:"connected"`
}

// Folder is the Syncthing folder holding the channel, with the settings ferry
// recommends checking (docs/sync.md).
type Folder struct {
	ID    string `json:"id"`
	Label string `json:"label,omitempty"`
	Path  string `json:"path"`
	// State is Syncthing's folder state: idle, scanning, syncing, error, … ("" unknown).
	State  string `json:"state,omitempty"`
	Paused bool   `json:"paused"`
	// NeedFiles and NeedBytes are what this machine still has to fetch (-1 unknown).
	NeedFiles int64 `json:"need_files"`
	NeedBytes int64 `json:"need_bytes"`
	// MaxConflicts is how many conflict copies Syncthing keeps per file (-1: all).
	MaxConflicts int `json:"max_conflicts"`
	// WatcherEnabled and WatcherDelayS are the file-system watcher and its delay (s).
	WatcherEnabled bool `json:"watcher_enabled"`
	WatcherDelayS  int  `json:"watcher_delay_s"`
}

// Peer is another device sharing the folder.
type Peer struct {
	ID        string `json:"id"` // Syncthing device id, first 7 characters
	Name      string `json:"name,omitempty"`
	Connected bool   `json:"connected"`
	Paused    bool   `json:"paused"`
	// Completion is the peer's completion of the folder in percent (-1 unknown).
	Completion float64 `json:"completion"`
}

// Line is sync health in two words for ferry_join and ferry_primary status: the
// delivery state and a short note.
type Line struct {
	Delivery string `json:"delivery"`
	Note     string `json:"note"`
}

// Line summarises h.
func (h *Health) Line() Line {
	return Line{Delivery: h.Delivery, Note: h.Detail}
}

// NoPeer reports whether Syncthing carries the channel here and no peer of its folder
// is connected (including Syncthing not answering): this machine cannot tell a silent
// writer from one whose files have not arrived, so "silent" is not asserted (docs/design.md §2
// rule 7).
func (h *Health) NoPeer() bool { return h.InUse && h.Connected == 0 }

// Probe asks Syncthing on this machine about the folder holding the channel folder
// root: folder state (/rest/db/status), connected peers (/rest/system/connections) and
// each peer's completion (/rest/db/completion). The address and key come from
// SYNCTHING_API_URL and SYNCTHING_API_KEY, or from Syncthing's config.xml (see
// syncthingConfigPaths); only loopback addresses are asked. The whole probe is bounded
// by Deadline and by ctx. It never fails: every failure mode is a state.
func Probe(ctx context.Context, root string) *Health {
	ctx, cancel := context.WithTimeout(ctx, Deadline)
	defer cancel()
	h := &Health{Syncthing: StateNone, Delivery: Stored, Peers: []Peer{}}
	api, folders, err := locateSyncthing()
	switch {
	case err != nil:
		h.Syncthing, h.Detail = StateError, err.Error()
		h.Fix = "fix or remove the file named above, or set SYNCTHING_API_URL and SYNCTHING_API_KEY"
		return h
	case api == nil:
		h.Detail = "no Syncthing here; delivery unknown"
		return h
	}
	h.Source = api.source
	root = canonicalDir(root)
	cfgFolder := matchFolder(folders, root)
	h.InUse = cfgFolder != nil

	if err := api.probe(ctx, h, root); err != nil {
		h.Syncthing, h.Detail, h.Fix = classify(err, api)
		// A probe cut short proves no connection: count none.
		h.Delivery, h.Connected, h.Peers = Stored, 0, []Peer{}
		if h.Folder == nil && cfgFolder != nil {
			h.Folder = cfgFolder.summary()
		}
		if h.InUse {
			h.Detail += "; the channel is in Syncthing folder " + h.Folder.ID
		}
	}
	return h
}

// classify turns a probe error into a state, a detail and a fix.
func classify(err error, api *stAPI) (state, detail, fix string) {
	var se *statusError
	switch {
	case errors.Is(err, errNotLoopback):
		return StateError, err.Error(), "set SYNCTHING_API_URL to Syncthing's API on 127.0.0.1 or ::1"
	case errors.As(err, &se) && (se.code == http.StatusUnauthorized || se.code == http.StatusForbidden):
		return StateUnauthorized, fmt.Sprintf("Syncthing at %s refused the API key (HTTP %d)", api.base, se.code),
			"set SYNCTHING_API_KEY to the key in Syncthing's settings (Actions → Settings → GUI)"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return StateTimeout, fmt.Sprintf("Syncthing at %s did not answer within %s", api.base, Deadline),
			"check that Syncthing is not hung; restart it"
	case isRefused(err):
		if api.source != "env" && !api.explicit {
			// A config.xml of an installation that is not running.
			return StateUnreachable, fmt.Sprintf("Syncthing is not running here (nothing answers at %s)", api.base),
				"start Syncthing, or set SYNCTHING_API_URL to where its API listens"
		}
		return StateUnreachable, fmt.Sprintf("nothing answers at %s", api.base), "start Syncthing, or fix SYNCTHING_API_URL"
	}
	return StateError, "asking Syncthing: " + err.Error(), "check Syncthing's log; `ferry doctor` shows the state"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isRefused(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// statusError is an HTTP answer other than 200.
type statusError struct {
	path string
	code int
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: HTTP %d", e.path, e.code) }

var errNotLoopback = errors.New("the Syncthing API address is not on loopback; ferry asks only 127.0.0.1 or ::1")

// stAPI is Syncthing's REST API on loopback.
type stAPI struct {
	base     string // scheme://host:port, no trailing slash
	key      string
	source   string // "env" or the config.xml path
	explicit bool   // the URL came from the environment
	client   *http.Client
}

// get fetches path (with query) into out.
func (a *stAPI) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", a.key)
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &statusError{path: path, code: resp.StatusCode}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

// REST shapes (only the fields ferry reads).
type (
	stSystemStatus struct {
		MyID string `json:"myID"`
	}
	stFolderCfg struct {
		ID             string `json:"id"`
		Label          string `json:"label"`
		Path           string `json:"path"`
		Paused         bool   `json:"paused"`
		MaxConflicts   int    `json:"maxConflicts"`
		WatcherEnabled bool   `json:"fsWatcherEnabled"`
		WatcherDelayS  int    `json:"fsWatcherDelayS"`
		Devices        []struct {
			DeviceID string `json:"deviceID"`
		} `json:"devices"`
	}
	stDeviceCfg struct {
		DeviceID string `json:"deviceID"`
		Name     string `json:"name"`
		Paused   bool   `json:"paused"`
	}
	stConnections struct {
		Connections map[string]struct {
			Connected bool `json:"connected"`
			Paused    bool `json:"paused"`
		} `json:"connections"`
	}
	stDBStatus struct {
		State     string `json:"state"`
		NeedFiles int64  `json:"needFiles"`
		NeedBytes int64  `json:"needBytes"`
	}
	stCompletion struct {
		Completion float64 `json:"completion"`
		NeedItems  int64   `json:"needItems"`
	}
)

func (f *stFolderCfg) summary() *Folder {
	return &Folder{ID: f.ID, Label: f.Label, Path: f.Path, Paused: f.Paused, NeedFiles: -1, NeedBytes: -1,
		MaxConflicts: f.MaxConflicts, WatcherEnabled: f.WatcherEnabled, WatcherDelayS: f.WatcherDelayS}
}

// probe reads the folder holding root and its peers into h.
func (a *stAPI) probe(ctx context.Context, h *Health, root string) error {
	var me stSystemStatus
	if err := a.get(ctx, "/rest/system/status", &me); err != nil {
		return err
	}
	var folders []stFolderCfg
	if err := a.get(ctx, "/rest/config/folders", &folders); err != nil {
		return err
	}
	f := matchFolder(folders, root)
	if f == nil {
		h.Syncthing, h.InUse = StateNotShared, false
		h.Detail = "Syncthing runs here but no folder of it holds the channel: delivery to other machines is not known"
		h.Fix = "share the channel's folder (or a folder above it) in Syncthing, or ignore this when another tool carries it"
		return nil
	}
	h.Syncthing, h.InUse, h.Folder = StateOK, true, f.summary()
	var st stDBStatus
	if err := a.get(ctx, "/rest/db/status?folder="+url.QueryEscape(f.ID), &st); err != nil {
		return err
	}
	h.Folder.State, h.Folder.NeedFiles, h.Folder.NeedBytes = st.State, st.NeedFiles, st.NeedBytes
	var devs []stDeviceCfg
	if err := a.get(ctx, "/rest/config/devices", &devs); err != nil {
		return err
	}
	names := map[string]stDeviceCfg{}
	for _, d := range devs {
		names[d.DeviceID] = d
	}
	var conns stConnections
	if err := a.get(ctx, "/rest/system/connections", &conns); err != nil {
		return err
	}
	for _, d := range f.Devices {
		if d.DeviceID == me.MyID || d.DeviceID == "" {
			continue
		}
		p := Peer{ID: shortDevice(d.DeviceID), Name: names[d.DeviceID].Name, Paused: names[d.DeviceID].Paused, Completion: -1}
		if c, ok := conns.Connections[d.DeviceID]; ok {
			p.Connected = c.Connected && !c.Paused
			p.Paused = p.Paused || c.Paused
		}
		var comp stCompletion
		if err := a.get(ctx, "/rest/db/completion?folder="+url.QueryEscape(f.ID)+"&device="+url.QueryEscape(d.DeviceID), &comp); err != nil {
			return err
		}
		p.Completion = comp.Completion
		if p.Connected {
			h.Connected++
		}
		h.Peers = append(h.Peers, p)
	}
	slices.SortFunc(h.Peers, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	delivered := len(h.Peers) > 0 && !f.Paused
	behind := 0
	for _, p := range h.Peers {
		if !p.Connected || p.Completion < 100 {
			delivered = false
		}
		if p.Completion < 100 {
			behind++
		}
	}
	if delivered {
		h.Delivery = Delivered
	}
	switch {
	case f.Paused:
		h.Detail = fmt.Sprintf("Syncthing folder %s is paused here: nothing is sent or received", f.ID)
		h.Fix = "resume the folder in Syncthing"
	case len(h.Peers) == 0:
		h.Detail = fmt.Sprintf("Syncthing folder %s is shared with no other device", f.ID)
		h.Fix = "share the folder with the other machines in Syncthing"
	case h.Connected == 0:
		h.Detail = fmt.Sprintf("Syncthing folder %s (%s): no peer connected of %d; writes are stored here only", f.ID, orState(st.State), len(h.Peers))
		h.Fix = "check that Syncthing runs on the other machines and that they can reach this one"
	case delivered:
		h.Detail = fmt.Sprintf("Syncthing folder %s (%s): %d of %d peers connected, all at 100%%", f.ID, orState(st.State), h.Connected, len(h.Peers))
	default:
		h.Detail = fmt.Sprintf("Syncthing folder %s (%s): %d of %d peers connected, %d not yet at 100%%", f.ID, orState(st.State), h.Connected, len(h.Peers), behind)
		h.Fix = "wait for Syncthing to finish; a peer that stays behind needs checking in its Syncthing"
	}
	return nil
}

func orState(s string) string {
	if s == "" {
		return "state unknown"
	}
	return s
}

// shortDevice is the first block of a Syncthing device id, as Syncthing's GUI shows it.
func shortDevice(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// matchFolder returns the folder whose path is root or a directory above it (the
// deepest such folder when several are nested), or nil.
func matchFolder(folders []stFolderCfg, root string) *stFolderCfg {
	var best *stFolderCfg
	bestLen := -1
	for i := range folders {
		p := canonicalDir(expandTilde(folders[i].Path))
		if p == "" || !pathWithin(root, p) {
			continue
		}
		if len(p) > bestLen {
			best, bestLen = &folders[i], len(p)
		}
	}
	return best
}

// pathWithin reports whether dir is parent or dir itself contains it (both cleaned and
// absolute); names compare without case on Windows and macOS.
func pathWithin(dir, parent string) bool {
	if runtime.GOOS == "windows" || runtime.GOOS == "darwin" {
		dir, parent = strings.ToLower(dir), strings.ToLower(parent)
	}
	if dir == parent {
		return true
	}
	if !strings.HasSuffix(parent, string(filepath.Separator)) {
		parent += string(filepath.Separator)
	}
	return strings.HasPrefix(dir, parent)
}

// canonicalDir is p made absolute, cleaned and with symbolic links resolved where they
// resolve ("" for an empty p).
func canonicalDir(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return filepath.Clean(p)
}

// expandTilde expands a leading "~" (Syncthing writes folder paths such as "~/Sync").
func expandTilde(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// stConfig is the part of Syncthing's config.xml ferry reads.
type stConfig struct {
	GUI struct {
		TLS     bool   `xml:"tls,attr"`
		Address string `xml:"address"`
		APIKey  string `xml:"apikey"`
	} `xml:"gui"`
	Folders []struct {
		ID             string `xml:"id,attr"`
		Label          string `xml:"label,attr"`
		Path           string `xml:"path,attr"`
		WatcherEnabled bool   `xml:"fsWatcherEnabled,attr"`
		WatcherDelayS  int    `xml:"fsWatcherDelayS,attr"`
		Paused         bool   `xml:"paused"`
		MaxConflicts   int    `xml:"maxConflicts"`
		Devices        []struct {
			ID string `xml:"id,attr"`
		} `xml:"device"`
	} `xml:"folder"`
}

// syncthingConfigPaths lists where Syncthing keeps config.xml on this OS, in the order
// ferry looks: $STHOMEDIR or $STCONFDIR (Syncthing's own overrides; when one is set it
// is the only place), else Linux $XDG_STATE_HOME/syncthing or ~/.local/state/syncthing
// (Syncthing ≥ 1.27) and ~/.config/syncthing (older releases), macOS
// ~/Library/Application Support/Syncthing, Windows %LOCALAPPDATA%\Syncthing.
func syncthingConfigPaths() []string {
	var dirs []string
	for _, env := range []string{"STHOMEDIR", "STCONFDIR"} {
		if d := os.Getenv(env); d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) > 0 {
		// Syncthing itself then looks nowhere else, and neither does ferry.
		return []string{filepath.Join(dirs[0], "config.xml")}
	}
	home, _ := os.UserHomeDir()
	cfg, _ := os.UserConfigDir()
	switch runtime.GOOS {
	case "windows":
		local := os.Getenv("LOCALAPPDATA")
		if local == "" {
			local, _ = os.UserCacheDir() // %LocalAppData% on Windows
		}
		if local != "" {
			dirs = append(dirs, filepath.Join(local, "Syncthing"))
		}
	case "darwin":
		if cfg != "" {
			dirs = append(dirs, filepath.Join(cfg, "Syncthing")) // ~/Library/Application Support
		}
	default:
		state := os.Getenv("XDG_STATE_HOME")
		if state == "" && home != "" {
			state = filepath.Join(home, ".local", "state")
		}
		if state != "" {
			dirs = append(dirs, filepath.Join(state, "syncthing"))
		}
		if cfg != "" {
			dirs = append(dirs, filepath.Join(cfg, "syncthing"))
		}
	}
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, filepath.Join(d, "config.xml"))
	}
	return out
}

// locateSyncthing finds the API (nil when there is no Syncthing to ask) and the folders
// config.xml shares (nil without a config.xml). An error names a config.xml that
// exists but cannot be read or parsed.
func locateSyncthing() (*stAPI, []stFolderCfg, error) {
	envURL, envKey := strings.TrimSpace(os.Getenv(EnvURL)), strings.TrimSpace(os.Getenv(EnvKey))
	var cfg *stConfig
	var cfgPath string
	if envURL == "" || envKey == "" {
		for _, p := range syncthingConfigPaths() {
			raw, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("reading Syncthing's %s: %w", p, err)
			}
			var c stConfig
			if err := xml.Unmarshal(raw, &c); err != nil {
				return nil, nil, fmt.Errorf("parsing Syncthing's %s: %w", p, err)
			}
			cfg, cfgPath = &c, p
			break
		}
		if cfg == nil && envURL == "" && envKey == "" {
			return nil, nil, nil
		}
	}
	api := &stAPI{source: "env", explicit: envURL != ""}
	var folders []stFolderCfg
	tlsOn := false
	if cfg != nil {
		api.source = cfgPath
		api.key = cfg.GUI.APIKey
		tlsOn = cfg.GUI.TLS
		api.base = guiBase(cfg.GUI.Address, tlsOn)
		for _, f := range cfg.Folders {
			fc := stFolderCfg{ID: f.ID, Label: f.Label, Path: f.Path, Paused: f.Paused, MaxConflicts: f.MaxConflicts,
				WatcherEnabled: f.WatcherEnabled, WatcherDelayS: f.WatcherDelayS}
			for _, d := range f.Devices {
				fc.Devices = append(fc.Devices, struct {
					DeviceID string `json:"deviceID"`
				}{d.ID})
			}
			folders = append(folders, fc)
		}
	}
	if envURL != "" {
		api.base = strings.TrimRight(envURL, "/")
	}
	if envKey != "" {
		api.key = envKey
	}
	if api.base == "" {
		api.base = "http://127.0.0.1:8384" // Syncthing's default
	}
	var pin []byte
	if cfgPath != "" {
		pin = readPEMCert(filepath.Join(filepath.Dir(cfgPath), "https-cert.pem"))
	}
	api.client = loopbackClient(pin)
	return api, folders, nil
}

// guiBase turns config.xml's GUI address into a base URL on loopback: an unspecified
// host (0.0.0.0, ::) is asked on 127.0.0.1; a unix socket is not supported ("" keeps
// the default).
func guiBase(addr string, tlsOn bool) string {
	addr = strings.TrimSpace(addr)
	if addr == "" || strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "unix:") {
		return ""
	}
	scheme := "http"
	if tlsOn {
		scheme = "https"
	}
	if i := strings.Index(addr, "://"); i >= 0 {
		scheme, addr = addr[:i], addr[i+3:]
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// readPEMCert returns the DER bytes of the first certificate in a PEM file, or nil.
func readPEMCert(p string) []byte {
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	b, _ := pem.Decode(raw)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil
	}
	return b.Bytes
}

// loopbackClient is an HTTP client that dials loopback addresses only (the API key
// never leaves the machine) and ignores proxies. Syncthing's HTTPS certificate is
// self-signed: it is accepted when it is the one in Syncthing's https-cert.pem (pin),
// or, without that file, on loopback alone.
func loopbackClient(pin []byte) *http.Client {
	dialer := &net.Dialer{Timeout: Deadline}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if host == "localhost" {
				host = "127.0.0.1"
			}
			ip := net.ParseIP(host)
			if ip == nil || !ip.IsLoopback() {
				return nil, errNotLoopback
			}
			return dialer.DialContext(ctx, network, net.JoinHostPort(host, port))
		},
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // self-signed; checked below against the pin when there is one
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if pin == nil || (len(raw) > 0 && bytes.Equal(raw[0], pin)) {
					return nil
				}
				return errors.New("the Syncthing HTTPS certificate is not the one in its https-cert.pem")
			},
		},
		ResponseHeaderTimeout: Deadline,
		DisableKeepAlives:     true,
	}
	return &http.Client{Transport: tr, Timeout: Deadline,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
