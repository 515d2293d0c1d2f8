package fold

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/fsbus/internal/sigcache"
	"github.com/ferryhq/ferry/ledger"
)

// The owner's checkpoint (docs/format.md §20, ADR 0019 §2–§3, §7).
//
// A `checkpoint` entry (master only, ref "checkpoint") names a head object by hash.
// The head, signed by the master key in force at the entry (domain CheckpointDomain),
// names the epoch, the fold rules, the cut, the state's chunks by hash and the device
// that may write the next checkpoint. A checkpoint counts when its signature verifies,
// its head is here and verifies, and it extends the counting chain: epoch 1 names no
// basis; epoch e+1 names the counting epoch e's entry as basis, is written in the
// master segment of the device epoch e's head names as compactor, and its cut covers
// epoch e's. Checkpoints of one epoch in one segment are a fork of that segment, which
// the reader resolves (docs/format.md §10); first checkpoints written on two devices
// are an error, reported, and the one with the lower entry hash counts. A checkpoint
// whose data names another of its epoch and basis as replaced takes that one's place
// (ADR 0020): the writer saw the chain stop there for the settle time.

// TypeCheckpoint is the owner's checkpoint entry.
const TypeCheckpoint = "checkpoint"

// CheckpointDomain is the signing domain of a checkpoint head (docs/format.md §5).
const CheckpointDomain = "ferry-checkpoint-v1"

// HeadVersion is the "v" of a head object.
const HeadVersion = 2

// CheckpointData is a checkpoint entry's data.
type CheckpointData struct {
	Epoch int    `json:"epoch"`
	Basis string `json:"basis,omitempty"` // the previous counting checkpoint entry's hash
	Head  string `json:"head"`            // "sha256:" + hex of the head object's canonical bytes
	Rules int    `json:"rules"`           // the fold.RulesVersion the state was folded under
	// TakeOver marks a checkpoint written by `ferry compact --take-over` on a device
	// that is not the compactor the previous head names (docs/format.md §20 "Moving
	// the compactor"): it counts only when the compactor wrote none of its epoch.
	TakeOver bool `json:"take_over,omitempty"`
	// Replaces names a checkpoint entry of the same epoch and basis at which the chain
	// stopped on the writing machine (its head never arrived or does not check): the
	// one it names does not count, wherever its head is (docs/format.md §20
	// "Replacing a checkpoint that does not count", ADR 0020).
	Replaces string `json:"replaces,omitempty"`
}

// ChunkRef names one chunk of a checkpoint's state: the id of its first thing and the
// hash of its canonical bytes.
type ChunkRef struct {
	First string `json:"first"`
	Hash  string `json:"hash"`
	// Filter, on a thing chunk's ref, is a Bloom filter of the ids the chunk holds
	// (things.go): an id it rules out is in no chunk, so looking it up reads none.
	Filter string `json:"filter,omitempty"`
}

// Head is a checkpoint's head object, checkpoints/<epoch>-<16 hex>/head.json.
type Head struct {
	V       int    `json:"v"`
	Project string `json:"project"`
	Epoch   int    `json:"epoch"`
	Rules   int    `json:"rules"`
	Cut     Cut    `json:"cut"`
	// State lists the chunks whose concatenated bytes are the encoding of the base's
	// core (First: "0", "1", …); Things the thing-range chunks of its terminal things
	// (First: the chunk's lowest id; things.go), in ascending id order.
	State  []ChunkRef `json:"state"`
	Things []ChunkRef `json:"things"`
	// Idem lists the chunks of the idempotency keys at the cut (First: the chunk's
	// lowest "<writer> <key>"; idem_chunks.go), in ascending order.
	Idem []ChunkRef `json:"idem"`
	// Compactor is the device whose master segment may write the next checkpoint.
	Compactor string `json:"compactor"`
	// Rotations are the verbatim lines of every master.rotate at or below the cut,
	// Previous the previous counting checkpoint entry's line (empty at epoch 1): a
	// reader links channel.toml's key to the signer with them.
	Rotations []json.RawMessage `json:"rotations"`
	Previous  json.RawMessage   `json:"previous,omitempty"`
	Sig       string            `json:"sig,omitempty"`
}

// HeadPath is the path of a head object under the channel folder.
func HeadPath(epoch int, headHash string) string {
	return fmt.Sprintf("checkpoints/%d-%s/head.json", epoch, strings.TrimPrefix(headHash, "sha256:")[:16])
}

// ChunkPath is the path of a chunk under the channel folder.
func ChunkPath(hash string) string {
	return "checkpoints/chunks/" + strings.TrimPrefix(hash, "sha256:") + ".json"
}

