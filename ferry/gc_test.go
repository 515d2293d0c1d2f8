package main

import (
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLateFirstGC: lateFirstGC sets GOGC to 400 at once and back to 100 after the
// first collection; with GOGC in the environment it sets nothing.
func TestLateFirstGC(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	var mu sync.Mutex
	var set []int
	record := func(p int) int {
		mu.Lock()
		defer mu.Unlock()
		set = append(set, p)
		return 100
	}
	calls := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(set)
	}
	lateFirstGC(record)
	if got := calls(); !slices.Equal(got, []int{400}) {
		t.Fatalf("before the first collection: set %v, want [400]", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(calls(), []int{400, 100}) {
		if time.Now().After(deadline) {
			t.Fatalf("after collections: set %v, want [400 100]", calls())
		}
		runtime.GC() // the sentinel is unreachable: its finalizer runs after a collection
		time.Sleep(5 * time.Millisecond)
	}

	t.Setenv("GOGC", "200")
	mu.Lock()
	set = nil
	mu.Unlock()
	lateFirstGC(record)
	runtime.GC()
	if got := calls(); len(got) != 0 {
		t.Fatalf("with GOGC=200 in the environment: set %v, want nothing", got)
	}
}
