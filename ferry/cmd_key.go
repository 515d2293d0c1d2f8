package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/ledger"
	"golang.org/x/term"
)

// KeyCmd groups key commands.
type KeyCmd struct {
	New    KeyNewCmd    `cmd:"" help:"Make a key for an agent on this machine without announcing it."`
	Show   KeyShowCmd   `cmd:"" help:"Print the public key of an agent (or of the master)."`
	Lock   KeyLockCmd   `cmd:"" help:"Encrypt a key with a passphrase; writes need ferry key unlock."`
	Unlock KeyUnlockCmd `cmd:"" help:"Open a locked key for a while (default 8h) on this machine."`
	Export KeyExportCmd `cmd:"" help:"Write a key (default the master) encrypted with a passphrase."`
	Import KeyImportCmd `cmd:"" help:"Store a key written by ferry key export on this machine."`
}

// EnvPassphrase is the variable a passphrase may come from when stdin is no terminal.
const EnvPassphrase = "FERRY_PASSPHRASE"

// passphraseHelp is the long help shared by the commands that take a passphrase.
const passphraseHelp = "The passphrase is read, in this order, from the first line of --passphrase-file PATH,\n" +
	"from the environment variable FERRY_PASSPHRASE, or from a no-echo prompt when stdin is\n" +
	"a terminal. It is never a flag, never stored, never printed, and never given to or\n" +
	"accepted by `ferry mcp serve`. Encryption is age's scrypt passphrase recipient."

// Passphrase is the flag of the commands that take a passphrase.
type Passphrase struct {
	PassphraseFile string `name:"passphrase-file" help:"Read the passphrase from the first line of this file (else FERRY_PASSPHRASE, else a prompt)." placeholder:"PATH" type:"path"`
}

// read returns the passphrase (see passphraseHelp). confirm asks twice at a prompt (a
// passphrase being set). Errors: invalid when there is no source or the two typed
// passphrases differ; not_found for a missing file.
func (p Passphrase) read(g *Globals, what string, confirm bool) ([]byte, error) {
	if p.PassphraseFile != "" {
		f, err := os.Open(p.PassphraseFile)
		if err != nil {
			return nil, errs.Errorf(errs.NotFound, "pass a readable file holding the passphrase on its first line", "reading the passphrase file: %v", err)
		}
		defer f.Close()
		line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading the passphrase file: %w", err)
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
	if v, ok := os.LookupEnv(EnvPassphrase); ok {
		return []byte(v), nil
	}
	f, ok := g.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, errs.Errorf(errs.Invalid, "pass --passphrase-file PATH or set FERRY_PASSPHRASE (stdin is not a terminal to prompt on)",
			"no passphrase given for %s", what)
	}
	fmt.Fprintf(g.stderr, "Passphrase for %s: ", what)
	pass, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(g.stderr)
	if err != nil {
		return nil, fmt.Errorf("reading the passphrase: %w", err)
	}
	if confirm {
		fmt.Fprintf(g.stderr, "Again, to confirm: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(g.stderr)
		if err != nil {
			return nil, fmt.Errorf("reading the passphrase: %w", err)
		}
		if !bytes.Equal(pass, again) {
			return nil, errs.Errorf(errs.Invalid, "run the command again and type the same passphrase twice", "the two passphrases differ; nothing was written")
		}
	}
	return pass, nil
}

// keyName is --as, or the master when it is empty.
func keyName(g *Globals) (string, error) {
	if g.As == "" || g.As == fold.MasterWriter {
		return fold.MasterWriter, nil
	}
	if err := fold.CheckName("agent name", g.As); err != nil {
		return "", err
	}
	return g.As, nil
}

// KeyLockCmd is `ferry key lock [--as NAME]`.
type KeyLockCmd struct {
	Passphrase
}

// Help is the long help.
func (c *KeyLockCmd) Help() string {
	return "Encrypts the key of --as NAME (default: the master) on this machine with a passphrase\n" +
		"and removes the plain key file. Every write with a locked key then fails with\n" +
		"`locked` (exit 6) until `ferry key unlock`. On an unlocked key it locks it again\n" +
		"at once (the passphrase is not asked).\n\n" + passphraseHelp
}

// Run implements the command.
func (c *KeyLockCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	name, err := keyName(g)
	if err != nil {
		return err
	}
	var pass []byte
	if st, _ := ch.Home.KeyStatus(ch.Project(), name); st == fsbus.KeyPlain {
		if pass, err = c.read(g, "locking the key of "+name, true); err != nil {
			return err
		}
	}
	before, err := ch.Home.LockKey(ch.Project(), name, pass)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(map[string]string{"name": name, "was": string(before), "state": string(fsbus.KeyLocked)})
	}
	switch before {
	case fsbus.KeyPlain:
		g.printf("✔ the key of %s is locked; writes need `ferry key unlock --as %s`\n", name, name)
	case fsbus.KeyUnlocked:
		g.printf("✔ the key of %s is locked again (its unlocked copy is removed)\n", name)
	default:
		g.printf("✔ the key of %s was already locked\n", name)
	}
	return nil
}

