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
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
)

// Home is the machine-local, never-synced state (docs/design.md §2): keys, pinned master keys,
// the project → channel map and the device id under ConfigDir; lock files, the arrival
// log and the index under CacheDir. Keys are never put in CacheDir.
type Home struct {
	ConfigDir string
	CacheDir  string
	// Warn, when set, hears warnings about machine-local files: a cache (the index,
	// the fold checkpoint, a run journal) that could not be saved — warned once per
	// file and process, since its loss only costs time — or a high-water mark that
	// could not be promoted after its entry was written. The CLI prints them on
	// stderr. nil: warnings are dropped.
	Warn func(msg string)

	warned sync.Map // keys of warnings given once (warn)
}

// warn passes msg to Warn; with a non-empty key, only the first warning of that key in
// this process.
func (h *Home) warn(key, msg string) {
	if h.Warn == nil {
		return
	}
	if key != "" {
		if _, dup := h.warned.LoadOrStore(key, true); dup {
			return
		}
	}
	h.Warn(msg)
}

// CacheNotSaved warns through Warn, once per path and process, that a machine-local
// cache file (the index, the fold checkpoint, a run journal) could not be saved.
func (h *Home) CacheNotSaved(path string, err error) {
	h.warn("cache "+path, fmt.Sprintf("%v (a cache: the next commands redo the work it saves, and still give the same answers)", err))
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
// (8 Crockford base32 characters, docs/design.md §2 "Ledger entry").
func (h *Home) Device() (string, error) {
	p := filepath.Join(h.ConfigDir, "device")
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if len(id) == fold.DeviceLen && fold.ValidName(id) {
			return id, nil
		}
		return "", fmt.Errorf("device id in %s is damaged (%q); delete the file to make a new one", p, id)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading device id: %w", err)
	}
	id := fold.NewDeviceID()
	if err := fsutil.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
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

// NewKey makes and stores a fresh ed25519 key for (project, name), mode 0600. It
// returns a conflict error when a key already exists (keys are never overwritten).
func (h *Home) NewKey(project, name string) (ledger.KeySigner, error) {
	p := h.keyPath(project, name)
	if h.HasKey(project, name) {
		return nil, errs.Errorf(errs.Conflict, "use `ferry key show` to see it", "a key for %s in project %s already exists", name, project)
	}
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	text := "ed25519-seed:" + base64.RawURLEncoding.EncodeToString(priv.Seed()) + "\n"
	if err := fsutil.WriteFile(p, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return ledger.KeySigner(priv), nil
}

// Keys lists the names with a key for project on this machine.
func (h *Home) Keys(project string) []string {
	ents, _ := os.ReadDir(filepath.Join(h.ConfigDir, "keys", project))
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".key"); ok {
			out = append(out, n)
		} else if n, ok := strings.CutSuffix(e.Name(), keyfile.LockedSuffix); ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// PinMaster records the master public key of project on first use and checks it
// afterwards. It returns a denied error when the channel names another master key
// than the pinned one (docs/design.md §2 "Identity, trust and levels").
func (h *Home) PinMaster(project, key string) error {
	p := filepath.Join(h.ConfigDir, "pins", project+".pub")
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fsutil.WriteFile(p, []byte(key+"\n"), 0o644)
	}
	if err != nil {
		return fmt.Errorf("reading pinned master key: %w", err)
	}
	if pinned := strings.TrimSpace(string(b)); pinned != key {
		return errs.Errorf(errs.Denied, "if the owner really made a new channel under this project id, remove "+p+" after checking with them",
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

// MappedDir returns the folder this machine maps project to, or "" when none.
func (h *Home) MappedDir(project string) (string, error) {
	m, err := h.Projects()
	if err != nil {
		return "", err
	}
	return m[project], nil
}

// MapForJoin maps project to dir for a command that joins it (CheckRemap first, then
// MapProject), before the command writes anything, so that a map that cannot be saved
// refuses the command with nothing written. undo puts the previous mapping back, for
// when the command is then refused.
func (h *Home) MapForJoin(project, dir string, force bool, more string) (undo func(), err error) {
	if err := h.CheckRemap(project, dir, force, more); err != nil {
		return nil, err
	}
	prev, err := h.MappedDir(project)
	if err != nil {
		return nil, err
	}
	if err := h.MapProject(project, dir); err != nil {
		return nil, err
	}
	return func() { _ = h.MapProject(project, prev) }, nil
}

// CheckRemap refuses (conflict, naming the old folder) to map project to dir when this
// machine maps it to another folder and force is false: a silent remap would move every
// later command, and every agent and app of this machine, onto the other channel. more
// ends the hint (another way out the command offers). nil when mapping is safe.
func (h *Home) CheckRemap(project, dir string, force bool, more string) error {
	old, err := h.MappedDir(project)
	if err != nil || old == "" || old == dir || force {
		return err
	}
	gone := ""
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		gone = " (a folder that is missing now)"
	}
	hint := fmt.Sprintf("pass --force to map %s to %s instead (the channel in %s is left as it is)", project, dir, old)
	if more != "" {
		hint += ", " + more
	}
	return errs.Errorf(errs.Conflict, hint, "project %s is already mapped on this machine to %s%s; nothing was written", project, old, gone)
}

// MapProject records that project's channel is dir on this machine; "" removes the
// mapping.
func (h *Home) MapProject(project, dir string) error {
	m, err := h.Projects()
	if err != nil {
		return err
	}
	if m[project] == dir {
		return nil
	}
	if dir == "" {
		delete(m, project)
	} else {
		m[project] = dir
	}
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(projectsFile{Projects: m}); err != nil {
		return fmt.Errorf("encoding projects: %w", err)
	}
	return fsutil.WriteFile(h.projectsPath(), []byte(b.String()), 0o644)
}

// A highWater is the machine-local mark of the last entry this machine appended to
// one segment (docs/format.md §10 "Writer continuity", §18): its seq and hash, and
// whether it is pending — written before the append, not yet promoted after it.
type highWater struct {
	Seq     uint64
	Hash    string // "" in marks written before marks named the hash
	Pending bool
	// Damaged holds the text of a mark that does not parse (a crash tore it, or a hand
	// edit): it is read as a pending mark of an unknown entry.
	Damaged string
}

// markLen is the length of every mark this binary writes, "\n" included: the longest
// mark ("<20 digits> sha256:<64 hex> pending") padded with spaces. A fixed length lets
// each next mark overwrite the last in place with one fsync, and the promotion
// overwrite "pending" alone.
const markLen = 20 + 1 + 71 + 1 + len("pending") + 1

// acked is the highest seq of the segment this machine's writes are known to have
// reached: Seq, or Seq-1 while the mark is pending (the entry at Seq may never have
// been written).
func (m highWater) acked() uint64 {
	if m.Pending && m.Seq > 0 {
		return m.Seq - 1
	}
	return m.Seq
}

// highWaterPath is where this machine keeps the high-water mark of (writer, device):
// under the config dir, which users do not purge as they do caches; losing the mark
// silently turns off the check that refuses a write after entries were lost.
func (h *Home) highWaterPath(project, writer, device string) string {
	return filepath.Join(h.ConfigDir, "segments", project, writer+"."+device)
}

// legacyHighWaterPath is where binaries before the config-dir mark kept it (under the
// cache dir); it is read when the config-dir mark is missing and removed once the
// config-dir mark is written.
func (h *Home) legacyHighWaterPath(project, writer, device string) string {
	return filepath.Join(h.StateDir(project), "segments", writer+"."+device)
}

// highWater returns the highest seq this machine's writes to (writer, device) are
// known to have reached (highWater.acked), 0 when it never wrote there or the mark
// cannot be read (doctor and verify report the latter through readHighWater).
func (h *Home) highWater(project, writer, device string) uint64 {
	m, _ := h.readHighWater(project, writer, device)
	return m.acked()
}

// readHighWater reads the high-water mark of (writer, device): "<seq>", "<seq> <hash>"
// or "<seq> <hash> pending", then spaces up to markLen and "\n" (a promoted mark has
// spaces where "pending" was). A missing mark is the zero highWater; one that does not
// parse is returned with Damaged set. The error is that of reading the file, naming it:
// a write must not go on as if the check were off.
func (h *Home) readHighWater(project, writer, device string) (highWater, error) {
	p := h.highWaterPath(project, writer, device)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		p = h.legacyHighWaterPath(project, writer, device)
		b, err = os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return highWater{}, nil
		}
	}
	if err != nil {
		return highWater{}, fmt.Errorf("reading this machine's high-water mark %s: %w", p, err)
	}
	m, ok := parseHighWater(string(b))
	if !ok {
		text := strings.TrimSpace(string(b))
		if len(text) > 40 {
			text = strings.ToValidUTF8(text[:40], "") + "…"
		}
		if text == "" {
			text = "(empty)"
		}
		return highWater{Pending: true, Damaged: text}, nil
	}
	return m, nil
}

// parseHighWater parses a high-water mark's text.
func parseHighWater(s string) (highWater, bool) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 3 {
		return highWater{}, false
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return highWater{}, false
	}
	m := highWater{Seq: n}
	if len(f) > 1 {
		if !isEntryHash(f[1]) {
			return highWater{}, false
		}
		m.Hash = f[1]
	}
	if len(f) == 3 {
		if f[2] != "pending" {
			return highWater{}, false
		}
		m.Pending = true
	}
	return m, true
}

