package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCLIRefusesNonIJSON: every JSON the CLI takes — --schema and --result, inline and
// as @FILE, and mcp call's --args — is refused as invalid (exit 2) when it is not I-JSON
// (RFC 7493), naming why and where, and the channel stays byte for byte as it was.
func TestCLIRefusesNonIJSON(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FERRY_HOME", filepath.Join(dir, "home"))
	t.Setenv("FERRY_AGENT", "")
	ch := filepath.Join(dir, "ch")
	t.Setenv("FERRY_CHANNEL", ch)
	cli := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := runIO(args, strings.NewReader(""), &o, &e)
		return code, o.String(), e.String()
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(args...)
		if code != 0 {
			t.Fatalf("ferry %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	must("init", ch, "--project", "acme")
	for _, a := range []string{"alice", "bob"} {
		must("join", "--as", a)
		must("grant", a, "--level", "member")
	}
	id := regexp.MustCompile(`"id": "(o-[0-9a-z]+)"`).FindStringSubmatch(must("--as", "alice", "order", "new", "Review", "--json"))
	if id == nil {
		t.Fatal("no order id")
	}
	must("--as", "bob", "order", "claim", id[1])

	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return "@" + p
	}
	dupTop := `{"type":"object","type":"array"}`
	dupNested := `{"passed":true,"detail":{"ok":1,"ok":2}}`
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"schema, duplicate", []string{"--as", "alice", "order", "new", "T", "--schema", dupTop},
			`invalid: schema is not I-JSON: duplicate member name "type" at the top level (byte offset 17)`},
		{"schema @FILE, duplicate nested", []string{"--as", "alice", "order", "new", "T", "--schema", file("s.json", `{"properties":{"a":{},"a":{}}}`)},
			`invalid: schema is not I-JSON: duplicate member name "a" in the object at "/properties" (byte offset 22)`},
		{"schema @FILE, invalid UTF-8", []string{"--as", "alice", "order", "new", "T", "--schema", file("s8.json", "{\"description\":\"caf\xe9\"}")},
			`invalid: schema is not I-JSON: invalid UTF-8 at byte offset 19`},
		{"schema, lone surrogate", []string{"--as", "alice", "order", "new", "T", "--schema", `{"description":"\ud800"}`},
			`invalid: schema is not I-JSON: lone surrogate \ud800 at byte offset 16`},
		{"result, duplicate", []string{"--as", "bob", "order", "submit", id[1], "--ref", "abc", "--result", dupNested},
			`invalid: result is not I-JSON: duplicate member name "ok" in the object at "/detail" (byte offset 32)`},
		{"result @FILE, duplicate", []string{"--as", "bob", "order", "submit", id[1], "--ref", "abc", "--result", file("r.json", "{\n  \"passed\": true,\n  \"passed\": false\n}\n")},
			`invalid: result is not I-JSON: duplicate member name "passed" at the top level (byte offset 22)`},
		{"result @FILE with a BOM, duplicate", []string{"--as", "bob", "order", "submit", id[1], "--ref", "abc", "--result", file("rb.json", "\xef\xbb\xbf{\"a\":1,\"a\":2}")},
			`invalid: result is not I-JSON: duplicate member name "a" at the top level (byte offset 10)`},
		{"result @FILE, invalid UTF-8", []string{"--as", "bob", "order", "submit", id[1], "--ref", "abc", "--result", file("r8.json", "{\"note\":\"\xc3\"}")},
			`invalid: result is not I-JSON: invalid UTF-8 at byte offset 9`},
		{"result, lone high surrogate", []string{"--as", "bob", "order", "submit", id[1], "--ref", "abc", "--result", `{"note":"x\uD83D"}`},
			`invalid: result is not I-JSON: lone surrogate \uD83D at byte offset 10 (a high surrogate with no low surrogate after it)`},
		{"result, lone low surrogate", []string{"--as", "bob", "order", "submit", id[1], "--ref", "abc", "--result", `["\udc00"]`},
			`invalid: result is not I-JSON: lone surrogate \udc00 at byte offset 2 (a low surrogate with no high surrogate before it)`},
		{"mcp call --args, duplicate", []string{"mcp", "call", "github", "search", "--args", `{"query":"safe","query":"evil"}`},
			`invalid: --args is not I-JSON: duplicate member name "query" at the top level (byte offset 16)`},
		{"mcp call --args @FILE, lone surrogate", []string{"mcp", "call", "github", "search", "--args", file("a.json", `{"query":"\udfff"}`)},
			`invalid: --args is not I-JSON: lone surrogate \udfff at byte offset 10`},
	}
	// A repeated name that looks like a credential is never echoed, whole or cut.
	token := "sk-ant-api03-" + strings.Repeat("Q7xv9Lr2", 10)
	cases = append(cases, struct {
		name string
		args []string
		want string
	}{"result, duplicate secret-looking name", []string{"--as", "bob", "order", "submit", id[1], "--ref", "abc", "--result", `{"` + token + `":1,"` + token + `":2}`},
		`invalid: result is not I-JSON: duplicate member name "[secret removed: Anthropic API key]" at the top level`})
	before := channelSnapshot(t, ch)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := cli(c.args...)
			if code != exitCodes["invalid"] || out != "" || !strings.Contains(errs, "ferry: error: "+c.want) || !strings.Contains(errs, "ferry: hint: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errs, exitCodes["invalid"], c.want)
			}
			if strings.Contains(errs, token[:16]) {
				t.Fatalf("stderr echoes the secret-looking name: %q", errs)
			}
			if after := channelSnapshot(t, ch); after != before {
				t.Fatalf("the channel changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// channelSnapshot is every file of the channel folder with a hash of its bytes.
func channelSnapshot(t *testing.T, ch string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(ch, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ch, p)
		fmt.Fprintf(&b, "%s %d %x\n", rel, len(data), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
