package main

import (
	"os"
	"strings"

	"github.com/ferryhq/ferry/fsbus"
)

// readArg returns s, or the contents of FILE when s is "@FILE".
func readArg(s string) (string, error) {
	p, ok := strings.CutPrefix(s, "@")
	if !ok {
		return s, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fsbus.Errorf(fsbus.CatInvalid, "check the path after @", "reading %s: %v", p, err)
	}
	return string(b), nil
}
