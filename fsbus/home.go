package fsbus

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/ledger"
)

// Home is the machine-local, never-synced state (DESIGN §2): keys, pinned master keys,
// the project → channel map and the device id under ConfigDir; lock files, the arrival
// log and the index under CacheDir. Keys are never put in CacheDir.
type Home struct {
	ConfigDir string
	CacheDir  string
}

// EnvHome is the variable that moves all machine-local state (tests, ferry demo).
const EnvHome = "FERRY_HOME"

// LocalHome returns the Home of this machine: $FERRY_HOME/config and $FERRY_HOME/cache
// when FERRY_HOME is set, else os.UserConfigDir()/ferry and os.UserCacheDir()/ferry.
// It returns an error when the OS reports no config or cache directory.
func LocalHome() (*Home, error) {
	if h := os.Getenv(EnvHome); h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", EnvHome, err)
		}
		return &Home{ConfigDir: filepath.Join(abs, "config"), CacheDir: filepath.Join(abs, "cache")}, nil
	}
	cfg, err := os.UserConfigDir()
	if err != nil {
		return nil, fmt.Errorf("finding the config dir: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("finding the cache dir: %w", err)
	}
	return &Home{ConfigDir: filepath.Join(cfg, "ferry"), CacheDir: filepath.Join(cache, "ferry")}, nil
}

// Device returns this installation's device id, creating it on first use
// (8 Crockford base32 characters, DESIGN §2 "Device").
func (h *Home) Device() (string, error) {
	p := filepath.Join(h.ConfigDir, "device")
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if len(id) == DeviceLen && ValidName(id) {
			return id, nil
		}
		return "", fmt.Errorf("device id in %s is damaged (%q); delete the file to make a new one", p, id)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading device id: %w", err)
	}
	id := NewDeviceID()
	if err := WriteFileAtomic(p, []byte(id+"\n"), 0o644); err != nil {
		return "", err
	}
	return id, nil
}

// LockDir is the directory of machine-local lock files for a project.
func (h *Home) LockDir(project string) string { return filepath.Join(h.CacheDir, "locks", project) }

// StateDir is the directory of a project's machine-local derived state (arrival log).
func (h *Home) StateDir(project string) string {
	return filepath.Join(h.CacheDir, "channels", project)
}

func (h *Home) keyPath(project, name string) string {
	return filepath.Join(h.ConfigDir, "keys", project, name+".key")
}

// HasKey reports whether a key for (project, name) exists on this machine, plain or
// locked (keystore.go).
func (h *Home) HasKey(project, name string) bool {
	_, err := os.Stat(h.keyPath(project, name))
	return err == nil || fileExists(h.lockedPath(project, name))
}

// NewKey makes and stores a fresh ed25519 key for (project, name), mode 0600. It
// returns a conflict error when a key already exists (keys are never overwritten).
func (h *Home) NewKey(project, name string) (ledger.KeySigner, error) {
	p := h.keyPath(project, name)
	if h.HasKey(project, name) {
		return nil, Errorf(CatConflict, "use `ferry key show` to see it", "a key for %s in project %s already exists", name, project)
	}
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	text := "ed25519-seed:" + base64.RawURLEncoding.EncodeToString(priv.Seed()) + "\n"
	if err := WriteFileAtomic(p, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return ledger.KeySigner(priv), nil
}

// LoadKey reads the key of (project, name): the plain key, or the runtime copy of a
// locked key (keystore.go). It returns a not_found error naming the command to run when
// there is none, and a locked error naming `ferry key unlock` for a locked key without
// a valid runtime copy.
func (h *Home) LoadKey(project, name string) (ledger.KeySigner, error) {
	p := h.keyPath(project, name)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) && fileExists(h.lockedPath(project, name)) {
		k, _, err := h.readUnlocked(project, name)
		return k, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		if name == MasterWriter {
			return nil, Errorf(CatNotFound, "run owner commands on the machine where `ferry init` made the channel",
				"this machine holds no master key for project %s", project)
		}
		return nil, Errorf(CatNotFound, fmt.Sprintf("run `ferry join --as %s --project %s` first", name, project),
			"no key for %s in project %s on this machine", name, project)
	}
	if err != nil {
		return nil, fmt.Errorf("reading key: %w", err)
	}
	k, ok := parseSeedFile(string(b))
	if !ok {
		return nil, fmt.Errorf("key file %s is damaged", p)
	}
	return k, nil
}

