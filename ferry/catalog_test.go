package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// The command catalog (catalog.go): walked from kong's model, it must list exactly the
// leaves `ferry --help` lists, each with exactly the flags and arguments its own --help
// shows, paths without aliases; docs/commands.md must be the catalog rendered now; and
// `ferry mcp serve` must serve that very catalog.

func init() {
	// Another test file of this binary may register -update too.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite generated files (docs/commands.md)")
	}
}

// regenerating reports whether the test run was given -update.
func regenerating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const commandsDoc = "../docs/commands.md"

func testCatalog(t *testing.T) *Catalog {
	t.Helper()
	app, err := catalogModel()
	if err != nil {
		t.Fatal(err)
	}
	return commandCatalog(app)
}

// helpSection returns the lines of one section ("Commands:", "Flags:", "Arguments:")
// of a --help output, up to the next blank line that ends it (a section may hold
// blank lines between flag groups: it ends at a line that starts a new section).
func helpSection(out, title string) []string {
	var lines []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == title:
			in = true
		case in && l != "" && !strings.HasPrefix(l, " "):
			return lines // the next section, or the closing "Run …" line
		case in:
			lines = append(lines, l)
		}
	}
	return lines
}

// helpCommands parses the Commands section of `ferry --help`: each entry is a line
// indented by exactly two spaces, "path words (alias,…)   help…".
func helpCommands(t *testing.T, out string) map[string][]string {
	t.Helper()
	entry := regexp.MustCompile(`^  (\S(?:\S| \S)*?)(?: \(([^)]*)\))?(?:  +.*)?$`)
	cmds := map[string][]string{}
	for _, l := range helpSection(out, "Commands:") {
		if strings.HasPrefix(l, "   ") || l == "" {
			continue // a wrapped help line
		}
		m := entry.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("cannot parse command line %q of ferry --help", l)
		}
		var aliases []string
		if m[2] != "" {
			aliases = strings.Split(m[2], ",")
		}
		cmds[m[1]] = aliases
	}
	if len(cmds) == 0 {
		t.Fatalf("ferry --help lists no commands:\n%s", out)
	}
	return cmds
}

// helpFlags parses the flag names (without dashes) of a --help output.
func helpFlags(out string) []string {
	name := regexp.MustCompile(`^\s+(?:-\S, )?--([a-z0-9-]+)`)
	var names []string
	for _, l := range helpSection(out, "Flags:") {
		if m := name.FindStringSubmatch(l); m != nil {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names
}

// helpArgs parses the arguments of a --help output: "name", or "name?" when optional
// ("[<name>]").
func helpArgs(out string) []string {
	name := regexp.MustCompile(`^\s+(\[?)<([^>]+)>`)
	var names []string
	for _, l := range helpSection(out, "Arguments:") {
		if m := name.FindStringSubmatch(l); m != nil {
			if m[1] == "[" {
				m[2] += "?"
			}
			names = append(names, m[2])
		}
	}
	sort.Strings(names)
	return names
}

func TestCommandCatalogMatchesHelp(t *testing.T) {
	cat := testCatalog(t)
	code, out, errs := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("ferry --help: exit %d\n%s", code, errs)
	}
	listed := helpCommands(t, out)

	var paths []string
	for _, c := range cat.Commands {
		paths = append(paths, c.Path)
		if strings.ContainsAny(c.Path, "(),") {
			t.Errorf("catalog path %q carries aliases", c.Path)
		}
		aliases, ok := listed[c.Path]
		if !ok {
			t.Errorf("catalog has %q; ferry --help does not list it", c.Path)
			continue
		}
		if !slices.Equal(aliases, c.Aliases) {
			t.Errorf("%s: catalog aliases %q, ferry --help shows %q", c.Path, c.Aliases, aliases)
		}
	}
	for p := range listed {
		if !slices.Contains(paths, p) {
			t.Errorf("ferry --help lists %q; the catalog does not", p)
		}
	}
	if len(paths) != len(listed) {
		t.Errorf("catalog has %d commands, ferry --help lists %d", len(paths), len(listed))
	}

	var globals []string
	for _, f := range cat.Globals {
		globals = append(globals, f.Name)
	}
	if got := helpFlags(out); !slices.Equal(got, sorted(globals)) {
		t.Errorf("global flags: catalog %v, ferry --help %v", sorted(globals), got)
	}

	// Every leaf: its --help shows exactly the catalog's flags (with the globals) and
	// arguments.
	for _, c := range cat.Commands {
		args := append(strings.Fields(c.Path), "--help")
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Errorf("ferry %s: exit %d\n%s", strings.Join(args, " "), code, errs)
			continue
		}
		want := append([]string{}, globals...)
		for _, f := range c.Flags {
			want = append(want, f.Name)
		}
		if got := helpFlags(out); !slices.Equal(got, sorted(want)) {
			t.Errorf("ferry %s --help flags %v; catalog %v", c.Path, got, sorted(want))
		}
		var wantArgs []string
		for _, a := range c.Args {
			if a.Required {
				wantArgs = append(wantArgs, a.Name)
			} else {
				wantArgs = append(wantArgs, a.Name+"?")
			}
		}
		if got := helpArgs(out); !slices.Equal(got, sorted(wantArgs)) {
			t.Errorf("ferry %s --help arguments %v; catalog %v", c.Path, got, sorted(wantArgs))
		}
	}
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

// TestCommandCatalogShape pins what the walk must carry on commands whose shape is
// known: an alias kept out of the path, a positional, a flag's placeholder, default,
// enum and repeatability, and hidden flags left out.
func TestCommandCatalogShape(t *testing.T) {
	cat := testCatalog(t)
	byPath := map[string]CatalogCommand{}
	for _, c := range cat.Commands {
		if _, dup := byPath[c.Path]; dup {
			t.Errorf("catalog lists %q twice", c.Path)
		}
		byPath[c.Path] = c
	}
	list, ok := byPath["order list"]
	if !ok || !slices.Contains(list.Aliases, "ls") {
		t.Errorf("order list: %+v, want the alias ls beside the path", list)
	}
	neworder := byPath["order new"]
	// The title is the argument or --title (the MCP tool's name), exactly one of the two.
	if len(neworder.Args) != 1 || neworder.Args[0].Name != "title" || neworder.Args[0].Required {
		t.Errorf("order new args: %+v, want the optional <title>", neworder.Args)
	}
	var label, body, title *CatalogFlag
	for i := range neworder.Flags {
		switch neworder.Flags[i].Name {
		case "label":
			label = &neworder.Flags[i]
		case "body":
			body = &neworder.Flags[i]
		case "title":
			title = &neworder.Flags[i]
		}
	}
	if title == nil || title.Value != "TITLE" {
		t.Errorf("order new flags: --title is %+v, want --title=TITLE", title)
	}
	if label == nil || !label.Repeated || body == nil || body.Value != "TEXT" || body.Help == "" {
		t.Errorf("order new flags: label %+v, body %+v", label, body)
	}
	serve := byPath["mcp serve"]
	for _, f := range serve.Flags {
		if f.Name == "presence-every" {
			t.Errorf("mcp serve lists the hidden flag --presence-every")
		}
	}
	var channel *CatalogFlag
	for i := range cat.Globals {
		if cat.Globals[i].Name == "channel" {
			channel = &cat.Globals[i]
		}
	}
	if channel == nil || !slices.Contains(channel.Env, "FERRY_CHANNEL") || channel.Value != "DIR" {
		t.Errorf("global --channel: %+v", channel)
	}
	raw, err := catalogJSON(mustModel(t))
	if err != nil {
		t.Fatal(err)
	}
	var back Catalog
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Commands) != len(cat.Commands) {
		t.Fatalf("catalog JSON does not round-trip: %v (%d commands)", err, len(back.Commands))
	}
}