// SignHead signs h with s and returns its canonical bytes and hash.
func SignHead(h *Head, s ledger.Signer) ([]byte, string, error) {
	h.Sig = ""
	unsigned, err := ledger.Canonical(h)
	if err != nil {
		return nil, "", err
	}
	if h.Sig, err = ledger.SignDomain(s, CheckpointDomain, h.Project, unsigned); err != nil {
		return nil, "", err
	}
	b, err := ledger.Canonical(h)
	if err != nil {
		return nil, "", err
	}
	return b, ledger.HashBytes(b), nil
}

// ParseHead decodes head bytes, checking that they are canonical, hash to want and
// carry a signature by key for project.
func ParseHead(b []byte, want string, key ed25519.PublicKey, project string) (*Head, error) {
	h, err := decodeHead(b, want)
	if err != nil {
		return nil, err
	}
	if c, err := ledger.Canonical(h); err != nil || string(c) != string(b) {
		return nil, errors.New("head is not in its canonical form (RFC 8785)")
	}
	sig := h.Sig
	h.Sig = ""
	unsigned, err := ledger.Canonical(h)
	if err != nil {
		return nil, err
	}
	h.Sig = sig
	if err := ledger.VerifyDomain(key, CheckpointDomain, project, unsigned, sig); err != nil {
		return nil, fmt.Errorf("head is not signed by the master key in force at its checkpoint entry: %w", err)
	}
	if err := checkHeadShape(h, project); err != nil {
		return nil, err
	}
	return h, nil
}

// decodeHead decodes head bytes that must hash to want, refusing unknown members.
func decodeHead(b []byte, want string) (*Head, error) {
	if ledger.HashBytes(b) != want {
		return nil, fmt.Errorf("head hashes to %s, the checkpoint names %s", ledger.HashBytes(b), want)
	}
	var h Head
	if err := strictDecode(b, &h); err != nil {
		return nil, fmt.Errorf("head does not decode: %w", err)
	}
	return &h, nil
}

// strictDecode decodes one JSON value of b into v, refusing members v has no field for.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// parseHeadChecked is ParseHead for head bytes this machine parsed and verified
// before (ckfile.Floored's marker) and that still hash to want: their canonical form
// and signature are not checked again, their shape is.
func parseHeadChecked(b []byte, want string, _ ed25519.PublicKey, project string) (*Head, error) {
	h, err := decodeHead(b, want)
	if err != nil {
		return nil, err
	}
	if err := checkHeadShape(h, project); err != nil {
		return nil, err
	}
	return h, nil
}

// checkHeadShape checks what a head names beside its signature: its version and
// project, its cut, its thing chunks' refs and its compactor.
func checkHeadShape(h *Head, project string) error {
	if h.V != HeadVersion || h.Project != project {
		return fmt.Errorf("head of version %d for project %q; this build reads version %d of %q", h.V, h.Project, HeadVersion, project)
	}
	if err := h.Cut.Check(); err != nil {
		return err
	}
	if err := checkThingRefs(h.Things); err != nil {
		return err
	}
	if err := checkIdemRefs(h.Idem); err != nil {
		return err
	}
	if !ledger.ValidName(h.Compactor) {
		return fmt.Errorf("head names a bad compactor device %q", h.Compactor)
	}
	return nil
}

// Checkpoints reads a channel's checkpoint objects: Head returns a head object's bytes
// by entry data, Chunk a chunk's bytes by hash; both ErrObjectMissing when the file is
// not here (pending sync).
type Checkpoints interface {
	Head(epoch int, hash string) ([]byte, error)
	Chunk(hash string) ([]byte, error)
}

// Counting is one counting checkpoint: its entry, its data and its head.
type Counting struct {
	Entry ledger.Entry
	Data  CheckpointData
	Head  *Head
}

// CheckpointProblem is a checkpoint entry that does not count, or a counting one whose
// state could not be used, with the reason.
type CheckpointProblem struct {
	Hash   string `json:"hash,omitempty"`
	Epoch  int    `json:"epoch,omitempty"`
	Kind   string `json:"kind"` // not_counting | replaced | pending | rules | state | rolled_back | cut
	Detail string `json:"detail"`
	// Stops marks the checkpoint the chain stopped at: the one that would extend it,
	// whose head is not here or does not check. Every later checkpoint waits for it
	// unless the next compaction replaces it (CheckpointData.Replaces).
	Stops bool `json:"stops,omitempty"`
}

