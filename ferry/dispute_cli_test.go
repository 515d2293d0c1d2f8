package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCPServeDisputesATamperedCheckpoint: a real `ferry mcp serve` started on a
// machine whose copy of the owner's checkpoint was changed folds the checkpoint again
// in the background, before any client call, and writes a signed checkpoint.dispute;
// `ferry status` and `ferry doctor` show it, and the owner's `ferry compact` refuses
// while it stands.
func TestMCPServeDisputesATamperedCheckpoint(t *testing.T) {
	t.Parallel()
	m := newMCPMachine(t, ferryExe(t))
	ch := m.channel("acme", "bob")
	var o struct{ ID string }
	if err := json.Unmarshal([]byte(m.must("--as", "bob", "order", "new", "First", "--project", "acme", "--json")), &o); err != nil {
		t.Fatal(err)
	}
	m.must("--as", "bob", "order", "cancel", o.ID, "--project", "acme")
	m.must("compact", "--settle", "0s", "--force", "--project", "acme")
	chunks, _ := filepath.Glob(filepath.Join(ch, "checkpoints", "chunks", "*.json"))
	tampered := false
	for _, p := range chunks {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), `{"asks":`) {
			b[len(b)/2] ^= 1
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			tampered = true
		}
	}
	if !tampered {
		t.Fatalf("no chunk of terminal things among %v", chunks)
	}

	srv := m.serve("bob", "acme")
	stdin, err := srv.StdinPipe() // held open: the server waits for a client that never speaks
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = srv.Wait()
	}()

	type status struct {
		Disputes []struct {
			Writer, Checkpoint, First, Entry string
			Epoch                            int
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a liveness bound, no timing claimed
	defer cancel()
	var st status
	poll(t, ctx, "the dispute in ferry status", func() bool {
		st = status{}
		out, _, code := m.ferry("status", "--json", "--project", "acme")
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && len(st.Disputes) > 0
	})
	if d := st.Disputes[0]; len(st.Disputes) != 1 || d.Writer != "bob" || d.Epoch != 1 || d.First != "(state)" || d.Entry == "" {
		t.Fatalf("disputes: %+v", st.Disputes)
	}
	poll(t, ctx, "the server's report of the dispute", func() bool { return strings.Contains(stderr.String(), "disputed") })

	if out, _, code := m.ferry("status", "--project", "acme"); code != 0 || !strings.Contains(out, "disputed   the owner's checkpoint of epoch 1 by bob") {
		t.Fatalf("status text: exit %d\n%s", code, out)
	}
	out, _, code := m.ferry("doctor", "--json", "--project", "acme")
	if code == 0 || !strings.Contains(out, `"check": "checkpoint_dispute"`) || !strings.Contains(out, "bob (device") {
		t.Fatalf("doctor with a standing dispute: exit %d\n%s", code, out)
	}
	m.must("--as", "bob", "order", "new", "Second", "--project", "acme")
	if _, errOut, code := m.ferry("compact", "--settle", "0s", "--force", "--project", "acme"); code == 0 || !strings.Contains(errOut, "disputed") {
		t.Fatalf("compact over a standing dispute: exit %d\n%s", code, errOut)
	}
}
