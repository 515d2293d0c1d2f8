package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"golang.org/x/term"
)

// SecretCmd groups the vault verbs (docs/adr/0009-vault.md). They
// exist on the command line only: no MCP tool reads or writes the vault.
type SecretCmd struct {
	Put  SecretPutCmd  `cmd:"" help:"Encrypt a value to named agents and keep it in the vault."`
	Get  SecretGetCmd  `cmd:"" help:"Decrypt a value with your own key and print it to stdout."`
	List SecretListCmd `cmd:"" aliases:"ls" help:"List the vault's names and recipients (never values)."`
}

// SecretPutCmd is `ferry secret put NAME --to AGENT… [--from-file PATH]`.
type SecretPutCmd struct {
	Name     string   `arg:"" help:"Secret name: a-z, 0-9 and '-', at most 63 characters."`
	To       []string `help:"Agent that may read it (repeatable, or comma-separated; master for the owner). You are always one." required:"" placeholder:"AGENT"`
	FromFile string   `help:"Read the value from this file instead of stdin." placeholder:"PATH" type:"path"`
	keyFlag
}

// Help is the long help.
func (c *SecretPutCmd) Help() string {
	return "Needs level member. The value is read from stdin (or --from-file) byte for byte, at most 64 KiB, " +
		"and encrypted with age to each recipient's seated ed25519 key and yours; the channel holds only " +
		"the encrypted file vault/NAME/<id>.age and a signed secret.put entry naming the recipients. " +
		"A name belongs to its first author: only that author or master may put it again, which replaces it " +
		"for `secret get` (another member gets `denied`). A recipient later revoked can still read " +
		"what was encrypted to it before: put the value again, rotated, without it."
}

// Run implements the command.
func (c *SecretPutCmd) Run(g *Globals) error {
	value, err := c.value(g)
	if err != nil {
		return err
	}
	s, err := g.Session()
	if err != nil {
		return err
	}
	var to []string
	for _, t := range c.To {
		for _, n := range strings.Split(t, ",") {
			if n = strings.TrimSpace(n); n != "" {
				to = append(to, n)
			}
		}
	}
	sec, err := s.SecretPut(c.Name, to, value, c.Key)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(sec)
	}
	g.printf("✔ secret %s stored (%s), readable by %s\n", sec.Name, sec.ID, strings.Join(sec.Recipients, ", "))
	return nil
}

// value reads the value from --from-file or stdin, refusing a terminal stdin (the value
// would echo on screen) and anything over fsbus.MaxSecretValue bytes.
func (c *SecretPutCmd) value(g *Globals) ([]byte, error) {
	r := io.Reader(g.stdin)
	src := "stdin"
	if c.FromFile != "" {
		f, err := os.Open(c.FromFile)
		if err != nil {
			return nil, errs.Errorf(errs.Invalid, "check the path of --from-file", "reading %s: %v", c.FromFile, err)
		}
		defer f.Close()
		r, src = f, c.FromFile
	} else if f, ok := g.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return nil, errs.Errorf(errs.Invalid, "pipe the value in (e.g. `ferry secret put NAME --to AGENT < file`) or pass --from-file PATH",
			"stdin is a terminal: the value would show on screen")
	}
	if r == nil {
		return nil, errs.Errorf(errs.Invalid, "pipe the value in or pass --from-file PATH", "no value on stdin")
	}
	b, err := io.ReadAll(io.LimitReader(r, fsbus.MaxSecretValue+1))
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "check "+src, "reading the value from %s: %v", src, err)
	}
	if len(b) > fsbus.MaxSecretValue {
		return nil, errs.Errorf(errs.Invalid, "the vault keeps credentials, not files",
			"the value in %s is more than %d bytes; the limit is %d bytes", src, fsbus.MaxSecretValue, fsbus.MaxSecretValue)
	}
	return b, nil
}

// SecretGetCmd is `ferry secret get NAME`.
type SecretGetCmd struct {
	Name string `arg:"" help:"Secret name."`
}

// Help is the long help.
func (c *SecretGetCmd) Help() string {
	return "Decrypts with the key of --as on this machine and prints the value, exactly as put, to stdout " +
		"and nothing else there (no --json); stderr says who put it and when. An agent that is not a recipient gets `denied`."
}

// Run implements the command.
func (c *SecretGetCmd) Run(g *Globals) error {
	s, err := g.Session()
	if err != nil {
		return err
	}
	b, sec, err := s.SecretGet(c.Name)
	if err != nil {
		return err
	}
	// Who wrote the value goes to stderr, so stdout stays the value alone.
	fprintf(g.stderr, "ferry: secret %s: the value put by %s at %s\n", sec.Name, sec.Author, sec.HLC)
	warnIgnored(g.stderr, sec)
	_, err = g.stdout.Write(b)
	return err
}

// warnIgnored warns that a name has puts by writers other than its owner and master,
// which get and list ignore (ADR 0009 §2).
func warnIgnored(w io.Writer, sec *fold.Secret) {
	if len(sec.Ignored) == 0 {
		return
	}
	who := sec.Owner + " or " + fold.MasterWriter
	if sec.Owner == fold.MasterWriter {
		who = fold.MasterWriter
	}
	fprintf(w, "ferry: warning: secret %s also has puts by %s, ignored: it belongs to %s, and only %s may replace it\n",
		sec.Name, strings.Join(sec.Ignored, ", "), sec.Owner, who)
}

// SecretListCmd is `ferry secret list`.
type SecretListCmd struct{}

// Run implements the command.
func (c *SecretListCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	v, err := ch.Load()
	if err != nil {
		return err
	}
	list := v.SecretList()
	if g.JSON {
		return g.printJSON(map[string]any{"secrets": list})
	}
	if len(list) == 0 {
		g.printf("the vault is empty\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBY\tPUTS\tREADABLE BY")
	for _, s := range list {
		fprintf(tw, "%s\t%s\t%d\t%s\n", s.Name, s.Author, s.Puts, strings.Join(s.Recipients, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range list {
		warnIgnored(g.stderr, s)
	}
	return nil
}
