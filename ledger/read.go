package ledger

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// record is one parsed line and where it was first found.
type record struct {
	e    Entry
	path string // slash-separated, relative to the channel directory
	line int    // 1-based
}

// segFile is one segment file found by the walk.
type segFile struct {
	abs string // host path
	rel string // slash-separated, relative to the channel directory
}

// segResult is what reading one segment file gave.
type segResult struct {
	records  []record
	problems []Problem
	err      error
}

// Read merges every segment of the channel into one Snapshot (see the package doc,
// "Merging and forks"). It reads each file named ledger/<dir>/<name>.jsonl under Root —
// conflict copies included, dot-files, *.tmp and *.torn-<n> files skipped — and trusts
// the writer and device inside each entry, never the file name. A missing ledger
// directory is an empty snapshot.
//
// Problems in the data never fail a read: a last line without "\n" or a run of NUL
// bytes ends that file's reading as KindTorn; a complete line that is not an entry is
// KindMalformed (with its 1-based line number) and skipped; a chain with a seq gap or a
// prev that does not name its predecessor is KindBrokenChain; two records with one
// (writer, device, seq) are a Fork (and a KindFork problem). Problem paths are
// slash-separated and relative to Root. Read returns an error only when a directory or
// file cannot be listed or read. The result depends only on the records, not on file
// names or listing order. Read checks no signatures; see ReadVerified.
func (l *Ledger) Read() (*Snapshot, error) {
	s, _, err := l.read(nil, "")
	return s, err
}

// read is Read, with signatures checked first when keys is not nil (see
// ReadVerified). It also returns how many segment files it read.
func (l *Ledger) read(keys KeyFunc, project string) (*Snapshot, int, error) {
	files, err := l.listFiles()
	if err != nil {
		return nil, 0, err
	}
	results := readSegments(files)
	for _, res := range results {
		if res.err != nil {
			return nil, 0, res.err
		}
	}
	snap := mergeResults(results, keys, project, nil, nil, nil)
	return snap, len(files), nil
}

// compareEntries orders entries by (hlc text, writer, device, seq).
func compareEntries(a, b Entry) int {
	return cmp.Or(
		cmp.Compare(a.HLC, b.HLC),
		cmp.Compare(a.Writer, b.Writer),
		cmp.Compare(a.Device, b.Device),
		cmp.Compare(a.Seq, b.Seq),
	)
}

// segKey names one chain.
type segKey struct{ writer, device string }

// IsSegmentName reports whether Read reads a file of that name in a writer directory
// (a segment, or a sync tool's copy of one): it ends in .jsonl, does not start with
// '.', and is neither a temp file nor a torn tail moved aside (<device>.torn-<n>).
func IsSegmentName(name string) bool { return isSegmentName(name) }

// isSegmentName reports whether a file name in a writer directory is a segment (or a
// sync tool's copy of one) that readers read.
func isSegmentName(name string) bool {
	return !strings.HasPrefix(name, ".") &&
		strings.HasSuffix(name, segmentExt) &&
		!strings.HasSuffix(name, tmpExt) &&
		!strings.Contains(name, tornInfix)
}

// listFiles is listSegments of the ledger's root with the archived files of the
// chains SetArchived set after them.
func (l *Ledger) listFiles() ([]segFile, error) {
	files, err := listSegments(l.opts.Root)
	if err != nil {
		return nil, err
	}
	return append(files, listArchived(l.archiveRoots(), l.Archived())...), nil
}

// listSegments returns the segment files under root/ledger in name order. Symbolic
// links and other non-regular files are skipped, as are dot-directories.
func listSegments(root string) ([]segFile, error) {
	dir := filepath.Join(root, ledgerDirName)
	dirs, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var files []segFile
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		sub := filepath.Join(dir, d.Name())
		ents, err := os.ReadDir(sub)
		if errors.Is(err, fs.ErrNotExist) { // removed since listed
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", sub, err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || !isSegmentName(e.Name()) {
				continue
			}
			files = append(files, segFile{
				abs: filepath.Join(sub, e.Name()),
				rel: path.Join(ledgerDirName, d.Name(), e.Name()),
			})
		}
	}
	return files, nil
}

