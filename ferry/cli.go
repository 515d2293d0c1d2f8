package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/kong"
	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
	"github.com/ferryhq/ferry/internal/textsafe"
)

// version is set by the build (-ldflags "-X main.version=…"); a release carries its
// version as its module version instead (currentVersion, README "Release build").
var version = "dev"

// CLI is the whole command tree (docs/design.md §3). Every command is one fsbus call.
type CLI struct {
	cliRoot

	Init     InitCmd     `cmd:"" help:"Create a channel in a folder and the owner's master key."`
	Key      KeyCmd      `cmd:"" help:"Make or show this machine's keys."`
	Join     JoinCmd     `cmd:"" help:"Announce an agent in a channel (makes its key)."`
	Grant    GrantCmd    `cmd:"" help:"Seat an agent at a level, or revoke it (owner only)."`
	Agents   AgentsCmd   `cmd:"" help:"List agents, their levels and liveness."`
	Agent    AgentCmd    `cmd:"" help:"Act on one agent: retire it."`
	Access   AccessCmd   `cmd:"" help:"Show what an agent may do."`
	Status   StatusCmd   `cmd:"" help:"Show the owner's view: agents to seat, reviews due, contested orders."`
	Order    OrderCmd    `cmd:"" help:"Dispatch, claim and finish orders."`
	Talk     TalkCmd     `cmd:"" help:"Send messages and read what is new to you."`
	Ask      AskCmd      `cmd:"" help:"Ask the owner before a risky step; the owner answers."`
	Primary  PrimaryCmd  `cmd:"" help:"See, take, hand over or brief the primary role."`
	Decision DecisionCmd `cmd:"" help:"Record and list the decisions made."`
	Handin   HandinCmd   `cmd:"" help:"Name work handed in: a commit, branch or path."`
	Catchup  CatchupCmd  `cmd:"" help:"Show an agent's bounded digest of what matters now."`
	Ledger   LedgerCmd   `cmd:"" help:"Read or verify the ledger."`
	Watch    WatchCmd    `cmd:"" help:"Print each new entry, order, message and contest as it arrives."`
	Sync     SyncCmd     `cmd:"" help:"Carry the channel with git: commit this machine's files, pull, push."`
	Doctor   DoctorCmd   `cmd:"" help:"Check what syncing did to the channel, with a fix for each finding."`
	Mcp      McpCmd      `cmd:"" name:"mcp" help:"Serve the channel to AI apps over MCP."`
	Demo     DemoCmd     `cmd:"" help:"Run the whole order loop in a throw-away sandbox."`
	Version  VersionCmd  `cmd:"" help:"Print the version and channel format."`
	Run      RunCmd      `cmd:"" help:"Take ready orders and run a file on each, unattended."`
	Daemon   DaemonCmd   `cmd:"" help:"Run handlers per agent and task type from a config, one daemon per agent."`
	Inspect  InspectCmd  `cmd:"" help:"Show orders with state, holder, age, retries and last error."`

	// Fitting into the tools people use.
	Connect    ConnectCmd    `cmd:"" help:"Write (or remove) an AI app's MCP entry for ferry and join its agent."`
	Completion CompletionCmd `cmd:"" help:"Print a shell completion script (bash, zsh, fish, powershell)."`
	Update     UpdateCmd     `cmd:"" help:"Approve, check for and apply signed updates of ferry itself."`
	Search     SearchCmd     `cmd:"" help:"Search orders, messages, decisions and asks, newest first."`

	// The owner's trust root (ADR 0008, ADR 0015).
	Master MasterCmd `cmd:"" help:"Rotate the owner's master key, or deliberately re-pin it."`
	Policy PolicyCmd `cmd:"" help:"Show the channel's policy in force, or change it (owner only)."`
	// The owner's checkpoint (ADR 0019).
	Compact CompactCmd `cmd:"" help:"Sign where the ledger's past ends: the owner's checkpoint (owner only)."`
	Archive ArchiveCmd `cmd:"" help:"Take the history a checkpoint covers out of the synced folder (owner only)."`
	// The vault (ADR 0009) and the pause switch.
	Secret SecretCmd `cmd:"" help:"Keep a secret in the channel's vault, encrypted to named agents."`
	Pause  PauseCmd  `cmd:"" help:"Stop this machine acting on channels until ferry resume."`
	Resume ResumeCmd `cmd:"" help:"Lift this machine's pause."`
}

