package cache

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"sync"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/ledger"
)

// Parallel runs fn(0..n-1) on GOMAXPROCS goroutines, in blocks.
func Parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/256+1)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for w := range workers {
		lo, hi := w*per, min(n, (w+1)*per)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// VerifyAgentEntry warms the signature cache for one agent entry: an agent.join is
// checked against the key it announces, anything else against the keys its writer was
// granted. Master entries were checked before.
func VerifyAgentEntry(e *ledger.Entry, granted map[string][]ed25519.PublicKey, project string) {
	switch {
	case e.Writer == fold.MasterWriter:
	case e.Type == fold.TypeAgentJoin:
		if d, ok := fold.DecodeData(e); ok {
			if k, err := ledger.ParseKey(d.Key); err == nil {
				sigcache.Verify(e, k, project)
			}
		}
	default:
		for _, k := range granted[e.Writer] {
			if sigcache.Verify(e, k, project) {
				break
			}
		}
	}
}

// AppendFrame appends one frame (kind + payload) to buf.
func AppendFrame(buf []byte, kind byte, payload []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(payload)+1))
	start := len(buf)
	buf = append(buf, kind)
	buf = append(buf, payload...)
	sum := FrameSum(buf[start:])
	return append(buf, sum[:]...)
}

func DecodeSigs(b []byte) ([]sigcache.Rec, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: signature count", errIndex)
	}
	b = b[k:]
	out := make([]sigcache.Rec, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l+ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: signature record", errIndex)
		}
		b = b[k:]
		out = append(out, sigcache.Rec{Hash: string(b[:l]), Pub: ed25519.PublicKey(bytes.Clone(b[l : l+ed25519.PublicKeySize]))})
		b = b[l+ed25519.PublicKeySize:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: signature frame has trailing bytes", errIndex)
	}
	return out, nil
}

// ReadIndex replays an index file. The signature frames are returned as they are, for
// loadSigsLocked to put in the process's signature cache when a fold needs them: a
// process starting from the fold checkpoint verifies only what is new and never does
// (ADR 0011). It returns errIndex (wrapped) for a wrong header, a failed checksum, a
// ledger frame that does not decode, or a torn last frame.
func ReadIndex(r *bufio.Reader, project, master string) (*ledger.ReadState, [][]byte, int, error) {
	head, err := r.ReadString('\n')
	if err != nil || head != IndexHeader+project+" "+master+"\n" {
		return nil, nil, 0, fmt.Errorf("%w: header %q", errIndex, head)
	}
	rs := ledger.NewReadState()
	var sigs [][]byte
	frames := 0
	for {
		n, err := binary.ReadUvarint(r)
		if err == io.EOF {
			break
		}
		if err != nil || n > 1<<30 {
			return nil, nil, 0, fmt.Errorf("%w: frame length", errIndex)
		}
		buf := make([]byte, n+FrameSumSize)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, nil, 0, fmt.Errorf("%w: torn frame", errIndex)
		}
		payload, sum := buf[:n], buf[n:]
		if s := FrameSum(payload); !bytes.Equal(s[:], sum) || n == 0 {
			return nil, nil, 0, fmt.Errorf("%w: checksum", errIndex)
		}
		switch payload[0] {
		case 'L':
			if err := rs.ApplyChunk(payload[1:]); err != nil {
				return nil, nil, 0, fmt.Errorf("%w: %v", errIndex, err)
			}
		case 'V':
			sigs = append(sigs, payload[1:])
		default:
			return nil, nil, 0, fmt.Errorf("%w: frame kind %q", errIndex, payload[0])
		}
		frames++
	}
	rs.ClearChanges() // what was just read is saved
	return rs, sigs, frames, nil
}

// errIndex marks an index file that cannot be trusted.
var errIndex = errors.New("local index is damaged")

// FrameSum is the checksum of an index frame or a checkpoint payload: CRC-32C, big-endian.
func FrameSum(b []byte) [FrameSumSize]byte {
	var out [FrameSumSize]byte
	binary.BigEndian.PutUint32(out[:], crc32.Checksum(b, castagnoli()))
	return out
}

var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// FrameSumSize is the size of a frame's checksum (frameSum).
const FrameSumSize = crc32.Size

// IndexHeader starts the index file; its number changes with the segment chunks' encoding
// (4: a segment read from a floor, ledger.ReadState.SetFloors).
const IndexHeader = "ferry-index 4 "