// readSegments reads files concurrently and returns their results in files' order.
func readSegments(files []segFile) []segResult {
	results := make([]segResult, len(files))
	workers := min(runtime.GOMAXPROCS(0), len(files))
	if workers <= 1 {
		for i, f := range files {
			results[i] = readSegment(f)
		}
		return results
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				results[i] = readSegment(files[i])
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// readBufSize is the largest bufio buffer of a segment read; longer lines are
// assembled (readLine).
const readBufSize = 256 << 10

// readBuffer returns a reader of file from offset whose buffer is what is left of the
// file (4 KiB at least, readBufSize at most): a read of a short segment, or of the few
// lines appended since the last one, does not allocate readBufSize. A line longer than
// the buffer, or one appended since the size was read, is assembled like any other.
func readBuffer(file *os.File, offset int64) *bufio.Reader {
	n := int64(readBufSize)
	if fi, err := file.Stat(); err == nil {
		n = min(max(fi.Size()-offset+1, 4<<10), readBufSize)
	}
	return bufio.NewReaderSize(file, int(n))
}

// readSegment parses the complete lines of one segment file. It stops at a last line
// without "\n" or at a NUL byte (KindTorn) and skips, reporting them, complete lines
// that are not entries (KindMalformed) and, silently, blank lines. A file that has
// vanished since it was listed reads as empty.
func readSegment(f segFile) segResult {
	file, err := os.Open(f.abs)
	if errors.Is(err, fs.ErrNotExist) {
		return segResult{}
	}
	if err != nil {
		return segResult{err: fmt.Errorf("reading %s: %w", f.abs, err)}
	}
	defer file.Close()

	var res segResult
	br := readBuffer(file, 0)
	var long []byte
	var off int64 // offset of the current line
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br, &long)
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return segResult{err: fmt.Errorf("reading %s: %w", f.abs, err)}
		}
		if i := bytes.IndexByte(line, 0); i >= 0 {
			p, err := nulProblem(f.rel, lineNo, off+int64(i), line[i:], br)
			if err != nil {
				return segResult{err: fmt.Errorf("reading %s: %w", f.abs, err)}
			}
			res.problems = append(res.problems, p)
			break
		}
		if err == io.EOF {
			res.problems = append(res.problems, Problem{
				Path: f.rel, Line: lineNo, Kind: KindTorn,
				Detail: fmt.Sprintf("last line (%d bytes at offset %d) has no newline: not arrived yet", len(line), off),
			})
			break
		}
		off += int64(len(line))
		body := line[:len(line)-1]
		if len(bytes.TrimSpace(body)) == 0 {
			continue
		}
		e, perr := parseLine(body)
		if perr != nil {
			res.problems = append(res.problems, Problem{
				Path: f.rel, Line: lineNo, Kind: KindMalformed, Detail: perr.Error(),
			})
			continue
		}
		res.records = append(res.records, record{e: e, path: f.rel, line: lineNo})
	}
	return res
}

// nulProblem is the problem of a file whose reading stops at a NUL byte at offset at:
// KindTorn when only NULs and white space follow (a tail not arrived yet), KindHole when
// data follows (rest is the rest of the line from the NUL, br the rest of the file;
// ADR 0007: records after a hole are hidden from every reader until the writer restores
// them).
func nulProblem(rel string, lineNo int, at int64, rest []byte, br *bufio.Reader) (Problem, error) {
	more := dataIn(rest)
	var buf [32 << 10]byte
	for !more {
		n, err := br.Read(buf[:])
		more = dataIn(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return Problem{}, err
		}
	}
	if more {
		return Problem{Path: rel, Line: lineNo, Kind: KindHole,
			Detail: fmt.Sprintf("unreadable bytes (NULs) at offset %d with data after them: readers stop there, so the records after them do not count; the writer's next append moves the damaged part aside and appends them again", at)}, nil
	}
	return Problem{Path: rel, Line: lineNo, Kind: KindTorn,
		Detail: fmt.Sprintf("NUL bytes at offset %d: the rest of the file has not arrived yet", at)}, nil
}

