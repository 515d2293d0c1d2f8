package fsbus

// Golden vectors of format v1 (docs/format.md). Three layers:
//
//   - RFC 8785 anchors: the published canonicalization examples and number table,
//     fed through ledger.CanonicalJSON (fixtures/vectors/rfc8785/).
//   - RFC 8032 anchors: §7.1 TEST 1–3, through crypto/ed25519 and ledger.KeySigner
//     (fixtures/vectors/rfc8032.json).
//   - ferry's own: a small channel written with fixed keys (RFC 8032 TEST 1 is the
//     master, TEST 2 and TEST 3 are agents), fixed HLCs and fixed ids, rebuilt here
//     byte for byte through the real code paths (fixtures/vectors/ferry/).
//
// The RFC anchors are hand-copied constants and never regenerated. The ferry vectors
// are regenerated with
//
//	go test ./fsbus -run Vectors -update
//
// which must only ever be run on purpose: format v1 is frozen, so a diff in
// fixtures/vectors/ferry is a format change.

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

func init() {
	// Registered only if no other test file of the package has: golden tests share it.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files (go test ./fsbus -run Vectors -update)")
	}
}

// updating reports whether the test run was given -update.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const (
	vecRoot    = "../fixtures/vectors"
	vecFerry   = vecRoot + "/ferry"
	vecProject = "vectors"
)

// ---------------------------------------------------------------------------
// RFC 8785

func TestVectorsRFC8785(t *testing.T) {
	t.Parallel()
	ins, err := filepath.Glob(filepath.Join(vecRoot, "rfc8785", "*.input.json"))
	if err != nil || len(ins) < 7 {
		t.Fatalf("RFC 8785 vectors missing: %v (%d files)", err, len(ins))
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".input.json")
		t.Run(name, func(t *testing.T) {
			input := readFile(t, in)
			want := readFile(t, strings.TrimSuffix(in, ".input.json")+".output.json")
			got, err := ledger.CanonicalJSON(input)
			if err != nil {
				t.Fatalf("CanonicalJSON: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical form differs\n got: %q\nwant: %q", got, want)
			}
			// The canonical form is a fixed point.
			again, err := ledger.CanonicalJSON(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("canonical form is not stable: %q, %v", again, err)
			}
		})
	}
}

func TestVectorsRFC8785Numbers(t *testing.T) {
	t.Parallel()
	var f struct {
		Samples []struct {
			IEEE754 string  `json:"ieee754"`
			JSON    *string `json:"json"`
		} `json:"samples"`
	}
	readJSON(t, filepath.Join(vecRoot, "rfc8785", "numbers.json"), &f)
	if len(f.Samples) != 26 {
		t.Fatalf("want the 26 samples of RFC 8785 Appendix B, have %d", len(f.Samples))
	}
	for _, s := range f.Samples {
		raw, err := hex.DecodeString(s.IEEE754)
		if err != nil || len(raw) != 8 {
			t.Fatalf("bad sample %q", s.IEEE754)
		}
		v := math.Float64frombits(binary.BigEndian.Uint64(raw))
		if s.JSON == nil {
			// NaN and Infinity: not expressible as JSON text, and refused when spelled.
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				t.Errorf("%s: a null sample must be NaN or Infinity", s.IEEE754)
			}
			for _, bad := range []string{"NaN", "Infinity", "-Infinity", "1e400"} {
				if out, err := ledger.CanonicalJSON([]byte(bad)); err == nil {
					t.Errorf("CanonicalJSON(%s) = %q, want an error", bad, out)
				}
			}
			continue
		}
		// Any JSON spelling that round-trips to the same binary64 must canonicalize to the
		// RFC's text; Go's shortest 'g' form is one such spelling.
		in := strconv.FormatFloat(v, 'g', -1, 64)
		got, err := ledger.CanonicalJSON([]byte("[" + in + "]"))
		if err != nil {
			t.Errorf("%s (%s): %v", s.IEEE754, in, err)
			continue
		}
		if want := "[" + *s.JSON + "]"; string(got) != want {
			t.Errorf("%s (%s): got %s, want %s", s.IEEE754, in, got, want)
		}
	}
}

// ---------------------------------------------------------------------------
// RFC 8032

type rfc8032Vector struct {
	Name      string `json:"name"`
	SecretKey string `json:"secret_key"`
	PublicKey string `json:"public_key"`
	Message   string `json:"message"`
	Signature string `json:"signature"`
}

func loadRFC8032(t *testing.T) []rfc8032Vector {
	t.Helper()
	var f struct {
		Vectors []rfc8032Vector `json:"vectors"`
	}
	readJSON(t, filepath.Join(vecRoot, "rfc8032.json"), &f)
	if len(f.Vectors) != 3 {
		t.Fatalf("want RFC 8032 TEST 1-3, have %d vectors", len(f.Vectors))
	}
	return f.Vectors
}

