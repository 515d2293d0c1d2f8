package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// The parser run builds holds only the top-level commands the arguments name
// (newParser): these tests hold it to the whole tree's parser, word for word.

// TestTopCommandsNames: topCommands names every top-level command of the whole model,
// in its order, as kong names them.
func TestTopCommandsNames(t *testing.T) {
	t.Parallel()
	var want []string
	for _, n := range mustModel(t).Children {
		if n.Type == kong.CommandNode {
			want = append(want, n.Name)
		}
	}
	var got []string
	for _, c := range topCommands() {
		got = append(got, c.name)
	}
	if !slices.Equal(got, want) || len(got) < 30 {
		t.Fatalf("topCommands = %q\nkong's model = %q", got, want)
	}
}

// parseWith parses args with the whole tree's parser or run's (parseArgs), and renders
// what came of it: the help printed, the exit code, the command selected and the global
// flags, or the error.
func parseWith(args []string, whole bool) (out string) {
	var cli CLI
	var stdout, stderr bytes.Buffer
	cli.stdout, cli.stderr = &stdout, &stderr
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exitError)
			if !ok {
				panic(r)
			}
			out = fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", e.code, stdout.String(), stderr.String())
		}
	}()
	var kctx *kong.Context
	var err error
	if whole {
		parser, perr := newParser(&cli, args, true, &stdout, &stderr)
		if perr != nil {
			return "new: " + perr.Error()
		}
		kctx, err = parser.Parse(args)
	} else {
		kctx, err = parseArgs(&cli, args)
	}
	if err != nil {
		sel := ""
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context != nil && pe.Context.Selected() != nil {
			sel = commandPath(pe.Context.Selected())
		}
		return fmt.Sprintf("error: %v (selected %q)", err, sel)
	}
	return fmt.Sprintf("command %q channel=%q project=%q as=%q json=%v args=%q", kctx.Command(), cli.Channel, cli.Project, cli.As, cli.JSON, kctx.Args)
}

// TestParserHelpMatchesWholeTree: `--help` of every command (and of the root) prints
// the same with run's parser as with the whole tree's.
func TestParserHelpMatchesWholeTree(t *testing.T) {
	t.Parallel()
	var paths [][]string
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		paths = append(paths, path)
		for _, ch := range n.Children {
			if ch.Type == kong.CommandNode {
				walk(ch, append(slices.Clone(path), ch.Name))
			}
		}
	}
	walk(mustModel(t).Node, nil)
	if len(paths) < 90 {
		t.Fatalf("only %d command paths in the model", len(paths))
	}
	for _, p := range paths {
		args := append(slices.Clone(p), "--help")
		whole, narrow := parseWith(args, true), parseWith(args, false)
		if whole != narrow {
			t.Errorf("ferry %s:\nwhole tree:\n%s\nrun's parser:\n%s", strings.Join(args, " "), whole, narrow)
		}
		if !strings.HasPrefix(whole, "exit 0") {
			t.Errorf("ferry %s: %s", strings.Join(args, " "), whole)
		}
	}
}

// TestParserMatchesWholeTree: parses, and parse errors, read the same with run's parser
// as with the whole tree's, including flag values that are command names.
func TestParserMatchesWholeTree(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"version"},
		{"version", "--json"},
		{"--version"},
		{},
		{"--json"},
		{"ordr", "list"},
		{"order"},
		{"order", "neww"},
		{"order", "new", "--bogus"},
		{"order", "list", "--state", "nonsense"},
		{"--channel", "status", "order", "list"},
		{"--as", "order", "order", "list"},
		{"--channel=status", "agents"},
		{"talk", "send", "all", "status"},
		{"talk", "send", "all", "--", "order"},
		{"--", "order", "list"},
		{"order", "list", "extra"},
		{"agents", "--json", "--as", "codex-laptop"},
		{"mcp", "serve", "--as", "a", "--tools", "admin"},
		{"completion", "bash"},
		{"order", "version"},
		{"version", "order"},
		{"help"},
		{"--help"},
		// Flag values that are command names, and commands after "--".
		{"--as", "order"},
		{"--channel", "order", "agnts"},
		{"--channel", "order", "--help"},
		{"--as", "version", "-h"},
		{"-h", "--project", "inspect"},
		{"--as", "order", "--as", "agents"},
		{"all", "inspect", "grant"},
		{"send", "set", "join"},
		{"--as", "pause", "--", "agents"},
		{"--as", "bob", "--", "agents"},
		{"--project", "handin", "--", "join", "ledger"},
		{"order", "list", "--help=true"},
	} {
		whole, narrow := parseWith(args, true), parseWith(args, false)
		if whole != narrow {
			t.Errorf("ferry %q:\nwhole tree:   %s\nrun's parser: %s", args, whole, narrow)
		}
	}
}

// TestFlagWithoutValue: a flag given last with no value is said to need one, whatever
// its type, instead of the parser's `expected string value but got "EOL"`.
func TestFlagWithoutValue(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"grant", "codex-desktop", "--level"},
		{"order", "list", "--state"},
		{"order", "list", "--limit"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		flag := args[len(args)-1]
		if code != 2 || !strings.HasPrefix(stderr.String(), "ferry: error: invalid: "+flag+" needs a value\n") || strings.Contains(stderr.String(), "EOL") {
			t.Errorf("ferry %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
		}
	}
}

// BenchmarkParse is run's parser built and run once, as every ferry process does:
// whole is the whole tree's model (help, completion, a failed narrowed parse), version
// and order-new the narrowed models of those command lines (ADR 0018).
func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name  string
		args  []string
		whole bool
	}{
		{"whole", []string{"version"}, true},
		{"version", []string{"version"}, false},
		{"order-new", []string{"order", "new", "Fix the login test"}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var cli CLI
				p, err := newParser(&cli, c.args, c.whole, io.Discard, io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Parse(c.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