func mustModel(t *testing.T) *kong.Application {
	t.Helper()
	app, err := catalogModel()
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// TestCommandsDoc fails when docs/commands.md is not the catalog rendered now; -update
// rewrites it.
func TestCommandsDoc(t *testing.T) {
	got := commandsMarkdown(testCatalog(t))
	if regenerating() {
		if err := os.WriteFile(commandsDoc, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(commandsDoc)
	if err != nil {
		t.Fatalf("reading %s: %v (run go test ./ferry -run TestCommandsDoc -update)", commandsDoc, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: the CLI changed; run go test ./ferry -run TestCommandsDoc -update and commit it", commandsDoc)
	}
	for _, c := range testCatalog(t).Commands {
		if !bytes.Contains(want, []byte("### `ferry "+c.Path)) {
			t.Errorf("%s has no section for %q", commandsDoc, c.Path)
		}
	}
}

// TestMCPServesCommandCatalog: `ferry mcp serve` hands its own parser's catalog to the
// server, served byte for byte as ferry://<project>/commands and summarised in
// ferry://<project>/capabilities.
func TestMCPServesCommandCatalog(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv("FERRY_HOME", home)
	dir := filepath.Join(t.TempDir(), "acme")
	for _, args := range [][]string{{"init", dir, "--project", "acme"}, {"join", "--as", "bob", "--project", "acme"}} {
		var o, e bytes.Buffer
		if code := runIO(args, strings.NewReader(""), &o, &e); code != 0 {
			t.Fatalf("ferry %v: exit %d\n%s%s", args, code, o.String(), e.String())
		}
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"ferry://acme/commands"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"ferry://acme/capabilities"}}`,
	}, "\n") + "\n"
	var o, e bytes.Buffer
	if code := runIO([]string{"mcp", "serve", "--as", "bob", "--project", "acme"}, strings.NewReader(in), &o, &e); code != 0 {
		t.Fatalf("ferry mcp serve: exit %d\n%s", code, e.String())
	}
	texts := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(o.String()), "\n") {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Contents []struct {
					URI  string `json:"uri"`
					Text string `json:"text"`
				} `json:"contents"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		if r.Error != nil {
			t.Fatalf("request %s failed: %s", r.ID, r.Error)
		}
		for _, c := range r.Result.Contents {
			texts[c.URI] = c.Text
		}
	}
	want, err := catalogJSON(mustModel(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := texts["ferry://acme/commands"]; got != string(want) {
		t.Fatalf("ferry://acme/commands is not the CLI's catalog:\n got %.300s\nwant %.300s", got, want)
	}
	var caps struct {
		Version  string `json:"version"`
		Commands struct {
			Leaves int `json:"leaves"`
		} `json:"commands"`
	}
	if err := json.Unmarshal([]byte(texts["ferry://acme/capabilities"]), &caps); err != nil {
		t.Fatalf("capabilities: %v\n%s", err, texts["ferry://acme/capabilities"])
	}
	if caps.Version != version || caps.Commands.Leaves != len(testCatalog(t).Commands) {
		t.Fatalf("capabilities = %+v, want version %s and %d leaves", caps, version, len(testCatalog(t).Commands))
	}
}
