package fsbus

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
	"github.com/gofrs/flock"
)

// The fold checkpoint (docs/format.md §18 "The fold checkpoint"; ADR 0011): catch-up
// and claims cost O(new entries). A process that folded the channel keeps
// what it folded in the cache dir beside the index:
//
//	<cache>/channels/<project>/fold-<first 16 hex of sha256(channel root)>.bin
//
// so that the next process — one `ferry order claim`, one `ferry catchup` — starts
// from it instead of folding every entry again: it restores the ledger snapshot the
// fold was made from (ledger.ReadState.RestoreLast, references into the index's
// records), reads only what was appended since, and folds only the things that touched
// (foldDelta, ADR 0010).
//
// The file is the header line "ferry-fold 1 <layout>-<binary> <project> <master
// key>\n", the payload, and the payload's CRC-32C (frameSum, as the index's frames).
// <layout> is a digest of the Go types the state codec walks (snapcodec.go), <binary>
// one of this build (binaryIdentity): a checkpoint is read only by the binary that
// wrote it, whose types and fold rules are those it was written with. The payload:
// the Unix ms of the last full fold the state descends from; the ledger's saved
// snapshot (length-prefixed); the State through the state codec; its counted entries
// as indexes into the snapshot's entries in the order of their hashes; the roster,
// each thing's entries and each chain's tip as indexes into the snapshot's entries;
// the arrival log as read (appendArrivals).
//
// Trust: the checkpoint is as trusted as the index (machine-local cache). It is used
// only when its checksum, header and ledger snapshot all match the index just opened;
// anything else — missing, damaged, another binary's, a segment read again since — is
// ignored and the process folds everything, writing a new one. It is also ignored once
// its full fold is older than CheckpointTrust: a full fold re-reads every object file
// and re-hashes every segment byte the index covers, which is how a file changed in
// place behind ferry's back (objects are written once) is found.

// checkpointTrust is how long after a full fold a new process may start from the
// checkpoint that fold left, instead of folding everything again (ADR 0011). A running
// process folds everything every FullFoldEvery.
const checkpointTrust = 10 * time.Minute

// checkpointEvery is how many entries a process folds through foldDelta after the
// last checkpoint before it writes a new one: what a new process's first Load folds
// on top of a checkpoint is bounded by about this plus what arrived since.
const checkpointEvery = 2000

const checkpointHeader = "ferry-fold 1 "

// checkpointPath is the channel's checkpoint file.
func (c *Channel) checkpointPath() string {
	sum := sha256.Sum256([]byte(c.Root))
	return filepath.Join(c.Home.StateDir(c.Project()), "fold-"+hex.EncodeToString(sum[:8])+".bin")
}

// stateLayout is a digest of every type the state codec walks from folded: their
// names, kinds and fields in order.
var stateLayout = sync.OnceValue(func() string {
	var sb strings.Builder
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		fmt.Fprintf(&sb, "%s/%s/%d;", t.String(), t.Kind(), t.Size())
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				fmt.Fprintf(&sb, "%s@%d:", f.Name, f.Offset)
				walk(f.Type)
			}
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		}
	}
	walk(reflect.TypeFor[fold.Folded]())
	sum := sha256.Sum256([]byte(sb.String()))
	return hex.EncodeToString(sum[:8])
})

// checkpointHead is the checkpoint's header line for this binary and channel.
func (c *Channel) checkpointHead() string {
	return checkpointHeader + stateLayout() + "-" + binaryIdentity() + " " + c.Project() + " " + ledger.FormatKey(c.MasterKey) + "\n"
}