// cliRoot is the root of the command tree without its commands: the global flags and
// --version. run parses with it and only the commands the arguments can name
// (parseModel).
type cliRoot struct {
	Globals

	// --version is `ferry version` as a flag.
	VersionFlag versionFlag `name:"version" help:"Print the version and channel format (as ferry version)."`
}

// Globals are the flags every command takes (docs/design.md §3).
type Globals struct {
	Channel string `help:"Channel directory." env:"FERRY_CHANNEL" placeholder:"DIR"`
	Project string `help:"Project id; its channel is looked up in this machine's config." placeholder:"ID"`
	As      string `help:"Act as this agent." env:"FERRY_AGENT" placeholder:"NAME"`
	JSON    bool   `help:"Print JSON." name:"json"`

	stdin  io.Reader `kong:"-"`
	stdout io.Writer `kong:"-"`
	stderr io.Writer `kong:"-"`
	home   *fsbus.Home
	// asFrom is where As came from, "--as" or "FERRY_AGENT" (checkOwner sets it).
	asFrom string
	// expired are the orders an order command's writes expired (orderSession), to be
	// reported.
	expired []string
}

// exitCodes map error categories to process exit codes: the one map docs/exit-codes.md,
// `ferry --help` and README are checked against (conventions.go).
var exitCodes = map[errs.Category]int{
	errs.Internal: 1, errs.Invalid: 2, errs.Denied: 3, errs.NotFound: 4,
	errs.Conflict: 5, errs.Locked: 6, errs.Stale: 7, errs.RetryNeeded: 8,
	errs.Paused: 9, errs.Superseded: 10,
}

type exitError struct{ code int }

// run parses args and runs one command, writing to stdout and stderr. It returns the
// process exit code: 0 on success, exitCodes[category] on a failure, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) (code int) {
	return runIO(args, os.Stdin, stdout, stderr)
}

// runIO is run with an explicit stdin (for `ferry mcp serve` in tests).
func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	// Until the parser has read --json, whether errors are JSON is read off args.
	jsonErrors := jsonFlag(args)
	// What errors must never print back (redact): the caller's own strings.
	inputs := append(slices.Clone(args), os.Getenv("FERRY_AGENT"), os.Getenv("FERRY_CHANNEL"))
	for _, a := range args {
		if !utf8.ValidString(a) {
			// The parser would turn the bad bytes into U+FFFD silently; refuse instead.
			return printError(stderr, errs.Errorf(errs.Invalid, "pass UTF-8 text (or --body @FILE with a UTF-8 file)",
				"argument %s is not UTF-8", secretguard.Quote(a)), jsonErrors, inputs)
		}
	}
	var cli CLI
	cli.stdin, cli.stdout, cli.stderr = stdin, stdout, stderr
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(exitError); ok {
				code = e.code
				return
			}
			panic(r)
		}
	}()
	kctx, err := parseArgs(&cli, args)
	if err != nil {
		hint, form := "ferry --help", ""
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context != nil && pe.Context.Selected() != nil {
			n := pe.Context.Selected()
			hint = "ferry " + commandPath(n) + " --help"
			if len(n.Children) == 0 {
				form = commandForm(n)
			}
		}
		if kind := parseErrorSecret(err.Error(), args); kind != "" {
			// The parser quotes the argument it rejects (a flag value starting with
			// '-', e.g. a private key block): never print it (docs/threat-model.md "Stray secrets").
			return printError(stderr, errs.Errorf(errs.Invalid,
				"keep credentials out of arguments (`ferry secret put NAME --to AGENT… < FILE`); a flag value starting with '-' is written --flag=VALUE; see `"+hint+"`",
				"the command line holds text that looks like %s %s, which it could not parse (not shown)", article(kind), kind), jsonErrors, inputs)
		}
		if e := negativeValue(err, hint); e != nil {
			return printError(stderr, e, jsonErrors, inputs)
		}
		h := "see `" + hint + "`"
		if form != "" {
			// An unknown flag or a stray argument is most often a word from elsewhere
			// (the MCP tools' parameter names, another CLI's habits): show the form.
			h = "the form is `" + form + "`; " + h
		}
		return printError(stderr, errs.Errorf(errs.Invalid, h, "%s", parseMessage(err)), jsonErrors, inputs)
	}
	if err := checkOwner(kctx, &cli.Globals); err != nil {
		return printError(stderr, err, cli.JSON, inputs)
	}
	if err := kctx.Run(&cli.Globals); err != nil {
		return printError(stderr, err, cli.JSON, inputs)
	}
	return 0
}

