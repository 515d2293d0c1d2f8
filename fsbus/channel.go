package fsbus

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/gitsync"
	"github.com/ferryhq/ferry/fsbus/internal/archive"
	"github.com/ferryhq/ferry/fsbus/internal/ckfile"
	"github.com/ferryhq/ferry/internal/bootclock"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/ledger"
)

// FormatVersion is the newest channel format this binary reads and writes
// (docs/format.md §8, §20): 2, which reads format 1 too. `ferry init` makes format-1
// channels; the first `ferry compact` moves one to format 2. A build linked with
// -ldflags "-X github.com/ferryhq/ferry/fsbus.maxFormat=1" reads format 1 only, as
// builds before format 2 did (the tests build one).
var FormatVersion = parseMaxFormat(maxFormat)

// maxFormat is FormatVersion as text, so the linker can set it.
var maxFormat = "2"

// initFormat is the format `ferry init` writes: old builds read the channel until the
// first compact.
const initFormat = 1

func parseMaxFormat(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 2 {
		panic(fmt.Sprintf("fsbus: maxFormat %q is not a channel format this code knows (1 or 2)", s))
	}
	return n
}

// channelDomain prefixes the signature of channel.toml.
const channelDomain = "ferry-channel-v1"

// Config is channel.toml: written once by init and signed by the master.
type Config struct {
	Format  int         `toml:"format" json:"format"`
	Project string      `toml:"project" json:"project"`
	Title   string      `toml:"title" json:"title"`
	Master  string      `toml:"master" json:"master"`
	Created string      `toml:"created" json:"created"`
	Policy  fold.Policy `toml:"policy" json:"policy"`
	Sig     string      `toml:"sig" json:"sig,omitempty"`
	// PolicyTable is the [policy] table as the file holds it — every key, those this
	// binary does not know too — as canonical JSON values (readConfig). Not part of
	// the signed body: Policy and the file's other keys are.
	PolicyTable map[string]json.RawMessage `toml:"-" json:"-"`
}

func (c Config) signingBody() ([]byte, error) {
	c.Sig = ""
	return ledger.Canonical(c)
}

// Channel is an opened channel directory.
type Channel struct {
	Root   string
	Config Config
	Home   *Home
	Device string
	// MasterKey is the master public key of channel.toml, checked against the pin: the
	// root of the rotation chain (State.MasterKey is the current master key).
	MasterKey ed25519.PublicKey
	Ledger    *ledger.Ledger
	// Now is the wall clock for HLCs, sightings and liveness; nil means time.Now.
	Now func() time.Time
	// Boot is the boot clock read beside Now at every sighting, on which elapsed time
	// is measured (clock.go, ADR 0013); nil means the OS boot clock, moved by as much
	// as Now is from the real wall clock. Tests only: the binary sets neither.
	Boot func() bootclock.Reading
	// Progress, when set, hears how far each Load is (a progress display for
	// the first reading of a big channel, which a terminal-free fsbus cannot draw):
	// stage is "reading", "verifying" (done and total count entries whose signatures are
	// checked), "folding" or "arrivals", and "" once the Load returns, with or without
	// an error. It is called on the goroutine running Load, at most once per 4,096
	// entries checked, and must return quickly. nil: no reports.
	Progress func(stage string, done, total int)

	// Thorough makes every Load fold everything: every object file read again and
	// every segment byte the local index covers hashed again (CheckPrefixes), instead
	// of starting from the fold checkpoint or the last Load. ferry doctor and ferry
	// ledger verify set it (ADR 0011).
	Thorough bool

	// Damage is set by OpenUnverified (config_check.go): channel.toml does not verify,
	// and the channel is open for `ferry doctor` only.
	Damage *ConfigDamage

	pin        string                         // the master key pinned on this machine (rotation.go)
	policyHead atomic.Pointer[fold.PolicySet] // the policy.set chain's head as of the last Load (policy.go)
	index      *localIndex                    // this process's copy of the local index (index.go)
	indexOnce  sync.Once

	// The last Load's snapshot and fold, from which the next Load folds only what is
	// new (fold_incr.go), and the arrival log as last read (arrivals.go).
	foldMu   sync.Mutex
	lastSnap *ledger.Snapshot
	lastFold *fold.Folded
	// lastFullAt is when this process last folded everything (FullFoldEvery).
	lastFullAt time.Time
	// ownerCheckpoint is what the last whole fold's owner's checkpoints gave
	// (owner_checkpoint.go), nil when the ledger holds none.
	ownerCheckpoint *fold.ChannelFold
	// floored is this process's reading from an owner's checkpoint's cut.
	floored ckfile.Floored
	// archiveDirs is the archive folders outside the channel SetArchiveDirs named.
	archiveDirs []string
	// sinceCheckpoint counts the entries folded through foldDelta since this process
	// last wrote, or started from, the fold checkpoint (checkpoint.go).
	sinceCheckpoint int
	// configSeen is channel.toml's size and modification time as this process last read
	// it (Open, checkPresent): a change is read again at the next Load.
	configSeen configStamp
	// rosterChecked are the hashes of the roster entries (joins, grants, rotations) of
	// the fold checkpoint this process started from: their signatures are checked again
	// (prewarmSigs) but were saved in the index by the process that wrote the
	// checkpoint, so saveIndex does not append them once more.
	rosterChecked map[string]bool
	// folds counts this process's Loads by how they folded (tests and benchmarks).
	folds   struct{ full, delta, fromCheckpoint int }
	lastArr *arrivals.Reading
}

