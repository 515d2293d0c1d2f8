package main

import (
	"bytes"
	"testing"

	"github.com/ferryhq/ferry/fsbus/fold"
)

// TestWarnIgnored: get and list warn, naming the writers whose puts of a name were
// ignored and its owner, and say nothing when there are none (ADR 0009
// §2; fsbus.TestVaultNameOwner makes such a put).
func TestWarnIgnored(t *testing.T) {
	var b bytes.Buffer
	warnIgnored(&b, &fold.Secret{Name: "deploy-token", Owner: "master", Author: "master"})
	if b.Len() != 0 {
		t.Fatalf("no ignored puts: %q", b.String())
	}
	warnIgnored(&b, &fold.Secret{Name: "deploy-token", Owner: "master", Author: "master", Ignored: []string{"alice", "bob"}})
	want := "ferry: warning: secret deploy-token also has puts by alice, bob, ignored: it belongs to master, and only master may replace it\n"
	if b.String() != want {
		t.Fatalf("warning %q, want %q", b.String(), want)
	}
	b.Reset()
	warnIgnored(&b, &fold.Secret{Name: "db", Owner: "alice", Author: "master", Ignored: []string{"bob"}})
	want = "ferry: warning: secret db also has puts by bob, ignored: it belongs to alice, and only alice or master may replace it\n"
	if b.String() != want {
		t.Fatalf("warning %q, want %q", b.String(), want)
	}
}