func TestVectorsRFC8032(t *testing.T) {
	t.Parallel()
	for _, v := range loadRFC8032(t) {
		t.Run(v.Name, func(t *testing.T) {
			seed, pub, msg, sig := unhex(t, v.SecretKey), unhex(t, v.PublicKey), unhex(t, v.Message), unhex(t, v.Signature)
			priv := ed25519.NewKeyFromSeed(seed)
			if got := priv.Public().(ed25519.PublicKey); !bytes.Equal(got, pub) {
				t.Errorf("public key %x, want %x", got, pub)
			}
			if got := ed25519.Sign(priv, msg); !bytes.Equal(got, sig) {
				t.Errorf("crypto/ed25519 signature %x, want %x", got, sig)
			}
			ks := ledger.KeySigner(priv)
			got, err := ks.Sign(msg)
			if err != nil || !bytes.Equal(got, sig) {
				t.Errorf("KeySigner signature %x (%v), want %x", got, err, sig)
			}
			if !bytes.Equal(ks.Public(), pub) {
				t.Errorf("KeySigner public key %x, want %x", ks.Public(), pub)
			}
			if !ed25519.Verify(pub, msg, sig) {
				t.Error("signature does not verify")
			}
			// The text forms round-trip.
			if k, err := ledger.ParseKey(ledger.FormatKey(pub)); err != nil || !bytes.Equal(k, pub) {
				t.Errorf("key text does not round-trip: %v", err)
			}
			if s, err := ledger.ParseSig(ledger.FormatSig(sig)); err != nil || !bytes.Equal(s, sig) {
				t.Errorf("signature text does not round-trip: %v", err)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Ids

func TestVectorsIDs(t *testing.T) {
	t.Parallel()
	var f struct {
		Alphabet string   `json:"alphabet"`
		Valid    []string `json:"valid_ids"`
		Invalid  []string `json:"invalid_ids"`
		Devices  []string `json:"valid_devices"`
		Resolve  []struct {
			Known    []string `json:"known"`
			Query    string   `json:"query"`
			ID       string   `json:"id"`
			Category string   `json:"category"`
		} `json:"resolve"`
	}
	readJSON(t, filepath.Join(vecRoot, "ids.json"), &f)
	if f.Alphabet != fold.Crockford {
		t.Errorf("alphabet %q, code uses %q", f.Alphabet, fold.Crockford)
	}
	for _, id := range f.Valid {
		if !fold.ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
	for _, id := range f.Invalid {
		if fold.ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
	for _, d := range f.Devices {
		if len(d) != fold.DeviceLen || !fold.ValidName(d) || strings.Trim(d, fold.Crockford) != "" {
			t.Errorf("device %q is not 8 Crockford characters", d)
		}
	}
	for _, r := range f.Resolve {
		id, err := fold.ResolveID("order", r.Query, r.Known)
		switch {
		case r.Category == "" && (err != nil || id != r.ID):
			t.Errorf("resolve %q: got %q, %v; want %q", r.Query, id, err, r.ID)
		case r.Category != "" && !errs.Is(err, errs.Category(r.Category)):
			t.Errorf("resolve %q: got %q, %v; want a %s error", r.Query, id, err, r.Category)
		}
	}
	for range 100 {
		if id := fold.NewID(fold.PrefixOrder); !fold.ValidID(id) || len(id) != 2+fold.IDLen {
			t.Fatalf("NewID made %q", id)
		}
		if d := fold.NewDeviceID(); len(d) != fold.DeviceLen || strings.Trim(d, fold.Crockford) != "" {
			t.Fatalf("NewDeviceID made %q", d)
		}
	}
}

// ---------------------------------------------------------------------------
// ferry's own vectors

// vecFile is fixtures/vectors/ferry/vectors.json.
type vecFile struct {
	Comment string      `json:"comment"`
	Project string      `json:"project"`
	Keys    []vecKey    `json:"keys"`
	Channel vecChannel  `json:"channel"`
	Objects []vecObject `json:"objects"`
	Args    []vecArgs   `json:"args"`
	Entries []vecEntry  `json:"entries"`
	State   vecState    `json:"state"`
}

type vecKey struct {
	Writer    string `json:"writer"`
	Device    string `json:"device"`
	Seed      string `json:"seed"` // hex, an RFC 8032 §7.1 secret key
	Source    string `json:"source"`
	PublicKey string `json:"public_key"`
}

type vecChannel struct {
	File           string `json:"file"`
	SigningBody    string `json:"signing_body"`
	SigningMessage string `json:"signing_message"`
	Sig            string `json:"sig"`
}

type vecObject struct {
	Name           string `json:"name"`
	Path           string `json:"path"`
	Author         string `json:"author"`
	SigningMessage string `json:"signing_message"`
	Sig            string `json:"sig"`
	File           string `json:"file"` // exact file bytes: canonical form + "\n"
	Hash           string `json:"hash"`
}

type vecArgs struct {
	Name      string `json:"name"`
	Canonical string `json:"canonical"`
	Hash      string `json:"hash"`
}

type vecEntry struct {
	Name           string          `json:"name"`
	Writer         string          `json:"writer"`
	Device         string          `json:"device"`
	Seq            uint64          `json:"seq"`
	HLC            string          `json:"hlc"`
	Type           string          `json:"type"`
	Ref            string          `json:"ref,omitempty"`
	Idem           string          `json:"idem,omitempty"`
	Prev           string          `json:"prev,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
	SigningMessage string          `json:"signing_message"`
	Sig            string          `json:"sig"`
	Line           string          `json:"line"` // exact segment line without its "\n"
	Hash           string          `json:"hash"`
}

// vecState is the part of the folded state the vectors pin, naming entries by name.
type vecState struct {
	Agents    map[string]vecAgent `json:"agents"`
	Orders    map[string]vecOrder `json:"orders"`
	Contested []vecContest        `json:"contested"`
	Ignored   []vecIgnored        `json:"ignored"`
	Idem      map[string]string   `json:"idem"` // "writer idem-key" → entry name
}

type vecAgent struct {
	Seated bool     `json:"seated"`
	Level  string   `json:"level"`
	Key    string   `json:"key,omitempty"`
	Scopes []string `json:"scopes,omitempty"`
}

type vecOrder struct {
	Title     string   `json:"title"`
	State     string   `json:"state"`
	Author    string   `json:"author"`
	Holder    string   `json:"holder,omitempty"`
	OfferedTo string   `json:"offered_to,omitempty"`
	Claim     string   `json:"claim,omitempty"`
	Head      string   `json:"head"`
	History   []string `json:"history"`
	Progress  []string `json:"progress,omitempty"`
	Result    string   `json:"result,omitempty"`
	Reviews   []string `json:"reviews,omitempty"`
}

type vecContest struct {
	Ref      string   `json:"ref"`
	Basis    string   `json:"basis"`
	Winner   string   `json:"winner"`
	Losers   []string `json:"losers"`
	Involved []string `json:"involved"`
}

type vecIgnored struct {
	Entry  string `json:"entry"`
	Reason string `json:"reason"`
}

// The vector channel's writers: RFC 8032 §7.1 secret keys as seeds.
const (
	vecAgentA = "claude-code-laptop"
	vecAgentB = "codex-desktop"
	vecOrder1 = "o-k3f9x2abq7mze"
	vecOrder2 = "o-2b8x4d6f9gh3j"
	vecResult = "r-5y7nq2c8w1hta"
)

// vecBuilder writes the vector channel in memory through the real code paths.
type vecBuilder struct {
	t       *testing.T
	f       *vecFile
	signers map[string]ledger.KeySigner
	devices map[string]string
	tails   map[string]*ledger.Entry
	hashes  map[string]string // entry name → hash
	files   map[string][]byte // channel-relative path → bytes
	seg     map[string]*bytes.Buffer
}

func newVecBuilder(t *testing.T) *vecBuilder {
	t.Helper()
	rfc := loadRFC8032(t)
	b := &vecBuilder{
		t:       t,
		f:       &vecFile{Project: vecProject},
		signers: map[string]ledger.KeySigner{},
		devices: map[string]string{},
		tails:   map[string]*ledger.Entry{},
		hashes:  map[string]string{},
		files:   map[string][]byte{},
		seg:     map[string]*bytes.Buffer{},
	}
	b.f.Comment = "ferry format v1 golden vectors (docs/format.md). Regenerate only on purpose: go test ./fsbus -run Vectors -update"
	for i, w := range []struct{ name, device string }{{fold.MasterWriter, "k3f9x2ab"}, {vecAgentA, "q7mze0h4"}, {vecAgentB, "d3sktp01"}} {
		k := ledger.KeySigner(ed25519.NewKeyFromSeed(unhex(t, rfc[i].SecretKey)))
		b.signers[w.name], b.devices[w.name] = k, w.device
		b.f.Keys = append(b.f.Keys, vecKey{Writer: w.name, Device: w.device, Seed: rfc[i].SecretKey,
			Source: "RFC 8032 section 7.1 " + rfc[i].Name, PublicKey: ledger.FormatKey(k.Public())})
	}
	return b
}

func (b *vecBuilder) key(w string) string { return ledger.FormatKey(b.signers[w].Public()) }

// channel writes channel.toml as Init does, with a fixed creation time and the header
// comment Init wrote when the vectors were made (a comment is not signed; the vectors
// stay byte for byte).
func (b *vecBuilder) channel() {
	cfg := Config{Format: initFormat, Project: vecProject, Title: "ferry format v1 vectors",
		Master: b.key(fold.MasterWriter), Created: "2026-11-29T18:00:00Z", Policy: fold.DefaultPolicy()}
	body, err := cfg.signingBody()
	if err != nil {
		b.t.Fatal(err)
	}
	if cfg.Sig, err = ledger.SignDomain(b.signers[fold.MasterWriter], channelDomain, vecProject, body); err != nil {
		b.t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.WriteString("# ferry channel: written once by `ferry init`, signed by the master key. Do not edit.\n")
	if err := toml.NewEncoder(&buf).Encode(cfg); err != nil {
		b.t.Fatal(err)
	}
	b.files["channel.toml"] = buf.Bytes()
	b.f.Channel = vecChannel{File: "channel/channel.toml", SigningBody: string(body),
		SigningMessage: string(ledger.DomainMessage(channelDomain, vecProject, body)), Sig: cfg.Sig}
}

// object seals obj with sealObject and records it.
func (b *vecBuilder) object(name, author, id string, obj any, env *fold.Envelope) string {
	body, err := ledger.Canonical(obj) // what sealObject signs: the envelope has no sig yet
	if err != nil {
		b.t.Fatal(err)
	}
	data, hash, err := sealObject(obj, func(s string) { env.Sig = s }, b.signers[author], vecProject)
	if err != nil {
		b.t.Fatal(err)
	}
	rel, err := filepath.Rel("/ch", verify.ObjectPath("/ch", author, id))
	if err != nil {
		b.t.Fatal(err)
	}
	rel = filepath.ToSlash(rel)
	b.files[rel] = data
	msg := ledger.DomainMessage(ledger.ObjectDomain, vecProject, body)
	b.f.Objects = append(b.f.Objects, vecObject{Name: name, Path: "channel/" + rel, Author: author,
		SigningMessage: string(msg), Sig: env.Sig, File: string(data), Hash: hash})
	return hash
}

// args records the argument hash of an idempotent call.
func (b *vecBuilder) args(name string, call any) string {
	c, err := ledger.Canonical(call)
	if err != nil {
		b.t.Fatal(err)
	}
	h := argsHash(call)
	b.f.Args = append(b.f.Args, vecArgs{Name: name, Canonical: string(c), Hash: h})
	return h
}

// entry signs the next entry of writer's segment and records it.
func (b *vecBuilder) entry(name, writer, hlc, typ, ref, idem string, d any) string {
	e := ledger.Entry{V: ledger.Version, Writer: writer, Device: b.devices[writer], Seq: 1, HLC: hlc,
		Type: typ, Ref: ref, Idem: idem, Data: mustJSON(d)}
	if last := b.tails[writer]; last != nil {
		e.Seq, e.Prev = last.Seq+1, last.Hash()
	}
	msg, err := e.SigningMessage(vecProject)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := e.Sign(b.signers[writer], vecProject); err != nil {
		b.t.Fatal(err)
	}
	line, err := e.Canonical()
	if err != nil {
		b.t.Fatal(err)
	}
	b.tails[writer] = &e
	b.hashes[name] = e.Hash()
	seg := "ledger/" + writer + "/" + e.Device + ".jsonl"
	if b.seg[seg] == nil {
		b.seg[seg] = &bytes.Buffer{}
	}
	b.seg[seg].Write(line)
	b.seg[seg].WriteByte('\n')
	b.f.Entries = append(b.f.Entries, vecEntry{Name: name, Writer: writer, Device: e.Device, Seq: e.Seq, HLC: hlc,
		Type: typ, Ref: ref, Idem: idem, Prev: e.Prev, Data: e.Data, SigningMessage: string(msg), Sig: e.Sig,
		Line: string(line), Hash: e.Hash()})
	return e.Hash()
}

// buildVectors writes the whole vector channel and returns its files (paths relative to
// fixtures/vectors/ferry) and the vector file, state included.
func buildVectors(t *testing.T) (map[string][]byte, *vecFile) {
	b := newVecBuilder(t)
	b.channel()
	A, B, M := vecAgentA, vecAgentB, fold.MasterWriter
	h := b.hashes

	b.entry("a1-join", A, "2026-11-29T18:30:00.000Z/0000", fold.TypeAgentJoin, A, "",
		fold.EntryData{Key: b.key(A), App: "claude-code", Machine: "laptop"})
	b.entry("b1-join", B, "2026-11-29T18:30:00.250Z/0000", fold.TypeAgentJoin, B, "",
		fold.EntryData{Key: b.key(B), App: "codex", Machine: "desktop"})
	b.entry("m1-grant-a", M, "2026-11-29T18:30:01.000Z/0000", fold.TypeGrantSet, A, "",
		fold.EntryData{Agent: A, Key: b.key(A), Level: "member"})
	b.entry("m2-grant-b", M, "2026-11-29T18:30:01.000Z/0001", fold.TypeGrantSet, B, "",
		fold.EntryData{Agent: B, Key: b.key(B), Level: "member"})

	o1 := &fold.OrderObject{Envelope: fold.Envelope{V: 1, ID: vecOrder1, Author: B, Device: b.devices[B]},
		Title: "Fix the flaky login test <CI> & retry", Body: "Fails about 1 in 20 runs on CI.\nSee `auth_test.go` — “TestLogin”.",
		Labels: []string{"ci", "tests"}, Priority: "high"}
	b.entry("b2-create-o1", B, "2026-11-29T18:31:00.000Z/0000", fold.TypeOrderCreate, vecOrder1, "",
		fold.EntryData{Object: b.object("order o1", B, vecOrder1, o1, &o1.Envelope)})
	b.entry("a2-claim-o1", A, "2026-11-29T18:32:00.000Z/0000", fold.TypeOrderClaim, vecOrder1, "",
		fold.EntryData{Basis: h["b2-create-o1"]})
	b.entry("a3-progress-o1", A, "2026-11-29T18:40:00.000Z/0000", fold.TypeOrderProgress, vecOrder1, "",
		fold.EntryData{Claim: h["a2-claim-o1"], Note: "found the race: the session cookie is read before it is set"})
	r := &fold.ResultObject{Envelope: fold.Envelope{V: 1, ID: vecResult, Author: A, Device: b.devices[A]},
		Order: vecOrder1, Reference: "commit 1a2b3c4d", Summary: "wait for the cookie; 200 runs green"}
	b.entry("a4-submit-o1", A, "2026-11-29T18:50:00.000Z/0000", fold.TypeOrderSubmit, vecOrder1, "",
		fold.EntryData{Basis: h["a2-claim-o1"], Reference: r.Reference, Note: r.Summary, Result: vecResult,
			Object: b.object("result of o1", A, vecResult, r, &r.Envelope)})
	b.entry("b3-review-o1", B, "2026-11-29T19:00:00.000Z/0000", fold.TypeOrderReview, vecOrder1, "",
		fold.EntryData{Basis: h["a4-submit-o1"], Verdict: "accept", Note: "LGTM"})

	// An idempotent order.create offered at creation: data.args is NewOrder's argument hash.
	// It carries the label ci, so A's claims under its later grant scoped to ci and
	// tests count (scoped grants).
	opt := NewOrderOptions{Title: "Bump the Go toolchain to 1.26", Labels: []string{"ci"}, To: A, Key: "dispatch-o2"}
	o2 := &fold.OrderObject{Envelope: fold.Envelope{V: 1, ID: vecOrder2, Author: B, Device: b.devices[B]}, Title: opt.Title, Labels: opt.Labels}
	b.entry("b4-create-o2", B, "2026-11-29T19:01:00.000Z/0000", fold.TypeOrderCreate, vecOrder2, opt.Key,
		fold.EntryData{Object: b.object("order o2", B, vecOrder2, o2, &o2.Envelope), To: A, Args: b.args("order new o2", opt)})
	// A grant change names the last seq the previous grant still covers.
	b.entry("m3-regrant-a", M, "2026-11-29T19:02:00.000Z/0000", fold.TypeGrantSet, A, "",
		fold.EntryData{Agent: A, Key: b.key(A), Level: "orchestrator", Scopes: []string{"ci", "tests"},
			Bounds: map[string]uint64{b.devices[A]: 4}, Basis: h["m1-grant-a"]})
	// An idempotent lifecycle call: data.args is lifecycle's argument hash.
	claimArgs := callArgs{Call: fold.TypeOrderClaim, Order: vecOrder2, Data: fold.EntryData{}}
	b.entry("a5-claim-o2", A, "2026-11-29T19:03:00.000Z/0000", fold.TypeOrderClaim, vecOrder2, "claim-o2",
		fold.EntryData{Basis: h["b4-create-o2"], Args: b.args("order claim o2", claimArgs)})
	b.entry("a6-release-o2", A, "2026-11-29T19:04:00.000Z/0000", fold.TypeOrderRelease, vecOrder2, "",
		fold.EntryData{Basis: h["a5-claim-o2"], Note: "no time today"})
	// Two machines claim o2 on the same basis: a branch, resolved by the lower hash.
	b.entry("a7-claim-o2", A, "2026-11-29T19:05:00.000Z/0000", fold.TypeOrderClaim, vecOrder2, "",
		fold.EntryData{Basis: h["a6-release-o2"]})
	b.entry("b5-claim-o2", B, "2026-11-29T19:05:00.000Z/0000", fold.TypeOrderClaim, vecOrder2, "",
		fold.EntryData{Basis: h["a6-release-o2"]})
	b.entry("m4-revoke-b", M, "2026-11-29T19:10:00.000Z/0000", fold.TypeGrantRevoke, B, "",
		fold.EntryData{Agent: B, Bounds: map[string]uint64{b.devices[B]: 5}, Basis: h["m2-grant-b"]})
	// Beyond the revocation's bound: counts for nothing.
	b.entry("b6-cancel-o2", B, "2026-11-29T19:20:00.000Z/0000", fold.TypeOrderCancel, vecOrder2, "",
		fold.EntryData{Basis: h["b5-claim-o2"], Note: "doing it myself"})
	// A basis binds an entry to a chain only together with its ref: ref o2, basis in o1.
	b.entry("a8-offer-o2-bad-basis", A, "2026-11-29T19:30:00.000Z/0000", fold.TypeOrderOffer, vecOrder2, "",
		fold.EntryData{Basis: h["b2-create-o1"], To: A})

	files := map[string][]byte{}
	for p, data := range b.files {
		files["channel/"+p] = data
	}
	for p, buf := range b.seg {
		files["channel/"+p] = buf.Bytes()
	}
	// The state is the fold of the channel just written, through Open and Load.
	dir := t.TempDir()
	writeTree(t, dir, files)
	b.f.State = vecSummary(t, foldDir(t, filepath.Join(dir, "channel")).State, b.f)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(b.f); err != nil {
		t.Fatal(err)
	}
	files["vectors.json"] = out.Bytes()
	return files, b.f
}

// foldDir opens the channel in dir with a throw-away home and loads it.
func foldDir(t *testing.T, dir string) *View {
	t.Helper()
	c := openDir(t, dir)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func openDir(t *testing.T, dir string) *Channel {
	t.Helper()
	home := t.TempDir()
	h := &Home{ConfigDir: filepath.Join(home, "config"), CacheDir: filepath.Join(home, "cache")}
	c, err := Open(h, dir)
	if err != nil {
		t.Fatalf("opening the vector channel: %v", err)
	}
	return c
}

// vecSummary reduces a folded state to what the vectors pin, naming entries by name.
func vecSummary(t *testing.T, st *fold.State, f *vecFile) vecState {
	t.Helper()
	names := map[string]string{}
	for _, e := range f.Entries {
		names[e.Hash] = e.Name
	}
	name := func(hash string) string {
		if hash == "" {
			return ""
		}
		if n, ok := names[hash]; ok {
			return n
		}
		return hash
	}
	steps := func(ss []fold.Step) []string {
		var out []string
		for _, s := range ss {
			out = append(out, name(s.Hash))
		}
		return out
	}
	out := vecState{Agents: map[string]vecAgent{}, Orders: map[string]vecOrder{}, Contested: []vecContest{},
		Ignored: []vecIgnored{}, Idem: map[string]string{}}
	for n, a := range st.Agents {
		out.Agents[n] = vecAgent{Seated: a.Seated, Level: a.Level, Key: a.Key, Scopes: a.Scopes}
	}
	for id, o := range st.Orders {
		vo := vecOrder{Title: o.Title, State: string(o.State), Author: o.Author, Holder: o.Holder, OfferedTo: o.OfferedTo,
			Claim: name(o.Claim), Head: name(o.Head), History: steps(o.History), Progress: steps(o.Progress)}
		if o.Result != nil {
			vo.Result = o.Result.Reference + " (" + o.Result.Result + ")"
		}
		for _, r := range o.Reviews {
			vo.Reviews = append(vo.Reviews, r.By+": "+r.Verdict)
		}
		out.Orders[id] = vo
	}
	for _, c := range st.Contested {
		out.Contested = append(out.Contested, vecContest{Ref: c.Ref, Basis: name(c.Basis), Winner: name(c.Winner.Hash),
			Losers: steps(c.Losers), Involved: c.Involved})
	}
	for _, ig := range st.Ignored {
		out.Ignored = append(out.Ignored, vecIgnored{Entry: name(ig.Hash), Reason: ig.Reason})
	}
	st.Idem.All(func(k string, rec fold.IdemRec) {
		out.Idem[strings.Replace(k, "\x00", " ", 1)] = name(rec.Hash)
	})
	return out
}

func TestVectorsFerry(t *testing.T) {
	t.Parallel()
	files, f := buildVectors(t)
	if updating() {
		if err := os.RemoveAll(vecFerry); err != nil {
			t.Fatal(err)
		}
		writeTree(t, vecFerry, files)
		t.Logf("rewrote %d files under %s", len(files), vecFerry)
	}

	// Byte for byte: every generated file is stored, and nothing else is.
	stored := map[string]bool{}
	err := filepath.WalkDir(vecFerry, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(vecFerry, p)
		stored[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v (run with -update to create it)", vecFerry, err)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if !stored[p] {
			t.Errorf("%s: missing from fixtures", p)
			continue
		}
		if got := readFile(t, filepath.Join(vecFerry, p)); !bytes.Equal(got, files[p]) {
			t.Errorf("%s: the code now writes other bytes than the golden file: format v1 changed\n"+
				"golden: %q\n  code: %q", p, clip(got), clip(files[p]))
		}
	}
	for p := range stored {
		if files[p] == nil {
			t.Errorf("%s: stored but no longer generated", p)
		}
	}
	if t.Failed() {
		return
	}

	// Independent checks of the stored vectors, for a reader who trusts nothing above.
	var sf vecFile
	readJSON(t, filepath.Join(vecFerry, "vectors.json"), &sf)
	keys := map[string]ed25519.PublicKey{}
	for _, k := range sf.Keys {
		pub, err := ledger.ParseKey(k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ed25519.NewKeyFromSeed(unhex(t, k.Seed)).Public().(ed25519.PublicKey), pub) {
			t.Errorf("%s: public key does not derive from its seed", k.Writer)
		}
		keys[k.Writer] = pub
	}
	t.Run("channel", func(t *testing.T) { checkVecChannel(t, &sf, keys[fold.MasterWriter]) })
	t.Run("objects", func(t *testing.T) { checkVecObjects(t, &sf, keys) })
	t.Run("args", func(t *testing.T) { checkVecArgs(t, &sf) })
	t.Run("entries", func(t *testing.T) { checkVecEntries(t, &sf, keys) })
	t.Run("append", func(t *testing.T) { checkVecAppend(t, &sf) })
	t.Run("fold", func(t *testing.T) { checkVecFold(t, &sf) })
	_ = f
}

func checkVecChannel(t *testing.T, f *vecFile, master ed25519.PublicKey) {
	raw := readFile(t, filepath.Join(vecFerry, f.Channel.File))
	var cfg Config
	if _, err := toml.Decode(string(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	body, err := cfg.signingBody()
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != f.Channel.SigningBody {
		t.Errorf("signing body %s, want %s", body, f.Channel.SigningBody)
	}
	msg := "ferry-channel-v1\n" + vecProject + "\n" + f.Channel.SigningBody
	if f.Channel.SigningMessage != msg {
		t.Errorf("signing message %q, want %q", f.Channel.SigningMessage, msg)
	}
	sig, err := ledger.ParseSig(cfg.Sig)
	if err != nil || cfg.Sig != f.Channel.Sig || !ed25519.Verify(master, []byte(msg), sig) {
		t.Errorf("channel.toml signature does not verify (%v)", err)
	}
	if err := ledger.VerifyDomain(master, channelDomain, "another-project", body, cfg.Sig); err == nil {
		t.Error("channel.toml signature verifies for another project")
	}
}

func checkVecObjects(t *testing.T, f *vecFile, keys map[string]ed25519.PublicKey) {
	for _, o := range f.Objects {
		raw := readFile(t, filepath.Join(vecFerry, o.Path))
		if string(raw) != o.File {
			t.Errorf("%s: file bytes differ from the vector", o.Name)
		}
		c, hash, err := verify.ReadObject(filepath.Join(vecFerry, o.Path))
		if err != nil {
			t.Fatal(err)
		}
		if hash != o.Hash || ledger.HashBytes(bytes.TrimSuffix(raw, []byte("\n"))) != o.Hash {
			t.Errorf("%s: hash %s, want %s", o.Name, hash, o.Hash)
		}
		if err := verifyObjectSig(c, keys[o.Author], vecProject); err != nil {
			t.Errorf("%s: %v", o.Name, err)
		}
		sig, _ := ledger.ParseSig(o.Sig)
		if !strings.HasPrefix(o.SigningMessage, "ferry-object-v1\n"+vecProject+"\n") ||
			!ed25519.Verify(keys[o.Author], []byte(o.SigningMessage), sig) {
			t.Errorf("%s: signing message does not carry the signature", o.Name)
		}
		// An editor's BOM, CRLF and indentation change neither hash nor signature.
		var ind bytes.Buffer
		if err := json.Indent(&ind, raw, "", "    "); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "o.json")
		edited := append([]byte("\xef\xbb\xbf"), bytes.ReplaceAll(ind.Bytes(), []byte("\n"), []byte("\r\n"))...)
		if err := os.WriteFile(p, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, h2, err := verify.ReadObject(p); err != nil || h2 != o.Hash {
			t.Errorf("%s: re-indented copy hashes to %s (%v), want %s", o.Name, h2, err, o.Hash)
		}
	}
}

func checkVecArgs(t *testing.T, f *vecFile) {
	for _, a := range f.Args {
		if ledger.HashBytes([]byte(a.Canonical)) != a.Hash {
			t.Errorf("%s: hash of %s is not %s", a.Name, a.Canonical, a.Hash)
		}
		c, err := ledger.CanonicalJSON([]byte(a.Canonical))
		if err != nil || string(c) != a.Canonical {
			t.Errorf("%s: %s is not in canonical form", a.Name, a.Canonical)
		}
	}
}

func checkVecEntries(t *testing.T, f *vecFile, keys map[string]ed25519.PublicKey) {
	prev := map[string]string{}
	for _, v := range f.Entries {
		e, err := ledger.ParseLine([]byte(v.Line))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		c, _ := e.Canonical()
		if string(c) != v.Line {
			t.Errorf("%s: stored line is not canonical", v.Name)
		}
		if e.Hash() != v.Hash || ledger.HashBytes([]byte(v.Line)) != v.Hash {
			t.Errorf("%s: hash %s, want %s", v.Name, e.Hash(), v.Hash)
		}
		if e.Sig != v.Sig || e.Prev != v.Prev || e.Seq != v.Seq || e.HLC != v.HLC || e.Idem != v.Idem {
			t.Errorf("%s: parsed fields differ from the vector", v.Name)
		}
		msg, err := e.SigningMessage(vecProject)
		if err != nil || string(msg) != v.SigningMessage {
			t.Errorf("%s: signing message %q, want %q", v.Name, msg, v.SigningMessage)
		}
		// The signing message is the domain, the project and the line without "sig".
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(v.Line), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "sig")
		body, _ := ledger.Canonical(m)
		if want := "ferry-entry-v1\n" + vecProject + "\n" + string(body); v.SigningMessage != want {
			t.Errorf("%s: signing message is not domain + project + body", v.Name)
		}
		if err := e.VerifySig(keys[v.Writer], vecProject); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		if err := e.VerifySig(keys[v.Writer], "another-project"); !errors.Is(err, ledger.ErrBadSignature) {
			t.Errorf("%s: verifies for another project", v.Name)
		}
		seg := v.Writer + "/" + v.Device
		if v.Prev != prev[seg] {
			t.Errorf("%s: prev %s does not name the segment's previous entry %s", v.Name, v.Prev, prev[seg])
		}
		prev[seg] = v.Hash
		// Another spelling of the same line (BOM, indentation, CRLF) is the same entry.
		var ind bytes.Buffer
		if err := json.Indent(&ind, []byte(v.Line), "", "  "); err != nil {
			t.Fatal(err)
		}
		alt := append([]byte("\xef\xbb\xbf"), bytes.ReplaceAll(ind.Bytes(), []byte("\n"), []byte(" "))...)
		alt = append(alt, '\r')
		e2, err := ledger.ParseLine(alt)
		if err != nil || e2.Hash() != v.Hash || e2.VerifySig(keys[v.Writer], vecProject) != nil {
			t.Errorf("%s: a re-spelled line is not the same entry (%v)", v.Name, err)
		}
		// An added field is covered: it changes the hash and breaks the signature.
		added := strings.Replace(v.Line, `{`, `{"x-new":1,`, 1)
		e3, err := ledger.ParseLine([]byte(added))
		if err != nil || e3.Hash() == v.Hash || e3.VerifySig(keys[v.Writer], vecProject) == nil {
			t.Errorf("%s: an added field is not covered by hash and signature (%v)", v.Name, err)
		}
	}
}

// checkVecAppend replays the entries through ledger.Append with a clock set to each
// entry's time and checks that the segments come out byte for byte as stored: seq, prev
// and the HLC rule (counter within one millisecond) are the real append path's.
func checkVecAppend(t *testing.T, f *vecFile) {
	dir := t.TempDir()
	var now time.Time
	l, err := ledger.Open(ledger.Options{Root: dir, LockDir: filepath.Join(dir, ".locks"), Project: vecProject,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	seeds := map[string]ledger.KeySigner{}
	for _, k := range f.Keys {
		seeds[k.Writer] = ledger.KeySigner(ed25519.NewKeyFromSeed(unhex(t, k.Seed)))
	}
	for _, v := range f.Entries {
		h, err := ledger.ParseHLC(v.HLC)
		if err != nil {
			t.Fatal(err)
		}
		now = time.UnixMilli(h.Ms)
		e, err := l.Append(v.Writer, v.Device, ledger.Draft{Type: v.Type, Ref: v.Ref, Data: v.Data, Idem: v.Idem}, seeds[v.Writer], ledger.HLC{})
		if err != nil {
			t.Fatal(err)
		}
		if e.Hash() != v.Hash || e.HLC != v.HLC {
			t.Errorf("%s: Append wrote %s at %s, want %s at %s", v.Name, e.Hash(), e.HLC, v.Hash, v.HLC)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(vecFerry, "channel", "ledger", "*", "*.jsonl"))
	if len(segs) != len(f.Keys) {
		t.Fatalf("want one stored segment per writer, have %d", len(segs))
	}
	for _, s := range segs {
		rel, _ := filepath.Rel(filepath.Join(vecFerry, "channel"), s)
		if got := readFile(t, filepath.Join(dir, rel)); !bytes.Equal(got, readFile(t, s)) {
			t.Errorf("%s: Append wrote other bytes", rel)
		}
	}
}

// checkVecFold folds a copy of the stored channel and checks the documented outcome.
func checkVecFold(t *testing.T, f *vecFile) {
	dir := t.TempDir()
	files := map[string][]byte{}
	err := filepath.WalkDir(filepath.Join(vecFerry, "channel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(vecFerry, "channel"), p)
		files[rel] = readFile(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, files)
	c := openDir(t, dir)
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	st := v.State
	got := vecSummary(t, st, f)
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(f.State)
	if !bytes.Equal(gj, wj) {
		t.Errorf("folded state differs from vectors.json\n got: %s\nwant: %s", gj, wj)
	}
	hash := map[string]string{}
	for _, e := range f.Entries {
		hash[e.Name] = e.Hash
	}

	// The documented outcome, stated independently of the golden summary.
	if n := len(v.Snapshot.Entries); n != len(f.Entries) || len(v.Snapshot.Forks) != 0 {
		t.Errorf("snapshot holds %d entries and %d forks, want %d and none", n, len(v.Snapshot.Forks), len(f.Entries))
	}
	a, b := st.Agents[vecAgentA], st.Agents[vecAgentB]
	if a == nil || !a.Seated || a.Level != "orchestrator" || !slices.Equal(a.Scopes, []string{"ci", "tests"}) {
		t.Errorf("%s: want seated orchestrator with scopes ci, tests; got %+v", vecAgentA, a)
	}
	if b == nil || b.Seated || b.Level != "none" {
		t.Errorf("%s: want revoked (not seated, level none); got %+v", vecAgentB, b)
	}
	if lv := st.LevelAt(&v.Snapshot.Entries[0]); lv != fold.LevelMember { // a1-join at seq 1 ≤ bound 4
		t.Errorf("a1-join falls under level %s, want member", lv)
	}
	o1 := st.Order(vecOrder1)
	if o1 == nil || o1.State != fold.StateAccepted || o1.Holder != vecAgentA || o1.Result == nil ||
		o1.Result.Reference != "commit 1a2b3c4d" || o1.Result.Result != vecResult || len(o1.Progress) != 1 ||
		o1.Head != hash["b3-review-o1"] || o1.Claim != hash["a2-claim-o1"] {
		t.Errorf("%s: want accepted, held by %s, result %s, one progress note; got %+v", vecOrder1, vecAgentA, vecResult, o1)
	}
	winner, loser := "a7-claim-o2", "b5-claim-o2"
	if hash[loser] < hash[winner] {
		winner, loser = loser, winner
	}
	o2 := st.Order(vecOrder2)
	if o2 == nil || o2.State != fold.StateClaimed || o2.Claim != hash[winner] || len(o2.Contests) != 1 {
		t.Fatalf("%s: want claimed by the branch with the lower hash (%s); got %+v", vecOrder2, winner, o2)
	}
	ct := o2.Contests[0]
	if ct.Basis != hash["a6-release-o2"] || ct.Winner.Hash != hash[winner] || len(ct.Losers) != 1 ||
		ct.Losers[0].Hash != hash[loser] || !slices.Equal(ct.Involved, []string{vecAgentA, vecAgentB}) {
		t.Errorf("contest: %+v", ct)
	}
	ignored := map[string]string{}
	for _, ig := range st.Ignored {
		ignored[ig.Hash] = ig.Reason
	}
	if len(st.Ignored) != 2 || ignored[hash["b6-cancel-o2"]] != "writer's grant was revoked" ||
		ignored[hash["a8-offer-o2-bad-basis"]] != "basis names an entry of another chain" {
		t.Errorf("want b6-cancel-o2 (revoked) and a8-offer-o2-bad-basis (basis of another order) ignored; got %+v", st.Ignored)
	}
	if len(o1.Contests) != 0 || len(o1.History) != 4 {
		t.Errorf("%s: an entry about another order changed its chain: %+v", vecOrder1, o1)
	}
	for _, e := range f.Entries {
		// Entries are signed and granted except b6; a8 counts as an entry but not in a chain.
		if counts := st.Counts(e.Hash); counts != (e.Name != "b6-cancel-o2") {
			t.Errorf("%s: counts = %v", e.Name, counts)
		}
	}

	// Idempotency: a replay with the same arguments returns the first call's order; other
	// arguments are a conflict.
	args := map[string]string{}
	for _, a := range f.Args {
		args[a.Name] = a.Hash
	}
	s := &Session{Channel: c, Name: vecAgentB}
	if ref, replay, err := s.checkIdem(st, "dispatch-o2", args["order new o2"]); err != nil || !replay || ref != vecOrder2 {
		t.Errorf("replay of dispatch-o2: %q %v %v", ref, replay, err)
	}
	if _, _, err := s.checkIdem(st, "dispatch-o2", args["order claim o2"]); !errs.Is(err, errs.Conflict) {
		t.Errorf("dispatch-o2 with other arguments: %v, want conflict", err)
	}
	if got := argsHash(NewOrderOptions{Title: "Bump the Go toolchain to 1.26", Labels: []string{"ci"}, To: vecAgentA, Key: "another key"}); got != args["order new o2"] {
		t.Errorf("the idempotency key is part of the argument hash: %s", got)
	}

	// ledger verify: the revoked writer's late entry has no key and is ignored by the fold;
	// everything else is clean.
	rep, err := c.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Objects) != 0 || len(rep.Ledger.Forks) != 0 || len(rep.Ignored) != 2 {
		t.Errorf("verify: %+v", rep)
	}
	for _, p := range rep.Ledger.Problems {
		if p.Kind != ledger.KindUnknownKey || p.Writer != vecAgentB || p.Seq != 6 {
			t.Errorf("verify problem: %+v", p)
		}
	}
}

// ---------------------------------------------------------------------------
// helpers

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	if err := json.Unmarshal(readFile(t, p), v); err != nil {
		t.Fatalf("decoding %s: %v", p, err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func writeTree(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func clip(b []byte) []byte {
	if len(b) > 400 {
		return append(slices.Clip(b[:400]), "…"...)
	}
	return b
}

// TestObservedHLCSkipsSkewed: a write absorbs the highest HLC it has read within
// max_skew, even when a further-ahead entry exists (docs/format.md §6).
func TestObservedHLCSkipsSkewed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 18, 30, 0, 0, time.UTC)
	at := func(d time.Duration) ledger.Entry {
		return ledger.Entry{HLC: ledger.HLC{Ms: now.Add(d).UnixMilli()}.String()}
	}
	s := &Session{Channel: &Channel{Config: Config{Policy: fold.DefaultPolicy()}, Now: func() time.Time { return now }}}
	snap := &ledger.Snapshot{Entries: []ledger.Entry{at(-time.Minute), at(10 * time.Minute), at(2 * time.Hour)}}
	if got, want := s.observedHLC(&View{Snapshot: snap}), (ledger.HLC{Ms: now.Add(10 * time.Minute).UnixMilli()}); got != want {
		t.Errorf("observed %s, want %s", got, want)
	}
	if got := s.observedHLC(&View{Snapshot: &ledger.Snapshot{Entries: []ledger.Entry{at(2 * time.Hour)}}}); got != (ledger.HLC{}) {
		t.Errorf("observed %s, want none", got)
	}
}