func (c *Channel) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// progress reports a Load stage to c.Progress when set.
func (c *Channel) progress(stage string, done, total int) {
	if c.Progress != nil {
		c.Progress(stage, done, total)
	}
}

// Project returns the channel's project id.
func (c *Channel) Project() string { return c.Config.Project }

// dirs every channel has (docs/design.md §2 layout).
var channelDirs = []string{"ledger", "orders", "messages", "asks", "results", "presence", "handins", "memory", "releases"}

const gitattributes = "* -text\n"

// stignore hides ferry's and the sync tools' temp names from Syncthing. It is written
// on every machine by init and join: Syncthing does not sync it. Syncthing reads it
// only at the root of a shared folder: when the channel is a subfolder, the root's
// .stignore needs doctor.StignoreLines instead (`ferry doctor` says so).
const stignore = "// written by ferry: temp files are never synced\n(?d).ferry-*.tmp\n(?d)*.torn-*\n"

// InitOptions configure Init.
type InitOptions struct {
	Dir     string
	Project string
	Title   string
	// Force maps Project to Dir even when this machine maps it to another folder.
	Force bool
}

// Init creates a channel in opts.Dir (created if missing; it must not hold a
// channel.toml yet): the layout, a master key for the project on this machine (made if
// none), the signed channel.toml with format = 1, PROTOCOL.md, .gitattributes and
// .stignore, and maps the project to the directory. It returns an invalid error for a
// bad project id, and a conflict error, writing nothing, when the directory already
// holds a channel or (without opts.Force) this machine maps the project to another
// folder: remapping it silently would leave every command of the project on a new,
// empty channel.
func Init(h *Home, opts InitOptions) (*Channel, error) {
	if err := fold.CheckName("project id", opts.Project); err != nil {
		return nil, err
	}
	if err := secretguard.Check("channel title", opts.Title); err != nil {
		return nil, err // channel.toml and PROTOCOL.md are read by whoever stores the folder
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", opts.Dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "channel.toml")); err == nil {
		return nil, errs.Errorf(errs.Conflict, "use `ferry join` to take part in an existing channel", "%s already holds a channel", dir)
	}
	if err := h.CheckRemap(opts.Project, dir, opts.Force, "or choose another --project"); err != nil {
		return nil, err
	}
	var master ledger.KeySigner
	if h.HasKey(opts.Project, fold.MasterWriter) {
		master, err = h.LoadKey(opts.Project, fold.MasterWriter)
	} else {
		master, err = h.NewKey(opts.Project, fold.MasterWriter)
	}
	if err != nil {
		return nil, err
	}
	for _, d := range channelDirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	title := opts.Title
	if title == "" {
		title = opts.Project
	}

	cfg := Config{
		Format:  initFormat,
		Project: opts.Project,
		Title:   title,
		Master:  ledger.FormatKey(master.Public()),
		Created: time.Now().UTC().Format(time.RFC3339),
		Policy:  fold.DefaultPolicy(),
	}
	body, err := cfg.signingBody()
	if err != nil {
		return nil, err
	}
	if cfg.Sig, err = ledger.SignDomain(master, channelDomain, cfg.Project, body); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("# ferry channel: written by `ferry init`, its format line moved to 2 by the owner's first `ferry compact`; signed by the master key. Do not edit.\n")
	if err := toml.NewEncoder(&buf).Encode(cfg); err != nil {
		return nil, fmt.Errorf("encoding channel.toml: %w", err)
	}
	files := []struct {
		name string
		data []byte
	}{
		{"PROTOCOL.md", []byte(ckfile.ProtocolMD(cfg.Title, cfg.Project))},
		{".gitattributes", []byte(gitattributes)},
		{".stignore", []byte(stignore)},
		{"channel.toml", buf.Bytes()}, // last: its presence marks a complete channel
	}
	for _, f := range files {
		if err := fsutil.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return nil, err
		}
	}
	if err := h.PinMaster(cfg.Project, cfg.Master); err != nil {
		return nil, err
	}
	if err := h.MapProject(cfg.Project, dir); err != nil {
		return nil, err
	}
	return Open(h, dir)
}