// Keys lists the names with a key for project on this machine.
func (h *Home) Keys(project string) []string {
	ents, _ := os.ReadDir(filepath.Join(h.ConfigDir, "keys", project))
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".key"); ok {
			out = append(out, n)
		} else if n, ok := strings.CutSuffix(e.Name(), lockedSuffix); ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// PinMaster records the master public key of project on first use and checks it
// afterwards. It returns a denied error when the channel names another master key
// than the pinned one (DESIGN §2 "Identity, trust and levels").
func (h *Home) PinMaster(project, key string) error {
	p := filepath.Join(h.ConfigDir, "pins", project+".pub")
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return WriteFileAtomic(p, []byte(key+"\n"), 0o644)
	}
	if err != nil {
		return fmt.Errorf("reading pinned master key: %w", err)
	}
	if pinned := strings.TrimSpace(string(b)); pinned != key {
		return Errorf(CatDenied, "if the owner really made a new channel under this project id, remove "+p+" after checking with them",
			"channel.toml names master key %s but this machine pinned %s for project %s", key, pinned, project)
	}
	return nil
}

// projectsFile is the project → channel map.
type projectsFile struct {
	Projects map[string]string `toml:"projects"`
}

func (h *Home) projectsPath() string { return filepath.Join(h.ConfigDir, "projects.toml") }

// Projects returns the project → channel directory map (empty when none).
func (h *Home) Projects() (map[string]string, error) {
	var pf projectsFile
	md, err := toml.DecodeFile(h.projectsPath(), &pf)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", h.projectsPath(), err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, fmt.Errorf("reading %s: unknown keys %v", h.projectsPath(), und)
	}
	if pf.Projects == nil {
		pf.Projects = map[string]string{}
	}
	return pf.Projects, nil
}

// MapProject records that project's channel is dir on this machine.
func (h *Home) MapProject(project, dir string) error {
	m, err := h.Projects()
	if err != nil {
		return err
	}
	if m[project] == dir {
		return nil
	}
	m[project] = dir
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(projectsFile{Projects: m}); err != nil {
		return fmt.Errorf("encoding projects: %w", err)
	}
	return WriteFileAtomic(h.projectsPath(), []byte(b.String()), 0o644)
}

// highWaterPath is where this machine records the last seq it appended to a segment.
func (h *Home) highWaterPath(project, writer, device string) string {
	return filepath.Join(h.StateDir(project), "segments", writer+"."+device)
}

// highWater returns the last seq this machine appended to (writer, device), 0 when it
// never did or the record is lost (the cache may be purged: then the check is off).
func (h *Home) highWater(project, writer, device string) uint64 {
	n, _ := h.highWaterMark(project, writer, device)
	return n
}

// highWaterMark returns the last seq this machine appended to (writer, device) and
// that entry's hash ("" when the file predates hashes in it, issue 7), or 0 and "".
// The file holds "<seq>\n" or "<seq> <hash>\n".
func (h *Home) highWaterMark(project, writer, device string) (uint64, string) {
	b, err := os.ReadFile(h.highWaterPath(project, writer, device))
	if err != nil {
		return 0, ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, ""
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, ""
	}
	if len(f) > 1 {
		return n, f[1]
	}
	return n, ""
}

// setHighWater records seq (with its entry's hash, "" for none) as the last appended to
// (writer, device). A failure only turns the loss check off for that segment, so it is
// not reported.
func (h *Home) setHighWater(project, writer, device string, seq uint64, hash string) {
	line := strconv.FormatUint(seq, 10)
	if hash != "" {
		line += " " + hash
	}
	_ = WriteFileAtomic(h.highWaterPath(project, writer, device), []byte(line+"\n"), 0o644)
}

// removeKey deletes a key this process just made and did not use (a refused join).
func (h *Home) removeKey(project, name string) { os.Remove(h.keyPath(project, name)) }
