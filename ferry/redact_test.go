package main

import (
	"strings"
	"testing"
	"time"
)

// TestParseErrorsNeverEchoSecrets: a flag value the parser rejects (one starting with
// '-', like a private key block) or a bad label is never printed back when it looks
// like a credential (docs/threat-model.md "Stray secrets": never echo it).
func TestParseErrorsNeverEchoSecrets(t *testing.T) {
	key := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Ykl\n-----END RSA PRIVATE KEY-----"
	tok := "ghp_" + strings.Repeat("aB3x9Q", 6)
	cases := []struct {
		name   string
		args   []string
		kind   string
		secret string
	}{
		{"flag value starting with a dash", []string{"handin", "add", "--ref", key, "--as", "alice"}, "private key block", "MIIEpAIBAAK"},
		{"token as a flag value starting with a dash", []string{"talk", "send", "--to", "-" + tok, "hi", "--as", "alice"}, "GitHub token", tok[4:]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != exitCodes["invalid"] || strings.Contains(out+errs, tc.secret) || !strings.Contains(errs, "looks like a "+tc.kind) {
				t.Fatalf("exit %d, stdout %q, stderr %q: want invalid naming a %s, never echoing it", code, out, errs, tc.kind)
			}
		})
	}
	// `ferry run --label` checks its labels before opening a channel.
	if err := checkRunFlags(5*time.Second, time.Minute, 10*time.Second, []string{tok}); err == nil || strings.Contains(err.Error(), tok[4:]) || !strings.Contains(err.Error(), "GitHub token") {
		t.Fatalf("run --label with a token: %v", err)
	}
	// An ordinary parse error still quotes what it could not parse.
	code, _, errs := runCLI(t, "talk", "send", "--to", "-bob", "hi", "--as", "alice")
	if code != exitCodes["invalid"] || !strings.Contains(errs, "-bob") {
		t.Fatalf("plain parse error: exit %d, stderr %q", code, errs)
	}
}