// binaryIdentity tells this binary from another one (16 hex): its module version and
// VCS revision as built, and its executable's size and modification time. A state
// folded by another build — whose fold rules may differ though its types do not — is
// never restored. A binary that cannot name its executable is told apart by its
// build information alone.
var binaryIdentity = sync.OnceValue(func() string {
	var sb strings.Builder
	if info, ok := debug.ReadBuildInfo(); ok {
		sb.WriteString(info.Main.Path + "@" + info.Main.Version)
		for _, s := range info.Settings {
			if strings.HasPrefix(s.Key, "vcs.") {
				sb.WriteString(" " + s.Key + "=" + s.Value)
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			fmt.Fprintf(&sb, " %d %d", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	sum := sha256.Sum256([]byte(sb.String()))
	return hex.EncodeToString(sum[:8])
})

// checkpointBody is what the payload holds past the ledger snapshot, by value.
type checkpointBody struct {
	St       fold.State
	Missing  map[fold.ObjRef]string
	Dangling map[string][]string
	Crossed  map[string]bool
}

// encodeCheckpoint encodes f, folded from snap, with the ledger's saved snapshot
// (ledger.ReadState.SaveLast) and the time of the full fold it descends from. It
// returns an error when f names an entry snap does not hold or the state does not
// encode; nothing is written then.
func encodeCheckpoint(f *fold.Folded, snap *ledger.Snapshot, ledgerLast []byte, fullAt time.Time, arr *arrivals.Reading) ([]byte, error) {
	at := make(map[string]int, len(snap.Entries))
	for i := range snap.Entries {
		at[snap.Entries[i].Hash()] = i
	}
	b := binary.AppendUvarint(nil, uint64(fullAt.UnixMilli()))
	b = fold.AppendStr(b, string(ledgerLast))
	body := checkpointBody{St: *f.State, Missing: f.Missing, Dangling: f.Dangling, Crossed: f.Crossed}
	body.St.Counted = fold.Layered[bool]{}
	var err error
	if b, err = fold.EncodeState(b, &body); err != nil {
		return nil, err
	}
	// The counted entries: their indexes in snap.Entries, in the order of their hashes
	// (the restored set is searched, not hashed: layered's sorted base).
	var counted []int
	var missing error
	f.State.Counted.All(func(h string, c bool) {
		if !c {
			return
		}
		i, ok := at[h]
		if !ok {
			missing = fmt.Errorf("%w: a counted entry %s is not in the snapshot", fold.ErrStateCodec, h)
			return
		}
		counted = append(counted, i)
	})
	if missing != nil {
		return nil, missing
	}
	fold.SortByHash(counted, func(i int) string { return snap.Entries[i].Hash() })
	b = binary.AppendUvarint(b, uint64(len(counted)))
	for _, i := range counted {
		b = binary.AppendUvarint(b, uint64(i))
	}
	idx := func(es ...*ledger.Entry) error {
		b = binary.AppendUvarint(b, uint64(len(es)))
		for _, e := range es {
			i, ok := at[e.Hash()]
			if !ok {
				return fmt.Errorf("%w: entry %s is not in the snapshot", fold.ErrStateCodec, e.Hash())
			}
			b = binary.AppendUvarint(b, uint64(i))
		}
		return nil
	}
	roster := make([]*ledger.Entry, len(f.Roster))
	for i := range f.Roster {
		roster[i] = &f.Roster[i]
	}
	if err := idx(roster...); err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, uint64(len(f.Things)))
	for k, es := range f.Things {
		b = fold.AppendStr(b, k)
		if err := idx(es...); err != nil {
			return nil, err
		}
	}
	tips := make([]*ledger.Entry, 0, len(f.Tips))
	for _, e := range f.Tips {
		tips = append(tips, e)
	}
	if err := idx(tips...); err != nil {
		return nil, err
	}
	return arrivals.Append(b, arr, snap, at), nil
}

// decodeCheckpoint rebuilds the folded state from a payload, over snap, the ledger
// snapshot restored from ledgerLast. It returns errStateCodec (wrapped) for bytes that
// do not decode or name entries snap does not hold.
func decodeCheckpoint(b []byte, snap *ledger.Snapshot) (*fold.Folded, *arrivals.Reading, error) {
	var body checkpointBody
	rest, err := fold.DecodeState(b, &body)
	if err != nil {
		return nil, nil, err
	}
	return decodeCheckpointRefs(&body, rest, snap)
}

// decodeCheckpointRefs is the part of decodeCheckpoint past the state codec's: what
// refers to snap's entries. body is the decoded state; rest the bytes after it.
func decodeCheckpointRefs(body *checkpointBody, rest []byte, snap *ledger.Snapshot) (*fold.Folded, *arrivals.Reading, error) {
	d := &fold.StateDec{B: rest}
	ncount := d.Length()
	keys, vals := make([]string, 0, ncount), make([]bool, 0, ncount)
	for range ncount {
		i := d.Uvarint()
		if d.Err != nil || i >= uint64(len(snap.Entries)) {
			d.Fail("counted entry %d of %d", i, len(snap.Entries))
			break
		}
		h := snap.Entries[i].Hash()
		if n := len(keys); n > 0 && keys[n-1] >= h {
			d.Fail("counted entries out of order")
			break
		}
		keys, vals = append(keys, h), append(vals, true)
	}
	idx := func() []*ledger.Entry {
		n := d.Length()
		var out []*ledger.Entry
		for range n {
			i := d.Uvarint()
			if d.Err != nil || i >= uint64(len(snap.Entries)) {
				d.Fail("entry index %d of %d", i, len(snap.Entries))
				return nil
			}
			out = append(out, &snap.Entries[i])
		}
		return out
	}
	f := &fold.Folded{Missing: body.Missing, Dangling: body.Dangling, Crossed: body.Crossed, Things: map[string][]*ledger.Entry{}, Tips: map[[2]string]*ledger.Entry{}}
	for _, e := range idx() {
		f.Roster = append(f.Roster, *e)
	}
	nthing := d.Length()
	for i := 0; i < nthing && d.Err == nil; i++ {
		k := string(d.Take(d.Length()))
		f.Things[k] = idx()
	}
	for _, e := range idx() {
		f.Tips[[2]string{e.Writer, e.Device}] = e
	}
	arr := arrivals.Decode(d, snap)
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, nil, d.Err
	}
	st := body.St
	if err := checkDecodedState(&st); err != nil {
		return nil, nil, err
	}
	st.Counted = fold.SortedLayered(keys, vals)
	if f.Missing == nil {
		f.Missing = map[fold.ObjRef]string{}
	}
	f.State = &st
	return f, arr, nil
}

// checkDecodedState checks what every reader of a State takes for granted and a
// payload that passes its checksum may still break (a bug, a hand edit): each thing is
// filed under its own id, no entry of a map is nil, the primary role is there. It
// returns errStateCodec (wrapped) naming the first break.
func checkDecodedState(st *fold.State) error {
	if st.Primary == nil {
		return fmt.Errorf("%w: no primary role", fold.ErrStateCodec)
	}
	for k, a := range st.Agents {
		if a == nil || a.Name != k {
			return fmt.Errorf("%w: agent %q filed under %q", fold.ErrStateCodec, nameOf(a), k)
		}
	}
	if err := checkFiled(st.Orders, func(o *fold.Order) string { return o.ID }); err != nil {
		return err
	}
	if err := checkFiled(st.Messages, func(m *fold.Message) string { return m.ID }); err != nil {
		return err
	}
	if err := checkFiled(st.Asks, func(a *fold.Ask) string { return a.ID }); err != nil {
		return err
	}
	return checkFiled(st.Handins, func(h *fold.Handin) string { return h.ID })
}

func nameOf(a *fold.Agent) string {
	if a == nil {
		return "<nil>"
	}
	return a.Name
}

// checkFiled reports a thing of m that is nil or filed under another id than its own.
func checkFiled[T any](m map[string]*T, id func(*T) string) error {
	for k, v := range m {
		if v == nil || id(v) != k {
			return fmt.Errorf("%w: a thing filed under %q is nil or has another id", fold.ErrStateCodec, k)
		}
	}
	return nil
}

// errCheckpoint marks a checkpoint file that cannot be used.
var errCheckpoint = errors.New("fold checkpoint unusable")

// readCheckpoint reads the checkpoint file's header and payload, checking its
// checksum. It returns errCheckpoint (wrapped) for a missing, damaged or foreign
// file, and the full fold time and the payload past it otherwise.
func (c *Channel) readCheckpoint() (fullAt time.Time, ledgerLast, body []byte, err error) {
	raw, err := os.ReadFile(c.checkpointPath())
	if err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("%w: %v", errCheckpoint, err)
	}
	head := c.checkpointHead()
	if !bytes.HasPrefix(raw, []byte(head)) || len(raw) < len(head)+frameSumSize {
		return time.Time{}, nil, nil, fmt.Errorf("%w: header", errCheckpoint)
	}
	payload, sum := raw[len(head):len(raw)-frameSumSize], raw[len(raw)-frameSumSize:]
	if s := frameSum(payload); !bytes.Equal(s[:], sum) {
		return time.Time{}, nil, nil, fmt.Errorf("%w: checksum", errCheckpoint)
	}
	d := &fold.StateDec{B: payload}
	ms := d.Uvarint()
	ledgerLast = d.Take(d.Length())
	if d.Err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("%w: %v", errCheckpoint, d.Err)
	}
	return time.UnixMilli(int64(ms)), ledgerLast, d.B, nil
}