// parseArgs parses args into cli, whose stdin, stdout and stderr are set, with run's
// parser (newParser): when that parse fails, cli is parsed again with the whole tree's
// parser, whose error (or success: a command after "--") is the answer, so narrowing
// the parser never changes what a command line means or what its error says. A parse
// error that is no *kong.ParseError means the parser could not be built.
func parseArgs(cli *CLI, args []string) (*kong.Context, error) {
	whole := wholeTree(args)
	parser, err := newParser(cli, args, whole, cli.stdout, cli.stderr)
	if err != nil {
		return nil, err
	}
	kctx, err := parser.Parse(args)
	if err == nil || whole {
		return kctx, err
	}
	stdin, stdout, stderr := cli.stdin, cli.stdout, cli.stderr
	*cli = CLI{}
	cli.stdin, cli.stdout, cli.stderr = stdin, stdout, stderr
	if parser, err = newParser(cli, args, true, stdout, stderr); err != nil {
		return nil, err
	}
	return parser.Parse(args)
}

// wholeTree reports whether args need the whole tree's parser from the start: no
// argument names a top-level command, the one named needs the whole tree (completion),
// or help is asked for (-h, --help: the root's help lists every command).
func wholeTree(args []string) bool {
	named := namedCommands(args)
	if len(named) == 0 || slices.Contains(named, "completion") {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || strings.HasPrefix(a, "--help=") {
			return true
		}
	}
	return false
}

