package fold

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/ferryhq/ferry/ledger"
)

// The state codec (the folded state kept in the local index). The fold's
// State is a graph of plain values — structs with unexported fields, strings, numbers,
// slices, maps with string keys, pointers — that only this package builds. encoding/gob
// and encoding/json see exported fields alone, and a State that came back without its
// unexported fields would fold differently, so the checkpoint encodes every field
// through reflection over the values' memory. The encoding is this binary's own: a
// checkpoint names the binary that wrote it (checkpoint.go) and no other reads it.
//
// Per kind: bool one byte; signed integers zig-zag uvarints; unsigned integers
// uvarints; float64 8 bytes big-endian; a string a uvarint length and the bytes; a
// slice or map 0 for nil, else its length plus one and its elements (map keys then
// values); a pointer 0 for nil, else 1 and the value; an array or struct its elements
// or fields in order. Pointers shared between two places come back as two copies, and
// a cycle is refused (stateMaxDepth). Maps with pointer keys, interfaces, funcs and
// channels are refused, except a nil or empty map with pointer keys (State.decoded,
// nil once Fold returns). A ledger.Entry is 1, its line and its hash, when it
// was read from a line of the usual shape (ledger.Entry.KeptLine), else 0 and its
// fields: its fields are substrings of its line, kept once.
//
// Decoded strings, and the lines and data of kept entries, share the bytes they were
// decoded from (unsafe.String): the caller keeps that buffer unchanged for as long as
// the state lives.

// ErrStateCodec is wrapped by every encode and decode failure of the state codec.
var ErrStateCodec = errors.New("state codec")

// decodePrealloc is the most elements a decoded slice or map is made with before its
// elements have decoded: it grows from there.
const decodePrealloc = 1024

// stateMaxDepth bounds nesting, so a cycle is an error instead of a stack overflow.
const stateMaxDepth = 64

type stateCodec struct {
	enc func(b []byte, p unsafe.Pointer, depth int) ([]byte, error)
	dec func(d *StateDec, p unsafe.Pointer, depth int)
}

var (
	stateCodecs  sync.Map // reflect.Type → *stateCodec, complete ones only
	codecBuildMu sync.Mutex
	codecBuild   = map[reflect.Type]*stateCodec{} // under codecBuildMu, incomplete ones too
)

// codecFor returns the codec of t, building it once.
func codecFor(t reflect.Type) *stateCodec {
	if c, ok := stateCodecs.Load(t); ok {
		return c.(*stateCodec)
	}
	codecBuildMu.Lock()
	defer codecBuildMu.Unlock()
	c := codecLocked(t)
	for t, c := range codecBuild {
		stateCodecs.Store(t, c)
	}
	return c
}

// codecLocked is codecFor under codecBuildMu: a type met again while it is being
// built (a recursive type) gets the codec being filled in.
func codecLocked(t reflect.Type) *stateCodec {
	if c, ok := codecBuild[t]; ok {
		return c
	}
	c := &stateCodec{}
	codecBuild[t] = c
	buildCodec(c, t)
	return c
}

// StateDec reads the encoding; the first failure sticks in err.
type StateDec struct {
	B   []byte `json:"-"`
	Err error  `json:"-"`
}

func (d *StateDec) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: "+format, append([]any{ErrStateCodec}, args...)...)
	}
}

