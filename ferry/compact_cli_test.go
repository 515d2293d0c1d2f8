package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/errs"
)

// TestCompactedOrdersThroughTheCLI: after `ferry compact`, an order cancelled before
// the cut is listed by `order list --state cancelled` and shown by `order show`; with
// its thing chunk gone, the listing warns that orders final at the checkpoint are
// missing from it and `order show` fails naming the chunk.
func TestCompactedOrdersThroughTheCLI(t *testing.T) {
	w, _, _ := smallChannel(t)
	var rows []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, w.home, "--as", "bob", "order", "list", "--json", "--channel", w.ch)), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("order list: %+v, %v", rows, err)
	}
	id := rows[0].ID
	mustCLI(t, w.home, "--as", "bob", "order", "cancel", id, "--channel", w.ch)
	mustCLI(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch)
	if out := mustCLI(t, w.home, "--as", "bob", "order", "list", "--state", "cancelled", "--channel", w.ch); !strings.Contains(out, id) {
		t.Fatalf("cancelled order not listed after compact:\n%s", out)
	}
	if out := mustCLI(t, w.home, "--as", "bob", "order", "show", id, "--channel", w.ch); !strings.Contains(out, "cancelled") {
		t.Fatalf("order show after compact:\n%s", out)
	}
	chunks, _ := filepath.Glob(filepath.Join(w.ch, "checkpoints", "chunks", "*.json"))
	for _, p := range chunks {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), `{"asks":`) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, out, errOut := cliIn(t, w.home, "--as", "bob", "order", "list", "--state", "cancelled", "--channel", w.ch)
	if code != 0 || strings.Contains(out, id) || !strings.Contains(errOut, "missing from this list") {
		t.Fatalf("list with a thing chunk gone: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := cliIn(t, w.home, "--as", "bob", "order", "show", id, "--channel", w.ch); code == 0 || !strings.Contains(errOut, "checkpoints/chunks/") {
		t.Fatalf("show with its thing chunk gone: exit %d\n%s", code, errOut)
	}
}

