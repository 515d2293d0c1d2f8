package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
)

// The command catalog: every leaf command of the CLI with its arguments and flags,
// walked from kong's model — k.Model.Leaves(true), each leaf's words without aliases,
// n.AllFlags(true), n.Positional — never from a hand-kept list. `ferry mcp serve`
// builds it from its own parser at start-up and hands it to the MCP server
// (mcpserver.FerryConfig.Commands, served as ferry://<project>/commands), so the
// server never imports the CLI; docs/commands.md is generated from the same walk
// (go test ./ferry -run TestCommandsDoc -update).

// Catalog is the command catalog.
type Catalog struct {
	Name string `json:"name"` // the program: "ferry"
	// Globals are the flags of the program itself, which every command takes.
	Globals []CatalogFlag `json:"globals"`
	// Commands are the leaf commands, in the order of the parser (ferry --help).
	Commands []CatalogCommand `json:"commands"`
}

// CatalogCommand is one leaf command.
type CatalogCommand struct {
	// Path is the command's words after the program name, without aliases: "order list".
	Path string `json:"path"`
	// Aliases are other names of the last word ("ls" for "order list").
	Aliases []string      `json:"aliases,omitempty"`
	Help    string        `json:"help"`
	Args    []CatalogArg  `json:"args,omitempty"`
	Flags   []CatalogFlag `json:"flags,omitempty"` // its own and its parents' flags, not the globals
}

// CatalogArg is a positional argument.
type CatalogArg struct {
	Name     string `json:"name"`
	Help     string `json:"help,omitempty"`
	Required bool   `json:"required,omitempty"`
	Repeated bool   `json:"repeated,omitempty"` // takes several values
}

