package fsbus

import (
	"path/filepath"
	"testing"
)

// TestLoadProgress: a Load tells Channel.Progress its stages in order, the signature
// checks with a rising count that ends at the number of entries, and "" at the end
// (the progress display of a first reading of a big channel).
func TestLoadProgress(t *testing.T) {
	h := testHome(t)
	c, err := Init(h, InitOptions{Dir: filepath.Join(t.TempDir(), "acme"), Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"alice", "bob", "carol"} {
		if _, err := Join(c, n, "test"); err != nil {
			t.Fatal(err)
		}
	}
	defer func(b int) { progressBlock = b }(progressBlock)
	progressBlock = 1
	type call struct {
		stage       string
		done, total int
	}
	var calls []call
	c.Progress = func(stage string, done, total int) { calls = append(calls, call{stage, done, total}) }
	v, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := len(v.Snapshot.Entries)
	if n < 3 {
		t.Fatalf("only %d entries", n)
	}
	if len(calls) < 4 || calls[0].stage != "reading" || calls[len(calls)-1] != (call{}) {
		t.Fatalf("calls %v", calls)
	}
	var stages []string
	last, verifying := -1, 0
	for _, cl := range calls {
		if len(stages) == 0 || stages[len(stages)-1] != cl.stage {
			stages = append(stages, cl.stage)
		}
		if cl.stage == "verifying" {
			verifying++
			if cl.total != n || cl.done < last || cl.done > n {
				t.Errorf("verifying %d/%d after %d (entries %d)", cl.done, cl.total, last, n)
			}
			last = cl.done
		}
	}
	if want := []string{"reading", "verifying", "folding", "arrivals", ""}; len(stages) != len(want) {
		t.Errorf("stages %v, want %v", stages, want)
	} else {
		for i := range want {
			if stages[i] != want[i] {
				t.Errorf("stages %v, want %v", stages, want)
				break
			}
		}
	}
	if last != n || verifying < n/2 {
		t.Errorf("verifying ended at %d of %d after %d reports", last, n, verifying)
	}
}