// KeyUnlockCmd is `ferry key unlock [--as NAME] [--for 8h]`.
type KeyUnlockCmd struct {
	For time.Duration `name:"for" help:"How long the key stays open (at most 720h)." default:"8h"`
	Passphrase
}

// Help is the long help.
func (c *KeyUnlockCmd) Help() string {
	return "Decrypts the locked key of --as NAME (default: the master) into this machine's runtime\n" +
		"copy, <config>/unlocked/<project>/<name>.key under FERRY_HOME (or the OS config dir\n" +
		"when unset), mode 0600, never in the channel. The copy carries its expiry; the\n" +
		"first read after it removes the copy and the key is locked again.\n\n" + passphraseHelp
}

// Run implements the command.
func (c *KeyUnlockCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	name, err := keyName(g)
	if err != nil {
		return err
	}
	if st, _ := ch.Home.KeyStatus(ch.Project(), name); st != fsbus.KeyLocked && st != fsbus.KeyUnlocked {
		_, err := ch.Home.UnlockKey(ch.Project(), name, nil, c.For) // the error naming the state
		return err
	}
	pass, err := c.read(g, "the key of "+name, false)
	if err != nil {
		return err
	}
	exp, err := ch.Home.UnlockKey(ch.Project(), name, pass, c.For)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(map[string]string{"name": name, "expires": exp.Format(time.RFC3339), "copy": ch.Home.UnlockedPath(ch.Project(), name)})
	}
	g.printf("✔ the key of %s is unlocked until %s (`ferry key lock --as %s` locks it sooner)\n", name, exp.Format(time.RFC3339), name)
	return nil
}

// KeyExportCmd is `ferry key export [--as NAME] [--out FILE]`.
type KeyExportCmd struct {
	Out string `help:"Write the export to this file (mode 0600; it must not exist) instead of stdout." placeholder:"FILE" type:"path"`
	Passphrase
}

// Help is the long help.
func (c *KeyExportCmd) Help() string {
	return "Writes the key of --as NAME (default: the master) encrypted with a passphrase, as an\n" +
		"ASCII-armored age file, to carry it to another machine: `ferry key import FILE` there.\n" +
		"The master used on a second machine writes in its own segment (its own device id).\n" +
		"A locked key must be unlocked first.\n\n" + passphraseHelp
}