// newParser is the command-line parser of cli for args. With whole its model is the
// whole of CLI, as kong builds it from the struct. Otherwise it is cliRoot with only
// the top-level commands some argument names (before "--"), registered in CLI's order,
// so kong reflects over one subtree instead of ~200 commands and flags (ADR 0018). A
// flag value that is a command name only adds that command; parseArgs parses again with
// the whole tree when this parser's parse fails.
func newParser(cli *CLI, args []string, whole bool, stdout, stderr io.Writer) (*kong.Kong, error) {
	opts := []kong.Option{
		kong.Name("ferry"),
		kong.Description("Coordinate AI coding agents through a plain shared folder.\n\n" + exitCodesLine()),
		kong.UsageOnError(),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { panic(exitError{c}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Vars{"version": version},
		kong.NamedMapper("pointer", pointerMapper{}),
	}
	if whole {
		return kong.New(cli, opts...)
	}
	named := namedCommands(args)
	v := reflect.ValueOf(cli).Elem()
	t := v.Type()
	for _, c := range topCommands() {
		if slices.Contains(named, c.name) {
			f := t.Field(c.field)
			opts = append(opts, kong.DynamicCommand(c.name, f.Tag.Get("help"), f.Tag.Get("group"), v.Field(c.field).Addr().Interface(), string(f.Tag)))
		}
	}
	return kong.New(&cli.cliRoot, opts...)
}

// topCommand is one top-level command of CLI: its name on the command line and the
// index of its field.
type topCommand struct {
	name  string
	field int
}

// topCommands lists CLI's top-level commands in field order. A command's name is its
// name tag, else its field name lowercased (every command field is one word; a test
// checks the names against kong's own model).
func topCommands() []topCommand {
	t := reflect.TypeFor[CLI]()
	var out []topCommand
	for i := range t.NumField() {
		f := t.Field(i)
		if _, ok := f.Tag.Lookup("cmd"); !ok {
			continue
		}
		name := f.Tag.Get("name")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, topCommand{name, i})
	}
	return out
}

// namedCommands are the top-level command names that appear among args before "--":
// the one a parse selects is among them whatever the flags before it take as values,
// unless it comes after "--" (that parse fails, and parseArgs parses with the whole
// tree).
func namedCommands(args []string) []string {
	var out []string
	cmds := topCommands()
	for _, a := range args {
		if a == "--" {
			break
		}
		for _, c := range cmds {
			if c.name == a && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// parseMessage is the parser's error in words a user reads: kong reports a flag given
// last with no value as `--level: expected string value but got "EOL" (<EOL>)`.
func parseMessage(err error) string {
	msg := err.Error()
	if flag, rest, ok := strings.Cut(msg, ": expected "); ok && strings.HasPrefix(flag, "-") && strings.HasSuffix(rest, ` but got "EOL" (<EOL>)`) {
		return flag + " needs a value"
	}
	return msg
}

// negativeValue is the error for a negative duration or count given as a flag's own
// argument (`--settle -5s`, `--limit -2`), which the parser takes for a short flag;
// nil for any other parse error. A flag of text (such as --settle) counts as a
// duration when its placeholder says DURATION.
func negativeValue(err error, hint string) error {
	flag, rest, _ := strings.Cut(err.Error(), ": expected ")
	kind, rest, _ := strings.Cut(rest, ` value but got "`)
	value, _, short := strings.Cut(rest, `" (short flag)`)
	if !short || !strings.HasPrefix(flag, "--") || len(value) < 2 || value[0] != '-' || value[1] < '0' || value[1] > '9' {
		return nil
	}
	if kind == "string" {
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context != nil {
			for _, f := range pe.Context.Flags() {
				if "--"+f.Name == flag && f.PlaceHolder == "DURATION" {
					kind = "duration"
				}
			}
		}
	}
	switch kind {
	case "duration":
		return errs.Errorf(errs.Invalid, "give a duration that is not negative, such as 90m or 24h; see `"+hint+"`",
			"%s %s: a negative duration is refused", flag, value)
	case "int":
		return errs.Errorf(errs.Invalid, "give a number that is not negative; see `"+hint+"`",
			"%s %s: a negative number is refused", flag, value)
	}
	return nil
}

// internalHint is the hint of an error that is no *errs.Error.
const internalHint = "check that the channel folder and this machine's ferry config and cache dirs (FERRY_HOME when set) exist and are writable"

// printError prints err and returns its exit code: as text, "ferry: error: <category>:
// <message>" and "ferry: hint: <hint>"; with asJSON, one line
// {"error":{"category":…,"message":…,"hint":…}} (docs/exit-codes.md). What looks like
// a credential in inputs (the command line, FERRY_AGENT, FERRY_CHANNEL) is never
// printed back. It is the one place the CLI prints an error.
func printError(w io.Writer, err error, asJSON bool, inputs []string) int {
	var fe *errs.Error
	if !errors.As(err, &fe) {
		fe = &errs.Error{Category: errs.Internal, Message: err.Error(), Hint: internalHint}
	}
	code, ok := exitCodes[fe.Category]
	if !ok {
		code = 1
	}
	if asJSON {
		type jsonError struct {
			Category errs.Category `json:"category"`
			Message  string        `json:"message"`
			Hint     string        `json:"hint"`
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // a hint's `a < b` stays readable
		// Cleaned as text is: stderr is often a terminal, and JSON keeps bidi overrides.
		// An error writing stderr leaves nothing to tell.
		_ = enc.Encode(map[string]jsonError{"error": {fe.Category, clean(redact(fe.Message, inputs)), clean(redact(fe.Hint, inputs))}})
		return code
	}
	fmt.Fprintf(w, "ferry: error: %s: %s\n", fe.Category, clean(redact(fe.Message, inputs))) // may quote an MCP server's text
	if fe.Hint != "" {
		fmt.Fprintf(w, "ferry: hint: %s\n", clean(redact(fe.Hint, inputs)))
	}
	return code
}

// jsonFlag reports whether args set --json (a bare --json or --json=VALUE), before a
// "--" that ends the flags: what the parser will make of them, for errors it reports
// before (or while) reading them.
func jsonFlag(args []string) bool {
	on := false
	for _, a := range args {
		switch {
		case a == "--":
			return on
		case a == "--json":
			on = true
		case strings.HasPrefix(a, "--json="):
			v := strings.ToLower(strings.TrimPrefix(a, "--json="))
			on = v == "true" || v == "1" || v == "yes" // kong's bool values
		}
	}
	return on
}

// Home returns this machine's Home (FERRY_HOME or the OS config and cache dirs).
func (g *Globals) Home() (*fsbus.Home, error) {
	if g.home == nil {
		h, err := fsbus.LocalHome()
		if err != nil {
			return nil, err
		}
		if w := g.stderr; w != nil {
			h.Warn = func(msg string) { fmt.Fprintf(w, "ferry: warning: %s\n", msg) }
		}
		g.home = h
	}
	return g.home, nil
}

// Open opens the channel named by --channel, FERRY_CHANNEL, --project (looked up in
// this machine's project map), or the only project mapped on this machine.
func (g *Globals) Open() (*fsbus.Channel, error) {
	return g.openWith(fsbus.Open)
}

// openWith is Open with the function that opens a channel directory (fsbus.Open, or
// fsbus.OpenUnverified for `ferry doctor`).
func (g *Globals) openWith(open func(*fsbus.Home, string) (*fsbus.Channel, error)) (*fsbus.Channel, error) {
	c, err := g.open(open)
	if c != nil && testClock != nil {
		c.Now, c.Boot = testClock, testBoot
	}
	if c != nil {
		c.Progress = loadProgress(g.stderr) // a terminal only (docs/exit-codes.md "Output")
	}
	return c, err
}

// checkChannelNamed reports, without opening or folding anything, whether a channel is
// named the way open would find it: --channel DIR holding a channel.toml, --project
// mapped on this machine, or exactly one project mapped. Its error is invalid (exit 2),
// with the fix.
func (g *Globals) checkChannelNamed() error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	if g.Channel != "" {
		if _, err := os.Stat(filepath.Join(g.Channel, "channel.toml")); err != nil {
			what := "holds no channel (no channel.toml)"
			if _, derr := os.Stat(g.Channel); errors.Is(derr, fs.ErrNotExist) {
				what = "does not exist"
			}
			return errs.Errorf(errs.Invalid, "pass the folder `ferry init` made (it holds channel.toml), or run `ferry init` there first",
				"%s %s", g.Channel, what)
		}
		return nil
	}
	m, err := h.Projects()
	if err != nil {
		return err
	}
	switch {
	case g.Project != "":
		if _, ok := m[g.Project]; !ok {
			return errs.Errorf(errs.Invalid, "pass --channel DIR once (or run `ferry join` with it) to map it on this machine"+mappedHere(m),
				"project %s is not mapped to a channel on this machine", g.Project)
		}
	case len(m) != 1:
		return errs.Errorf(errs.Invalid, "pass --project ID or --channel DIR in the app's server entry"+mappedHere(m), "no channel given")
	}
	return nil
}

func (g *Globals) open(open func(*fsbus.Home, string) (*fsbus.Channel, error)) (*fsbus.Channel, error) {
	h, err := g.Home()
	if err != nil {
		return nil, err
	}
	if g.Channel != "" {
		c, err := open(h, g.Channel)
		if err != nil {
			return nil, err
		}
		if g.Project != "" && g.Project != c.Project() {
			return nil, errs.Errorf(errs.Invalid, "drop --project or pass the matching channel", "channel %s holds project %s, not %s", g.Channel, c.Project(), g.Project)
		}
		return c, nil
	}
	m, err := h.Projects()
	if err != nil {
		return nil, err
	}
	if g.Project != "" {
		dir, ok := m[g.Project]
		if !ok {
			return nil, errs.Errorf(errs.NotFound, "pass --channel DIR once (or run `ferry join` with it) to map it on this machine"+mappedHere(m),
				"project %s is not mapped to a channel on this machine", g.Project)
		}
		return openMapped(h, g.Project, dir, open)
	}
	if len(m) == 1 {
		for p, dir := range m {
			return openMapped(h, p, dir, open)
		}
	}
	return nil, errs.Errorf(errs.Invalid, "pass --channel DIR or --project ID"+mappedHere(m), "no channel given")
}

// mappedHere is " (projects here: a, b)" naming the projects of m, sorted, or " (no
// project is mapped on this machine)".
func mappedHere(m map[string]string) string {
	if len(m) == 0 {
		return " (no project is mapped on this machine)"
	}
	names := slices.Sorted(maps.Keys(m))
	return " (projects here: " + strings.Join(names, ", ") + ")"
}

// Session opens the channel as the agent named by --as (or FERRY_AGENT).
func (g *Globals) Session() (*fsbus.Session, error) {
	c, err := g.Open()
	if err != nil {
		return nil, err
	}
	if g.As == "" {
		hint := "pass --as NAME or set FERRY_AGENT"
		if ks := c.Home.Keys(c.Project()); len(ks) > 0 {
			hint += " (keys on this machine: " + strings.Join(ks, ", ") + ")"
		}
		return nil, errs.Errorf(errs.Invalid, hint, "no agent name given")
	}
	return c.As(g.As)
}

// Master opens the channel as the owner. It refuses when --as or FERRY_AGENT names
// another writer (requireMaster), so no command signs as master under an agent's name,
// marked as an ownerCommand or not.
func (g *Globals) Master() (*fsbus.Session, error) {
	if err := g.requireMaster("act as the owner"); err != nil {
		return nil, err
	}
	c, err := g.Open()
	if err != nil {
		return nil, err
	}
	return c.As(fold.MasterWriter)
}

// printJSON writes v as indented JSON.
func (g *Globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printf writes text output; every string argument passes through clean, so text from
// the channel (titles, notes, app names) can never carry a terminal escape to the
// owner's screen.
func (g *Globals) printf(format string, args ...any) {
	fmt.Fprintf(g.stdout, format, cleanArgs(args)...)
}

// fprintf is printf to another writer (a tabwriter).
func fprintf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, cleanArgs(args)...) }

func cleanArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = clean(s)
		}
		out[i] = a
	}
	return out
}

