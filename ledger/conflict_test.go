package ledger

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// copyNameSeeds is the seed corpus of FuzzParseCopyName: one name per file, raw bytes.
const copyNameSeeds = "../fixtures/fuzz/ledger/copynames"

func TestParseCopyName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, base, tool string
	}{
		// Syncthing.
		{"k3f9x2ab.sync-conflict-20261129-183000-ABCDEFG.jsonl", "k3f9x2ab.jsonl", ToolSyncthing},
		{"o-k3f9x2abq7mze.sync-conflict-20261129-235959-Z7Z7Z7Z.json", "o-k3f9x2abq7mze.json", ToolSyncthing},
		{"notes.sync-conflict-20261129-183000-ABCDEFG", "notes", ToolSyncthing},
		{"0.sync-conflict-00000101-000000-2222222", "0", ToolSyncthing}, // dates are checked for shape only
		{"a.b.sync-conflict-20261129-183000-ABCDEFG.md", "a.b.md", ToolSyncthing},
		{"k.sync-conflict-20260101-000000-AAAAAAA.sync-conflict-20260102-000000-BBBBBBB.jsonl",
			"k.sync-conflict-20260101-000000-AAAAAAA.jsonl", ToolSyncthing}, // one level
		{"k.sync-conflict-20260101-000000-AAAAAAA (1).jsonl", "k.sync-conflict-20260101-000000-AAAAAAA.jsonl", ToolGoogleDrive},
		{"k.sync-conflict-20260101-000000-AAAAAAA (conflicted copy 2026-11-29).jsonl", "k.sync-conflict-20260101-000000-AAAAAAA.jsonl", ToolDropbox},
		// Dropbox.
		{"k3f9x2ab (conflicted copy 2026-11-29).jsonl", "k3f9x2ab.jsonl", ToolDropbox},
		{"k3f9x2ab (Ann's conflicted copy 2026-11-29).jsonl", "k3f9x2ab.jsonl", ToolDropbox},
		{"k3f9x2ab (Ann Lee’s conflicted copy 2026-11-29 (2)).jsonl", "k3f9x2ab.jsonl", ToolDropbox},
		{"my notes (laptop's conflicted copy 2026-01-31).md", "my notes.md", ToolDropbox},
		{"README (conflicted copy 2026-11-29)", "README", ToolDropbox},
		// Google Drive.
		{"k3f9x2ab (1).jsonl", "k3f9x2ab.jsonl", ToolGoogleDrive},
		{"k3f9x2ab (12).jsonl", "k3f9x2ab.jsonl", ToolGoogleDrive},
		{"a (1) (2).jsonl", "a (1).jsonl", ToolGoogleDrive},
		// OneDrive.
		{"k3f9x2ab-DESKTOP-AB12CD3.jsonl", "k3f9x2ab.jsonl", ToolOneDrive},
		{"k3f9x2ab-Laptop.jsonl", "k3f9x2ab.jsonl", ToolOneDrive},
		{"o-k3f9x2abq7mze-WORKPC.json", "o-k3f9x2abq7mze.json", ToolOneDrive},
		{"claude-code-laptop.k3f9x2ab-PC1.json", "claude-code-laptop.k3f9x2ab.json", ToolOneDrive},
		{"a-b-PC1.json", "a-b.json", ToolOneDrive},
		{"0--DESKTOP-AB12CD3.json", "0-.json", ToolOneDrive},
		{"k3f9x2ab-DESKTOP-7.jsonl", "k3f9x2ab.jsonl", ToolOneDrive},
		{"0-0-PC1.json", "0-0.json", ToolOneDrive},
		{"a-0-PC-7.json", "a-0.json", ToolOneDrive},
		{"k3f9x2ab-7-PC.jsonl", "k3f9x2ab-7.jsonl", ToolOneDrive},
	}
	for _, tt := range tests {
		base, tool, ok := ParseCopyName(tt.name)
		if !ok || base != tt.base || tool != tt.tool {
			t.Errorf("ParseCopyName(%q) = %q, %q, %v; want %q, %q", tt.name, base, tool, ok, tt.base, tt.tool)
		}
	}
	for _, name := range []string{
		// ferry's own names.
		"k3f9x2ab.jsonl", "o-k3f9x2abq7mze.json", "claude-code-laptop.k3f9x2ab.json",
		"k3f9x2ab.torn-1", ".k3f9x2ab.jsonl.tmp", "channel.toml", "PROTOCOL.md", "k3f9x2ab-laptop.jsonl",
		// sync tools' temp files are temp files, not copies.
		".syncthing.k3f9x2ab.jsonl.tmp", "~syncthing~k3f9x2ab.jsonl.tmp",
		// near misses.
		"k3f9x2ab.sync-conflict-20261329-183000-ABCDEFG.jsonl", // month 13
		"k3f9x2ab.sync-conflict-20261129-243000-ABCDEFG.jsonl", // hour 24
		"k3f9x2ab.sync-conflict-20261129-183000-abcdefg.jsonl", // lower-case device
		"k3f9x2ab.sync-conflict-20261129-183000-ABCDEF1.jsonl", // 1 is not base32
		"k3f9x2ab.sync-conflict-20261129-183000-ABCDEFG.a.b",   // two extensions after
		"k3f9x2ab.jsonl.sync-conflict-20261129-183000-ABCDEFG", // Syncthing puts it before .jsonl
		".sync-conflict-20261129-183000-ABCDEFG.jsonl",         // no stem
		"k3f9x2ab (conflicted copy 2026-13-29).jsonl",
		"k3f9x2ab (conflicted copy 2026-11-29.jsonl",
		" (conflicted copy 2026-11-29).jsonl",
		"k3f9x2ab ('s conflicted copy 2026-11-29).jsonl",
		"k3f9x2ab (0).jsonl", "k3f9x2ab (01).jsonl", "k3f9x2ab (12345).jsonl", "k3f9x2ab ().jsonl",
		" (1).jsonl", "k3f9x2ab(1).jsonl",
		"-X.jsonl", "k3f9x2ab-.jsonl", "k3f9x2ab-TOOLONGMACHINENAME.jsonl", "k3f9x2ab-X_Y.jsonl", "k3f9x2ab-my-laptop.jsonl",
		"", "dir/k3f9x2ab (1).jsonl", `dir\k3f9x2ab (1).jsonl`, "k3f9x2ab (1).jsonl\x00", "\xff (1).jsonl",
	} {
		if base, tool, ok := ParseCopyName(name); ok || base != "" || tool != "" {
			t.Errorf("ParseCopyName(%q) = %q, %q, %v; want no copy", name, base, tool, ok)
		}
	}
}