// dataIn reports whether b holds a byte other than NUL and ASCII white space.
func dataIn(b []byte) bool {
	for _, c := range b {
		switch c {
		case 0, ' ', '\t', '\n', '\r':
		default:
			return true
		}
	}
	return false
}

// readLine returns the next line including its '\n' and a nil error, or the bytes
// before end of file and io.EOF. Lines longer than br's buffer are assembled in *long;
// the result is valid until the next call.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	b, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return b, err
	}
	*long = append((*long)[:0], b...)
	for err == bufio.ErrBufferFull {
		b, err = br.ReadSlice('\n')
		*long = append(*long, b...)
	}
	return *long, err
}

// resolve walks one (writer, device) chain upward by seq and returns the records that
// count, in seq order, the forks found, and the chain's problems (KindBrokenChain,
// KindFork). bySeq holds distinct records (by hash) per seq.
func resolve(k segKey, bySeq map[uint64][]*record, fl *Floor) (kept []*record, forks []Fork, probs []Problem) {
	seqs := make([]uint64, 0, len(bySeq))
	for s := range bySeq {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)

	var tip string     // hash of the last record kept
	var lastSeq uint64 // its seq; 0 before the first
	if fl != nil {
		tip, lastSeq = fl.Hash, fl.Seq // the chain goes on from its floor's entry
	}
	forkOf := map[string]int{} // hash of a losing record → index in forks
	forkProb := []int{}        // index in probs of each fork's problem, by fork
	forkWin := []*record{}     // each fork's kept record, by fork
	for _, s := range seqs {
		var cands []*record
		for _, r := range bySeq[s] {
			if i, ok := forkOf[r.e.Prev]; ok && r.e.Prev != "" {
				forks[i].Losers = append(forks[i].Losers, r.e)
				forkOf[r.e.Hash()] = i
				continue
			}
			cands = append(cands, r)
		}
		if len(cands) == 0 {
			continue
		}
		slices.SortFunc(cands, func(a, b *record) int { return cmp.Compare(a.e.Hash(), b.e.Hash()) })

		var win *record
		for _, c := range cands {
			if c.e.Prev == tip || s == 1 {
				win = c
				break
			}
		}
		switch {
		case s != lastSeq+1:
			win = cmp.Or(win, cands[0])
			what := fmt.Sprintf("seq %d follows seq %d", s, lastSeq)
			if lastSeq == 0 {
				what = fmt.Sprintf("chain starts at seq %d", s)
			}
			probs = append(probs, chainProblem(win, KindBrokenChain, what+": records are missing"))
		case win == nil:
			win = cands[0]
			probs = append(probs, chainProblem(win, KindBrokenChain,
				fmt.Sprintf("prev %s does not name seq %d's hash %s", orNone(win.e.Prev), lastSeq, tip)))
		case s == 1 && win.e.Prev != "":
			probs = append(probs, chainProblem(win, KindBrokenChain, "seq 1 names a prev"))
		}

		if len(cands) > 1 {
			fk := Fork{Writer: k.writer, Device: k.device, Seq: s, Winner: win.e}
			var first *record
			for _, c := range cands {
				if c == win {
					continue
				}
				if first == nil {
					first = c
				}
				fk.Losers = append(fk.Losers, c.e)
				forkOf[c.e.Hash()] = len(forks)
			}
			forks = append(forks, fk)
			forkWin = append(forkWin, win)
			forkProb = append(forkProb, len(probs))
			probs = append(probs, chainProblem(first, KindFork, ""))
		}
		kept = append(kept, win)
		tip, lastSeq = win.e.Hash(), s
	}
	for i, fk := range forks {
		w := forkWin[i]
		probs[forkProb[i]].Detail = fmt.Sprintf("%d records at seq %d: kept %s (%s line %d), left out %d record(s) of the other branch(es)",
			countAt(fk), fk.Seq, fk.Winner.Hash(), w.path, w.line, len(fk.Losers))
	}
	return kept, forks, probs
}