// clean shows control characters other than newline and tab, line separators and bidi
// controls (textsafe.Lines) as \xNN (or \u{NNNN}).
func clean(s string) string {
	return textsafe.Lines.Clean(s, func(r rune) string {
		if r < 0x100 {
			return fmt.Sprintf("\\x%02x", r)
		}
		return fmt.Sprintf("\\u{%04x}", r)
	})
}

// openMapped opens a project's mapped channel; a folder that vanished gets its own
// error (a sync tool not running, a moved folder), never the "create one" hint that
// would make a second, empty channel under the same path.
func openMapped(h *fsbus.Home, project, dir string, open func(*fsbus.Home, string) (*fsbus.Channel, error)) (*fsbus.Channel, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, errs.Errorf(errs.NotFound,
			"check that the synced folder is there (is the sync tool running? was it moved?); if it moved, pass --channel NEWDIR once to re-map it",
			"the channel folder of project %s, %s, is missing", project, dir)
	}
	return open(h, dir)
}

// commandPath is a command's words without aliases ("decision list", never
// "decision list (ls)"), so a hint names a command that runs as printed.
func commandPath(n *kong.Node) string {
	var words []string
	for ; n != nil && n.Type != kong.ApplicationNode; n = n.Parent {
		words = append([]string{n.Name}, words...)
	}
	return strings.Join(words, " ")
}