// Open opens the channel in dir: reads and verifies channel.toml, pins or checks the
// master key, and prepares the ledger. It reads no segment. Errors:
//   - not_found when dir holds no channel.toml;
//   - invalid when channel.toml does not parse or its signature does not verify;
//   - invalid when its format is newer than FormatVersion (the binary is too old);
//   - denied when its master key differs from the one pinned on this machine and no
//     rotation chain from it reaches the pinned key (the hint names `ferry master
//     repin`, rotation.go).
func Open(h *Home, dir string) (*Channel, error) {
	cfg, mk, dir, raw, err := readConfigFile(dir)
	if err != nil {
		return nil, err
	}
	c := &Channel{Root: dir, Config: cfg, Home: h, MasterKey: mk}
	c.configSeen = stampOf(filepath.Join(dir, "channel.toml"))
	// The pin: channel.toml's key, or a key its rotation chain reaches (rotation.go).
	if err := c.checkPin(); err != nil {
		return nil, err
	}
	// What `ferry doctor` compares a channel.toml that stops verifying with.
	h.keepVerifiedConfig(cfg.Project, dir, raw)
	if c.Device, err = h.Device(); err != nil {
		return nil, err
	}
	if err := c.openLedger(); err != nil {
		return nil, err
	}
	return c, nil
}

// openLedger prepares c.Ledger, with channel.toml's max skew until a Load reads the
// policy in force (policy.go).
func (c *Channel) openLedger() error {
	skew := time.Duration(max(c.Config.Policy.MaxSkewS, 0)) * time.Second
	lg, err := ledger.Open(ledger.Options{Root: c.Root, LockDir: c.Home.LockDir(c.Config.Project), Project: c.Config.Project, MaxSkew: skew, Now: c.now})
	if err != nil {
		return err
	}
	c.Ledger = lg
	return nil
}

// readConfig reads and verifies channel.toml in dir, returning it, its master key and
// dir made absolute. Errors as Open's, but for the pin.
func readConfig(dir string) (Config, ed25519.PublicKey, string, error) {
	cfg, mk, dir, _, err := readConfigFile(dir)
	return cfg, mk, dir, err
}

