package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/selfupdate"
)

// copyBuild puts at path a copy of what b builds.
func copyBuild(t *testing.T, b *build, path string) {
	t.Helper()
	copyExe(t, b.wait(t), path)
}

// TestUpdateApplyReplacesBinary (ADR 0005): a real ferry 1.0.0, copied to a temp dir,
// sees the owner's approval of 1.1.0 (a real build in the channel's releases/), applies
// it and is then ferry 1.1.0; the new binary finds nothing newer. Every step is a
// separate process of the binary being replaced.
func TestUpdateApplyReplacesBinary(t *testing.T) {
	// Release builds tagged with each version (versionBuild),
	// started while the tests before the parallel ones run.
	v100, v110 := versionBuild("1.0.0"), versionBuild("1.1.0")
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "bin", "ferry")
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	copyBuild(t, v100, exe)
	ch := filepath.Join(dir, "ch")
	env := append(os.Environ(), "FERRY_HOME="+filepath.Join(dir, "home"), "FERRY_CHANNEL="+ch, "FERRY_AGENT=")
	ferry := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(exe, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ferry %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ferry("init", ch, "--project", "acme")
	copyBuild(t, v110, filepath.Join(ch, "releases", "ferry-next"))
	plat := selfupdate.Platform()
	ferry("update", "approve", "1.1.0", "--platform", plat+"=releases/ferry-next")

	var chk fsbus.UpdateCheck
	if err := json.Unmarshal([]byte(ferry("update", "check", "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	if !chk.Available || chk.Current != "1.0.0" || chk.Latest != "1.1.0" || chk.Platform != plat {
		t.Fatalf("check: %+v", chk)
	}
	// Without --yes: a dry run that runs every check, exits 0 and replaces nothing
	// (docs/commands.md, `ferry update apply`).
	if out := ferry("update", "apply"); !strings.Contains(out, "would install ferry 1.1.0 in place of 1.0.0 at ") || !strings.Contains(out, "run again with --yes to install it") {
		t.Fatalf("apply without --yes said %q", out)
	}
	if v := ferry("version"); !strings.HasPrefix(v, "ferry 1.0.0 ") {
		t.Fatalf("after the dry run: %q", v)
	}
	out := ferry("update", "apply", "--yes")
	if !strings.Contains(out, "ferry 1.0.0 → 1.1.0 installed at ") {
		t.Fatalf("apply said %q", out)
	}
	if v := ferry("version"); !strings.HasPrefix(v, "ferry 1.1.0 ") {
		t.Fatalf("after apply: %q", v)
	}
	if out := ferry("update", "check"); !strings.HasPrefix(out, "ferry 1.1.0 is up to date for "+plat) {
		t.Fatalf("check after apply: %q", out)
	}
	ents, err := os.ReadDir(filepath.Dir(exe))
	if err != nil || len(ents) != 1 {
		t.Fatalf("beside the binary: %v %v", ents, err)
	}
	// The same file approved again as 1.2.0 (it reports 1.1.0), or for a platform it
	// was not built for: refused at approval, nothing written, so no machine is ever
	// offered a release that apply would refuse.
	approveFails := func(want string, args ...string) {
		t.Helper()
		cmd := exec.Command(exe, append([]string{"update", "approve"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("update approve %v: %v\n%s\nwant an error with %q", args, err, out, want)
		}
	}
	approveFails("reports version 1.1.0 (its git tag; an -X main.version is not visible under -trimpath), not 1.2.0", "1.2.0", "--platform", plat+"=releases/ferry-next")
	other := "windows/amd64"
	if plat == other {
		other = "linux/amd64"
	}
	approveFails("is a Go binary for "+plat+", not "+other, "1.1.0", "--platform", other+"=releases/ferry-next")
	if out := ferry("update", "check"); !strings.HasPrefix(out, "ferry 1.1.0 is up to date for "+plat) {
		t.Fatalf("check after the refused approvals: %q", out)
	}
	// A file that is not a Go binary is approved with a note saying what was not checked.
	if err := os.WriteFile(filepath.Join(ch, "releases", "notes.txt"), []byte("not a binary\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ferry("update", "approve", "1.3.0", "--platform", "plan9/amd64=releases/notes.txt"); !strings.Contains(out, "note: releases/notes.txt is not a Go binary this ferry can read") {
		t.Fatalf("approving a text file said %q", out)
	}
}