// commandForm is the usage line of leaf command n, walked from kong's model: its
// words, its required flags (the members of a required xor group as one choice), its
// positional arguments (optional ones in brackets), then "[flags]" when it takes
// others. A positional argument that a flag of the same name may replace (order new's
// title and --title) shows as that choice:
//
//	ferry talk send --to NAME [TEXT] [flags]
//	ferry order review ID (--accept | --changes | --verdict accept|changes) [flags]
//	ferry order new (TITLE | --title TITLE) [flags]
func commandForm(n *kong.Node) string {
	words := []string{"ferry", leafPath(n)}
	global := map[*kong.Flag]bool{}
	root := n
	for root.Parent != nil {
		root = root.Parent
	}
	for _, f := range root.Flags {
		global[f] = true
	}
	flags := map[string]*kong.Flag{}
	optional := false
	var groups []string              // required xor groups, in the order of the first member
	members := map[string][]string{} // xor group → its required members, rendered
	for _, group := range n.AllFlags(true) {
		for _, f := range group {
			if global[f] {
				continue
			}
			flags[f.Name] = f
			if !f.Required {
				optional = true
				continue
			}
			if len(f.Xor) == 0 {
				words = append(words, formFlag(f))
				continue
			}
			x := f.Xor[0]
			if members[x] == nil {
				groups = append(groups, x)
			}
			members[x] = append(members[x], formFlag(f))
		}
	}
	for _, x := range groups {
		if len(members[x]) == 1 {
			words = append(words, members[x][0])
		} else {
			words = append(words, "("+strings.Join(members[x], " | ")+")")
		}
	}
	for _, p := range n.Positional {
		w := strings.ToUpper(p.Name)
		if p.IsCumulative() {
			w += "..."
		}
		switch f := flags[p.Name]; {
		case f != nil:
			w = "(" + w + " | " + formFlag(f) + ")"
		case !p.Required:
			w = "[" + w + "]"
		}
		words = append(words, w)
	}
	if optional {
		words = append(words, "[flags]")
	}
	return strings.Join(words, " ")
}

// formFlag is one flag as commandForm shows it: --to NAME, --accept, or an enum's
// values (--verdict accept|changes).
func formFlag(f *kong.Flag) string {
	if f.IsBool() || f.IsCounter() {
		return "--" + f.Name
	}
	v := f.FormatPlaceHolder()
	if f.Enum != "" {
		var vals []string
		for _, e := range f.EnumSlice() {
			if e != "" {
				vals = append(vals, e)
			}
		}
		v = strings.Join(vals, "|")
	}
	return "--" + f.Name + " " + v
}

// versionFlag is --version: it prints what `ferry version` prints and exits 0, before
// any command or other flag is checked (kong's VersionFlag prints the bare version).
type versionFlag bool

// BeforeReset prints the version and exits.
func (versionFlag) BeforeReset(app *kong.Kong) error {
	g := &Globals{stdout: app.Stdout, stderr: app.Stderr}
	if err := (&VersionCmd{}).Run(g); err != nil {
		return err
	}
	app.Exit(0)
	return nil
}
