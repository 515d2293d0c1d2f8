package bootclock

import (
	"runtime"
	"testing"
	"time"
)

// TestRead: the boot clock reads, never goes back, and names one boot throughout; it
// runs beside the wall clock, not from it (a reading is far below the Unix time).
func TestRead(t *testing.T) {
	a, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if a.Since <= 0 || b.Since < a.Since || a.ID != b.ID {
		t.Fatalf("readings %+v then %+v", a, b)
	}
	if a.Since >= time.Duration(time.Now().UnixNano()) {
		t.Fatalf("boot clock %v reads like the wall clock", a.Since)
	}
	if runtime.GOOS == "linux" && len(a.ID) != 36 {
		t.Fatalf("linux boot id %q, want the kernel's UUID", a.ID)
	}
}

func TestCleanID(t *testing.T) {
	if got := cleanID(" 6198c267-1d93-4205 b505\n"); got != "6198c267-1d93-4205b505" {
		t.Fatalf("cleanID: %q", got)
	}
}
