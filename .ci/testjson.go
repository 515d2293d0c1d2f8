//go:build ignore

// testjson reads `go test -json` on stdin and prints what `go test` would: build
// output, a line per package, and the output of every test that failed or never
// finished (a panic, a timeout). It exits 1 when a build, a test or a package failed,
// when a package started and never reported, and when any test skipped: under .ci/run
// every gate is turned on (internal/repocheck/skips_test.go), so a skip there is a
// test that did not run.
//
//	go test -json ./... | go run .ci/testjson.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

func main() {
	out := map[string][]string{}     // "package test" → output lines
	running := map[string][]string{} // package → tests started and not ended
	open := map[string]bool{}        // packages started and not ended
	var skipped, failed []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Println(string(line)) // what go test printed outside its events
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Print(e.Output)
		case "build-fail":
			failed = append(failed, e.ImportPath+" (build)")
		case "start":
			open[e.Package] = true
		case "run":
			running[e.Package] = append(running[e.Package], e.Test)
		case "output":
			out[key] = append(out[key], e.Output)
		case "skip", "pass", "fail":
			if e.Test == "" {
				delete(open, e.Package)
			} else {
				running[e.Package] = slices.DeleteFunc(running[e.Package], func(t string) bool { return t == e.Test })
			}
		}
		switch {
		case e.Action == "skip" && e.Test != "":
			skipped = append(skipped, key)
		case e.Action == "fail" && e.Test != "":
			failed = append(failed, key)
			fmt.Print(strings.Join(out[key], ""))
		case e.Action == "fail":
			// A panic or a timeout ends the package while tests still run: their output
			// holds the trace.
			for _, t := range running[e.Package] {
				fmt.Print(strings.Join(out[e.Package+" "+t], ""))
			}
			fmt.Print(strings.Join(out[key], ""))
			fmt.Printf("FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
			failed = append(failed, e.Package)
		case e.Action == "pass" && e.Test == "":
			fmt.Printf("ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testjson: reading go test -json:", err)
		os.Exit(1)
	}
	for p := range open {
		failed = append(failed, p+" (started, never reported)")
		for _, t := range running[p] {
			fmt.Print(strings.Join(out[p+" "+t], ""))
		}
		fmt.Print(strings.Join(out[p+" "], ""))
	}
	if len(skipped) > 0 {
		fmt.Printf("\n%d tests skipped; under .ci/run every gate is on, so none may:\n  %s\n", len(skipped), strings.Join(skipped, "\n  "))
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		fmt.Printf("\nfailed:\n  %s\n", strings.Join(failed, "\n  "))
	}
	if len(failed) > 0 || len(skipped) > 0 {
		os.Exit(1)
	}
}
