//go:build ignore

// testjson reads `go test -json` on stdin and prints what `go test` would: a line per
// package, and the output of every test that failed. It exits 1 when a test or a
// package failed, and when any test skipped: under .ci/run every gate is turned on
// (internal/repocheck/skips_test.go), so a skip there is a test that did not run.
//
//	go test -json ./... | go run .ci/testjson.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	out := map[string][]string{} // package/test → output lines
	var skipped, failed []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Println(string(line)) // build output and the like, as go test prints it
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			out[key] = append(out[key], e.Output)
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, e.Package+" "+e.Test)
			}
		case "fail":
			if e.Test != "" {
				failed = append(failed, key)
				fmt.Print(strings.Join(out[key], ""))
			} else {
				fmt.Print(strings.Join(out[key], ""))
				fmt.Printf("FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
				failed = append(failed, e.Package)
			}
		case "pass":
			if e.Test == "" {
				fmt.Printf("ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testjson: reading go test -json:", err)
		os.Exit(1)
	}
	if len(skipped) > 0 {
		fmt.Printf("\n%d tests skipped; under .ci/run every gate is on, so none may:\n  %s\n", len(skipped), strings.Join(skipped, "\n  "))
	}
	if len(failed) > 0 || len(skipped) > 0 {
		os.Exit(1)
	}
}
