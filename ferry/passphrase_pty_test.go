//go:build linux || darwin

package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestPassphrasePrompt: with stdin a terminal and no --passphrase-file or
// FERRY_PASSPHRASE, the passphrase is read at a prompt on stderr with echo off (the
// typed text never appears on the terminal); a passphrase being set is asked twice, and
// two different ones are refused.
func TestPassphrasePrompt(t *testing.T) {
	t.Setenv(EnvPassphrase, "x")
	os.Unsetenv(EnvPassphrase) // t.Setenv restores whatever was there
	for _, c := range []struct {
		name, typed string
		confirm     bool
		want        string // "" for a refusal
	}{
		{"once", "s3cret words\n", false, "s3cret words"},
		{"twice", "s3cret words\ns3cret words\n", true, "s3cret words"},
		{"differ", "s3cret words\nother words\n", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ptm, tty, err := pty.Open()
			if err != nil {
				t.Fatalf("opening a pty: %v", err)
			}
			defer ptm.Close()
			defer tty.Close()
			var echo bytes.Buffer
			var wg sync.WaitGroup
			wg.Go(func() { io.Copy(&echo, ptm) }) // what the terminal shows
			stderr := &syncBuffer{}
			g := &Globals{stdin: tty, stdout: io.Discard, stderr: stderr}
			done := make(chan struct{})
			var got []byte
			var rerr error
			go func() {
				got, rerr = Passphrase{}.read(g, "the key of bob", c.confirm)
				close(done)
			}()
			prompts := []string{"Passphrase for the key of bob: ", "Again, to confirm: "}
			for i, line := range strings.SplitAfter(strings.TrimSuffix(c.typed, "\n"), "\n") {
				// Type only once the prompt is there (echo goes off right after it).
				for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), prompts[i]); {
					if time.Now().After(deadline) {
						t.Fatalf("no prompt %q: %q", prompts[i], stderr.String())
					}
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(50 * time.Millisecond)
				io.WriteString(ptm, strings.TrimSuffix(line, "\n")+"\n")
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the prompt did not return")
			}
			tty.Close()
			ptm.Close()
			wg.Wait()
			if !strings.Contains(stderr.String(), "Passphrase for the key of bob: ") {
				t.Errorf("prompt %q", stderr.String())
			}
			if c.confirm && !strings.Contains(stderr.String(), "Again, to confirm: ") {
				t.Errorf("no confirmation prompt: %q", stderr.String())
			}
			if strings.Contains(echo.String(), "s3cret") || strings.Contains(echo.String(), "other") {
				t.Errorf("the terminal echoed the passphrase: %q", echo.String())
			}
			if c.want == "" {
				if rerr == nil || !strings.Contains(rerr.Error(), "the two passphrases differ") {
					t.Fatalf("differing passphrases: %q %v, want refused", got, rerr)
				}
				return
			}
			if rerr != nil || string(got) != c.want {
				t.Fatalf("read %q %v, want %q", got, rerr, c.want)
			}
		})
	}
}
