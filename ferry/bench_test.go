package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The process benchmarks time whole `ferry` processes (start, open, load, check, write,
// exit) on a copy of the busy fixture: 200 entries, 40 open orders (fixtures/README.md).
// A copy serves busyBatch iterations and is then replaced outside the timer, so the
// channel holds 200 to 200+busyBatch entries while timed.
const busyBatch = 40

// benchAgent is a member on device A of the busy fixture.
const benchAgent = "cursor-laptop"

// busyCopy is one copy of the busy fixture.
type busyCopy struct {
	bin, home, channel string
	open               []string // ids of open orders, from `ferry order list`
}

// newBusyCopy copies fixtures/busy into a fresh temp dir and runs one untimed
// `ferry order list` on it, as a machine that has seen the channel before would have:
// its pin and arrival log are in place.
func newBusyCopy(b *testing.B, bin string) *busyCopy {
	b.Helper()
	dir := b.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "fixtures", "busy"))); err != nil {
		b.Fatal(err)
	}
	c := &busyCopy{bin: bin, home: filepath.Join(dir, "home"), channel: filepath.Join(dir, "channel")}
	var rows []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(c.ferry(b, "order", "list", "--state", "open", "--json"), &rows); err != nil {
		b.Fatal(err)
	}
	if len(rows) != 40 {
		b.Fatalf("busy fixture has %d open orders, want 40", len(rows))
	}
	for _, r := range rows {
		c.open = append(c.open, r.ID)
	}
	return c
}

// ferry runs one ferry process on the copy as benchAgent and returns its stdout.
func (c *busyCopy) ferry(b *testing.B, args ...string) []byte {
	cmd := exec.Command(c.bin, append(args, "--channel", c.channel, "--as", benchAgent)...)
	env := []string{"FERRY_HOME=" + c.home}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FERRY_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("ferry %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// BenchmarkProcessOrderNew times one `ferry order new` process on the busy fixture.
func BenchmarkProcessOrderNew(b *testing.B) {
	bin := releaseBinary(b)
	c := newBusyCopy(b, bin)
	n := 0
	for b.Loop() {
		if n == busyBatch {
			b.StopTimer()
			c, n = newBusyCopy(b, bin), 0
			b.StartTimer()
		}
		n++
		c.ferry(b, "order", "new", fmt.Sprintf("Benchmark order %d", n), "--body", "Timed by BenchmarkProcessOrderNew.")
	}
}

// BenchmarkProcessOrderClaim times one `ferry order claim ID` process on the busy
// fixture; each iteration claims another of its 40 open orders.
func BenchmarkProcessOrderClaim(b *testing.B) {
	bin := releaseBinary(b)
	c := newBusyCopy(b, bin)
	for b.Loop() {
		if len(c.open) == 0 {
			b.StopTimer()
			c = newBusyCopy(b, bin)
			b.StartTimer()
		}
		id := c.open[0]
		c.open = c.open[1:]
		c.ferry(b, "order", "claim", id)
	}
}
