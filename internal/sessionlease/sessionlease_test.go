package sessionlease

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTakeWithoutWarn: a lease whose pid cannot be recorded (its pid file is a
// directory) is still taken, and a nil warn is nobody to tell, not a panic.
func TestTakeWithoutWarn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "leases", "agent-bob.lease")
	if err := os.MkdirAll(p+".pid", 0o755); err != nil {
		t.Fatal(err)
	}
	l, holder, err := Take(p, nil)
	if err != nil || l == nil || holder != "" {
		t.Fatalf("Take = %v, %q, %v; want the lease", l, holder, err)
	}
	defer l.Release()
	if who, held := Holder(p); !held || who != "another process" {
		t.Errorf("Holder = %q, %v; want held, its holder unnamed (no pid recorded)", who, held)
	}
}