// TestRolledBackFolderThroughTheCLI: once this machine has seen epoch 2 count, a folder
// restored from a copy taken at epoch 1 is reported by `ledger verify` and
// `doctor`, and `ferry compact` refuses (conflict) instead of writing epoch 2 again.
func TestRolledBackFolderThroughTheCLI(t *testing.T) {
	w, _, _ := smallChannel(t)
	mustCLI(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch)
	backup := filepath.Join(t.TempDir(), "backup")
	if err := os.CopyFS(backup, os.DirFS(w.ch)); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, w.home, "--as", "bob", "order", "new", "Third", "--channel", w.ch)
	mustCLI(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch)
	mustCLI(t, w.home, "--as", "bob", "status", "--channel", w.ch) // this machine sees epoch 2 count
	if err := os.RemoveAll(w.ch); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(w.ch, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cliIn(t, w.home, "ledger", "verify", "--channel", w.ch)
	if code == 0 || !strings.Contains(out+errOut, "rolled back") || !strings.Contains(out+errOut, "epoch 2") {
		t.Fatalf("ledger verify of a rolled-back folder: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cliIn(t, w.home, "doctor", "--channel", w.ch)
	if code == 0 || !strings.Contains(out+errOut, "rolled back") {
		t.Fatalf("doctor on a rolled-back folder: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cliIn(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch)
	if code != exitCodes[errs.Conflict] || !strings.Contains(errOut, "epoch 2") {
		t.Fatalf("compact on a rolled-back folder: exit %d\n%s%s", code, out, errOut)
	}
	if heads, _ := filepath.Glob(filepath.Join(w.ch, "checkpoints", "2-*")); len(heads) != 0 {
		t.Fatalf("epoch 2 written again: %v", heads)
	}
}

// TestCompactSettleWordsCLI: a negative --settle, given as its own argument or after
// '=', is refused (invalid) naming it, with a hint, and writes nothing, as a negative
// count is (a text flag's value starting with '-' keeps the parser's advice); a
// settle time of 0s reads "since just now", never "in the last 0s"; the default one
// prints as 24h.
func TestCompactSettleWordsCLI(t *testing.T) {
	w, _, _ := smallChannel(t)
	for _, args := range [][]string{{"compact", "--settle", "-5s"}, {"compact", "--settle=-5s"}} {
		code, out, errOut := cliIn(t, w.home, append(args, "--channel", w.ch)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "ferry: error: invalid: --settle -5s: a negative duration is refused") ||
			!strings.Contains(errOut, "ferry: hint: give a duration that is not negative") {
			t.Errorf("ferry %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(w.ch, "checkpoints")); !os.IsNotExist(err) {
		t.Fatalf("a refused compact wrote checkpoints/: %v", err)
	}
	if code, _, errOut := cliIn(t, w.home, "--as", "bob", "decision", "list", "--limit", "-2", "--channel", w.ch); code != 2 || !strings.Contains(errOut, "--limit -2: a negative number is refused") {
		t.Errorf("decision list --limit -2: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := cliIn(t, w.home, "--as", "bob", "order", "new", "--title", "-5", "--channel", w.ch); code != 2 || !strings.Contains(errOut, `perhaps try --title="-5"`) {
		t.Errorf("order new --title -5: exit %d\n%s", code, errOut)
	}

	code, _, errOut := cliIn(t, w.home, "compact", "--settle", "0s", "--channel", w.ch)
	if code != 5 || !strings.Contains(errOut, "not seen to advance since just now: ") ||
		strings.Contains(errOut, "0s:") || !strings.Contains(errOut, "give a longer --settle") {
		t.Errorf("compact --settle 0s with seated writers: exit %d\n%s", code, errOut)
	}
	if out := mustCLI(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch); !strings.Contains(out, "not seen to advance since just now (--force)") {
		t.Errorf("compact --settle 0s --force:\n%s", out)
	}
	if out := mustCLI(t, w.home, "compact", "--channel", w.ch); !strings.Contains(out, "nothing new has settled (settle 24h): nothing written") {
		t.Errorf("compact at the default settle time:\n%s", out)
	}
}

// TestAgo: a holder's last change reads "just now" under a second, else its age.
func TestAgo(t *testing.T) {
	for age, want := range map[int64]string{0: "just now", 90: "1m30s ago", 7200: "2h ago"} {
		if got := ago(age); got != want {
			t.Errorf("ago(%d) = %q, want %q", age, got, want)
		}
	}
}

// TestArchiveThroughTheCLI: with policy.archive_grace_s at 1, frozen files move to
// archive/ at a writer's first write and at `ferry compact`; `ledger verify` is clean
// after; `ferry archive move DIR` refuses a DIR inside the channel folder and takes
// archive/ out into DIR; `ledger verify` stays without errors and `ledger verify
// --archive DIR` checks every chain from its first entry, while a DIR that does not
// exist is not found.
func TestArchiveThroughTheCLI(t *testing.T) {
	w, _, _ := smallChannel(t)
	mustCLI(t, w.home, "policy", "set", "archive_grace_s=1", "--channel", w.ch)
	mustCLI(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch)
	mustCLI(t, w.home, "--as", "bob", "order", "new", "Third", "--channel", w.ch)
	mustCLI(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch)
	time.Sleep(1100 * time.Millisecond) // the grace: one second on the wall clock
	mustCLI(t, w.home, "--as", "bob", "order", "new", "Fourth", "--channel", w.ch)
	mustCLI(t, w.home, "compact", "--settle", "0s", "--force", "--channel", w.ch)
	archived, _ := filepath.Glob(filepath.Join(w.ch, "archive", "ledger", "*", "*.jsonl"))
	if len(archived) < 2 {
		t.Fatalf("archive/ holds %v: want bob's and the master's frozen files", archived)
	}
	if out := mustCLI(t, w.home, "ledger", "verify", "--channel", w.ch); !strings.Contains(out, "no problems") {
		t.Fatalf("ledger verify after the move:\n%s", out)
	}
	code, _, errOut := cliIn(t, w.home, "archive", "move", filepath.Join(w.ch, "old"), "--channel", w.ch)
	if code != exitCodes[errs.Invalid] || !strings.Contains(errOut, "inside the channel folder") {
		t.Fatalf("archive move into the channel folder: exit %d\n%s", code, errOut)
	}
	time.Sleep(1100 * time.Millisecond) // archived at least the grace ago
	dir := filepath.Join(t.TempDir(), "old")
	out := mustCLI(t, w.home, "archive", "move", dir, "--channel", w.ch)
	if !strings.Contains(out, fmt.Sprintf("✔ %d files moved out of the folder", len(archived))) {
		t.Fatalf("archive move:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(w.ch, "archive", "ledger", "*", "*.jsonl")); len(left) != 0 {
		t.Fatalf("archive/ still holds %v", left)
	}
	if code, out, errOut := cliIn(t, w.home, "ledger", "verify", "--channel", w.ch); code != 0 {
		t.Fatalf("ledger verify with the archive out of the folder: exit %d\n%s%s", code, out, errOut)
	}
	if out := mustCLI(t, w.home, "ledger", "verify", "--archive", dir, "--channel", w.ch); !strings.Contains(out, "no problems") {
		t.Fatalf("ledger verify --archive:\n%s", out)
	}
	if code, _, errOut := cliIn(t, w.home, "ledger", "verify", "--archive", filepath.Join(dir, "none"), "--channel", w.ch); code != exitCodes[errs.NotFound] {
		t.Fatalf("ledger verify --archive of a missing folder: exit %d\n%s", code, errOut)
	}
	// Orders whose entries left with the archive are no orphan objects.
	if _, out, errOut := cliIn(t, w.home, "doctor", "--channel", w.ch); strings.Contains(out+errOut, "orphan_object") {
		t.Fatalf("doctor with the archive out of the folder:\n%s%s", out, errOut)
	}
	if out := mustCLI(t, w.home, "--as", "bob", "order", "list", "--channel", w.ch); !strings.Contains(out, "Fourth") || !strings.Contains(out, "First") {
		t.Fatalf("order list after the archive left:\n%s", out)
	}
}