// readConfigFile is readConfig that also returns the file's bytes. A file that decodes
// but whose signature does not verify is returned with its master key and dir beside an
// invalid error wrapping ErrConfigUnverified (OpenUnverified, config_check.go).
func readConfigFile(dir string) (Config, ed25519.PublicKey, string, []byte, error) {
	var cfg Config
	dir, err := filepath.Abs(dir)
	if err != nil {
		return cfg, nil, "", nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	p := filepath.Join(dir, "channel.toml")
	raw, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		// The folder was given (--channel, FERRY_CHANNEL, the project map): the hint says
		// how to fix that path or make a channel there, never "pass --channel".
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return cfg, nil, "", nil, errs.Errorf(errs.NotFound, "fix the path, or create a channel there with `ferry init DIR --project ID`",
				"the channel folder %s does not exist", dir)
		}
		return cfg, nil, "", nil, errs.Errorf(errs.NotFound, "pass the folder that holds channel.toml, or create a channel there with `ferry init DIR --project ID`",
			"%s holds no ferry channel (no channel.toml)", dir)
	}
	if err != nil {
		return cfg, nil, "", nil, fmt.Errorf("reading %s: %w", p, err)
	}
	const restore = "restore channel.toml from another machine or backup"
	body := bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	if _, err := toml.Decode(string(body), &cfg); err != nil {
		return cfg, nil, "", nil, errs.Errorf(errs.Invalid, restore, "%s does not parse: %v", p, err)
	}
	if cfg.Format > FormatVersion {
		return cfg, nil, "", nil, errs.Errorf(errs.Invalid, "update ferry on this machine (`ferry version` shows this binary)",
			"channel format %d is newer than this binary reads (format %d); nothing was read or written", cfg.Format, FormatVersion)
	}
	if cfg.Format < 1 {
		return cfg, nil, "", nil, errs.Errorf(errs.Invalid, restore, "%s has no valid format", p)
	}
	mk, err := ledger.ParseKey(cfg.Master)
	if err != nil {
		return cfg, nil, "", nil, errs.Errorf(errs.Invalid, restore, "%s: %v", p, err)
	}
	// The signature covers every key of the file, known to this binary or not (ADR 0001).
	all, err := ckfile.DecodeConfigMap(raw)
	if err != nil {
		return cfg, nil, "", nil, errs.Errorf(errs.Invalid, restore, "%s does not parse: %v", p, err)
	}
	if cfg.PolicyTable, err = ckfile.PolicyTable(all["policy"]); err != nil {
		return cfg, nil, "", nil, errs.Errorf(errs.Invalid, restore, "%s: [policy]: %v", p, err)
	}
	signed, err := ledger.Canonical(all)
	if err != nil {
		return cfg, nil, "", nil, errs.Errorf(errs.Invalid, restore, "%s: %v", p, err)
	}
	if err := ledger.VerifyDomain(mk, channelDomain, cfg.Project, signed, cfg.Sig); err != nil {
		return cfg, mk, dir, nil, &errs.Error{Category: errs.Invalid, Err: ErrConfigUnverified,
			Message: p + " is not signed by its master key: it was edited or damaged; nothing was read or written",
			Hint:    "run `ferry doctor` to see which keys changed; restore channel.toml from another machine or backup (never edit it: its signature covers every key); policy changes are made with `ferry policy set KEY=VALUE` (owner only)"}
	}
	if err := fold.CheckName("project id", cfg.Project); err != nil {
		return cfg, nil, "", nil, err
	}
	return cfg, mk, dir, raw, nil
}

// writeStignore writes .stignore if missing (join calls it on every machine).
func writeStignore(dir string) error {
	p := filepath.Join(dir, ".stignore")
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	return fsutil.WriteFile(p, []byte(stignore), 0o644)
}

// SyncGit carries the channel through the git repository it lives in (`ferry sync
// --git`) under the channel lock: gitsync.Sync says what it commits and how it fails.
func (c *Channel) SyncGit(ctx context.Context) (*gitsync.Result, error) {
	return gitsync.Sync(ctx, c.Root, gitsync.Options{
		Device:     c.Device,
		DeviceFile: filepath.Join(c.Home.ConfigDir, "device"),
		Lock:       c.withChannelLock,
		Owner:      c.Home.HasKey(c.Project(), fold.MasterWriter),
	})
}

// SetArchiveDirs names archive folders outside the channel (`--archive DIR`) that reads
// and Verify take archived chain files from (docs/format.md §21); not_found, changing
// nothing, when one is not a directory (archive.Dirs).
func (c *Channel) SetArchiveDirs(dirs []string) error {
	abs, err := archive.Dirs(dirs)
	if err != nil {
		return err
	}
	c.archiveDirs = abs
	c.Ledger.SetArchiveDirs(abs)
	return nil
}