// writeCheckpoint writes the checkpoint of f, folded from snap, whose last full fold
// was at fullAt, under the flock index.lock, atomically (fsutil.WriteFile). It does
// nothing when the index is off or its last snapshot is not snap (the last read was
// verified — a fork — or another read came after). A failure is returned and costs only the next process a full fold.
func (c *Channel) writeCheckpoint(f *fold.Folded, snap *ledger.Snapshot, fullAt time.Time, arr *arrivals.Reading) error {
	if !indexEnabled() {
		return nil
	}
	ix := c.localIndex()
	ix.mu.Lock()
	var last []byte
	if ix.rs != nil && ix.rs.Last() == snap { // the references must be into snap's entries
		last = ix.rs.SaveLast()
	}
	ix.mu.Unlock()
	if last == nil {
		return nil
	}
	payload, err := encodeCheckpoint(f, snap, last, fullAt, arr)
	if err != nil {
		return err
	}
	head := c.checkpointHead()
	sum := frameSum(payload)
	out := make([]byte, 0, len(head)+len(payload)+len(sum))
	out = append(append(append(out, head...), payload...), sum[:]...)
	lockDir := c.Home.LockDir(c.Project())
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return fmt.Errorf("creating lock dir: %w", err)
	}
	lk := flock.New(filepath.Join(lockDir, "index.lock"))
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("locking the local index: %w", err)
	}
	defer lk.Unlock()
	if err := fsutil.WriteFile(c.checkpointPath(), out, 0o644); err != nil {
		return fmt.Errorf("writing the fold checkpoint: %w", err)
	}
	return nil
}