// CountingChain returns the counting checkpoints of entries (a snapshot's, merged
// order) in epoch order, and the problems of every checkpoint entry that does not
// count. master is channel.toml's key.
func CountingChain(entries []ledger.Entry, master ed25519.PublicKey, project string, cps Checkpoints) ([]Counting, []CheckpointProblem) {
	var cands []*ledger.Entry
	for i := range entries {
		if e := &entries[i]; e.Writer == MasterWriter && e.Type == TypeCheckpoint {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	start, rotations := archivedStart(cands, cps)
	st := &State{Project: project}
	withRot := entries
	if len(rotations) > 0 {
		withRot = MergedSet(append(rotations, entries...))
	}
	masters := ResolveMasters(st, FoldInput{Entries: withRot, Master: master, Project: project}, func(*ledger.Entry, string) {})
	var probs []CheckpointProblem
	type cand struct {
		e *ledger.Entry
		d CheckpointData
	}
	var valid []cand
	for _, e := range cands {
		var d CheckpointData
		switch {
		case e.Ref != TypeCheckpoint:
			probs = append(probs, CheckpointProblem{Hash: e.Hash(), Kind: "not_counting", Detail: "checkpoint entry whose ref is not \"checkpoint\""})
		case !sigcache.Verify(e, masters.KeyAt(e.Device, e.Seq), project):
			probs = append(probs, CheckpointProblem{Hash: e.Hash(), Kind: "not_counting", Detail: "checkpoint entry not signed by the master key in force"})
		case json.Unmarshal(e.Data, &d) != nil || d.Epoch < 1 || !validHash(d.Head) || (d.Epoch == 1) != (d.Basis == "") ||
			(d.Replaces != "" && (!validHash(d.Replaces) || d.Replaces == e.Hash())):
			probs = append(probs, CheckpointProblem{Hash: e.Hash(), Kind: "not_counting", Detail: "checkpoint entry with data that does not decode or names no head, an epoch and basis that disagree, or a bad replaces"})
		default:
			valid = append(valid, cand{e, d})
		}
	}
	slices.SortFunc(valid, func(a, b cand) int { return strings.Compare(a.e.Hash(), b.e.Hash()) })
	var chain []Counting
	basis, epoch, compactor := "", 0, ""
	var prevCut Cut
	// The chain starts at epoch 1, or — once the master's frozen files holding the
	// first checkpoints moved to archive/ (docs/format.md §21) — at the checkpoint that
	// the head of the lowest one here whose basis is not here names as previous, as a
	// reading from the cut takes it (FoldFloored).
	if start != nil {
		if i := slices.IndexFunc(valid, func(c cand) bool { return c.e == start }); i >= 0 {
			prev, err := archivedPrevious(valid[i].e, valid[i].d, masters, cps, project)
			if err != nil {
				probs = append(probs, CheckpointProblem{Hash: start.Hash(), Epoch: valid[i].d.Epoch, Kind: "not_counting", Stops: true,
					Detail: "the checkpoints below it are not in the folder (archived) and its head's previous checkpoint does not check: " + err.Error()})
			} else {
				chain = append(chain, *prev)
				basis, epoch, compactor, prevCut = prev.Entry.Hash(), prev.Data.Epoch, prev.Head.Compactor, prev.Head.Cut
			}
		}
	}
	for {
		var next []cand
		for _, c := range valid {
			if c.d.Epoch == epoch+1 && c.d.Basis == basis && (epoch == 0 || c.e.Device == compactor || c.d.TakeOver) {
				next = append(next, c)
			}
		}
		// A candidate another of its epoch and basis replaces is out, whether or not its
		// head is here: the rule reads entries only, so every machine drops the same one.
		replaced := map[string]cand{}
		for _, c := range next {
			if c.d.Replaces != "" {
				replaced[c.d.Replaces] = c
			}
		}
		next = slices.DeleteFunc(next, func(c cand) bool {
			by, ok := replaced[c.e.Hash()]
			if ok {
				probs = append(probs, CheckpointProblem{Hash: c.e.Hash(), Epoch: c.d.Epoch, Kind: "replaced",
					Detail: fmt.Sprintf("replaced by %s, written on device %s", by.e.Hash(), by.e.Device)})
			}
			return ok
		})
		if len(next) == 0 {
			break
		}
		// One segment: the lowest seq (a later one at the same epoch should have named
		// it). The compactor's own before any take-over; epoch 1 on several devices, or
		// several take-overs: the lowest hash, the others reported.
		// The order is total: replacements first, then by the device's rank (the
		// compactor first, then the lowest hash of the device's lowest-seq candidate),
		// then by seq within a device.
		lowest := map[string]cand{}
		for _, c := range next {
			if l, ok := lowest[c.e.Device]; !ok || c.e.Seq < l.e.Seq {
				lowest[c.e.Device] = c
			}
		}
		// A replacement ranks before every candidate that replaces none: it was written
		// where the chain stopped, over a cut that may cover such a candidate, and a
		// reader from its cut would not see one that outranked it.
		later := func(x, y bool) int { // false before true
			switch {
			case x == y:
				return 0
			case x:
				return 1
			}
			return -1
		}
		slices.SortFunc(next, func(a, b cand) int {
			if r := later(a.d.Replaces == "", b.d.Replaces == ""); r != 0 {
				return r
			}
			if r := later(a.e.Device != compactor, b.e.Device != compactor); r != 0 {
				return r
			}
			if ah, bh := lowest[a.e.Device].e.Hash(), lowest[b.e.Device].e.Hash(); ah != bh {
				return strings.Compare(ah, bh)
			}
			return int(a.e.Seq) - int(b.e.Seq)
		})
		win := next[0]
		for _, c := range next[1:] {
			detail := fmt.Sprintf("a second checkpoint of epoch %d on the same basis: %s counts", c.d.Epoch, win.e.Hash())
			if c.d.TakeOver && epoch > 0 {
				detail = fmt.Sprintf("a take-over on device %s while %s also wrote epoch %d (%s counts): the compactor was not gone", c.e.Device, win.e.Device, c.d.Epoch, win.e.Hash())
			} else if c.e.Device != win.e.Device {
				detail = fmt.Sprintf("a first checkpoint written on another device (%s) than the one that counts (%s, %s): two owner machines compacted at once", c.e.Device, win.e.Device, win.e.Hash())
			}
			probs = append(probs, CheckpointProblem{Hash: c.e.Hash(), Epoch: c.d.Epoch, Kind: "not_counting", Detail: detail})
		}
		raw, err := cps.Head(win.d.Epoch, win.d.Head)
		if err != nil {
			kind := "state"
			if errors.Is(err, ErrObjectMissing) {
				kind = "pending"
			}
			probs = append(probs, CheckpointProblem{Hash: win.e.Hash(), Epoch: win.d.Epoch, Kind: kind, Detail: "head " + HeadPath(win.d.Epoch, win.d.Head) + ": " + err.Error(), Stops: true})
			break
		}
		h, err := ParseHead(raw, win.d.Head, masters.KeyAt(win.e.Device, win.e.Seq), project)
		if err == nil && (h.Epoch != win.d.Epoch || h.Rules != win.d.Rules) {
			err = fmt.Errorf("head names epoch %d and rules %d, its entry %d and %d", h.Epoch, h.Rules, win.d.Epoch, win.d.Rules)
		}
		if err == nil {
			err = h.Cut.Covers(prevCut)
		}
		if err == nil {
			if p, ok := h.Cut.At(MasterWriter, win.e.Device); ok && p.Seq >= win.e.Seq {
				err = fmt.Errorf("cut of the master's segment %s (seq %d) is not below the checkpoint entry (seq %d)", win.e.Device, p.Seq, win.e.Seq)
			}
		}
		if err != nil {
			probs = append(probs, CheckpointProblem{Hash: win.e.Hash(), Epoch: win.d.Epoch, Kind: "not_counting", Detail: err.Error(), Stops: true})
			break
		}
		chain = append(chain, Counting{Entry: *win.e, Data: win.d, Head: h})
		basis, epoch, compactor, prevCut = win.e.Hash(), win.d.Epoch, h.Compactor, h.Cut
	}
	for _, c := range valid {
		if !slices.ContainsFunc(chain, func(k Counting) bool { return k.Entry.Hash() == c.e.Hash() }) &&
			!slices.ContainsFunc(probs, func(p CheckpointProblem) bool { return p.Hash == c.e.Hash() }) {
			probs = append(probs, CheckpointProblem{Hash: c.e.Hash(), Epoch: c.d.Epoch, Kind: "not_counting",
				Detail: "checkpoint that does not extend the counting chain (another basis or epoch, or written on a device that is not the compactor)"})
		}
	}
	return chain, probs
}

// archivedStart finds where the counting chain starts when no checkpoint entry of
// epoch 1 is among cands (the master's frozen files that held the first ones moved to
// archive/): the lowest-epoch checkpoint entry whose basis is not among cands (the
// lowest hash of its epoch), and the master.rotate lines its head keeps, which
// ResolveMasters needs to verify it when rotations moved too (each line is checked
// there, from channel.toml's key). nil when an epoch-1 entry is here, or none names an
// absent basis, or its head is not here or does not hash to its name.
func archivedStart(cands []*ledger.Entry, cps Checkpoints) (*ledger.Entry, []ledger.Entry) {
	here := make(map[string]bool, len(cands))
	for _, e := range cands {
		here[e.Hash()] = true
	}
	var start *ledger.Entry
	var sd CheckpointData
	for _, e := range cands {
		var d CheckpointData
		if json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		if d.Epoch == 1 {
			return nil, nil
		}
		if d.Epoch > 1 && !here[d.Basis] && (start == nil || d.Epoch < sd.Epoch || (d.Epoch == sd.Epoch && e.Hash() < start.Hash())) {
			start, sd = e, d
		}
	}
	if start == nil {
		return nil, nil
	}
	raw, err := cps.Head(sd.Epoch, sd.Head)
	var loose Head
	if err != nil || ledger.HashBytes(raw) != sd.Head || json.Unmarshal(raw, &loose) != nil {
		return start, nil
	}
	var rot []ledger.Entry
	for _, l := range loose.Rotations {
		if e, err := ledger.ParseLine(l); err == nil {
			rot = append(rot, e)
		}
	}
	return start, rot
}

// archivedPrevious is the counting checkpoint the head of the checkpoint entry e
// (data d) names as previous (previousCounting), e's head verified first.
func archivedPrevious(e *ledger.Entry, d CheckpointData, masters *MasterChain, cps Checkpoints, project string) (*Counting, error) {
	raw, err := cps.Head(d.Epoch, d.Head)
	if err != nil {
		return nil, err
	}
	h, err := ParseHead(raw, d.Head, masters.KeyAt(e.Device, e.Seq), project)
	if err != nil {
		return nil, err
	}
	return previousCounting(h, d, masters, cps, project)
}

// LoadBase reads and checks a counting checkpoint's state: every chunk named by the
// head, hash-checked, decoded as one base whose epoch and cut are the head's.
func LoadBase(c Counting, cps Checkpoints) (*Base, error) {
	b, err := loadBase(c, cps, true)
	if err != nil {
		return nil, err
	}
	if _, _, err := b.Terminals(); err != nil {
		return nil, err
	}
	if _, err := b.AllIdem(); err != nil {
		return nil, err
	}
	return b, nil
}

// LoadBaseLazy is LoadBase reading the thing chunks only when a thing of theirs is
// asked for (things.go): a chunk that then does not read or check leaves its things
// unknown to the process, and Base.Err says why. checked says that this machine
// loaded that head's state before (ckfile.Floored): the chunks are hash-checked
// against the head as always, and the check that their bytes are the state's
// canonical encoding, which those same bytes passed, is skipped.
func LoadBaseLazy(c Counting, cps Checkpoints, checked bool) (*Base, error) {
	return loadBase(c, cps, !checked)
}

func loadBase(c Counting, cps Checkpoints, canonical bool) (*Base, error) {
	var all []byte
	for _, ref := range c.Head.State {
		b, err := cps.Chunk(ref.Hash)
		if err != nil {
			return nil, fmt.Errorf("chunk %s: %w", ChunkPath(ref.Hash), err)
		}
		if got := ledger.HashBytes(b); got != ref.Hash {
			return nil, fmt.Errorf("chunk %s hashes to %s (tampered or damaged)", ChunkPath(ref.Hash), got)
		}
		all = append(all, b...)
	}
	base, err := decodeBase(all, canonical)
	if err != nil {
		return nil, err
	}
	if base.Epoch != c.Data.Epoch || !slices.Equal(base.Cut, c.Head.Cut) {
		return nil, fmt.Errorf("state names epoch %d and another cut than its head (epoch %d)", base.Epoch, c.Data.Epoch)
	}
	if err := checkThingRefs(c.Head.Things); err != nil {
		return nil, err
	}
	if err := checkIdemRefs(c.Head.Idem); err != nil {
		return nil, err
	}
	base.withThings(c.Head.Things, c.Head.Idem, cps.Chunk)
	return base, nil
}

// Chunks splits a base's encoding into chunks of at most chunkMax bytes each and
// returns them with their refs. (The chunk boundaries are a function of the bytes.)
func Chunks(enc []byte) ([][]byte, []ChunkRef) {
	var out [][]byte
	var refs []ChunkRef
	for len(enc) > 0 {
		n := min(len(enc), chunkMax)
		c := enc[:n]
		out = append(out, c)
		refs = append(refs, ChunkRef{First: fmt.Sprint(len(refs)), Hash: ledger.HashBytes(c)})
		enc = enc[n:]
	}
	return out, refs
}

// chunkMax is the most bytes a chunk holds (64 KiB).
const chunkMax = 64 << 10