func (d *StateDec) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail("bad uvarint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Length reads a slice, map or string length (plus one when nilable) and checks that
// at least that many bytes remain, so damaged input never allocates much.
func (d *StateDec) Length() int {
	n := d.Uvarint()
	if n > uint64(len(d.B))+1 {
		d.Fail("length %d past the end", n)
		return 0
	}
	return int(n)
}

func (d *StateDec) Take(n int) []byte {
	if d.Err != nil || n > len(d.B) {
		d.Fail("short input")
		return nil
	}
	out := d.B[:n:n]
	d.B = d.B[n:]
	return out
}

func tooDeep(depth int) error {
	if depth > stateMaxDepth {
		return fmt.Errorf("%w: nested deeper than %d (a cycle?)", ErrStateCodec, stateMaxDepth)
	}
	return nil
}

func buildCodec(c *stateCodec, t reflect.Type) {
	switch t.Kind() {
	case reflect.Bool:
		c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			if *(*bool)(p) {
				return append(b, 1), nil
			}
			return append(b, 0), nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, _ int) {
			v := d.Take(1)
			if len(v) == 1 {
				*(*bool)(p) = v[0] == 1
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			return binary.AppendVarint(b, reflect.NewAt(t, p).Elem().Int()), nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, _ int) {
			if d.Err != nil {
				return
			}
			v, n := binary.Varint(d.B)
			if n <= 0 {
				d.Fail("bad varint")
				return
			}
			d.B = d.B[n:]
			reflect.NewAt(t, p).Elem().SetInt(v)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			return binary.AppendUvarint(b, reflect.NewAt(t, p).Elem().Uint()), nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, _ int) {
			reflect.NewAt(t, p).Elem().SetUint(d.Uvarint())
		}
	case reflect.Float64:
		c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			return binary.BigEndian.AppendUint64(b, math.Float64bits(*(*float64)(p))), nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, _ int) {
			if v := d.Take(8); len(v) == 8 {
				*(*float64)(p) = math.Float64frombits(binary.BigEndian.Uint64(v))
			}
		}
	case reflect.String:
		c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			s := *(*string)(p)
			b = binary.AppendUvarint(b, uint64(len(s)))
			return append(b, s...), nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, _ int) {
			n := d.Length()
			if v := d.Take(n); len(v) > 0 {
				*(*string)(p) = unsafe.String(&v[0], len(v))
			}
		}
	case reflect.Slice:
		buildSlice(c, t)
	case reflect.Array:
		elem, size := codecLocked(t.Elem()), t.Elem().Size()
		c.enc = func(b []byte, p unsafe.Pointer, depth int) ([]byte, error) {
			var err error
			for i := range t.Len() {
				if b, err = elem.enc(b, unsafe.Add(p, uintptr(i)*size), depth+1); err != nil {
					return nil, err
				}
			}
			return b, nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, depth int) {
			for i := 0; i < t.Len() && d.Err == nil; i++ {
				elem.dec(d, unsafe.Add(p, uintptr(i)*size), depth+1)
			}
		}
	case reflect.Map:
		buildMap(c, t)
	case reflect.Pointer:
		elem := codecLocked(t.Elem())
		c.enc = func(b []byte, p unsafe.Pointer, depth int) ([]byte, error) {
			if err := tooDeep(depth); err != nil {
				return nil, err
			}
			q := *(*unsafe.Pointer)(p)
			if q == nil {
				return append(b, 0), nil
			}
			return elem.enc(append(b, 1), q, depth+1)
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, depth int) {
			v := d.Take(1)
			if len(v) == 0 || v[0] == 0 {
				return
			}
			if depth > stateMaxDepth {
				d.Fail("nested too deep")
				return
			}
			q := reflect.New(t.Elem()).UnsafePointer()
			elem.dec(d, q, depth+1)
			*(*unsafe.Pointer)(p) = q
		}
	case reflect.Struct:
		if t == entryType {
			buildEntry(c, t)
			return
		}
		buildStruct(c, t)
	default:
		unsupported(c, t)
	}
}

