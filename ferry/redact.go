package main

import (
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/secretguard"
)

// parseErrorSecret returns the kind of credential a parse error's message would echo:
// one it holds itself, or one found in an argument whose text the message quotes.
// "" when printing it is safe.
func parseErrorSecret(msg string, args []string) string {
	if kind, _ := secretguard.Find(msg); kind != "" {
		return kind
	}
	for _, a := range args {
		kind, at := secretguard.Find(a)
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

// redact shows s with every credential-looking span of the command line's arguments
// replaced by its kind (secretguard.RedactInputs): many errors quote the input they refuse —
// a name, an id, a path, a cursor — and a token pasted into the wrong argument must
// never be printed back (docs/format.md "Input caps and the secret guard").
func redact(s string, args []string) string {
	return secretguard.RedactInputs(s, args)
}

// shown is a caller's input as output may quote it: a credential-looking span of it
// replaced by its kind.
func shown(input string) string {
	return secretguard.RedactInputs(input, []string{input})
}