// countAt counts the records a fork found at its own seq.
func countAt(fk Fork) int {
	n := 1
	for _, e := range fk.Losers {
		if e.Seq == fk.Seq {
			n++
		}
	}
	return n
}

// chainProblem builds a problem about record r.
func chainProblem(r *record, kind, detail string) Problem {
	return Problem{
		Path: r.path, Line: r.line, Kind: kind,
		Writer: r.e.Writer, Device: r.e.Device, Seq: r.e.Seq, Detail: detail,
	}
}

// orNone renders an empty hash as "(none)".
func orNone(h string) string {
	if h == "" {
		return "(none)"
	}
	return h
}

// parseLine is ParseLine with a fast path for the lines Append writes: a line already
// in canonical form with only the known fields is recognised by rebuilding its
// canonical form from the decoded fields (canonicalizing only data) and comparing
// bytes, instead of canonicalizing the whole line. Any other line goes to ParseLine.
// The result is always identical to ParseLine's (FuzzParseLine checks it).
func parseLine(line []byte) (Entry, error) {
	if e, ok := parseCanonical(line); ok {
		return e, nil
	}
	return ParseLine(line)
}

// maxExactInt is 2^53: integers up to it are written by RFC 8785 as plain decimals.
const maxExactInt = 1 << 53

// parseCanonical decodes line when it is exactly the canonical form of an entry with
// only known fields whose strings are printable ASCII without '"' or '\'. It reports
// false for every other line, valid or not.
func parseCanonical(line []byte) (Entry, bool) {
	if len(line) == 0 || line[0] != '{' {
		return Entry{}, false
	}
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, false
	}
	if e.V < 1 || e.V > maxExactInt || e.Seq == 0 || e.Seq > maxExactInt ||
		e.Writer == "" || e.Device == "" || e.Type == "" || !ValidHLC(e.HLC) {
		return Entry{}, false
	}
	if len(e.Data) > 0 {
		if string(e.Data) == "null" {
			return Entry{}, false
		}
		c, err := CanonicalJSON(e.Data)
		if err != nil {
			return Entry{}, false
		}
		e.Data = c
	}
	buf := make([]byte, 0, len(line))
	ok := true
	str := func(key, v string, omitEmpty bool) {
		if v == "" && omitEmpty {
			return
		}
		buf = append(buf, ',', '"')
		buf = append(buf, key...)
		buf = append(buf, '"', ':', '"')
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				ok = false
			}
		}
		buf = append(buf, v...)
		buf = append(buf, '"')
	}
	num := func(key string, v uint64) {
		buf = append(buf, ',', '"')
		buf = append(buf, key...)
		buf = append(buf, '"', ':')
		buf = strconv.AppendUint(buf, v, 10)
	}
	// Keys in RFC 8785 order (by UTF-16 code units; all ASCII here).
	if len(e.Data) > 0 {
		buf = append(buf, `,"data":`...)
		buf = append(buf, e.Data...)
	}
	str("device", e.Device, false)
	str("hlc", e.HLC, false)
	str("idem", e.Idem, true)
	str("prev", e.Prev, true)
	str("ref", e.Ref, true)
	num("seq", e.Seq)
	str("sig", e.Sig, true)
	str("type", e.Type, false)
	num("v", uint64(e.V))
	str("writer", e.Writer, false)
	buf = append(buf, '}')
	buf[0] = '{' // replaces the leading comma
	if !ok || !bytes.Equal(buf, line) {
		return Entry{}, false
	}
	e.raw, e.known = buf, true
	e.hash = HashBytes(buf)
	return e, true
}
