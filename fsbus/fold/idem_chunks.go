package fold

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/ledger"
)

// The idempotency keys at a checkpoint's cut, in chunks (docs/format.md §20 "The
// state"): every key any entry at or below the cut took, with the entry that took it
// first, sorted by writer then key and packed in that order into chunks of at most
// thingsMax records and chunkMax bytes. A record's label is its writer, a space and
// its key (names and keys hold no space, so labels sort as (writer, key) pairs); the
// head lists each chunk's first label and hash (Head.Idem). A write looks its key up in
// the one chunk whose range holds it, and so does the fold for an entry above the cut
// that carries a key. Each chunk is the RFC 8785 encoding of
// {"idem": [{writer, key, args, hash, ref, hlc}, …], "v": BaseVersion}.

// idemChunkJSON is an idempotency chunk's encoded form.
type idemChunkJSON struct {
	V    int        `json:"v"`
	Idem []idemJSON `json:"idem"`
}

// idemLabel is the label of the idempotency key k (writer + "\x00" + key).
func idemLabel(k string) string { return strings.Replace(k, "\x00", " ", 1) }

// EncodeIdem packs b's idempotency keys into chunks and returns each chunk's bytes
// and ref, in label order.
func EncodeIdem(b *Base) ([][]byte, []ChunkRef, error) {
	all, err := b.AllIdem()
	if err != nil {
		return nil, nil, err
	}
	keys := slices.SortedFunc(maps.Keys(all), func(x, y string) int { return strings.Compare(idemLabel(x), idemLabel(y)) })
	var out [][]byte
	var refs []ChunkRef
	overhead := len(fmt.Sprintf(`{"idem":[],"v":%d}`, BaseVersion))
	for len(keys) > 0 {
		j := idemChunkJSON{V: BaseVersion}
		size := overhead
		n := 0
		for n < len(keys) && n < thingsMax {
			rec := idemJSON(all[keys[n]])
			v, err := ledger.Canonical(rec)
			if err != nil {
				return nil, nil, err
			}
			if n > 0 && size+len(v)+1 > chunkMax {
				break
			}
			size += len(v) + 1
			j.Idem = append(j.Idem, rec)
			n++
		}
		c, err := ledger.Canonical(j)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, c)
		refs = append(refs, ChunkRef{First: idemLabel(keys[0]), Hash: ledger.HashBytes(c)})
		keys = keys[n:]
	}
	return out, refs, nil
}

// checkIdemRefs checks a head's idempotency chunk refs: labels of a writer and a key,
// strictly ascending.
func checkIdemRefs(refs []ChunkRef) error {
	for i, r := range refs {
		w, k, ok := strings.Cut(r.First, " ")
		if !ok || !ledger.ValidName(w) || k == "" {
			return fmt.Errorf("head names an idempotency chunk whose first label %q is not a writer and a key", r.First)
		}
		if i > 0 && refs[i-1].First >= r.First {
			return fmt.Errorf("head's idempotency chunks are not in ascending order at %q", r.First)
		}
		if !strings.HasPrefix(r.Hash, "sha256:") || len(r.Hash) != len("sha256:")+64 {
			return fmt.Errorf("head names an idempotency chunk with a bad hash %q", r.Hash)
		}
	}
	return nil
}

// decodeIdem is an idempotency chunk's decode: its labels strictly ascending from its
// ref's first up to next, its canonical form.
func (b *Base) decodeIdem(raw []byte, i int, next string) error {
	ref := b.idem.refs[i]
	var j idemChunkJSON
	if err := decodeChunk(raw, &j, &j.V); err != nil {
		return err
	}
	if len(j.Idem) == 0 {
		return fmt.Errorf("holds no idempotency key")
	}
	prev := ""
	for n, r := range j.Idem {
		l := r.Writer + " " + r.Key
		switch {
		case !ledger.ValidName(r.Writer) || r.Key == "" || strings.Contains(r.Key, " "):
			return fmt.Errorf("holds a bad idempotency record %q", l)
		case n == 0 && l != ref.First, n > 0 && l <= prev, next != "" && l >= next:
			return fmt.Errorf("holds labels outside its range [%s, %s) or out of order at %q", ref.First, next, l)
		}
		prev = l
	}
	if c, err := ledger.Canonical(j); err != nil || string(c) != string(raw) {
		return fmt.Errorf("is not in its canonical encoding (RFC 8785)")
	}
	for _, r := range j.Idem {
		b.Idem[r.Writer+"\x00"+r.Key] = IdemRec(r)
	}
	return nil
}

// idemRec returns the record of idempotency key k (writer + "\x00" + key) at the cut,
// reading the one chunk whose range holds it; err when that chunk does not read or
// check (the key may be in it).
func (b *Base) idemRec(k string) (IdemRec, bool, error) {
	if b == nil {
		return IdemRec{}, false, nil
	}
	if s := b.idem; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		i := s.chunkFor(idemLabel(k))
		s.ensure(i)
		if err := s.failed[i]; err != nil {
			return IdemRec{}, false, err
		}
	}
	r, ok := b.Idem[k]
	return r, ok, nil
}

// AllIdem reads every idempotency chunk not read yet and returns every key at the cut,
// or the first chunk that did not read or check.
func (b *Base) AllIdem() (map[string]IdemRec, error) {
	if s := b.idem; s != nil {
		s.mu.Lock()
		err := s.ensureAll()
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return b.Idem, nil
}

// IdemGet returns the record of idempotency key k (writer + "\x00" + key): one an
// entry folded here took, else the one the checkpoint's state holds. A chunk that
// does not read counts as holding no key; the fold that read it is then not folded
// from (Base.Err), and a write checks with IdemLookup.
func (st *State) IdemGet(k string) (IdemRec, bool) {
	r, ok, _ := st.IdemLookup(k)
	return r, ok
}

// IdemLookup is IdemGet for a write: err when the checkpoint's chunk that may hold k
// does not read or check, so the write cannot tell a replay from a new call.
func (st *State) IdemLookup(k string) (IdemRec, bool, error) {
	if r, ok := st.Idem.Get(k); ok {
		return r, true, nil
	}
	return st.base.idemRec(k)
}

// AllIdem returns every idempotency key by writer + "\x00" + key: those the
// checkpoint's state holds (every idempotency chunk read) and those entries folded
// here took.
func (st *State) AllIdem() map[string]IdemRec {
	out := map[string]IdemRec{}
	if st.base != nil {
		all, _ := st.base.AllIdem() // a chunk that does not read: Base.Err, doctor
		maps.Copy(out, all)
	}
	st.Idem.All(func(k string, v IdemRec) { out[k] = v })
	return out
}
