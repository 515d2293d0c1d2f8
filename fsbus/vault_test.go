package fsbus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/internal/secretguard/secrettest"
	"github.com/ferryhq/ferry/ledger"
)

// TestVaultPutGet: a value is encrypted to the named agents and its author, only they
// decrypt it, nothing in the channel holds it in clear, and the newest put wins
// (ADR 0009).
func TestVaultPutGet(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	value := []byte("pg-" + secrettest.Token(50, 24, secrettest.Alnum) + "\n")
	sec, err := w.alice.SecretPut("db-password", []string{"bob"}, value, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(sec.Recipients, ",") != "alice,bob" || sec.Author != "alice" || !fold.ValidSecretID(sec.ID) {
		t.Fatalf("put: %+v", sec)
	}
	for _, s := range []*Session{w.alice, w.bob} {
		got, _, err := s.SecretGet("db-password")
		if err != nil || !bytes.Equal(got, value) {
			t.Fatalf("%s get: %q, %v", s.Name, got, err)
		}
	}
	if _, _, err := w.carol.SecretGet("db-password"); !errs.Is(err, errs.Denied) {
		t.Fatalf("carol (not a recipient): %v, want denied", err)
	}
	if _, _, err := w.bob.SecretGet("nope"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("unknown name: %v, want not_found", err)
	}
	// Nothing on disk holds the value in clear.
	filepath.WalkDir(w.c.Root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, bytes.TrimSpace(value)) {
				t.Errorf("%s holds the value in clear", p)
			}
		}
		return nil
	})

	// A second put of the name (master may replace any name) wins; the list shows
	// names, never values.
	value2 := []byte("second-" + secrettest.Token(51, 20, secrettest.Alnum))
	if _, err := w.master.SecretPut("db-password", []string{"carol", "bob"}, value2, ""); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Session{w.bob, w.carol, w.master} {
		if got, _, err := s.SecretGet("db-password"); err != nil || !bytes.Equal(got, value2) {
			t.Fatalf("%s get after the second put: %q, %v", s.Name, got, err)
		}
	}
	if _, _, err := w.alice.SecretGet("db-password"); !errs.Is(err, errs.Denied) {
		t.Fatalf("alice after a put not to her: %v, want denied", err)
	}
	list := w.load(t).SecretList()
	if len(list) != 1 || list[0].Name != "db-password" || list[0].Puts != 2 || list[0].Author != "master" || list[0].Owner != "alice" {
		t.Fatalf("list: %+v", list)
	}

	// A revoked recipient still opens what was encrypted to it before (ADR 0009 says so).
	if _, err := w.master.Revoke("carol"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := w.carol.SecretGet("db-password"); err != nil || !bytes.Equal(got, value2) {
		t.Fatalf("revoked carol reading an old put: %q, %v (ADR 0009 documents that she can)", got, err)
	}
}

// TestVaultRefusals: every refusal of put and get, each writing nothing.
func TestVaultRefusals(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	if _, err := w.master.Retire("carol"); err != nil {
		t.Fatal(err)
	}
	v := []byte("s3cret-value")
	cases := []struct {
		name string
		s    *Session
		sec  string
		to   []string
		val  []byte
		cat  errs.Category
		want string
	}{
		{"worker", w.wendy, "x", []string{"bob"}, v, errs.Denied, "needs level member"},
		{"unseated author", w.dave, "x", []string{"bob"}, v, errs.Denied, "not seated"},
		{"unseated recipient", w.alice, "x", []string{"dave"}, v, errs.Invalid, "dave is not seated"},
		{"retired recipient", w.alice, "x", []string{"carol"}, v, errs.Invalid, "carol is retired"},
		{"unknown recipient", w.alice, "x", []string{"zed"}, v, errs.NotFound, "no agent zed"},
		{"no recipient", w.alice, "x", nil, v, errs.Invalid, "at least one recipient"},
		{"bad name", w.alice, "../etc", []string{"bob"}, v, errs.Invalid, "bad secret name"},
		{"long name", w.alice, strings.Repeat("a", fold.MaxSecretName+1), []string{"bob"}, v, errs.Invalid, "bad secret name"},
		{"empty value", w.alice, "x", []string{"bob"}, nil, errs.Invalid, "empty secret value"},
		{"value too large", w.alice, "x", []string{"bob"}, make([]byte, MaxSecretValue+1), errs.Invalid, "secret value is 65537 bytes; the limit is 65536"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := channelFiles(t, w.c.Root)
			_, err := tc.s.SecretPut(tc.sec, tc.to, tc.val, "")
			if !errs.Is(err, tc.cat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %s containing %q", err, tc.cat, tc.want)
			}
			if !sameFiles(before, channelFiles(t, w.c.Root)) {
				t.Fatal("a refused put changed the channel")
			}
		})
	}

	// The longest name the cap names is accepted (63: a
	// portable name stops there).
	if _, err := w.alice.SecretPut(strings.Repeat("a", fold.MaxSecretName), []string{"bob"}, v, ""); err != nil {
		t.Fatalf("a %d-character name: %v", fold.MaxSecretName, err)
	}
	// An object edited on disk is never decrypted; a missing one is pending sync.
	sec, err := w.alice.SecretPut("api", []string{"bob"}, v, "")
	if err != nil {
		t.Fatal(err)
	}
	p := vaultPath(w.c.Root, "api", sec.ID)
	orig, _ := os.ReadFile(p)
	edited := bytes.Clone(orig)
	edited[len(edited)-1] ^= 1
	os.WriteFile(p, edited, 0o644)
	if _, _, err := w.bob.SecretGet("api"); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "edited or damaged") {
		t.Fatalf("edited object: %v", err)
	}
	os.Remove(p)
	if _, _, err := w.bob.SecretGet("api"); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("missing object: %v", err)
	}
	os.WriteFile(p, orig, 0o644)
	if got, _, err := w.bob.SecretGet("api"); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("restored object: %q, %v", got, err)
	}
	// An idempotent replay writes nothing and returns the first put.
	a, err := w.alice.SecretPut("k", []string{"bob"}, v, "put-1")
	if err != nil {
		t.Fatal(err)
	}
	before := channelFiles(t, w.c.Root)
	b, err := w.alice.SecretPut("k", []string{"bob"}, v, "put-1")
	if err != nil || b.ID != a.ID || !sameFiles(before, channelFiles(t, w.c.Root)) {
		t.Fatalf("replay: %+v, %v", b, err)
	}
	if _, err := w.alice.SecretPut("k", []string{"bob"}, []byte("other"), "put-1"); !errs.Is(err, errs.Conflict) {
		t.Fatalf("replay with another value: %v, want conflict", err)
	}
	var se *secretguard.Error
	if errors.As(err, &se) {
		t.Fatal("unexpected secret guard error")
	}
}

