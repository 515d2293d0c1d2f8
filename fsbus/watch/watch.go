package watch

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/fsnotify/fsnotify"
)

// Waiting for change (docs/design.md §1, §4 long-poll).
//
// A Watcher's notifications are hints, never facts (STYLE "watchers are hints"): it
// watches directories, not files — ledger/, every ledger/<writer>/ (new ones are added
// as they appear), orders/, messages/, asks/, results/ and handins/ — gathers a burst of
// events into one hint inside the goroutine that owns the fsnotify watcher, and
// rescans on overflow and on a timer. The rescan is what makes a synced or network
// folder work, where change notifications from other machines never arrive; with
// fsnotify unavailable, or turned off (WatchOptions.Poll, FERRY_WATCH=poll), the timer
// is all there is. Whoever gets a hint loads the channel and decides for itself
// whether anything it cares about changed: WaitFor does exactly that.

// envWatch is the variable that turns fsnotify off: FERRY_WATCH=poll makes every
// Watcher poll (for folders whose change notifications are missing or unreliable).
const envWatch = "FERRY_WATCH"

// Watch defaults.
var (
	// defaultRescan is how often a Watcher rescans the channel's directories: the poll
	// interval without fsnotify, the safety net with it.
	defaultRescan = 2 * time.Second
	// DefaultDebounce is how long a Watcher gathers a burst of fsnotify events into
	// one hint (a write is a temp file, a rename and an append: several events).
	DefaultDebounce = 50 * time.Millisecond
)

// WatchOptions configure Watch and WaitFor. The zero value watches
// with fsnotify (unless FERRY_WATCH=poll), rescans every DefaultRescan and debounces
// by DefaultDebounce.
type WatchOptions struct {
	// Poll turns fsnotify off: only the timed rescan reports change.
	Poll bool
	// Rescan is the rescan interval; 0 means DefaultRescan.
	Rescan time.Duration
	// Debounce is how long a burst of events is gathered; 0 means DefaultDebounce.
	Debounce time.Duration
	// OnWait, when not nil, is called by WaitFor each time it has loaded a view that is
	// not ready and starts waiting for a hint (tests write only once a wait is on).
	OnWait func()
}

// watchedDirs are the channel directories a Watcher watches (docs/design.md §2 layout):
// the ledger, whose writer subdirectories are added too, and the object directories,
// because an entry may arrive before the object it names (pending sync).
var watchedDirs = []string{"ledger", "orders", "messages", "asks", "results", "handins"}