// CatalogFlag is a flag, as `--help` shows it.
type CatalogFlag struct {
	Name     string   `json:"name"`            // without dashes: "body"
	Short    string   `json:"short,omitempty"` // one letter, without the dash
	Value    string   `json:"value,omitempty"` // the placeholder of its value; "" for a switch
	Help     string   `json:"help,omitempty"`
	Default  string   `json:"default,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	Env      []string `json:"env,omitempty"` // environment variables that set it
	Required bool     `json:"required,omitempty"`
	Repeated bool     `json:"repeated,omitempty"` // may be given several times or as a list
}

// catalogModel builds the parser's model of the whole CLI the way run does (newParser
// with the whole tree).
func catalogModel() (*kong.Application, error) {
	k, err := newParser(&CLI{}, nil, true, io.Discard, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("building the command parser: %w", err)
	}
	return k.Model, nil
}

// commandCatalog walks app: its visible leaves (Leaves(true)), each with its
// positional arguments and its visible flags (AllFlags(true)) other than the
// program's own, which are listed once as Globals.
func commandCatalog(app *kong.Application) *Catalog {
	c := &Catalog{Name: app.Name, Globals: []CatalogFlag{}, Commands: []CatalogCommand{}}
	global := map[*kong.Flag]bool{}
	for _, f := range app.Flags {
		global[f] = true
		if !f.Hidden {
			c.Globals = append(c.Globals, catalogFlag(f))
		}
	}
	for _, n := range app.Leaves(true) {
		cmd := CatalogCommand{Path: leafPath(n), Aliases: n.Aliases, Help: n.Help}
		for _, p := range n.Positional {
			cmd.Args = append(cmd.Args, CatalogArg{Name: p.Name, Help: p.Help, Required: p.Required, Repeated: p.IsCumulative()})
		}
		for _, group := range n.AllFlags(true) {
			for _, f := range group {
				if !global[f] {
					cmd.Flags = append(cmd.Flags, catalogFlag(f))
				}
			}
		}
		c.Commands = append(c.Commands, cmd)
	}
	return c
}

// leafPath is n's words from the program down, without aliases: kong's n.Path() with
// the "(alias,…)" it adds left out ("order list", never "order list (ls)"); a branching
// argument shows as "<name>".
func leafPath(n *kong.Node) string {
	var words []string
	for ; n != nil && n.Type != kong.ApplicationNode; n = n.Parent {
		w := n.Name
		if n.Type == kong.ArgumentNode {
			w = "<" + n.Name + ">"
		}
		words = append([]string{w}, words...)
	}
	return strings.Join(words, " ")
}

func catalogFlag(f *kong.Flag) CatalogFlag {
	out := CatalogFlag{Name: f.Name, Help: f.Help, Required: f.Required, Env: f.Envs, Repeated: f.IsCumulative()}
	if f.Short != 0 {
		out.Short = string(f.Short)
	}
	if !f.IsBool() && !f.IsCounter() {
		out.Value = f.FormatPlaceHolder()
	}
	if f.HasDefault && !f.IsBool() {
		out.Default = f.Default
	}
	if f.Enum != "" {
		out.Enum = f.EnumSlice()
	}
	return out
}

// catalogJSON is the catalog of app as compact JSON without HTML escaping (what
// ferry://<project>/commands serves).
func catalogJSON(app *kong.Application) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(commandCatalog(app)); err != nil {
		return nil, fmt.Errorf("encoding the command catalog: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// commandsMarkdown renders the catalog as docs/commands.md.
func commandsMarkdown(c *Catalog) []byte {
	var b bytes.Buffer
	cell := func(s string) string {
		return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
	}
	flagCell := func(f CatalogFlag) string {
		s := "`--" + f.Name
		if f.Value != "" {
			s += "=" + f.Value
		}
		s += "`"
		if f.Short != "" {
			s = "`-" + f.Short + "`, " + s
		}
		return s
	}
	flagNotes := func(f CatalogFlag) string {
		var notes []string
		if f.Required {
			notes = append(notes, "required")
		}
		if f.Repeated {
			notes = append(notes, "repeatable")
		}
		if f.Default != "" {
			notes = append(notes, "default `"+f.Default+"`")
		}
		if len(f.Enum) > 0 {
			notes = append(notes, "one of "+strings.Join(f.Enum, ", "))
		}
		for _, e := range f.Env {
			notes = append(notes, "env `"+e+"`")
		}
		if len(notes) == 0 {
			return cell(f.Help)
		}
		return cell(f.Help) + " (" + strings.Join(notes, "; ") + ")"
	}
	fmt.Fprintf(&b, "# %s commands\n\n", c.Name)
	fmt.Fprintf(&b, "Generated from the CLI parser (kong's model), the same walk that `ferry mcp serve`\n")
	fmt.Fprintf(&b, "serves as `ferry://<project>/commands`. Do not edit: run\n")
	fmt.Fprintf(&b, "`go test ./ferry -run TestCommandsDoc -update`.\n\n")
	fmt.Fprintf(&b, "## Global flags\n\nEvery command takes these.\n\n| flag | meaning |\n|---|---|\n")
	for _, f := range c.Globals {
		fmt.Fprintf(&b, "| %s | %s |\n", flagCell(f), flagNotes(f))
	}
	fmt.Fprintf(&b, "\n## Commands\n\n")
	for _, cmd := range c.Commands {
		usage := c.Name + " " + cmd.Path
		for _, a := range cmd.Args {
			arg := "<" + a.Name + ">"
			if a.Repeated {
				arg += " ..."
			}
			if !a.Required {
				arg = "[" + arg + "]"
			}
			usage += " " + arg
		}
		fmt.Fprintf(&b, "### `%s`\n\n%s\n", usage, cmd.Help)
		if len(cmd.Aliases) > 0 {
			fmt.Fprintf(&b, "\nAlso: `%s`.\n", strings.Join(cmd.Aliases, "`, `"))
		}
		if len(cmd.Args)+len(cmd.Flags) > 0 {
			fmt.Fprintf(&b, "\n| argument or flag | meaning |\n|---|---|\n")
			for _, a := range cmd.Args {
				note := ""
				if !a.Required {
					note = " (optional)"
				}
				fmt.Fprintf(&b, "| `<%s>` | %s%s |\n", a.Name, cell(a.Help), note)
			}
			for _, f := range cmd.Flags {
				fmt.Fprintf(&b, "| %s | %s |\n", flagCell(f), flagNotes(f))
			}
		}
		b.WriteString("\n")
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}
