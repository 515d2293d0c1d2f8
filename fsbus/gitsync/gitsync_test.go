package gitsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGitOwns: ferry sync --git commits a changed file only when this machine wrote
// it (docs/design.md §2 rule 1: one writer per file) — by path for segments and presence, by
// the device inside the file for objects — and never a temp name, .stignore or a
// deletion (docs/sync.md "git").
func TestGitOwns(t *testing.T) {
	s := &syncer{root: t.TempDir(), o: Options{Device: "k3f9x2ab"}}
	for rel, body := range map[string]string{
		"orders/o-0000000000001.json":                      `{"v":1,"id":"o-0000000000001","author":"alice","device":"k3f9x2ab"}`,
		"orders/o-0000000000002.json":                      `{"v":1,"id":"o-0000000000002","author":"bob","device":"zzzzzzzz"}`,
		"messages/m-0000000000003.json":                    `not json`,
		"handins/alice/h-0000000000004.json":               `{"device":"k3f9x2ab"}`,
		"results/r-0000000000005.json":                     `{"device":"k3f9x2ab"}`,
		"asks/a-0000000000006.json":                        `{"device":"k3f9x2ab"}`,
		"orders/o-0000000000007.json.sync-bak":             `{"device":"k3f9x2ab"}`,
		"checkpoints/chunks/" + sha("chunk") + ".json":     `chunk`,
		"checkpoints/chunks/" + sha("other") + ".json":     `not other`,
		"checkpoints/1-" + sha("head")[:16] + "/head.json": `head`,
		"checkpoints/2-" + sha("head")[:16] + "/head.json": `not the head`,
	} {
		p := filepath.Join(s.root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	untracked, modified, deleted := statusEntry{x: '?', y: '?'}, statusEntry{x: ' ', y: 'M'}, statusEntry{x: ' ', y: 'D'}
	checkOwns(t, s, []ownsCase{
		{"ledger/alice/k3f9x2ab.jsonl", untracked, ownMine},
		{"ledger/alice/k3f9x2ab.jsonl", modified, ownMine},
		{"ledger/master/k3f9x2ab.torn-1", untracked, ownMine},
		{"ledger/alice/zzzzzzzz.jsonl", modified, ownOther}, // another machine's segment
		{"ledger/alice/k3f9x2ab.sync-conflict-20261129-120000-ABC.jsonl", untracked, ownOther},
		{"ledger/alice/k3f9x2ab.jsonl", deleted, ownOther},
		{"ledger/alice/k3f9x2ab.jsonl.tmp", untracked, ownSkip},
		{"ledger/alice/.syncthing.k3f9x2ab.jsonl.tmp", untracked, ownSkip},
		{"presence/alice.k3f9x2ab.json", modified, ownMine},
		{"presence/alice.zzzzzzzz.json", modified, ownOther},
		{"orders/o-0000000000001.json", untracked, ownMine},
		{"orders/o-0000000000001.json", modified, ownOther}, // objects are written once
		{"orders/o-0000000000002.json", untracked, ownOther},
		{"messages/m-0000000000003.json", untracked, ownOther},
		{"handins/alice/h-0000000000004.json", untracked, ownMine},
		{"results/r-0000000000005.json", untracked, ownMine},
		{"asks/a-0000000000006.json", untracked, ownMine},
		{"orders/o-0000000000007.json.sync-bak", untracked, ownOther},
		{"orders/o-0000000000009.json", untracked, ownOther}, // gone since the listing
		{"memory/plan.md", untracked, ownMine},
		{"memory/plan.md", modified, ownMine},
		{"memory/~$plan.md", untracked, ownSkip},
		{"channel.toml", untracked, ownMine},
		{"PROTOCOL.md", untracked, ownMine},
		{".gitattributes", untracked, ownMine},
		{"channel.toml", modified, ownOther},
		{".stignore", untracked, ownSkip},
		{"notes.txt", untracked, ownOther},
		{"checkpoints/chunks/" + sha("chunk") + ".json", untracked, ownMine}, // named by its hash
		{"checkpoints/chunks/" + sha("other") + ".json", untracked, ownOther},
		{"checkpoints/1-" + sha("head")[:16] + "/head.json", untracked, ownMine},
		{"checkpoints/2-" + sha("head")[:16] + "/head.json", untracked, ownOther},
		{"checkpoints/chunks/" + sha("chunk") + ".json", modified, ownOther},
	})
	// The owner's machine commits channel.toml's rewrite as format 2; no other does.
	owner := &syncer{root: s.root, o: Options{Device: "k3f9x2ab", Owner: true}}
	if got := owner.owns("channel.toml", modified); got != ownMine {
		t.Errorf("owns(channel.toml, modified) on the owner's machine = %d, want %d", got, ownMine)
	}
	if got := owner.owns("channel.toml", deleted); got != ownOther {
		t.Errorf("owns(channel.toml, deleted) on the owner's machine = %d, want %d", got, ownOther)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestGitOwnsArchivedFile: a chain file that moved whole to archive/ (docs/format.md §21
// "Moving frozen files") is committed as its deletion plus the archive copy, by any
// machine, when the copy holds the bytes HEAD holds under the live name; a deletion
// without that copy, or with other bytes, is left alone, and an archive file of
// another machine's chain that HEAD never held is too. Real git, a real repository.
func TestGitOwnsArchivedFile(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required by this test: %v", err)
	}
	root := t.TempDir()
	g := &gitRunner{ctx: context.Background(), bin: "git", dir: root}
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.name", "t"}, {"config", "user.email", "t@example.com"}, {"config", "commit.gpgsign", "false"}} {
		if _, err := g.run(nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, body string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ledger/alice/zzzzzzzz.jsonl", "frozen\n")
	write("ledger/alice/zzzzzzzz.1.jsonl", "newer\n")
	write("ledger/bob/zzzzzzzz.jsonl", "bob's\n")
	if _, err := g.run(nil, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.run(nil, "commit", "-q", "-m", "start"); err != nil {
		t.Fatal(err)
	}
	// alice's frozen file moved whole; bob's was deleted with a differing copy; a file
	// of carol's chain the repository never held appears in archive/.
	write("archive/ledger/alice/zzzzzzzz.jsonl", "frozen\n")
	write("archive/ledger/bob/zzzzzzzz.jsonl", "not bob's\n")
	write("archive/ledger/carol/zzzzzzzz.jsonl", "carol's\n")
	write("archive/ledger/carol/k3f9x2ab.jsonl", "this machine's\n")
	for _, f := range []string{"ledger/alice/zzzzzzzz.jsonl", "ledger/bob/zzzzzzzz.jsonl", "ledger/alice/zzzzzzzz.1.jsonl"} {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(f))); err != nil {
			t.Fatal(err)
		}
	}
	s := &syncer{root: root, o: Options{Device: "k3f9x2ab"}, blob: blobOf(g)}
	untracked, deleted := statusEntry{x: '?', y: '?'}, statusEntry{x: ' ', y: 'D'}
	checkOwns(t, s, []ownsCase{
		{"ledger/alice/zzzzzzzz.jsonl", deleted, ownMine},
		{"archive/ledger/alice/zzzzzzzz.jsonl", untracked, ownMine},
		{"ledger/bob/zzzzzzzz.jsonl", deleted, ownOther},
		{"archive/ledger/bob/zzzzzzzz.jsonl", untracked, ownOther},
		{"ledger/alice/zzzzzzzz.1.jsonl", deleted, ownOther}, // no archive copy
		{"archive/ledger/carol/zzzzzzzz.jsonl", untracked, ownOther},
		{"archive/ledger/carol/k3f9x2ab.jsonl", untracked, ownMine}, // its own device's chain
		{"archive/ledger/dave/zzzzzzzz.jsonl", deleted, ownOther},   // only the owner takes archive/ out
	})
	// On the owner's machine, a deletion in archive/ (`ferry archive move`) is its own.
	s.o.Owner = true
	checkOwns(t, s, []ownsCase{
		{"archive/ledger/dave/zzzzzzzz.jsonl", deleted, ownMine},
		{"archive/orders/o-x.json", deleted, ownOther},
		{"ledger/bob/zzzzzzzz.jsonl", deleted, ownOther},
	})
}

// ownsCase is one changed path, its status, and the ownership owns should give it.
type ownsCase struct {
	rel  string
	e    statusEntry
	want int
}

// checkOwns reports each case s.owns decides otherwise.
func checkOwns(t *testing.T, s *syncer, cases []ownsCase) {
	t.Helper()
	for _, tc := range cases {
		if got := s.owns(tc.rel, tc.e); got != tc.want {
			t.Errorf("owns(%s, %c%c) = %d, want %d", tc.rel, tc.e.x, tc.e.y, got, tc.want)
		}
	}
}