// TestVaultArgsLeakNothing: with an idempotency key, data.args must not let a reader of
// the ledger test guesses of the value (10,000 guesses would recover a 4-digit PIN
// from an unkeyed hash). Replays still match and other values conflict.
func TestVaultArgsLeakNothing(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	pin := []byte("4821")
	if _, err := w.alice.SecretPut("door-pin", []string{"bob"}, pin, "pin-1"); err != nil {
		t.Fatal(err)
	}
	var args string
	for _, e := range w.load(t).Snapshot.Entries {
		if e.Type == fold.TypeSecretPut && e.Ref == "door-pin" {
			var d fold.SecretData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			args = d.Args
		}
	}
	if args == "" {
		t.Fatal("the put carries no data.args")
	}
	recips := []string{"alice", "bob"}
	for i := range 10000 {
		guess := []byte(fmt.Sprintf("%04d", i))
		sum := sha256.Sum256(guess)
		h := hex.EncodeToString(sum[:])
		for _, cand := range []string{
			argsHash(secretArgs{Name: "door-pin", Recipients: recips, Value: h}),
			"sha256:" + h, h,
		} {
			if strings.Contains(args, strings.TrimPrefix(cand, "sha256:")) {
				t.Fatalf("data.args %s is testable from the ledger: guess %s matches", args, guess)
			}
		}
	}
	// The author's replay still matches; the same key with another value conflicts.
	before := channelFiles(t, w.c.Root)
	if _, err := w.alice.SecretPut("door-pin", []string{"bob"}, pin, "pin-1"); err != nil || !sameFiles(before, channelFiles(t, w.c.Root)) {
		t.Fatalf("replay: %v (or it wrote)", err)
	}
	if _, err := w.alice.SecretPut("door-pin", []string{"bob"}, []byte("4822"), "pin-1"); !errs.Is(err, errs.Conflict) {
		t.Fatalf("same key, other value: %v, want conflict", err)
	}
}

