package fsbus

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/verify"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
)

// hostileNames are names a caller (CLI flag, MCP argument, hand-edited entry) may try
// where ferry builds a path from a name: traversal, absolute and drive paths,
// separators, and the device names Windows reserves, in any case and with extensions.
var hostileNames = []string{
	"..", "../evil", "a/../../evil", "/etc/passwd", `C:\evil`, "c:evil", `..\evil`, "a/b", `a\b`, ".", "",
	"con", "CON", "Con", "nul", "prn", "aux", "com1", "COM9", "lpt1", "Lpt9", "con.txt", "NUL.tar.gz", "com1.log",
	"-rf", "name with space", "tab\tname", "nul\x00byte", strings.Repeat("a", 64),
}

// TestPathsRefused (docs/threat-model.md "Paths and links"): every place a name or path
// enters — agent names (join, seat, act as, address, offer), project ids, ids given to
// show commands, order file pointers — refuses traversal, absolute paths, separators
// and Windows reserved names, with an invalid (or not_found) error, and writes nothing.
func TestPathsRefused(t *testing.T) {
	t.Parallel()
	w := newAdvWorld(t)
	before := snapshotFiles(t, w.c.Root)
	st := mustLoad(t, w.c).State
	type attempt struct {
		where string
		try   func(name string) error
		cats  []errs.Category
	}
	inv, invOrNF := []errs.Category{errs.Invalid}, []errs.Category{errs.Invalid, errs.NotFound}
	attempts := []attempt{
		{"join --as", func(n string) error { _, err := Join(w.c, n, "test"); return err }, inv},
		{"grant", func(n string) error { _, err := w.master.Grant(GrantOptions{Agent: n, Level: "member"}); return err }, inv},
		{"revoke", func(n string) error { _, err := w.master.Revoke(n); return err }, invOrNF},
		{"--as", func(n string) error { _, err := w.c.As(n); return err }, inv},
		{"talk send --to", func(n string) error { _, err := w.alice.TalkSend(TalkSendOptions{To: n, Body: "hi"}); return err }, invOrNF},
		{"order offer --to", func(n string) error { _, err := w.alice.Offer(w.order, OfferOptions{To: n}); return err }, invOrNF},
		{"order new --to", func(n string) error {
			_, err := w.alice.NewOrder(NewOrderOptions{Title: "t", To: n})
			return err
		}, invOrNF},
		{"init --project", func(n string) error {
			_, err := Init(testHome(t), InitOptions{Dir: filepath.Join(t.TempDir(), "ch"), Project: n})
			return err
		}, inv},
		{"order show ID", func(n string) error { _, err := st.FindOrder(n); return err }, invOrNF},
		{"talk show ID", func(n string) error { _, err := st.TalkShow(n); return err }, invOrNF},
		{"ask show ID", func(n string) error { _, err := st.FindAsk(n); return err }, invOrNF},
		{"handin show ID", func(n string) error { _, err := st.FindHandin(n); return err }, invOrNF},
	}
	for _, a := range attempts {
		for _, n := range hostileNames {
			if n == "" && a.where == "order new --to" {
				continue // no recipient: the order is open to all
			}
			err := a.try(n)
			if err == nil {
				t.Errorf("%s %q: accepted", a.where, n)
				continue
			}
			ok := false
			for _, c := range a.cats {
				ok = ok || errs.Is(err, c)
			}
			if !ok {
				t.Errorf("%s %q: %v, want one of %v", a.where, n, err, a.cats)
			}
		}
	}
	if after := snapshotFiles(t, w.c.Root); after != before {
		t.Errorf("refused names changed the channel:\n%s", diffLines(after, before))
	}
	for _, n := range hostileNames {
		if fold.ValidName(n) || ledger.ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
	for _, n := range []string{"con-1", "nul2", "com10", "lpt", "console", "a", "claude-code-laptop"} {
		if !fold.ValidName(n) {
			t.Errorf("ValidName(%q) = false: only the reserved device names themselves are refused", n)
		}
	}
}

// TestHostileRefsInEntries (docs/threat-model.md "Paths and links"): entries a modified
// binary writes with a ref that is not an id of their kind never make the fold build a
// path from it: they are ignored, and nothing outside the channel is read.
func TestHostileRefsInEntries(t *testing.T) {
	t.Parallel()
	w := newAdvWorld(t)
	bad := []struct{ typ, ref string }{
		{fold.TypeOrderCreate, "o-../../../etc"},
		{fold.TypeOrderCreate, "../orders/x"},
		{fold.TypeMsgPost, "m-/etc/passwd"},
		{fold.TypeAskRaise, "a-..\\..\\x"},
		{fold.TypeHandinAdd, "h-../../x"},
		{fold.TypeOrderCreate, "o-con"},
	}
	var hashes []string
	for _, b := range bad {
		e := appendRaw(t, w.alice, b.typ, b.ref, fold.EntryData{Object: "sha256:00", To: "bob"})
		hashes = append(hashes, e.Hash())
	}
	st := mustLoad(t, w.c).State
	for i, h := range hashes {
		found := false
		for _, ig := range st.Ignored {
			found = found || ig.Hash == h
		}
		if !found {
			t.Errorf("%s %q counts (not listed as ignored)", bad[i].typ, bad[i].ref)
		}
	}
	w.intact(t, st)
}

// TestPointersRefused (docs/threat-model.md "Paths and links"): an order's file pointers are
// workspace-relative paths; traversal, absolute paths, reserved names and symlinks
// out of the workspace are refused.
func TestPointersRefused(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"../x", "a/../../x", "/etc/passwd", `C:\x`, "c:x", `a\b`, "", ".",
		"CON", "con.txt", "Nul.tar.gz", "COM1", "lpt1.log", "aux", "conin$", "dir/PRN.md", "x.", "x ",
		"COM¹", "lpt³.txt", "Conout$.log", "nul .txt",
		".env", "deploy/id_rsa", "certs/server.pem", ".git/config",
	} {
		if _, err := contract.CheckPointerPath(p); !errs.Is(err, errs.Invalid) {
			t.Errorf("CheckPointerPath(%q) = %v, want invalid", p, err)
		}
	}
	if got, err := contract.CheckPointerPath("src/./main.go"); err != nil || got != "src/main.go" {
		t.Errorf("CheckPointerPath(src/./main.go) = %q, %v", got, err)
	}

	if runtime.GOOS == "windows" {
		return // symlinks need privileges there; the path rules above hold everywhere
	}
	ws, outside := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(outside, "secret.txt"), []byte("outside\n"))
	writeTestFile(t, filepath.Join(ws, "ok.txt"), []byte("inside\n"))
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "file-link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "dir-link")); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"file-link.txt", "dir-link/secret.txt"} {
		if _, _, err := contract.FingerprintPointers(ws, []string{spec}, time.Now().Add(time.Hour)); !errs.Is(err, errs.Invalid) {
			t.Errorf("pointer %s through a link out of the workspace: %v, want invalid", spec, err)
		}
	}
	if ps, _, err := contract.FingerprintPointers(ws, []string{"ok.txt"}, time.Now().Add(time.Hour)); err != nil || len(ps) != 1 {
		t.Errorf("pointer inside the workspace: %v", err)
	}
}

