package fsutil

import "testing"

func TestIsTempName(t *testing.T) {
	for _, tc := range []struct {
		name string
		temp bool
	}{
		{".ferry-o-k3f9x2abq7mze.json-123456.tmp", true}, // ours (WriteFile)
		{"k3f9x2ab.jsonl.tmp", true},                     // the ledger's
		{".syncthing.o-k3f9x2abq7mze.json.tmp", true},    // Syncthing
		{"~syncthing~o-k3f9x2abq7mze.json.tmp", true},    // Syncthing on Windows
		{".tmp.drivedownload", true},                     // Google Drive
		{".dropbox.cache", true},                         // Dropbox
		{"~$notes.md", true},                             // Office / OneDrive owner file
		{"o-k3f9x2abq7mze.json.partial", true},           // a partial download
		{"NOTES.TMP", true},
		{"k3f9x2ab.torn-1", true}, // a torn tail moved aside
		{"", true},
		{"o-k3f9x2abq7mze.json", false},
		{"k3f9x2ab.jsonl", false},
		{"k3f9x2ab.sync-conflict-20261129-183000-ABCDEFG.jsonl", false}, // evidence, read
		{"k3f9x2ab (conflicted copy 2026-11-29).jsonl", false},
		{"tmp.json", false},
		{"template.md", false},
	} {
		if got := IsTempName(tc.name); got != tc.temp {
			t.Errorf("IsTempName(%q) = %v, want %v", tc.name, got, tc.temp)
		}
	}
}
