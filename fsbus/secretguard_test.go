package fsbus

import (
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/errs"
)

// fakeToken returns n deterministic pseudo-random characters of alphabet: realistic
// token bodies without committing anything that looks like a live credential.
func fakeToken(seed uint64, n int, alphabet string) string {
	r := rand.New(rand.NewPCG(seed, seed*7+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

const (
	alnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b64url = alnum + "-_"
	hexd   = "0123456789abcdef"
)

func jwtOf(header string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(`{"sub":"1234567890","name":"Ada","iat":1516239022}`)) + "." + fakeToken(9, 43, b64url)
}

// TestSecretGuardTable is the detector's table (docs/format.md §12 "Input caps and the
// secret guard"): every kind it names is found, ordinary engineering text is not.
func TestSecretGuardTable(t *testing.T) {
	tests := []struct {
		name, text, kind string // kind "" = must pass
	}{
		// positives
		{"aws key id", "use AKIA" + fakeToken(1, 16, upnum) + " for the bucket", "AWS access key id"},
		{"aws session key id", "ASIA" + fakeToken(2, 16, upnum), "AWS access key id"},
		{"github classic", "token ghp_" + fakeToken(3, 36, alnum), "GitHub token"},
		{"github oauth", "gho_" + fakeToken(4, 36, alnum), "GitHub token"},
		{"github user-to-server", "ghu_" + fakeToken(5, 36, alnum), "GitHub token"},
		{"github server", "ghs_" + fakeToken(6, 36, alnum), "GitHub token"},
		{"github refresh", "ghr_" + fakeToken(7, 40, alnum), "GitHub token"},
		{"github fine-grained", "github_pat_" + fakeToken(8, 22, alnum) + "_" + fakeToken(9, 59, alnum), "GitHub token"},
		{"gitlab", "glpat-" + fakeToken(10, 20, b64url), "GitLab token"},
		{"slack bot", "xoxb-" + fakeToken(11, 12, "0123456789") + "-" + fakeToken(12, 24, alnum), "Slack token"},
		{"slack user", "xoxp-" + fakeToken(13, 30, alnum), "Slack token"},
		{"openai legacy", "sk-" + fakeToken(14, 48, alnum), "OpenAI-style API key"},
		{"openai project", "key: sk-proj-" + fakeToken(15, 64, b64url), "OpenAI-style API key"},
		{"anthropic", "sk-ant-api03-" + fakeToken(16, 80, b64url), "Anthropic API key"},
		{"google", "AIza" + fakeToken(17, 35, b64url), "Google API key"},
		{"rsa private key", "here:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE…\n", "private key block"},
		{"openssh private key", "-----BEGIN OPENSSH PRIVATE KEY-----", "private key block"},
		{"pkcs8 private key", "-----BEGIN PRIVATE KEY-----", "private key block"},
		{"encrypted private key", "-----BEGIN ENCRYPTED PRIVATE KEY-----", "private key block"},
		{"pgp private block", "-----BEGIN PGP PRIVATE KEY BLOCK-----", "private key block"},
		{"age identity", "AGE-SECRET-KEY-1" + fakeToken(18, 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"), "age secret key"},
		{"jwt", "Authorization: Bearer " + jwtOf(`{"alg":"HS256","typ":"JWT"}`), "JWT"},
		{"env password", "DB_PASSWORD=s3cr3tP4ss", ".env secret"},
		{"env export token", "export GITHUB_TOKEN=abc123def456", ".env secret"},
		{"env api key quoted", `STRIPE_API_KEY="rk_live_abc123XYZ"`, ".env secret"},
		{"env secret lower", "client_secret = 9f8e7d6c5b4a", ".env secret"},
		{"env in second line", "set these:\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", ".env secret"},
		{"password in url", "clone https://ada:hunter22@git.example.com/repo.git", "password in a URL"},
		{"entropy assignment", "signing_key = " + fakeToken(19, 40, alnum), "high-entropy value assigned to a name"},
		{"entropy yaml", "webhook: " + fakeToken(20, 32, alnum+"+/"), "high-entropy value assigned to a name"},
		// mid-line, after another name, JSON/YAML, hyphenated project keys, empty URL user
		{"env mid-line", "creds: DB_PASSWORD=Tr0ub4dor9x", ".env secret"},
		{"env after another name", "note: AWS_SECRET_ACCESS_KEY=" + fakeToken(40, 40, alnum+"+/"), ".env secret"},
		{"json password", `{"password": "Tr0ub4dor9xQ!"}`, ".env secret"},
		{"json api key", `{"api_key": "` + fakeToken(41, 32, alnum) + `"}`, ".env secret"},
		{"yaml password line", "db:\n  host: db.internal\n  password: Tr0ub4dor9xQ!\n", ".env secret"},
		{"json high-entropy", `{"webhook": "` + fakeToken(42, 32, alnum) + `"}`, "high-entropy value assigned to a name"},
		{"openai project hyphens", "sk-proj-" + fakeToken(43, 20, alnum) + "-" + fakeToken(44, 30, alnum) + "-" + fakeToken(45, 30, alnum) + "-" + fakeToken(46, 20, alnum), "OpenAI-style API key"},
		{"password in url empty user", "redis://:Tr0ub4dor9x@cache.internal:6379/0", "password in a URL"},

		// negatives
		{"yaml token prose", "Token: expired, ask for a new one", ""},
		{"yaml secret kebab", "secret: v2-rollout-plan", ""},
		{"json empty password", `{"password": ""}`, ""},
		// identifiers, ids and digests, not secrets
		{"branch with ticket", "branch: feature/JIRA-1234-fix-login-flow2", ""},
		{"go package path", "path: internal/pkg/handlers/v2/OrderSubmit", ""},
		{"go test name with seed", "func: TestIncrementalFoldMatchesFold3283736891", ""},
		{"handler name", "handler: HandleOrderSubmitWithSchemaValidation2", ""},
		{"ulid", "trace = 01HZX3V8K9M2N4P6Q8R0S2T4V6", ""},
		{"sri hash", "integrity: " + sriOf("app.js"), ""},
		{"prose", "Refactor the ledger reader; the tests pass on Windows and macOS.", ""},
		{"sha256", "object sha256:" + fakeToken(21, 64, hexd), ""},
		{"sha256 assignment", "hash=" + fakeToken(22, 64, hexd), ""},
		{"git commit", "fixed in 3f2a9c1e" + fakeToken(23, 32, hexd) + " on main", ""},
		{"git commit assignment", "commit: " + fakeToken(24, 40, hexd), ""},
		{"uuid", "run id 123e4567-e89b-12d3-a456-426614174000", ""},
		{"uuid assignment", "request_id=123e4567-e89b-12d3-a456-426614174000", ""},
		{"ferry ids", "see o-k3f9x2abq7mze and m-7gq2x9abk3f0z, device k3f9x2ab", ""},
		{"short base64", "data=aGVsbG8gd29ybGQ=", ""},
		{"url", "docs at https://pkg.go.dev/filippo.io/age/agessh#NewEd25519Recipient", ""},
		{"url with query", "https://example.com/search?q=ferry+secret&page=2&sort=desc", ""},
		{"url with user only", "ssh://git@github.com/ferryhq/ferry.git", ""},
		{"file path", "edit /home/ada/projects/ferry2/fsbus/secretguard_test.go line 40", ""},
		{"path assignment", "GOPATH=/home/ada/go/pkg/mod/github.com/ferryhq", ""},
		{"windows path", `C:\Users\Ada\AppData\Roaming\ferry\config`, ""},
		{"env placeholder", "API_KEY=<your key here>", ""},
		{"env reference", "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}", ""},
		{"env dollar", "export TOKEN=$FERRY_TOKEN", ""},
		{"env stars", "PASSWORD=********", ""},
		{"env changeme", "DB_PASSWORD=changeme", ""},
		{"env empty", "SECRET_KEY=", ""},
		{"env file var", "PASSWORD_FILE=/run/secrets/db", ""},
		{"token word", "the claim token expired; the password policy says 12 characters", ""},
		{"sk word", "ask-the-owner-before-merging-this-branch-please", ""},
		{"risk word", "risk-assessment-for-the-new-feature-flag-rollout", ""},
		{"branch", "branch: feature/add-login-2fa-support-for-owners", ""},
		{"snake name", "test_name = test_secret_guard_refuses_tokens_2", ""},
		{"go test line", "go test ./fsbus -run TestSecretGuardTable -count=1", ""},
		{"hlc", "hlc=2026-11-29T18:30:00.123Z/0003", ""},
		{"jwt-like without alg", enc64(`{"typ":"none"}`) + "." + enc64(`{"a":1}`) + "." + fakeToken(25, 20, b64url), ""},
		{"base64 of text", "note=" + enc64("the quick brown fox jumps over the lazy dog"), ""},
		{"camel identifier", "handler: handleToolCallWithPausedMachineState", ""},
		{"version", "go=1.26.0 ferry=v0.9.0-rc.1+20261129", ""},
		{"python getenv", `API_KEY = os.environ["API_KEY"]`, ""},
		{"settings reference", "DB_PASSWORD = settings.DB_PASSWORD", ""},
		{"js env reference", "GITHUB_TOKEN=process.env.GITHUB_TOKEN;", ""},
		{"env dotted value", "DB_PASSWORD=s3cr3t.P4ss-2026", ".env secret"},
		{"env value holding a stock word", "DB_PASSWORD=MyPassword123!", ".env secret"},
		{"env value a stock word", "API_TOKEN=token", ""},
	}
	kinds := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kind, at := FindSecret(tc.text)
			if kind != tc.kind {
				t.Fatalf("FindSecret(%q) = %q, want %q", tc.text, kind, tc.kind)
			}
			if (kind == "") != (at < 0) {
				t.Fatalf("offset %d for kind %q", at, kind)
			}
		})
		kinds[tc.kind] = true
	}
	for _, d := range secretDetectors {
		if !kinds[d.kind] {
			t.Errorf("detector %q has no positive row", d.kind)
		}
	}
}

// sriOf is a Subresource Integrity value (sha512-<base64 of the digest>).
func sriOf(s string) string {
	sum := sha512.Sum512([]byte(s))
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

func enc64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestCheckSecretNeverEchoes: the refusal names kind, field and line, never the value.
func TestCheckSecretNeverEchoes(t *testing.T) {
	secret := "ghp_" + fakeToken(30, 36, alnum)
	err := CheckSecret("message body", "line one\nplease use "+secret+" for now")
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("err = %v, want invalid", err)
	}
	var se *SecretError
	if !errors.As(err, &se) || se.Kind != "GitHub token" || se.Field != "message body" || se.Line != 2 {
		t.Fatalf("SecretError = %+v", se)
	}
	var fe *errs.Error
	errors.As(err, &fe)
	for _, part := range []string{secret, secret[4:], secret[:12], secret[len(secret)-8:]} {
		if strings.Contains(err.Error(), part) {
			t.Fatalf("error text %q echoes the value", err)
		}
	}
	if !strings.Contains(fe.Hint, "ferry secret put") || !strings.Contains(fe.Message, "GitHub token") || !strings.Contains(fe.Message, "message body") {
		t.Fatalf("error %q: want kind, field and a hint naming ferry secret put", err)
	}
	if CheckSecret("note", "all good") != nil {
		t.Fatal("plain text refused")
	}
}

// TestRedactSecrets: every detector's span is replaced, the rest kept, and the result
// passes the guard (what `ferry run` does to a process's output).
func TestRedactSecrets(t *testing.T) {
	tok := "ghp_" + fakeToken(60, 36, alnum)
	in := "ok line\nGITHUB_TOKEN=" + tok + "\nkey AKIA" + fakeToken(61, 16, upnum) + " and -----BEGIN PRIVATE KEY-----\ndone"
	out, n := RedactSecrets(in)
	if n < 3 || strings.Contains(out, tok) || strings.Contains(out, "AKIA") || strings.Contains(out, "BEGIN PRIVATE") {
		t.Fatalf("RedactSecrets = %q, %d", out, n)
	}
	if !strings.HasPrefix(out, "ok line\n") || !strings.HasSuffix(out, "\ndone") || !strings.Contains(out, "[secret removed: GitHub token]") {
		t.Fatalf("RedactSecrets lost ordinary text: %q", out)
	}
	if kind, _ := FindSecret(out); kind != "" {
		t.Fatalf("redacted text still holds a %s: %q", kind, out)
	}
	// A job printing JSON (`{"password": …}` must not land in results/).
	js := `{"user": "ada", "password": "Tr0ub4dor9xQ!"}`
	if out, n := RedactSecrets(js); n != 1 || strings.Contains(out, "Tr0ub4dor") || !strings.Contains(out, `"user": "ada"`) {
		t.Fatalf("RedactSecrets(%s) = %q, %d", js, out, n)
	}
	if out, n := RedactSecrets("nothing here"); n != 0 || out != "nothing here" {
		t.Fatalf("clean text changed: %q %d", out, n)
	}
}

// TestIdentifierLikeSparesRandomTokens: the words-not-random rule
// must not excuse random tokens: none of 20,000 random 40-character mixed-case tokens
// (base64 and base64url alphabets too) is taken for an identifier.
func TestIdentifierLikeSparesRandomTokens(t *testing.T) {
	for seed := uint64(1); seed <= 20000; seed++ {
		for _, a := range []string{alnum, alnum + "+/", b64url} {
			if tok := fakeToken(seed, 40, a); identifierLike(tok) {
				t.Fatalf("random token %q taken for an identifier", tok)
			}
		}
	}
}

// An error may quote the caller's input in another case (ids are lowercased before
// they are quoted; an AWS key id is upper case): RedactInputs cuts it in any case.
func TestRedactInputsAnyCase(t *testing.T) {
	const token = "AKIA39ZZZZG4ZDMEN2KH"
	for _, text := range []string{
		`no order "akia39zzzzg4zdmen2kh"`,
		`no order "AKIA39ZZZZG4ZDMEN2KH"`,
		`no order "Akia39zzzzG4ZDMEN2KH"`,
	} {
		got := RedactInputs(text, []string{"order", "show", token})
		if strings.Contains(strings.ToLower(got), strings.ToLower(token)) || !strings.Contains(got, "[secret removed: ") {
			t.Errorf("RedactInputs(%q) = %q", text, got)
		}
	}
}