// restoredFold is a fold checkpoint restored over the index just opened.
type restoredFold struct {
	snap   *ledger.Snapshot
	fold   *fold.Folded
	fullAt time.Time
	arr    *arrivals.Reading // the arrival log as the checkpoint's process read it (nil: none)
}

// restoreCheckpoint is called when a process opens the index (localIndex.open): when
// the checkpoint matches the index and its full fold is younger than CheckpointTrust,
// it returns it, and the process's first Load folds only what is new on top of it.
// The caller then skips the full check of segment bytes (CheckPrefixes) the
// checkpoint's full fold made. nil means: fold everything.
func (c *Channel) restoreCheckpoint(rs *ledger.ReadState, pre *checkpointRead) *restoredFold {
	if pre == nil {
		return nil
	}
	snap, err := rs.RestoreLast(pre.last)
	if err != nil {
		return nil
	}
	f, arr, err := decodeCheckpointRefs(&pre.body, pre.rest, snap)
	if err != nil {
		rs.RestoreLast(nil) // drops the restored snapshot again
		return nil
	}
	return &restoredFold{snap, f, pre.fullAt, arr}
}

// checkpointRead is the part of a checkpoint read before the index is: what does not
// refer to the index's records.
type checkpointRead struct {
	fullAt time.Time
	last   []byte // the ledger's saved snapshot
	body   checkpointBody
	rest   []byte // what refers to the snapshot's entries (decodeCheckpointRefs)
}

// readCheckpointState reads the checkpoint file and decodes its state, when it is good
// and its full fold is younger than CheckpointTrust (and not over a minute ahead of
// this machine's clock); nil otherwise. It needs nothing from the index, so
// localIndex.open runs it beside reading the index.
func (c *Channel) readCheckpointState() *checkpointRead {
	fullAt, last, body, err := c.readCheckpoint()
	if err != nil || time.Since(fullAt) >= checkpointTrust || time.Until(fullAt) > time.Minute {
		return nil
	}
	pre := &checkpointRead{fullAt: fullAt, last: last}
	if pre.rest, err = fold.DecodeState(body, &pre.body); err != nil {
		return nil
	}
	return pre
}