// stamp reads this machine's clocks now: c.Now (the wall clock) and the boot clock.
// With Boot unset and Now set, the boot clock is Now less the boot's start: a test that
// sets Now alone moves both clocks together (time passes), and one that sets Boot too
// can step the wall clock alone. With neither set the OS boot clock is read.
func (c *Channel) stamp() arrivals.Stamp {
	wall := c.now()
	var r bootclock.Reading
	var err error
	switch {
	case c.Boot != nil:
		r = c.Boot()
	case c.Now != nil:
		r, err = bootclock.At(wall)
	default:
		r, err = bootclock.Read()
	}
	if err != nil {
		return arrivals.Stamp{Wall: wall.UnixMilli()}
	}
	id := r.ID
	if id == "" {
		id = arrivals.NoBootID
	}
	return arrivals.Stamp{Wall: wall.UnixMilli(), Boot: r.Since.Milliseconds(), BootID: id}
}

// arrivalsPath is the channel's arrival log.
func (c *Channel) arrivalsPath() string {
	sum := sha256.Sum256([]byte(c.Root))
	return filepath.Join(c.Home.StateDir(c.Project()), "arrivals-"+hex.EncodeToString(sum[:8])+".log")
}

// ingestArrivals brings the channel's arrival log up to date (the function of the
// same name in arrivals.go) and keeps the log as read for the next Load.
func (c *Channel) ingestArrivals(all, added []ledger.Entry, incremental bool, size0 int64) (*arrivals.Log, error) {
	dir, lockDir := c.Home.StateDir(c.Project()), c.Home.LockDir(c.Project())
	var below func(*ledger.Entry) bool
	if cf := c.ownerCheckpoint; cf != nil && cf.Used >= 0 {
		cut := cf.Chain[cf.Used].Head.Cut
		below = func(e *ledger.Entry) bool { return cut.Below(e.Writer, e.Device, e.Seq) }
	}
	a, last, err := arrivals.Ingest(dir, lockDir, c.arrivalsPath(), c.lastArr, c.stamp(), all, added, incremental, size0, below)
	c.lastArr = last
	return a, err
}

// arrivalsCompactMin is how many lines compactArrivals drops at least (fewer are not
// worth a rewrite of the log).
var arrivalsCompactMin = 1024

// compactArrivals drops from the arrival log the lines of the entries at or below the
// cut of the owner's checkpoint this Load read from (arrivals.Compact), once per
// epoch: snap is a reading from that cut, so what it holds is what the log keeps (a
// live thing's entries at or below the cut lose their sightings: `ferry inspect`
// shows their age as unknown). A
// failure leaves the log as it was and costs later Loads its size.
func (c *Channel) compactArrivals(snap *ledger.Snapshot, arr *arrivals.Log) {
	cf := c.ownerCheckpoint
	if cf == nil || cf.Used < 0 || snap.Floors == nil || arr == nil {
		return
	}
	epoch := cf.Chain[cf.Used].Data.Epoch
	if arr.Compacted >= epoch || arr.Last < uint64(len(snap.Entries)+arrivalsCompactMin) {
		return
	}
	keep := make(map[string]bool, len(snap.Entries))
	for i := range snap.Entries {
		keep[snap.Entries[i].Hash()] = true
	}
	for _, f := range snap.Forks {
		for i := range f.Losers {
			keep[f.Losers[i].Hash()] = true
		}
	}
	dropped, err := arrivals.Compact(c.Home.LockDir(c.Project()), c.arrivalsPath(), epoch, arrivalsCompactMin, arr.Complete(), func(h string) bool { return keep[h] })
	if err != nil {
		c.Home.CacheNotSaved(c.arrivalsPath(), err)
		return
	}
	if dropped > 0 {
		// The reading the next Load goes on from, and the fold checkpoint keeps, is of
		// the log as rewritten: the one before holds every line dropped.
		if rd, _, err := arrivals.Read(c.arrivalsPath()); err == nil && rd != nil {
			c.lastArr = rd
		} else {
			c.lastArr = nil
		}
	}
}
