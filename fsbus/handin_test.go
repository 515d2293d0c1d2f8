package fsbus

import (
	"os"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
)

// TestHandins: a worker hands in a reference (object handins/<writer>/<id>.json plus
// handin.add); a submit names it by prefix and the order's result carries the full id;
// an unknown hand-in id is refused; an edited object makes the entry count for nothing
// and one not yet arrived is pending.
func TestHandins(t *testing.T) {
	t.Parallel()
	c, _, ss := primaryWorld(t, map[string]string{"wendy": "worker", "mike": "member"})
	wendy, mike := ss["wendy"], ss["mike"]
	h, err := wendy.HandinAdd(" branch:fix-login ", NoteOptions{Note: " the fix \n and its test "})
	if err != nil {
		t.Fatal(err)
	}
	if !fold.ValidID(h.ID) || !strings.HasPrefix(h.ID, fold.PrefixHandin) || h.By != "wendy" || h.Ref != "branch:fix-login" || h.Note != "the fix \n and its test" || h.Missing {
		t.Fatalf("hand-in %+v", h)
	}
	path := verify.ObjectPath(c.Root, "wendy", h.ID)
	if !strings.Contains(path, "handins") {
		t.Fatalf("object path %s", path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	n := primaryEntries(t, c)
	for name, tc := range map[string]struct {
		ref, note string
		cat       errs.Category
	}{
		"empty ref":  {" ", "", errs.Invalid},
		"long ref":   {strings.Repeat("r", 501), "", errs.Invalid},
		"two lines":  {"a\nb", "", errs.Invalid},
		"long note":  {"ref", strings.Repeat("n", MaxNote+1), errs.Invalid},
		"not seated": {"ref", "", errs.NotFound},
	} {
		s := wendy
		if name == "not seated" {
			s = &Session{Channel: c, Name: "nobody", Signer: wendy.Signer}
			tc.cat = errs.Denied
		}
		if _, err := s.HandinAdd(tc.ref, NoteOptions{Note: tc.note}); !errs.Is(err, tc.cat) {
			t.Errorf("%s: %v; want %s", name, err, tc.cat)
		}
	}
	if primaryEntries(t, c) != n {
		t.Fatal("a refusal wrote an entry")
	}

	// A submit names the hand-in by prefix; the order's result holds the full id.
	o, err := mike.NewOrder(NewOrderOptions{Title: "Fix login"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mike.Claim(o.ID, ""); err != nil {
		t.Fatal(err)
	}
	n = primaryEntries(t, c)
	if _, err := mike.Submit(o.ID, SubmitOptions{Reference: "h-zzzz"}); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "ferry handin list") {
		t.Fatalf("submit naming an unknown hand-in: %v", err)
	}
	if primaryEntries(t, c) != n {
		t.Fatal("a refused submit wrote an entry")
	}
	o, err = mike.Submit(o.ID, SubmitOptions{Reference: h.ID[:6], Note: "see the hand-in"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Result.Reference != h.ID {
		t.Fatalf("submit reference %q; want %s", o.Result.Reference, h.ID)
	}
	// References not shaped like a hand-in id pass unchanged (a branch named h-fix).
	o2, _ := mike.NewOrder(NewOrderOptions{Title: "Other"})
	mike.Claim(o2.ID, "")
	if o2, err = mike.Submit(o2.ID, SubmitOptions{Reference: "h-fix"}); err != nil || o2.Result.Reference != "h-fix" {
		t.Fatalf("branch h-fix: %v", err)
	}

	h2, err := wendy.HandinAdd("commit:abc123", NoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := primaryLoad(t, c)
	if l := v.State.ListHandins(fold.HandinFilter{}); len(l) != 2 || l[0].ID != h2.ID {
		t.Fatalf("list %+v; want newest first", l)
	}
	if l := v.State.ListHandins(fold.HandinFilter{By: "mike"}); l == nil || len(l) != 0 {
		t.Fatalf("list by mike %+v", l)
	}
	if got, err := v.State.FindHandin(h2.ID[2:8]); err != nil || got.ID != h2.ID {
		t.Fatalf("find by prefix: %v", err)
	}

	// An edited object: the entry counts for nothing. A missing one: pending sync.
	p2 := verify.ObjectPath(c.Root, "wendy", h2.ID)
	raw, _ := os.ReadFile(p2)
	if err := os.WriteFile(p2, []byte(strings.Replace(string(raw), "abc123", "def456", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	v = primaryLoad(t, c)
	if v.State.Handins[h2.ID] != nil || !strings.Contains(primaryIgnoredRef(v.State, h2.ID), "hand-in object differs") {
		t.Errorf("edited object: %+v", v.State.Handins[h2.ID])
	}
	if got := v.State.Handins[h.ID]; got == nil || !got.Missing || got.Ref != "" {
		t.Errorf("missing object: %+v", got)
	}
}

func primaryIgnoredRef(st *fold.State, ref string) string {
	for _, ig := range st.Ignored {
		if ig.Ref == ref {
			return ig.Reason
		}
	}
	return ""
}