// A copy name that parses as another writer's segment is still only a copy: the reader
// takes whose records they are from the entries, never from the name (rule 8).
func TestReadCopyNamedAsAnotherSegment(t *testing.T) {
	t.Parallel()
	l := newTestLedger(t)
	mine := appendN(t, l, testWriter, testDevice, "a", 3)
	theirs := appendN(t, l, "codex-desktop", "q7mze0h4", "b", 2)
	seg := readFile(t, SegmentPath(l.Root(), testWriter, testDevice))
	// A Drive copy of my segment in the other writer's directory, named like its
	// segment, and a OneDrive copy whose base is the other device's name.
	writeFile(t, filepath.Join(l.Root(), "ledger", "codex-desktop", "q7mze0h4 (1).jsonl"), seg)
	writeFile(t, filepath.Join(l.Root(), "ledger", testWriter, "q7mze0h4-LAPTOP.jsonl"), seg[:len(seg)/2])
	s := mustRead(t, l)
	if len(s.Problems) != 1 || s.Problems[0].Kind != KindTorn || len(s.Forks) != 0 {
		t.Fatalf("problems %+v forks %+v; want one torn tail (the half copy)", s.Problems, s.Forks)
	}
	if got, want := len(s.Entries), len(mine)+len(theirs); got != want {
		t.Fatalf("%d entries, want %d", got, want)
	}
	for _, e := range s.Entries {
		if e.Writer == "codex-desktop" && e.Type != "test.b" || e.Writer == testWriter && e.Type != "test.a" {
			t.Fatalf("entry %s/%s seq %d of type %s: a file name decided whose record it is", e.Writer, e.Device, e.Seq, e.Type)
		}
	}
}

// FuzzParseCopyName checks ParseCopyName on any name (seeds: fixtures/fuzz/ledger/
// copynames): it never panics; a copy's base is a shorter non-empty name with the
// copy's extension and a known tool; and every tool's copy of a name ferry writes
// parses back to that name and tool.
func FuzzParseCopyName(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(copyNameSeeds, "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in %s (%v)", copyNameSeeds, err)
	}
	for _, p := range files {
		if strings.HasSuffix(p, ".md") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	tools := map[string]bool{ToolSyncthing: true, ToolDropbox: true, ToolOneDrive: true, ToolGoogleDrive: true}
	ferryName := regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*\.(jsonl|json|md)$`)
	f.Fuzz(func(t *testing.T, name string) {
		base, tool, ok := ParseCopyName(name)
		if ok {
			_, ext := splitExt(name)
			if base == "" || len(base) >= len(name) || !tools[tool] || strings.ContainsAny(base, "/\\\x00") {
				t.Fatalf("ParseCopyName(%q) = %q, %q", name, base, tool)
			}
			if tool == ToolSyncthing {
				// The infix goes before the extension, which may be empty.
				if len(name)-len(base) != len(".sync-conflict-20060102-150405-ABCDEFG") {
					t.Fatalf("ParseCopyName(%q) = %q: more than Syncthing's infix removed", name, base)
				}
			} else if _, bext := splitExt(base); bext != ext {
				t.Fatalf("ParseCopyName(%q) = %q: extension %q became %q", name, base, ext, bext)
			}
		} else if base != "" || tool != "" {
			t.Fatalf("ParseCopyName(%q) = %q, %q, false", name, base, tool)
		}
		if !ferryName.MatchString(name) || strings.Contains(name, syncthingMark) {
			return // a name with Syncthing's infix is no OneDrive copy's base (see the doc)
		}
		stem, ext := splitExt(name)
		for _, c := range []struct{ copy, tool string }{
			{stem + ".sync-conflict-20261129-183000-ABCDEFG" + ext, ToolSyncthing},
			{stem + " (conflicted copy 2026-11-29)" + ext, ToolDropbox},
			{stem + " (Ann's conflicted copy 2026-11-29 (3))" + ext, ToolDropbox},
			{stem + " (1)" + ext, ToolGoogleDrive},
			{stem + "-DESKTOP-AB12CD3" + ext, ToolOneDrive},
			{stem + "-PC1" + ext, ToolOneDrive},
		} {
			if b, tl, ok := ParseCopyName(c.copy); !ok || b != name || tl != c.tool {
				t.Fatalf("ParseCopyName(%q) = %q, %q, %v; want %q, %q", c.copy, b, tl, ok, name, c.tool)
			}
		}
	})
}
