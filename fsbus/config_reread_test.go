package fsbus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/errs"
)

// TestLoadReadsChangedChannelToml: a running process reads channel.toml again when it
// changes. A file touched with the same content changes nothing; one the owner moved
// to a newer format stops every Load (nothing folded as before); one that no longer
// verifies, or names another project or master key, stops it too.
func TestLoadReadsChangedChannelToml(t *testing.T) {
	t.Parallel()
	c, _, _ := primaryWorld(t, map[string]string{"mike": "member"})
	p := filepath.Join(c.Root, "channel.toml")
	if _, err := c.Load(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(); err != nil {
		t.Fatalf("channel.toml touched, the same bytes: %v", err)
	}
	for _, c2 := range []struct {
		name, from, to, want string
	}{
		{"a newer format", "format = 1", "format = 3", "channel format 3 is newer than this binary reads"},
		{"another title, unsigned", `title = "`, `title = "x`, "signature"},
	} {
		if !strings.Contains(string(orig), c2.from) {
			t.Fatalf("channel.toml holds no %q:\n%s", c2.from, orig)
		}
		changed := strings.Replace(string(orig), c2.from, c2.to, 1)
		if err := os.WriteFile(p, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Load(); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), c2.want) {
			t.Errorf("%s: Load = %v, want invalid with %q", c2.name, err, c2.want)
		}
	}
	// A channel made again under the same project id on another machine: its
	// channel.toml verifies, with another master key.
	other, err := Init(testHome(t), InitOptions{Dir: filepath.Join(t.TempDir(), "again"), Project: c.Project()})
	if err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(other.Root, "channel.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, again, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "channel.toml changed under this process") {
		t.Errorf("another master key: Load = %v, want invalid, changed under this process", err)
	}
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(); err != nil {
		t.Fatalf("channel.toml put back: %v", err)
	}
}