// TestVaultNameOwner: a name belongs to its first author; only that author or master
// replaces it. Another member's put is refused (denied, nothing written), and one that
// slipped past the check (written where the first put had not arrived) is ignored by
// get and reported by list (else alice could silently replace master's
// deploy-token, and master be denied its own secret). ADR 0009 §2.
func TestVaultNameOwner(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	mv := []byte("master-" + secrettest.Token(60, 24, secrettest.Alnum))
	if _, err := w.master.SecretPut("deploy-token", []string{"bob"}, mv, ""); err != nil {
		t.Fatal(err)
	}
	before := channelFiles(t, w.c.Root)
	_, err := w.alice.SecretPut("deploy-token", []string{"bob"}, []byte("alice-value"), "")
	if !errs.Is(err, errs.Denied) || !strings.Contains(err.Error(), "secret deploy-token belongs to master") {
		t.Fatalf("alice replacing master's secret: %v, want denied", err)
	}
	if !sameFiles(before, channelFiles(t, w.c.Root)) {
		t.Fatal("a refused put changed the channel")
	}
	for _, s := range []*Session{w.bob, w.master} {
		if got, sec, err := s.SecretGet("deploy-token"); err != nil || !bytes.Equal(got, mv) || sec.Author != "master" {
			t.Fatalf("%s get: %q, %+v, %v", s.Name, got, sec, err)
		}
	}
	// The owner and master replace; the owner stays the first author.
	if _, err := w.alice.SecretPut("alice-token", []string{"bob"}, []byte("a-1-value"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.alice.SecretPut("alice-token", []string{"bob"}, []byte("a-2-value"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.master.SecretPut("alice-token", []string{"bob"}, []byte("m-3-value"), ""); err != nil {
		t.Fatal(err)
	}
	if got, sec, err := w.bob.SecretGet("alice-token"); err != nil || string(got) != "m-3-value" || sec.Owner != "alice" || sec.Puts != 3 {
		t.Fatalf("bob get alice-token: %q, %+v, %v", got, sec, err)
	}
	// A put by bob that bypassed the write check: counted as an entry, ignored as a value.
	_, _, err = w.bob.write(func(v *View) (*ledger.Draft, []pendingObject, error) {
		d := fold.SecretData{Object: "sha256:" + strings.Repeat("0", 64), ID: fold.NewID(fold.PrefixSecret), Recipients: []string{"bob", "master"}}
		return &ledger.Draft{Type: fold.TypeSecretPut, Ref: "deploy-token", Data: mustJSON(d)}, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, sec, err := w.master.SecretGet("deploy-token"); err != nil || !bytes.Equal(got, mv) || strings.Join(sec.Ignored, ",") != "bob" {
		t.Fatalf("master get after bob's stray put: %q, %+v, %v", got, sec, err)
	}
	for _, sec := range w.load(t).SecretList() {
		if sec.Name == "deploy-token" && (sec.Author != "master" || strings.Join(sec.Ignored, ",") != "bob" || sec.Puts != 1) {
			t.Fatalf("list: %+v", sec)
		}
	}
}

// TestVaultDoctorAndVerify: an edited vault file is reported by `ledger verify` and in
// its findings, which doctor starts from (get says "run ferry doctor", so doctor must
// report it); an empty one (still syncing) is retry_needed and arriving, not a problem;
// secret names that look like object ids (a--b, o-x) are not taken for objects
// (fsbus/doctor's TestDoctorVaultNames: no pending_sync asks/a--b.json either).
func TestVaultDoctorAndVerify(t *testing.T) {
	t.Parallel()
	w := newTalkWorld(t)
	v := []byte("s3cret-value")
	for _, n := range []string{"a--b", "a-x", "o-x", "m-x"} {
		if _, err := w.alice.SecretPut(n, []string{"bob"}, v, ""); err != nil {
			t.Fatal(err)
		}
	}
	r := verified(t, w.c)
	for _, f := range r.Findings {
		if f.Level != verify.LevelInfo {
			t.Errorf("a clean vault: finding %+v", f)
		}
	}
	sec, err := w.alice.SecretPut("api", []string{"bob"}, v, "")
	if err != nil {
		t.Fatal(err)
	}
	p := vaultPath(w.c.Root, "api", sec.ID)
	rp := filepath.ToSlash(filepath.Join("vault", "api", sec.ID+".age"))
	orig, _ := os.ReadFile(p)

	// Empty: still arriving.
	os.WriteFile(p, nil, 0o644)
	if _, _, err := w.bob.SecretGet("api"); !errs.Is(err, errs.RetryNeeded) {
		t.Fatalf("empty vault file: %v, want retry_needed", err)
	}
	vr, err := w.c.Verify(w.load(t))
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() || !slices.Contains(vr.Arriving, filepath.FromSlash(rp)) && !slices.Contains(vr.Arriving, rp) {
		t.Fatalf("empty vault file: verify %+v, want arriving only", vr)
	}

	// Edited: an error for verify and in its findings.
	edited := bytes.Clone(orig)
	edited[len(edited)-1] ^= 1
	os.WriteFile(p, edited, 0o644)
	vr, err = w.c.Verify(w.load(t))
	if err != nil {
		t.Fatal(err)
	}
	if vr.OK() || len(vr.Objects) != 1 || !strings.Contains(filepath.ToSlash(vr.Objects[0]), rp+": differs from the hash") {
		t.Fatalf("edited vault file: verify objects %q", vr.Objects)
	}
	found := false
	for _, f := range verified(t, w.c).Findings {
		if f.Check == verify.CheckObject && f.Level == verify.LevelError && strings.Contains(filepath.ToSlash(f.Detail), rp) {
			found = true
		}
	}
	if !found {
		t.Fatal("the findings do not report the edited vault file")
	}
}
