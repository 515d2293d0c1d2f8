package ckfile

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// ToFormat rewrites the channel folder root's channel.toml as format `to`
// (RewriteFormat), signed in domain for project by the key the file names: signer, or
// when the master was rotated since, the old key old returns for the file's key.
func ToFormat(root string, to int, domain, project string, signer ledger.Signer, old func(ed25519.PublicKey) (ledger.KeySigner, bool)) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(root, "channel.toml"))
	if err != nil {
		return nil, fmt.Errorf("reading channel.toml: %w", err)
	}
	var named struct{ Master string }
	if _, err := toml.Decode(string(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))), &named); err == nil {
		if mk, err := ledger.ParseKey(named.Master); err == nil && !mk.Equal(signer.Public()) {
			if k, ok := old(mk); ok {
				signer = k
			}
		}
	}
	return RewriteFormat(root, raw, to, signer.Public(), func(body []byte) (string, error) {
		return ledger.SignDomain(signer, domain, project, body)
	})
}

// RewriteFormat moves channel.toml, whose bytes are raw, to format `to` (docs/format.md
// §20 "Format 2"): the file's `format` and `sig` lines are replaced, every other byte
// kept, and sig is what sign returns for the canonical JSON of every key but sig with
// the new format (§8). It refuses, writing nothing, unless master is the file's
// `master` key and the file holds exactly one top-level `format` line and one `sig`
// line. It writes the file by fsutil.WriteFile (a temp file, fsync, rename, directory
// fsync) and returns its new bytes.
func RewriteFormat(root string, raw []byte, to int, master ed25519.PublicKey, sign func(body []byte) (string, error)) ([]byte, error) {
	fix := "restore channel.toml from another machine or backup, then compact again"
	var all map[string]any
	if _, err := toml.Decode(string(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))), &all); err != nil {
		return nil, errs.Errorf(errs.Invalid, fix, "channel.toml does not parse: %v; nothing was written", err)
	}
	if mk, _ := all["master"].(string); mk != ledger.FormatKey(master) {
		return nil, errs.Errorf(errs.Conflict, "format 2 needs channel.toml signed again by the key it names: compact on the machine that holds that key, rotated out, as <master key file>.old-<n>",
			"channel.toml names master key %s, this machine signs with %s; nothing was written", mk, ledger.FormatKey(master))
	}
	delete(all, "sig")
	all["format"] = int64(to)
	body, err := ledger.Canonical(all)
	if err != nil {
		return nil, err
	}
	sig, err := sign(body)
	if err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	found := map[string]int{}
	for i, line := range lines {
		text := strings.TrimSpace(string(line))
		if strings.HasPrefix(text, "[") {
			break // a table: top-level keys come before the first
		}
		key, _, ok := strings.Cut(text, "=")
		key = strings.TrimSpace(key)
		if !ok || (key != "format" && key != "sig") {
			continue
		}
		found[key]++
		val := strconv.Itoa(to)
		if key == "sig" {
			val = strconv.Quote(sig)
		}
		end := line[len(bytes.TrimRight(line, "\r\n")):]
		lines[i] = append([]byte(key+" = "+val), end...)
	}
	if found["format"] != 1 || found["sig"] != 1 {
		return nil, errs.Errorf(errs.Invalid, fix, "channel.toml holds %d format and %d sig lines before its tables, not one each; nothing was written", found["format"], found["sig"])
	}
	out := bytes.Join(lines, nil)
	var back map[string]any
	if _, err := toml.Decode(string(bytes.TrimPrefix(out, []byte("\xef\xbb\xbf"))), &back); err != nil || back["sig"] != sig {
		return nil, errs.Errorf(errs.Invalid, fix, "channel.toml rewritten does not read back (%v); nothing was written", err)
	}
	delete(back, "sig")
	if again, err := ledger.Canonical(back); err != nil || !bytes.Equal(again, body) {
		return nil, errs.Errorf(errs.Invalid, fix, "channel.toml rewritten does not read back as signed; nothing was written")
	}
	if err := fsutil.WriteFile(filepath.Join(root, "channel.toml"), out, 0o644); err != nil {
		return nil, fmt.Errorf("rewriting channel.toml: %w", err)
	}
	return out, nil
}