func buildStruct(c *stateCodec, t reflect.Type) {
	type field struct {
		off uintptr
		c   *stateCodec
	}
	fields := make([]field, t.NumField())
	for i := range fields {
		f := t.Field(i)
		fields[i] = field{f.Offset, codecLocked(f.Type)}
	}
	c.enc = func(b []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		var err error
		for _, f := range fields {
			if b, err = f.c.enc(b, unsafe.Add(p, f.off), depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	c.dec = func(d *StateDec, p unsafe.Pointer, depth int) {
		for _, f := range fields {
			if d.Err != nil {
				return
			}
			f.c.dec(d, unsafe.Add(p, f.off), depth+1)
		}
	}
}

var entryType = reflect.TypeFor[ledger.Entry]()

// buildEntry builds the codec of a ledger entry: 1, its kept line and hash when
// ledger.Entry.KeptLine has them (the entry comes back by ledger.FromKeptLine, its
// strings over the line's bytes), else 0 and its fields as any struct's.
func buildEntry(c *stateCodec, t reflect.Type) {
	fields := &stateCodec{}
	buildStruct(fields, t)
	c.enc = func(b []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		if line, hash, ok := (*ledger.Entry)(p).KeptLine(); ok {
			b = AppendStr(append(b, 1), string(line))
			return AppendStr(b, hash), nil
		}
		return fields.enc(append(b, 0), p, depth)
	}
	c.dec = func(d *StateDec, p unsafe.Pointer, depth int) {
		tag := d.Take(1)
		switch {
		case len(tag) == 0:
		case tag[0] == 0:
			fields.dec(d, p, depth)
		case tag[0] == 1:
			line := d.Take(d.Length())
			hash := d.Take(d.Length())
			if d.Err != nil {
				return
			}
			e, ok := ledger.FromKeptLine(line, unsafe.String(unsafe.SliceData(hash), len(hash)))
			if !ok {
				d.Fail("a kept entry line that does not parse")
				return
			}
			*(*ledger.Entry)(p) = e
		default:
			d.Fail("entry tag %d", tag[0])
		}
	}
}

func unsupported(c *stateCodec, t reflect.Type) {
	c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
		return nil, fmt.Errorf("%w: cannot encode a %s", ErrStateCodec, t)
	}
	c.dec = func(d *StateDec, p unsafe.Pointer, _ int) { d.Fail("cannot decode a %s", t) }
}

func buildSlice(c *stateCodec, t reflect.Type) {
	if t.Elem().Kind() == reflect.Uint8 { // []byte and named byte slices: one copy
		c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			s := *(*[]byte)(p)
			if s == nil {
				return append(b, 0), nil
			}
			b = binary.AppendUvarint(b, uint64(len(s))+1)
			return append(b, s...), nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, _ int) {
			n := d.Length()
			if n == 0 {
				return
			}
			v := d.Take(n - 1)
			if d.Err == nil {
				*(*[]byte)(p) = append(make([]byte, 0, n-1), v...)
			}
		}
		return
	}
	elem, size := codecLocked(t.Elem()), t.Elem().Size()
	c.enc = func(b []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		v := reflect.NewAt(t, p).Elem()
		if v.IsNil() {
			return append(b, 0), nil
		}
		n := v.Len()
		b = binary.AppendUvarint(b, uint64(n)+1)
		base := v.UnsafePointer()
		var err error
		for i := range n {
			if b, err = elem.enc(b, unsafe.Add(base, uintptr(i)*size), depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	c.dec = func(d *StateDec, p unsafe.Pointer, depth int) {
		n := d.Length()
		if n == 0 || d.Err != nil {
			return
		}
		// Grown as elements decode, not made at the claimed length up front: damaged
		// input claiming a long slice of large elements runs out of bytes first.
		s := reflect.MakeSlice(t, 0, min(n-1, decodePrealloc))
		for i := 0; i < n-1 && d.Err == nil; i++ {
			if i == s.Cap() {
				g := reflect.MakeSlice(t, i, min(n-1, 2*i))
				reflect.Copy(g, s)
				s = g
			}
			s = s.Slice(0, i+1)
			elem.dec(d, unsafe.Add(s.UnsafePointer(), uintptr(i)*size), depth+1)
		}
		reflect.NewAt(t, p).Elem().Set(s)
	}
}

func buildMap(c *stateCodec, t reflect.Type) {
	if k := t.Key().Kind(); k == reflect.Pointer || k == reflect.Interface {
		// Only nil or empty (State.decoded): pointer identity does not survive a copy.
		c.enc = func(b []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			if reflect.NewAt(t, p).Elem().Len() > 0 {
				return nil, fmt.Errorf("%w: cannot encode a non-empty %s", ErrStateCodec, t)
			}
			return append(b, 0), nil
		}
		c.dec = func(d *StateDec, p unsafe.Pointer, _ int) {
			if v := d.Take(1); len(v) == 1 && v[0] != 0 {
				d.Fail("a non-empty %s", t)
			}
		}
		return
	}
	key, val := codecLocked(t.Key()), codecLocked(t.Elem())
	c.enc = func(b []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		m := reflect.NewAt(t, p).Elem()
		if m.IsNil() {
			return append(b, 0), nil
		}
		b = binary.AppendUvarint(b, uint64(m.Len())+1)
		k, v := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
		it := m.MapRange()
		var err error
		for it.Next() {
			k.SetIterKey(it)
			v.SetIterValue(it)
			if b, err = key.enc(b, k.Addr().UnsafePointer(), depth+1); err != nil {
				return nil, err
			}
			if b, err = val.enc(b, v.Addr().UnsafePointer(), depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	c.dec = func(d *StateDec, p unsafe.Pointer, depth int) {
		n := d.Length()
		if n == 0 || d.Err != nil {
			return
		}
		m := reflect.MakeMapWithSize(t, min(n-1, decodePrealloc))
		for i := 0; i < n-1 && d.Err == nil; i++ {
			k, v := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			key.dec(d, k.Addr().UnsafePointer(), depth+1)
			val.dec(d, v.Addr().UnsafePointer(), depth+1)
			m.SetMapIndex(k, v)
		}
		reflect.NewAt(t, p).Elem().Set(m)
	}
}

// EncodeState appends the encoding of *v to b.
func EncodeState[T any](b []byte, v *T) ([]byte, error) {
	return codecFor(reflect.TypeFor[T]()).enc(b, unsafe.Pointer(v), 0)
}

// DecodeState decodes one T from the front of b into *v and returns the rest of b. It
// returns errStateCodec (wrapped) when b does not decode; *v is then partly set and
// must not be used. Strings in *v share b's bytes.
func DecodeState[T any](b []byte, v *T) ([]byte, error) {
	d := &StateDec{B: b}
	codecFor(reflect.TypeFor[T]()).dec(d, unsafe.Pointer(v), 0)
	return d.B, d.Err
}

// SortByHash sorts xs by hash(x) as text. Entry hashes share the "sha256:" prefix,
// so the 8 bytes after it, read as a big-endian number, order them but for a tie once
// in billions, which the whole text settles: one integer comparison per step instead
// of a string comparison over the shared prefix.
func SortByHash[T any](xs []T, hash func(T) string) {
	const prefix = "sha256:"
	for _, x := range xs {
		if h := hash(x); len(h) < len(prefix)+8 || h[:len(prefix)] != prefix {
			slices.SortFunc(xs, func(a, b T) int { return strings.Compare(hash(a), hash(b)) })
			return
		}
	}
	type keyed struct {
		k uint64
		x T
	}
	ks := make([]keyed, len(xs))
	for i, x := range xs {
		h := hash(x)
		ks[i] = keyed{binary.BigEndian.Uint64([]byte(h[len(prefix) : len(prefix)+8])), x}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if a.k != b.k {
			return cmp.Compare(a.k, b.k)
		}
		return strings.Compare(hash(a.x), hash(b.x))
	})
	for i := range ks {
		xs[i] = ks[i].x
	}
}

// AppendStr appends s to b as the state codec writes a string: its length as a
// uvarint, then its bytes (what StateDec reads back).
func AppendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