// isEntryHash reports whether s has the form of an entry hash: "sha256:" + 64
// lowercase hex (docs/format.md §4).
func isEntryHash(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// promoteHighWater turns the pending mark m, which this process wrote, into a plain
// one in place: "pending" is overwritten with spaces, without fsync. A crash may keep
// the pending mark, which is harmless: its entry is in the segment, so the next write
// reads it as promoted (checkLost).
func (h *Home) promoteHighWater(project, writer, device string, m highWater) error {
	at := int64(len(strconv.FormatUint(m.Seq, 10)) + 1 + len(m.Hash) + 1)
	if err := fsutil.WriteAt(h.highWaterPath(project, writer, device), at, []byte("       ")); err != nil {
		return fmt.Errorf("promoting this machine's high-water mark: %w", err)
	}
	return nil
}

// writeHighWater records m as the high-water mark of (writer, device), durably: over
// a mark of markLen bytes in place with one fsync (fsutil.Overwrite), else by a new file
// (fsutil.WriteFile: temp file, fsync, rename, directory fsync), removing a mark an
// older binary left under the cache dir. The error names the file and the OS error.
func (h *Home) writeHighWater(project, writer, device string, m highWater) error {
	line := strconv.FormatUint(m.Seq, 10)
	if m.Hash != "" {
		line += " " + m.Hash
	}
	if m.Pending {
		line += " pending"
	}
	b := []byte(line + strings.Repeat(" ", max(0, markLen-1-len(line))) + "\n")
	p := h.highWaterPath(project, writer, device)
	if fi, err := os.Stat(p); err == nil && fi.Size() == int64(len(b)) {
		if err := fsutil.Overwrite(p, b); err != nil {
			return fmt.Errorf("writing this machine's high-water mark: %w", err)
		}
		return nil
	}
	if err := fsutil.WriteFile(p, b, 0o644); err != nil {
		return fmt.Errorf("writing this machine's high-water mark: %w", err)
	}
	os.Remove(h.legacyHighWaterPath(project, writer, device)) // the config-dir mark now rules
	return nil
}

// removeKey deletes a key this process just made and did not use (a refused join).
func (h *Home) removeKey(project, name string) { os.Remove(h.keyPath(project, name)) }