// Watcher reports that a channel may have changed. It holds an fsnotify watcher
// (unless it polls) and one goroutine, both released by Close.
type Watcher struct {
	// C receives a value when the channel's directories may have changed since the
	// last value was received. It holds at most one pending hint: hints never queue up.
	C <-chan struct{}

	c       chan struct{}
	root    string
	polling bool
	fw      *fsnotify.Watcher
	opt     WatchOptions
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// Watch starts watching the channel's directories. It falls back to polling when
// fsnotify cannot start or cannot watch a directory (no inotify instances left, an
// unsupported file system), when opt.Poll is set or when FERRY_WATCH=poll; Polling
// tells which. The directories that do not exist yet are created by the writes that
// need them and noticed by the rescan. Watch returns no error: a watcher that cannot
// be notified still polls.
func Watch(c *fsbus.Channel, opt WatchOptions) *Watcher {
	if opt.Rescan <= 0 {
		opt.Rescan = defaultRescan
	}
	if opt.Debounce <= 0 {
		opt.Debounce = DefaultDebounce
	}
	ch := make(chan struct{}, 1)
	w := &Watcher{C: ch, c: ch, root: c.Root, opt: opt, done: make(chan struct{}), stopped: make(chan struct{})}
	w.polling = opt.Poll || strings.EqualFold(strings.TrimSpace(os.Getenv(envWatch)), "poll")
	if !w.polling {
		fw, err := fsnotify.NewWatcher()
		if err == nil {
			w.fw = fw
			if err = w.addAll(); err != nil {
				fw.Close()
				w.fw = nil
			}
		}
		w.polling = w.fw == nil
	}
	go w.run()
	return w
}

// Polling reports whether the watcher only rescans on a timer (no fsnotify).
func (w *Watcher) Polling() bool { return w.polling }

// Close stops the watcher and waits for its goroutine to end. It is safe to call more
// than once.
func (w *Watcher) Close() error {
	w.once.Do(func() { close(w.done) })
	<-w.stopped
	return nil
}

// addAll adds every watched directory that exists, and every writer directory under
// ledger/. Directories that do not exist are skipped (the rescan notices them);
// any other failure is returned.
func (w *Watcher) addAll() error {
	for _, d := range watchedDirs {
		p := filepath.Join(w.root, d)
		if err := w.add(p); err != nil {
			return err
		}
		if d != "ledger" && d != "handins" {
			continue
		}
		subs, _ := os.ReadDir(p)
		for _, s := range subs {
			if s.IsDir() && !strings.HasPrefix(s.Name(), ".") {
				if err := w.add(filepath.Join(p, s.Name())); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// add watches dir; a directory that does not exist (any more) is not an error.
func (w *Watcher) add(dir string) error {
	if err := w.fw.Add(dir); err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return nil
}

// hint records that the channel may have changed (at most one pending).
func (w *Watcher) hint() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// run owns the fsnotify watcher: it debounces events into hints, adds writer
// directories as they appear under ledger/ (and handins/), and rescans on overflow
// and every Rescan.
func (w *Watcher) run() {
	defer close(w.stopped)
	var events <-chan fsnotify.Event
	var errCh <-chan error
	if w.fw != nil {
		defer w.fw.Close()
		events, errCh = w.fw.Events, w.fw.Errors
	}
	tick := time.NewTicker(w.opt.Rescan)
	defer tick.Stop()
	var debounce *time.Timer
	var fire <-chan time.Time
	defer func() {
		if debounce != nil {
			debounce.Stop()
		}
	}()
	sig := w.scan()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Create) && w.isWriterDir(ev.Name) {
				// A new writer (or a writer's first hand-in) made its directory: watch it,
				// and hint now, since its first file may have landed before the watch did.
				_ = w.add(ev.Name)
				w.hint()
			}
			if ev.Op == fsnotify.Chmod || fsutil.IsTempName(filepath.Base(ev.Name)) {
				continue // metadata only, or a sync tool's (or our) file in progress
			}
			if fire == nil { // gather the burst from its first event: a steady stream still wakes
				debounce = time.NewTimer(w.opt.Debounce)
				fire = debounce.C
			}
		case _, ok := <-errCh:
			if !ok {
				errCh = nil
				continue
			}
			// fsnotify.ErrEventOverflow (the kernel queue overflowed: events were lost)
			// or a backend error: re-add what may be missing and let the reader look
			// again, whether or not the signature moved (a lost event may be a change
			// the signature cannot see, such as a rewrite within one mtime tick).
			_ = w.addAll()
			sig = w.scan()
			w.hint()
		case <-fire:
			fire, debounce = nil, nil
			sig = w.scan()
			w.hint()
		case <-tick.C:
			if s := w.scan(); s != sig {
				sig = s
				if w.fw != nil {
					_ = w.addAll() // a writer directory whose create event was missed
				}
				w.hint()
			}
		}
	}
}

// isWriterDir reports whether p is a directory directly under ledger/ or handins/.
func (w *Watcher) isWriterDir(p string) bool {
	parent := filepath.Base(filepath.Dir(p))
	if filepath.Dir(filepath.Dir(p)) != w.root || (parent != "ledger" && parent != "handins") {
		return false
	}
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// scan returns a signature of the watched directories: for every file in them and in
// the writer directories of ledger/ and handins/, its name, size and modification
// time. Two equal signatures mean nothing a reader folds has changed (an append grows
// a segment; a publish adds a name).
func (w *Watcher) scan() [32]byte {
	h := sha256.New()
	var buf [16]byte
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			h.Write([]byte("\x00missing " + dir + "\n"))
			return
		}
		slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range ents {
			name := e.Name()
			if fsutil.IsTempName(name) {
				continue // a publish or a download in progress
			}
			p := filepath.Join(dir, name)
			if e.IsDir() {
				if depth > 0 {
					walk(p, depth-1)
				}
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue // removed since the listing
			}
			h.Write([]byte(p))
			binary.LittleEndian.PutUint64(buf[:8], uint64(fi.Size()))
			binary.LittleEndian.PutUint64(buf[8:], uint64(fi.ModTime().UnixNano()))
			h.Write(buf[:])
		}
	}
	for _, d := range watchedDirs {
		depth := 0
		if d == "ledger" || d == "handins" {
			depth = 1
		}
		walk(filepath.Join(w.root, d), depth)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// WaitFor loads the channel and calls ready on the view, then again after every hint
// of change, until ready reports true or ctx ends (docs/design.md §4 long-poll: callers pass a
// ctx with the wait's deadline). The watcher starts before the first load, so a change
// landing between that load and the wait is never missed.
//
// It returns the view ready accepted and nil; or, when ctx ends first, the last view
// loaded and ctx.Err() (context.DeadlineExceeded when the time ran out,
// context.Canceled when the caller gave up); or the error of a load.
func WaitFor(ctx context.Context, c *fsbus.Channel, opt WatchOptions, ready func(*fsbus.View) bool) (*fsbus.View, error) {
	w := Watch(c, opt)
	defer w.Close()
	for {
		v, err := c.Load()
		if err != nil {
			return nil, err
		}
		if ready(v) {
			return v, nil
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		if opt.OnWait != nil {
			opt.OnWait()
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-w.C:
		}
	}
}
