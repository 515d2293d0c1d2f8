package arrivals

import (
	"encoding/binary"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/ledger"
)

// decodeArrivals reads what appendArrivals wrote over snap; nil when the checkpoint
// holds no arrival log.
func Decode(d *fold.StateDec, snap *ledger.Snapshot) *Reading {
	has := d.Take(1)
	if d.Err != nil || has[0] == 0 {
		return nil
	}
	var head checkpointArrivals
	if d.B, d.Err = fold.DecodeState(d.B, &head); d.Err != nil {
		return nil
	}
	n := d.Length()
	keys, vals := make([]string, 0, n), make([]arrival, 0, n)
	for range n {
		var h, writer string
		if i := d.Uvarint(); i > 0 && i <= uint64(len(snap.Entries)) {
			h, writer = snap.Entries[i-1].Hash(), snap.Entries[i-1].Writer
		} else if i == 0 {
			h, writer = string(d.Take(d.Length())), string(d.Take(d.Length()))
		} else {
			d.Fail("arrival of entry %d of %d", i, len(snap.Entries))
		}
		num := d.Uvarint()
		ms, k := binary.Varint(d.B)
		if k <= 0 {
			d.Fail("arrival time")
		}
		if d.Err != nil {
			return nil
		}
		d.B = d.B[k:]
		ep := d.Uvarint()
		if d.Err != nil || ep > uint64(head.Clocks) {
			d.Fail("clock lines before arrival %d", num)
			return nil
		}
		if m := len(keys); m > 0 && keys[m-1] >= h {
			d.Fail("arrivals out of order")
			return nil
		}
		keys, vals = append(keys, h), append(vals, arrival{num, ms, writer, int(ep)})
	}
	a := &Log{LogID: head.LogID, Last: head.N, recs: fold.SortedLayered(keys, vals), latest: cloneLatest(head.Latest),
		clocks: head.Clocks, clock: head.Clock}
	return &Reading{Log: a, header: head.Header, offset: head.Offset, last: head.Last}
}

// appendArrivals appends the arrival log as arr read it (0 when there is none): its
// header, offset, last line, log id, highest number, each writer's newest line and the
// clock lines' count and last (ADR 0013), then its records in
// the order of their hashes, each as the index of its entry in snap (plus one) or 0 and
// the hash and writer when snap does not hold it (or another writer), then its arrival
// number, time and count of clock lines before it. Most records are the snapshot's: a few bytes each and no hash.
func Append(b []byte, arr *Reading, snap *ledger.Snapshot, at map[string]int) []byte {
	if arr == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	head := checkpointArrivals{Header: arr.header, LogID: arr.Log.LogID, Offset: arr.offset, Last: arr.last, N: arr.Log.Last,
		Latest: arr.Log.latest, Clocks: arr.Log.clocks, Clock: arr.Log.clock}
	b, _ = fold.EncodeState(b, &head) // plain values: cannot fail
	type rec struct {
		h string
		r arrival
	}
	recs := make([]rec, 0, arr.Log.recs.Len())
	arr.Log.recs.All(func(h string, r arrival) { recs = append(recs, rec{h, r}) })
	fold.SortByHash(recs, func(x rec) string { return x.h })
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, x := range recs {
		if i, ok := at[x.h]; ok && snap.Entries[i].Writer == x.r.writer {
			b = binary.AppendUvarint(b, uint64(i)+1)
		} else {
			b = append(b, 0)
			b = fold.AppendStr(b, x.h)
			b = fold.AppendStr(b, x.r.writer)
		}
		b = binary.AppendUvarint(b, x.r.n)
		b = binary.AppendVarint(b, x.r.ms)
		b = binary.AppendUvarint(b, uint64(x.r.ep))
	}
	return b
}

// checkpointArrivals is the arrival log as the checkpoint's process read it, past its
// records (appendArrivals).
type checkpointArrivals struct {
	Header, LogID string
	Offset        int64
	Last          []byte
	N             uint64
	Latest        map[string]arrival // Arrivals.latest
	Clocks        int
	Clock         Stamp
}