// TestChannelLinksRefused (docs/threat-model.md "Paths and links"): a symbolic link
// planted inside the channel — a whole directory (orders/) or a writer's segment
// directory — never receives a write: the write is refused (invalid, naming the link),
// nothing lands outside the channel, and verify and doctor list the link.
func TestChannelLinksRefused(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Log("symlinks need privileges on Windows; the write check is the same code")
	}
	for _, tc := range []struct {
		name  string
		plant string // channel-relative directory replaced by a link
		write func(w *advWorld) error
	}{
		{"orders directory", "orders", func(w *advWorld) error {
			_, err := w.alice.NewOrder(NewOrderOptions{Title: "through the link"})
			return err
		}},
		{"segment directory", "ledger/bob", func(w *advWorld) error {
			_, err := w.bob.TalkSend(TalkSendOptions{To: "alice", Body: "through the link"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newAdvWorld(t)
			outside := t.TempDir()
			dir := filepath.Join(w.c.Root, filepath.FromSlash(tc.plant))
			moved := filepath.Join(outside, "moved")
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, dir); err != nil {
				if runtime.GOOS == "windows" {
					return
				}
				t.Fatal(err)
			}
			outBefore := snapshotFiles(t, outside)
			err := tc.write(w)
			if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tc.plant+" in the channel is a symbolic link") {
				t.Errorf("write through %s: %v, want invalid naming the link", tc.plant, err)
			}
			if got := snapshotFiles(t, outside); got != outBefore {
				t.Errorf("a write landed outside the channel:\n%s", diffLines(got, outBefore))
			}
			r := w.report(t)
			found := false
			for _, l := range r.vr.Links {
				found = found || l == tc.plant
			}
			if !found || r.vr.OK() || r.vr.Fixes[verify.KindLink] == "" {
				t.Errorf("verify does not list the link %s with a fix: %v", tc.plant, r.vr.Links)
			}
			if len(findingsOf(r.vr.Findings, verify.CheckLink)) != 1 {
				t.Errorf("verify's findings do not list the link: %+v", r.vr.Findings)
			}
		})
	}
}
