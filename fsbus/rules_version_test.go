package fsbus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
)

// foldRulesFile pins what the committed busy fixture folds to under fold.RulesVersion.
const foldRulesFile = "testdata/fold-rules.json"

// foldRules is foldRulesFile: the rules version and, per fixture, the sha256 of its
// state as incrCanon writes it (every field of the state, the agents' segments, the
// idempotency records and the counted entries).
type foldRules struct {
	RulesVersion int               `json:"rules_version"`
	States       map[string]string `json:"states"`
}

// TestFoldRulesVersion: a change of what the busy fixture folds to fails unless it
// comes with a new fold.RulesVersion; -update writes the file for the version in force.
func TestFoldRulesVersion(t *testing.T) {
	t.Parallel()
	c := openBusyCopy(t)
	c.Thorough = true // every segment byte and object file read, no cache in the way
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(incrCanon(v.State)))
	got := foldRules{RulesVersion: fold.RulesVersion, States: map[string]string{"busy": "sha256:" + hex.EncodeToString(sum[:])}}
	if updating() {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.FromSlash(foldRulesFile), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(filepath.FromSlash(foldRulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var want foldRules
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%s: %v", foldRulesFile, err)
	}
	if want.RulesVersion != fold.RulesVersion {
		t.Fatalf("fold.RulesVersion is %d, %s was written for %d: go test ./fsbus -run TestFoldRulesVersion -update", fold.RulesVersion, foldRulesFile, want.RulesVersion)
	}
	for name, h := range got.States {
		if want.States[name] != h {
			t.Errorf("the %s fixture folds to %s, not %s, under fold.RulesVersion %d: a change of the fold's rules raises fold.RulesVersion (then -update)", name, h, want.States[name], fold.RulesVersion)
		}
	}
}
