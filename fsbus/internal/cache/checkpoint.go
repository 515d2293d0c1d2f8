package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// ErrCheckpoint marks a checkpoint file that cannot be used.
var ErrCheckpoint = errors.New("fold checkpoint unusable")

// checkFiled reports a thing of m that is nil or filed under another id than its own.
func checkFiled[T any](m map[string]*T, id func(*T) string) error {
	for k, v := range m {
		if v == nil || id(v) != k {
			return fmt.Errorf("%w: a thing filed under %q is nil or has another id", fold.ErrStateCodec, k)
		}
	}
	return nil
}

func nameOf(a *fold.Agent) string {
	if a == nil {
		return "<nil>"
	}
	return a.Name
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

// DecodeCheckpointRefs is the part of decodeCheckpoint past the state codec's: what
// refers to snap's entries. body is the decoded state; rest the bytes after it.
func DecodeCheckpointRefs(body *CheckpointBody, rest []byte, snap *ledger.Snapshot) (*fold.Folded, *arrivals.Reading, error) {
	d := &fold.StateDec{B: rest}
	// Entry i is the snapshot's, or past them the line i-len(snap.Entries) of the
	// owner's checkpoint's state the fold started from.
	var lines []ledger.Entry
	if b := body.St.Base(); b != nil {
		lines = b.Lines
	}
	held := uint64(len(snap.Entries) + len(lines))
	entryAt := func(i uint64) *ledger.Entry {
		if i < uint64(len(snap.Entries)) {
			return &snap.Entries[i]
		}
		return &lines[i-uint64(len(snap.Entries))]
	}
	ncount := d.Length()
	keys, vals := make([]string, 0, ncount), make([]bool, 0, ncount)
	for range ncount {
		i := d.Uvarint()
		if d.Err != nil || i >= held {
			d.Fail("counted entry %d of %d", i, held)
			break
		}
		h := entryAt(i).Hash()
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
			if d.Err != nil || i >= held {
				d.Fail("entry index %d of %d", i, held)
				return nil
			}
			out = append(out, entryAt(i))
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
	if b := body.St.Base(); b != nil { // a chain whose last record is at or below the cut ends there
		for _, p := range b.Cut {
			e := ledger.AttestedEntry(p.Writer, p.Device, p.Seq, p.Hash)
			f.Tips[[2]string{p.Writer, p.Device}] = &e
		}
	}
	for _, e := range idx() {
		if t := f.Tips[[2]string{e.Writer, e.Device}]; t == nil || e.Seq > t.Seq {
			f.Tips[[2]string{e.Writer, e.Device}] = e
		}
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

// DecodeCheckpoint rebuilds the folded state from a payload, over snap, the ledger
// snapshot restored from ledgerLast. It returns errStateCodec (wrapped) for bytes that
// do not decode or name entries snap does not hold.
func DecodeCheckpoint(b []byte, snap *ledger.Snapshot) (*fold.Folded, *arrivals.Reading, error) {
	var body CheckpointBody
	rest, err := fold.DecodeState(b, &body)
	if err != nil {
		return nil, nil, err
	}
	return DecodeCheckpointRefs(&body, rest, snap)
}

// EncodeCheckpoint encodes f, folded from snap, with the ledger's saved snapshot
// (ledger.ReadState.SaveLast), the time of the full fold it descends from, what the
// owner's checkpoints gave it and the stamps of that checkpoint's files. It
// returns an error when f names an entry snap does not hold or the state does not
// encode; nothing is written then.
func EncodeCheckpoint(f *fold.Folded, snap *ledger.Snapshot, ledgerLast []byte, fullAt time.Time, arr *arrivals.Reading, owner *fold.ChannelFold, stamps []FileStamp) ([]byte, error) {
	at := make(map[string]int, len(snap.Entries))
	for i := range snap.Entries {
		at[snap.Entries[i].Hash()] = i
	}
	st, ok := f.State.ForCache()
	if !ok {
		return nil, fmt.Errorf("%w: a state folded from an owner's checkpoint's state folded here", fold.ErrStateCodec)
	}
	// Entries past the snapshot's: the lines of the owner's checkpoint's state.
	atAll := at
	if bs := st.Base(); bs != nil {
		if owner == nil || owner.Used < 0 {
			return nil, fmt.Errorf("%w: a state folded from an owner's checkpoint without it", fold.ErrStateCodec)
		}
		atAll = make(map[string]int, len(snap.Entries)+len(bs.Lines))
		for i := range bs.Lines {
			atAll[bs.Lines[i].Hash()] = len(snap.Entries) + i
		}
		maps.Copy(atAll, at)
	}
	b := binary.AppendUvarint(nil, uint64(fullAt.UnixMilli()))
	b = fold.AppendStr(b, string(ledgerLast))
	body := CheckpointBody{St: st, Missing: f.Missing, Dangling: f.Dangling, Crossed: f.Crossed, Stamps: stamps}
	if owner != nil {
		body.Owner = &fold.ChannelFold{Chain: owner.Chain, Used: owner.Used, ReadOnly: owner.ReadOnly, Problems: owner.Problems, Cut: owner.Cut}
	}
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
		i, ok := atAll[h]
		if !ok {
			missing = fmt.Errorf("%w: a counted entry %s is not in the snapshot", fold.ErrStateCodec, h)
			return
		}
		counted = append(counted, i)
	})
	if missing != nil {
		return nil, missing
	}
	hashAt := func(i int) string {
		if i < len(snap.Entries) {
			return snap.Entries[i].Hash()
		}
		return st.Base().Lines[i-len(snap.Entries)].Hash()
	}
	fold.SortByHash(counted, hashAt)
	b = binary.AppendUvarint(b, uint64(len(counted)))
	for _, i := range counted {
		b = binary.AppendUvarint(b, uint64(i))
	}
	idx := func(es ...*ledger.Entry) error {
		b = binary.AppendUvarint(b, uint64(len(es)))
		for _, e := range es {
			i, ok := atAll[e.Hash()]
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
		if _, held := atAll[e.Hash()]; held || st.Base() == nil {
			tips = append(tips, e) // else the cut's own entry, which decoding puts back
		}
	}
	if err := idx(tips...); err != nil {
		return nil, err
	}
	return arrivals.Append(b, arr, snap, at), nil
}

// CheckpointBody is what the payload holds past the ledger snapshot, by value.
type CheckpointBody struct {
	St       fold.State
	Missing  map[fold.ObjRef]string
	Dangling map[string][]string
	Crossed  map[string]bool
	// Owner is what the owner's checkpoints gave the fold (its State and Folded nil),
	// nil when the ledger held none.
	Owner *fold.ChannelFold
	// Stamps are the head and core chunks of the checkpoint the state was folded from
	// as they stood when the checkpoint was written: a file whose stamp differs has
	// changed since (they are written once), and the fold is not restored.
	Stamps []FileStamp
}

// FileStamp is a file's path, size and modification time (Unix ns).
type FileStamp struct {
	Path  string
	Size  int64
	Mtime int64
}

// StampFiles stamps each of paths; an error names the first that does not stat.
func StampFiles(paths []string) ([]FileStamp, error) {
	out := make([]FileStamp, 0, len(paths))
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out = append(out, FileStamp{p, fi.Size(), fi.ModTime().UnixNano()})
	}
	return out, nil
}

// CheckStamps returns an error naming the first file of stamps that is gone or whose
// size or modification time differs.
func CheckStamps(stamps []FileStamp) error {
	now, err := StampFiles(func() []string {
		ps := make([]string, len(stamps))
		for i := range stamps {
			ps[i] = stamps[i].Path
		}
		return ps
	}())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	for i := range stamps {
		if now[i] != stamps[i] {
			return fmt.Errorf("%w: %s changed since the fold", ErrCheckpoint, stamps[i].Path)
		}
	}
	return nil
}

// BinaryIdentity tells this binary from another one (16 hex): its module version and
// VCS revision as built, and its executable's size and modification time. A state
// folded by another build — whose fold rules may differ though its types do not — is
// never restored. A binary that cannot name its executable is told apart by its
// build information alone.
var BinaryIdentity = sync.OnceValue(func() string {
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

// StateLayout is a digest of every type the state codec walks from folded: their
// names, kinds and fields in order.
var StateLayout = sync.OnceValue(func() string {
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
	walk(reflect.TypeFor[CheckpointBody]())
	sum := sha256.Sum256([]byte(sb.String()))
	return hex.EncodeToString(sum[:8])
})

const CheckpointHeader = "ferry-fold 2 "
