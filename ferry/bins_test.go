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
	"slices"
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
	return startJob(key, exeName(name), func(out string) (string, error) { return goBuildIn(".", out, pkg, flags) })
}

// startJob runs job(out) in the background the first time it is called with key, and
// returns its build; out is a path named file in a folder of its own under the build
// directory, beside which job may keep what it needs.
func startJob(key, file string, job func(out string) (string, error)) *build {
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
		out = filepath.Join(builds.dir, fmt.Sprint(len(builds.done)), "bin", file)
	}
	builds.done[key] = b
	if b.err != nil {
		close(b.ready)
		return b
	}
	go func() {
		defer close(b.ready)
		b.path, b.err = job(out)
	}()
	return b
}

// buildEnv is the environment of every go build: this process's as it started, before
// any test's t.Setenv (a build runs in the background while other tests run, and a
// HOME of theirs would move go's module cache into a test's temporary folder).
var buildEnv = os.Environ()

// goBuildIn runs go build flags… pkg into out, in the folder dir, with env added to
// buildEnv.
func goBuildIn(dir, out, pkg string, flags []string, env ...string) (string, error) {
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		goBin = "go"
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(slices.Clone(buildEnv), env...)
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

// releaseVersion is the version the release build of the tests is tagged with: the
// release binary's, which is also the older of the two builds
// TestUpdateApplyReplacesBinary updates between.
const releaseVersion = "1.0.0"

// versionBuild starts the build of the real ferry binary as a release is built (README
// "Release build"): `CGO_ENABLED=0 go build -buildvcs=true -trimpath -ldflags "-s -w"
// ./ferry` in a
// copy of this working tree committed and tagged v<version> in a new git repository, so
// the go command stamps the tag as the main module's version.
func versionBuild(version string) *build {
	return startJob("ferry-v"+version, exeName("ferry"), func(out string) (string, error) {
		src := filepath.Join(filepath.Dir(filepath.Dir(out)), "src-"+version)
		if err := taggedCopy(src, "v"+version); err != nil {
			return "", fmt.Errorf("making the tagged copy of the module: %w", err)
		}
		return goBuildIn(src, out, "./ferry", releaseFlags, "CGO_ENABLED=0")
	})
}

// moduleRoot is the module's root folder, the parent of this package's (as the test
// binary starts in it).
var moduleRoot = func() string {
	p, err := filepath.Abs("..")
	if err != nil {
		return ""
	}
	return p
}()

// releaseFlags are the go build flags of a release, built with CGO_ENABLED=0 (README
// "Release build").
var releaseFlags = []string{"-buildvcs=true", "-trimpath", "-ldflags", "-s -w"}

// taggedCopy copies the module's files that git tracks or would track (the working
// tree as it is, uncommitted changes included) into the new folder dir, commits them
// in a new git repository there and tags the commit tag.
func taggedCopy(dir, tag string) error {
	root := moduleRoot
	if root == "" {
		return errors.New("the module's root folder is not known")
	}
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	list, err := ls.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		from := filepath.Join(root, filepath.FromSlash(rel))
		fi, err := os.Lstat(from)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet in git
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if err := copyInto(from, filepath.Join(dir, filepath.FromSlash(rel)), fi.Mode().Perm()); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=ferry tests", "-c", "user.email=tests@ferry.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", tag},
		{"-c", "tag.gpgsign=false", "tag", tag},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(buildEnv, "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	return nil
}

// copyInto copies the file from to the new file to with mode perm (its folder is made).
func copyInto(from, to string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}

// releaseBuild starts the release build of ferry, tagged releaseVersion.
func releaseBuild() *build { return versionBuild(releaseVersion) }

// releaseBinary returns the real ferry binary (releaseBuild).
func releaseBinary(tb testing.TB) string {
	tb.Helper()
	return releaseBuild().wait(tb)
}

// copyExe copies the executable from to the new file to (its folder is made).
func copyExe(tb testing.TB, from, to string) {
	tb.Helper()
	if err := copyInto(from, to, 0o755); err != nil {
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
