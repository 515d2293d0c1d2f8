package fsbus

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/arrivals"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// testHome returns a Home under a temp dir (never the user's real one).
func testHome(t *testing.T) *Home {
	t.Helper()
	d := t.TempDir()
	return &Home{ConfigDir: filepath.Join(d, "config"), CacheDir: filepath.Join(d, "cache")}
}

func TestNewIDShape(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := fold.NewID(fold.PrefixOrder)
		if !fold.ValidID(id) || len(id) != 2+fold.IDLen {
			t.Fatalf("NewID = %q, not a valid id", id)
		}
		if seen[id] {
			t.Fatalf("NewID repeated %q", id)
		}
		seen[id] = true
	}
	for _, c := range "ilou" {
		for id := range seen {
			if strings.ContainsRune(id[2:], c) {
				t.Fatalf("id %q uses %q, outside Crockford base32", id, c)
			}
		}
	}
	if d := fold.NewDeviceID(); len(d) != fold.DeviceLen || !fold.ValidName(d) {
		t.Fatalf("NewDeviceID = %q", d)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"claude-code-laptop", true}, {"a", true}, {"0x", true},
		{"", false}, {"-a", false}, {"A", false}, {"a_b", false}, {"a.b", false},
		{"con", false}, {"lpt1", false}, {strings.Repeat("a", 64), false},
	} {
		if got := fold.ValidName(tc.in); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.in, got, tc.ok)
		}
	}
}

