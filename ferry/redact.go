package main

import (
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
)

// parseErrorSecret returns the kind of credential a parse error's message would echo:
// one it holds itself, or one found in an argument whose text the message quotes.
// "" when printing it is safe.
func parseErrorSecret(msg string, args []string) string {
	if kind, _ := fsbus.FindSecret(msg); kind != "" {
		return kind
	}
	for _, a := range args {
		kind, at := fsbus.FindSecret(a)
		if kind == "" {
			continue
		}
		frag := a[at:min(len(a), at+8)]
		if strings.Contains(msg, frag) || strings.Contains(msg, strings.Trim(strconv.Quote(frag), `"`)) {
			return kind
		}
	}
	return ""
}

func article(kind string) string {
	if kind != "" && strings.ContainsRune("AEIOaeio", rune(kind[0])) {
		return "an"
	}
	return "a"
}

// redact replaces what looks like a credential in an error's text with the kind it
// looks like (fsbus.RedactSecrets): many errors quote the input they refuse — a name,
// an id, a path — and a token pasted into the wrong argument must never be printed
// back (docs/format.md "Input caps and the secret guard").
func redact(s string) string {
	out, _ := fsbus.RedactSecrets(s)
	return out
}
