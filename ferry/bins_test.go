package main

// The executables the tests run. A test that needs only a ferry gets the test binary
// itself: TestMain's testscript.Main copies it onto PATH as "ferry", and started under
// that name it runs main, so nothing is built. What must be a real build — the release
// binary, which has none of the test clock hooks of lifecycle_script_test.go; the
// versioned builds `ferry update` replaces; the benchmarks' binary — and the programs
// in testdata are built with `go build` at most once per test binary, into one
// directory TestMain removes.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// builds holds every program goBuilt built: one directory for the test binary's run,
// and each build's path (or its failure) by its go build arguments.
var builds struct {
	mu   sync.Mutex
	dir  string // made by the first build; removeBuilds removes it
	done map[string]build
}

// build is the outcome of one go build: the executable, or the error with the
// command's output.
type build struct {
	path string
	err  error
}

// exeName is name with the executable suffix of the OS the tests run on.
func exeName(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// ferryExe returns the ferry the tests run as a separate process: the copy of the
// test binary named "ferry" on PATH (testscript.Main, TestMain), which runs main.
func ferryExe(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath(exeName("ferry"))
	if err != nil {
		tb.Fatalf("no ferry on PATH: TestMain's testscript.Main puts the test binary there: %v", err)
	}
	if !strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(p))), "testscript-main") {
		tb.Fatalf("ferry on PATH is %s, not the copy of the test binary testscript.Main makes", p)
	}
	return p
}

// goBuilt returns the executable name that `go build flags… pkg` builds (pkg relative
// to this package's directory), building it on the first call with those arguments
// only. A failed build fails every test that asks for it.
func goBuilt(tb testing.TB, name, pkg string, flags ...string) string {
	tb.Helper()
	key := strings.Join(append([]string{name, pkg}, flags...), "\x00")
	builds.mu.Lock()
	defer builds.mu.Unlock()
	b, ok := builds.done[key]
	if !ok {
		b = goBuild(name, pkg, flags)
		if builds.done == nil {
			builds.done = map[string]build{}
		}
		builds.done[key] = b
	}
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// goBuild runs go build flags… pkg into a new folder of builds.dir; the caller holds
// builds.mu.
func goBuild(name, pkg string, flags []string) build {
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "ferry-test-bins-")
		if err != nil {
			return build{err: fmt.Errorf("making the build directory: %w", err)}
		}
		builds.dir = dir
	}
	out := filepath.Join(builds.dir, fmt.Sprint(len(builds.done)), exeName(name))
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		goBin = "go"
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	if b, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
		return build{err: fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)}
	}
	return build{path: out}
}

// removeBuilds removes what goBuilt built; TestMain calls it after the tests.
func removeBuilds() error {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		return nil
	}
	return os.RemoveAll(builds.dir)
}

// releaseBinary returns the real ferry binary, as `go build ./ferry` builds it.
func releaseBinary(tb testing.TB) string {
	tb.Helper()
	return goBuilt(tb, "ferry", ".")
}

// copyExe copies the executable from to the new file to (its folder is made).
func copyExe(tb testing.TB, from, to string) {
	tb.Helper()
	err := os.MkdirAll(filepath.Dir(to), 0o755)
	var src, dst *os.File
	if err == nil {
		src, err = os.Open(from)
	}
	if err == nil {
		defer src.Close()
		dst, err = os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	}
	if err == nil {
		_, err = io.Copy(dst, src)
		err = errors.Join(err, dst.Close())
	}
	if err != nil {
		tb.Fatalf("copying %s to %s: %v", from, to, err)
	}
}

// cleanupM runs the tests of m, then removes what goBuilt built.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	code := c.m.Run()
	if err := removeBuilds(); err != nil {
		fmt.Fprintln(os.Stderr, "removing the test builds:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