// Run implements the command.
func (c *KeyExportCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	name, err := keyName(g)
	if err != nil {
		return err
	}
	if c.Out != "" {
		if _, err := os.Lstat(c.Out); err == nil {
			return errs.Errorf(errs.Conflict, "pass a new file name", "%s already exists; nothing was written", c.Out)
		}
	}
	if !ch.Home.HasKey(ch.Project(), name) {
		_, err := ch.Home.PublicKey(ch.Project(), name)
		return err
	}
	pass, err := c.read(g, "the export of "+name, true)
	if err != nil {
		return err
	}
	data, err := ch.Home.ExportKey(ch.Project(), name, pass)
	if err != nil {
		return err
	}
	if c.Out == "" {
		_, err := g.stdout.Write(data)
		return err
	}
	f, err := os.OpenFile(c.Out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s: %w", c.Out, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(c.Out)
		return fmt.Errorf("writing %s: %w", c.Out, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(c.Out)
		return fmt.Errorf("writing %s: %w", c.Out, err)
	}
	if g.JSON {
		return g.printJSON(map[string]string{"name": name, "file": c.Out})
	}
	g.printf("✔ the key of %s is in %s; on the other machine: ferry key import %s --channel <the channel folder there>\n", name, c.Out, c.Out)
	return nil
}

// KeyImportCmd is `ferry key import FILE`.
type KeyImportCmd struct {
	File string `arg:"" help:"The file ferry key export wrote." type:"path"`
	Passphrase
}

// Help is the long help.
func (c *KeyImportCmd) Help() string {
	return "Decrypts a file written by `ferry key export` and stores the key on this machine,\n" +
		"for the channel's project. It never overwrites another key of that name (conflict),\n" +
		"and a master key is taken only while it is the channel's current master key.\n" +
		"It maps the project to the channel on this machine, as ferry join does.\n" +
		"A wrong passphrase writes nothing.\n\n" + passphraseHelp
}

// Run implements the command.
func (c *KeyImportCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(c.File)
	if err != nil {
		return errs.Errorf(errs.NotFound, "pass the file `ferry key export` wrote", "reading %s: %v", c.File, err)
	}
	pass, err := c.read(g, c.File, false)
	if err != nil {
		return err
	}
	ik, err := fsbus.ReadExport(data, pass)
	if err != nil {
		return err
	}
	if ik.Project != ch.Project() {
		return errs.Errorf(errs.Invalid, "import it with --channel or --project of its own project",
			"%s holds a key of project %s, not %s; nothing was written", c.File, ik.Project, ch.Project())
	}
	if ik.Name == fold.MasterWriter {
		v, err := ch.Load()
		if err != nil {
			return err
		}
		if cur := v.State.MasterKey(); !cur.Equal(ik.Key.Public()) {
			return errs.Errorf(errs.Denied, "export the current master key on the machine that rotated it last",
				"%s holds master key %s, which is not the channel's current master key %s; nothing was written",
				c.File, ledger.FormatKey(ik.Key.Public()), ledger.FormatKey(cur))
		}
	}
	if err := ch.Home.CheckRemap(ch.Project(), ch.Root, false, "by running `ferry join --as NAME --channel "+ch.Root+" --force` first"); err != nil {
		return err
	}
	wrote, err := ch.Home.StoreImported(ik)
	if err != nil {
		return err
	}
	if err := ch.Home.MapProject(ch.Project(), ch.Root); err != nil { // as join does
		return err
	}
	key := ledger.FormatKey(ik.Key.Public())
	if g.JSON {
		return g.printJSON(map[string]any{"name": ik.Name, "key": key, "stored": wrote, "device": ch.Device})
	}
	if !wrote {
		g.printf("✔ this machine already holds this key of %s (%s)\n", ik.Name, key)
		return nil
	}
	g.printf("✔ the key of %s (%s) is stored; it writes here as device %s\n", ik.Name, key, ch.Device)
	return nil
}

// KeyNewCmd is `ferry key new --as NAME`.
type KeyNewCmd struct{}

// Run implements the command.
func (c *KeyNewCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	if g.As == "" {
		return errs.Errorf(errs.Invalid, "pass --as NAME", "no agent name given")
	}
	if err := fold.CheckName("agent name", g.As); err != nil {
		return err
	}
	k, err := ch.Home.NewKey(ch.Project(), g.As)
	if err != nil {
		return err
	}
	return printKey(g, g.As, ledger.FormatKey(k.Public()))
}

// KeyShowCmd is `ferry key show [--as NAME]`.
type KeyShowCmd struct{}

// Run implements the command.
func (c *KeyShowCmd) Run(g *Globals) error {
	ch, err := g.Open()
	if err != nil {
		return err
	}
	name := g.As
	if name == "" {
		name = fold.MasterWriter
	}
	k, err := ch.Home.PublicKey(ch.Project(), name) // a locked key's public half too
	if err != nil {
		return err
	}
	return printKey(g, name, ledger.FormatKey(k))
}

func printKey(g *Globals, name, key string) error {
	if g.JSON {
		return g.printJSON(map[string]string{"name": name, "key": key})
	}
	g.printf("%s %s\n", name, key)
	return nil
}
