package main

// The executables the tests run. A test that needs only a ferry gets the test binary
// itself: TestMain's testscript.Main copies it onto PATH as "ferry", and started under
// that name it runs main, so nothing is built. What must be a real build — the release
// binary, which has none of the test clock hooks of lifecycle_script_test.go; the
// versioned builds `ferry update` replaces; the benchmarks' binary — and the programs
// in testdata are built with `go build` at most once per test binary, into one
// directory TestMain removes. A build runs in the background from the first time a
// test asks for it; a parallel test asks before t.Parallel, so its builds run beside
// the tests before the parallel ones instead of after them.

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

// builds holds every program startBuild started: one directory for the test binary's
// run, and each build by its go build arguments.
var builds struct {
	mu   sync.Mutex
	dir  string // made by the first build; removeBuilds removes it
	done map[string]*build
}

// build is one go build, started once: when ready is closed, the executable or the
// error with the command's output.
type build struct {
	ready chan struct{}
	path  string
	err   error
}

// wait returns the executable b builds once it is built. A failed build fails every
// test that waits for it.
func (b *build) wait(tb testing.TB) string {
	tb.Helper()
	<-b.ready
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
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

// startBuild starts `go build flags… pkg` (pkg relative to this package's directory)
// in the background, the first time it is called with those arguments only, and
// returns the build. A parallel test starts its builds before t.Parallel, so they run
// while the tests before the parallel ones do.
func startBuild(name, pkg string, flags ...string) *build {
	key := strings.Join(append([]string{name, pkg}, flags...), "\x00")
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if b, ok := builds.done[key]; ok {
		return b
	}
	b := &build{ready: make(chan struct{})}
	if builds.done == nil {
		builds.done = map[string]*build{}
	}
	out := ""
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "ferry-test-bins-")
		if err != nil {
			b.err = fmt.Errorf("making the build directory: %w", err)
		}
		builds.dir = dir
	}
	if b.err == nil {
		out = filepath.Join(builds.dir, fmt.Sprint(len(builds.done)), exeName(name))
	}
	builds.done[key] = b
	if b.err != nil {
		close(b.ready)
		return b
	}
	go func() {
		defer close(b.ready)
		b.path, b.err = goBuild(out, pkg, flags)
	}()
	return b
}

// buildEnv is the environment of every go build: this process's as it started, before
// any test's t.Setenv (a build runs in the background while other tests run, and a
// HOME of theirs would move go's module cache into a test's temporary folder).
var buildEnv = os.Environ()

// goBuild runs go build flags… pkg into out.
func goBuild(out, pkg string, flags []string) (string, error) {
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		goBin = "go"
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command(goBin, args...)
	cmd.Env = buildEnv
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// removeBuilds waits for every build startBuild started, then removes what they
// built; TestMain calls it after the tests.
func removeBuilds() error {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	for _, b := range builds.done {
		<-b.ready
	}
	if builds.dir == "" {
		return nil
	}
	return os.RemoveAll(builds.dir)
}

// releaseVersion is the version the real ferry builds of the tests are stamped with,
// as a release build is (-ldflags "-X main.version=…"): the release binary's, which
// is also the older of the two builds TestUpdateApplyReplacesBinary updates between.
const releaseVersion = "1.0.0"

// versionBuild starts the build of the real ferry binary stamped with version.
func versionBuild(version string) *build {
	return startBuild("ferry", ".", "-ldflags", "-X main.version="+version)
}

// releaseBuild starts the build of the real ferry binary as a release is built: `go
// build ./ferry`, stamped with releaseVersion.
func releaseBuild() *build { return versionBuild(releaseVersion) }

// releaseBinary returns the real ferry binary (releaseBuild).
func releaseBinary(tb testing.TB) string {
	tb.Helper()
	return releaseBuild().wait(tb)
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

// cleanupM runs the tests of m, then removes what startBuild built.
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
