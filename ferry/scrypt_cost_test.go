package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age/armor"
)

// testScryptWorkFactor is log2 N of the scrypt cost the ferry tests lock and export
// keys with: TestMain sets keyfile.ScryptWorkFactor to it in the test binary and in
// every copy of it that runs as ferry, so a lock costs milliseconds instead of a
// second. The files are the same format; age reads the cost back from each file's
// header.
const testScryptWorkFactor = 10

// fullScryptWorkFactor is the work factor every build locks keys with: age's default,
// keyfile.ScryptWorkFactor's value until a test lowers it.
const fullScryptWorkFactor = 18

// TestReleaseBinaryLocksAtFullCost: the release build of ferry (releaseBuild) locks a key
// with age's full scrypt cost (log2 N = 18, keyfile.ScryptWorkFactor), whatever the
// tests lower in their own processes; the test binary standing in for ferry locks with the
// lowered cost, so the check reads the header and would see either.
func TestReleaseBinaryLocksAtFullCost(t *testing.T) {
	rel := releaseBuild() // built while the tests before the parallel ones run
	t.Parallel()
	for _, c := range []struct {
		name string
		bin  string
		want int
	}{
		{"release binary", rel.wait(t), fullScryptWorkFactor},
		{"test binary as ferry", ferryExe(t), testScryptWorkFactor},
	} {
		m := newMCPMachine(t, c.bin)
		m.channel("acme", "bob")
		cmd := m.command("key", "lock", "--as", "bob", "--project", "acme")
		cmd.Env = append(cmd.Env, EnvPassphrase+"=a passphrase of some words")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: key lock: %v\n%s", c.name, err, out)
		}
		b, err := os.ReadFile(filepath.Join(m.home, "config", "keys", "acme", "bob.key.locked"))
		if err != nil {
			t.Fatal(err)
		}
		if got := lockedWorkFactor(t, b); got != c.want {
			t.Errorf("%s locked a key with scrypt log2 N = %d, want %d", c.name, got, c.want)
		}
	}
}

// lockedWorkFactor reads log2 N from the scrypt stanza of a locked key file's age
// header (docs/format.md §18: a "ferry-locked-key-v1" line, then the armored age file,
// whose header has one "-> scrypt <salt> <log2 N>" line).
func lockedWorkFactor(t *testing.T, locked []byte) int {
	t.Helper()
	first, rest, ok := bytes.Cut(locked, []byte("\n"))
	if !ok || !bytes.HasPrefix(first, []byte("ferry-locked-key-v1 ")) {
		t.Fatalf("not a locked key file: %q", first)
	}
	sc := bufio.NewScanner(armor.NewReader(bytes.NewReader(rest)))
	if !sc.Scan() || sc.Text() != "age-encryption.org/v1" {
		t.Fatalf("the locked key is not an age v1 file: %q (%v)", sc.Text(), sc.Err())
	}
	stanzas := 0
	n := -1
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "---") {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "->" {
			continue // a stanza's body
		}
		stanzas++
		if len(f) != 4 || f[1] != "scrypt" {
			t.Fatalf("the locked key's age header has the stanza %q, want only one scrypt stanza", sc.Text())
		}
		var err error
		if n, err = strconv.Atoi(f[3]); err != nil {
			t.Fatalf("scrypt stanza %q: %v", sc.Text(), err)
		}
	}
	if stanzas != 1 {
		t.Fatalf("the locked key's age header has %d stanzas, want one scrypt stanza", stanzas)
	}
	return n
}
