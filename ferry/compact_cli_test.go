package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