func TestResolveID(t *testing.T) {
	t.Parallel()
	known := []string{"o-abc0000000000", "o-abd0000000000", "o-xyz0000000000"}
	for _, tc := range []struct {
		q, want string
		cat     errs.Category
	}{
		{"o-abc0000000000", "o-abc0000000000", ""},
		{"o-x", "o-xyz0000000000", ""},
		{"xyz", "o-xyz0000000000", ""},
		{"o-ab", "", errs.Invalid},
		{"o-q", "", errs.NotFound},
		{"", "", errs.Invalid},
	} {
		got, err := fold.ResolveID("order", tc.q, known)
		if tc.cat != "" {
			if !errs.Is(err, tc.cat) {
				t.Errorf("resolveID(%q) err = %v, want category %s", tc.q, err, tc.cat)
			}
			if tc.cat == errs.Invalid && tc.q != "" && !strings.Contains(err.Error(), "o-abc0000000000, o-abd0000000000") {
				t.Errorf("ambiguous prefix error does not list candidates: %v", err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolveID(%q) = %q, %v; want %q", tc.q, got, err, tc.want)
		}
	}
}

// TestResolveIDNear: an id that matches nothing names the closest known ids — the
// fewest edits from it (compared as a prefix), or else the longest shared prefix of at
// least four characters after the kind prefix — at most three; a short or far query
// names none.
func TestResolveIDNear(t *testing.T) {
	t.Parallel()
	known := []string{"o-9t4wq1hhc0aaa", "o-k3f9x2abq7mze", "o-k3f9x2abq7mzf", "o-zzzzzzzzzzzz1"}
	for _, tc := range []struct {
		q    string
		near []string
	}{
		{"o-k3f9x2abq7mzu", []string{"o-k3f9x2abq7mze", "o-k3f9x2abq7mzf"}}, // last character wrong: both one edit away
		{"o-k3f9x2abq7mzex", []string{"o-k3f9x2abq7mze"}},                   // one too many: the other is two away
		{"k3f9x2abq7mzeu", []string{"o-k3f9x2abq7mze"}},                     // no kind prefix
		{"m-k3f9x2abq7mze", []string{"o-k3f9x2abq7mze"}},                    // the kind letter wrong
		{"o-k3f9x2aaa", []string{"o-k3f9x2abq7mze", "o-k3f9x2abq7mzf"}},     // a prefix with a typo
		{"o-k3g9", []string{"o-k3f9x2abq7mze", "o-k3f9x2abq7mzf"}},          // one edit in four
		{"o-9t4wq1hhzzzzz", []string{"o-9t4wq1hhc0aaa"}},                    // a long shared prefix
		{"o-9t4wzzzzzzzzz", []string{"o-9t4wq1hhc0aaa"}},                    // four shared characters
		{"o-9t4zzzzzzzzzz", nil},                                            // three: too few
		{"o-k3g", nil},                                                      // too short to guess
		{"o-vvvvvvvvvvvvv", nil},                                            // nothing close
	} {
		_, err := fold.ResolveID("order", tc.q, known)
		if !errs.Is(err, errs.NotFound) {
			t.Fatalf("resolveID(%q): %v, want not_found", tc.q, err)
		}
		want := fmt.Sprintf("no order %q", tc.q)
		if len(tc.near) > 0 {
			want += "; did you mean " + strings.Join(tc.near, " or ") + "?"
		}
		if msg := errOf(err).Message; msg != want {
			t.Errorf("resolveID(%q): %q, want %q", tc.q, msg, want)
		}
	}
	// Three at most.
	many := []string{"o-aaaaaaaaaaaa1", "o-aaaaaaaaaaaa2", "o-aaaaaaaaaaaa3", "o-aaaaaaaaaaaa4"}
	_, err := fold.ResolveID("order", "o-aaaaaaaaaaaax", many)
	if want := `no order "o-aaaaaaaaaaaax"; did you mean o-aaaaaaaaaaaa1 or o-aaaaaaaaaaaa2 or o-aaaaaaaaaaaa3?`; err == nil || errOf(err).Message != want {
		t.Errorf("many near ids: %v, want %q", err, want)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "x.json")
	if err := fsutil.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsutil.WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "two" {
		t.Fatalf("content %q", b)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("temp files left behind: %v", ents)
	}
	// writeNew refuses to overwrite an object (written once).
	if err := writeNew(p, []byte("three")); err == nil {
		t.Fatal("writeNew overwrote an existing file")
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("writeNew changed the file: %q", b)
	}
	// A target that is a directory fails and leaves no temp file.
	if err := fsutil.WriteFile(dir, []byte("x"), 0o644); err == nil {
		t.Fatal("writing over a directory succeeded")
	}
	ents, _ = os.ReadDir(filepath.Dir(dir))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
}

func TestKeysArePrivateAndNeverOverwritten(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	k, err := h.NewKey("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.NewKey("acme", "alice"); !errs.Is(err, errs.Conflict) {
		t.Fatalf("second NewKey: %v, want conflict", err)
	}
	k2, err := h.LoadKey("acme", "alice")
	if err != nil || !k2.Public().Equal(k.Public()) {
		t.Fatalf("LoadKey = %v, %v", k2, err)
	}
	if fi, _ := os.Stat(h.keyPath("acme", "alice")); fi != nil && os.PathSeparator == '/' && fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := h.LoadKey("acme", "bob"); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "ferry join --as bob") {
		t.Fatalf("LoadKey of a missing key: %v", err)
	}
	if !strings.HasPrefix(h.keyPath("acme", "alice"), h.ConfigDir) {
		t.Fatal("keys must live in the config dir, never the cache dir")
	}
}

func TestInitOpenAndTrust(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	dir := filepath.Join(t.TempDir(), "acme")
	c, err := Init(h, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"channel.toml", "PROTOCOL.md", ".gitattributes", ".stignore", "ledger", "orders"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("init did not make %s", f)
		}
	}
	if _, err := Init(h, InitOptions{Dir: dir, Project: "acme"}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("second init: %v, want conflict", err)
	}
	if _, err := Init(h, InitOptions{Dir: t.TempDir(), Project: "Bad_ID"}); !errs.Is(err, errs.Invalid) {
		t.Fatalf("bad project id: %v, want invalid", err)
	}
	m, _ := h.Projects()
	if m["acme"] != c.Root {
		t.Fatalf("project map = %v", m)
	}

	// A second machine pins the master key on first use.
	h2 := testHome(t)
	if _, err := Open(h2, dir); err != nil {
		t.Fatal(err)
	}
	// A channel.toml naming another master key (a new channel under the same project
	// id) is refused on a machine that pinned the first one.
	other := filepath.Join(t.TempDir(), "acme")
	if _, err := Init(testHome(t), InitOptions{Dir: other, Project: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(h2, other); !errs.Is(err, errs.Denied) {
		t.Fatalf("open with another master key: %v, want denied", err)
	}

	// Editing channel.toml breaks its signature: refused, nothing written.
	p := filepath.Join(dir, "channel.toml")
	raw, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(raw), "quiet_after_s = 300", "quiet_after_s = 1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(h, dir); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("open of an edited channel.toml: %v", err)
	}
	// A key added by hand is covered by the signature too (ADR 0001 §2).
	if err := os.WriteFile(p, append(raw, []byte("\nextra = 1\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(h, dir); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("open of channel.toml with an added key: %v", err)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(h, dir); err != nil {
		t.Fatalf("restored channel.toml: %v", err)
	}
	if _, err := Open(h, t.TempDir()); !errs.Is(err, errs.NotFound) {
		t.Fatalf("open of an empty dir: %v, want not_found", err)
	}
}

func TestArrivalLogCursorsAndRepair(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(c, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	v1, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	cur := v1.Arrivals.Cursor()
	if _, err := Join(c, "bob", "test"); err != nil {
		t.Fatal(err)
	}
	v2, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	n, ok := v2.Arrivals.ParseCursor(cur)
	if !ok || n != v1.Arrivals.Last || v2.Arrivals.Last != n+2 { // bob's agent.join and agent.support
		t.Fatalf("cursor %q → %d,%v; last %d → %d", cur, n, ok, v1.Arrivals.Last, v2.Arrivals.Last)
	}
	if _, ok := v2.Arrivals.ParseCursor("zzzz.3"); ok {
		t.Fatal("a foreign cursor was accepted")
	}
	if _, ok := v2.Arrivals.Sighting["bob"]; !ok {
		t.Fatal("no sighting of bob")
	}
	// A damaged log is moved aside and rebuilt; an old cursor then falls back.
	p := c.arrivalsPath()
	if err := os.WriteFile(p, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v3, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v3.Arrivals.Last != 4 || v3.Arrivals.LogID == v2.Arrivals.LogID {
		t.Fatalf("rebuilt log: last %d id %s (old %s)", v3.Arrivals.Last, v3.Arrivals.LogID, v2.Arrivals.LogID)
	}
	if _, ok := v3.Arrivals.ParseCursor(cur); ok {
		t.Fatal("cursor into a lost log was accepted")
	}
	d := c.Catchup(v3, "alice", cur)
	if d.Since {
		t.Fatal("catchup with a lost cursor must fall back to the full digest")
	}
	// A torn last line (crash mid-append) is ignored, not fatal.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0o644)
	f.WriteString("5 sha256:ab")
	f.Close()
	if _, err := arrivals.Load(p); err != nil {
		t.Fatalf("torn arrival log line: %v", err)
	}
	if _, err := Join(c, "carol", "test"); err != nil {
		t.Fatal(err)
	}
	v4, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v4.Arrivals.LogID != v3.Arrivals.LogID || v4.Arrivals.Last != 6 {
		t.Fatalf("after a torn line the log was rebuilt or lost an arrival: id %s→%s last %d", v3.Arrivals.LogID, v4.Arrivals.LogID, v4.Arrivals.Last)
	}
}

func TestDecodeDataRejectsCaseVariantKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		data string
		ok   bool
	}{
		{`{"basis":"sha256:aa"}`, true},
		{`{"basis":"sha256:aa","unknown_field":1}`, true},
		{`{"Basis":"sha256:bb"}`, false},
		{`{"basis":"sha256:aa","BASIS":"sha256:bb"}`, false},
		{`[1]`, false},
	} {
		e := ledger.Entry{Data: []byte(tc.data)}
		if _, ok := fold.DecodeData(&e); ok != tc.ok {
			t.Errorf("decodeData(%s) ok = %v, want %v", tc.data, ok, tc.ok)
		}
	}
}

// TestVanishedChannelFolder: a long-running process (ferry mcp serve) whose channel
// folder disappears gets not_found on every read and write, and never recreates the
// folder (no presence heartbeat, no .stignore, no segment).
func TestVanishedChannelFolder(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	dir := filepath.Join(t.TempDir(), "acme")
	c, err := Init(h, InitOptions{Dir: dir, Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(c, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	m, _ := c.As(fold.MasterWriter)
	if _, err := m.Grant(GrantOptions{Agent: "alice", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	alice, _ := c.As("alice")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(); !errs.Is(err, errs.NotFound) {
		t.Fatalf("Load: %v, want not_found", err)
	}
	if _, err := alice.NewOrder(NewOrderOptions{Title: "x"}); !errs.Is(err, errs.NotFound) {
		t.Fatalf("NewOrder: %v, want not_found", err)
	}
	if err := alice.WritePresence("working", nil); !errs.Is(err, errs.NotFound) {
		t.Fatalf("WritePresence: %v, want not_found", err)
	}
	if _, err := Join(c, "alice", "test"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("Join: %v, want not_found", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("the vanished channel folder was recreated")
	}
}

// TestIdempotencyKeyBounded: keys are stored in signed entries forever, so they are
// short printable ASCII; anything else is refused and writes nothing.
func TestIdempotencyKeyBounded(t *testing.T) {
	t.Parallel()
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(c, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	m, _ := c.As(fold.MasterWriter)
	if _, err := m.Grant(GrantOptions{Agent: "alice", Level: "member"}); err != nil {
		t.Fatal(err)
	}
	alice, _ := c.As("alice")
	v0, _ := c.Load()
	for _, key := range []string{strings.Repeat("k", maxIdemKey+1), "has space", "tab\tkey", "ключ"} {
		if _, err := alice.NewOrder(NewOrderOptions{Title: "x", Key: key}); !errs.Is(err, errs.Invalid) {
			t.Errorf("key %q: %v, want invalid", key, err)
		}
	}
	if _, err := alice.NewOrder(NewOrderOptions{Title: "x", Key: strings.Repeat("k", maxIdemKey)}); err != nil {
		t.Fatalf("a key of the maximum length: %v", err)
	}
	v1, _ := c.Load()
	if len(v1.Snapshot.Entries) != len(v0.Snapshot.Entries)+1 {
		t.Fatalf("refused keys wrote entries: %d → %d", len(v0.Snapshot.Entries), len(v1.Snapshot.Entries))
	}
}

// errOf is the *errs.Error err holds, or an empty one: a test reads its hint or
// message without a type assertion.
func errOf(err error) *errs.Error {
	if fe, ok := errs.From(err); ok {
		return fe
	}
	return &errs.Error{}
}
