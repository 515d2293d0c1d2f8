package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// doctorOnly are the checks `ferry doctor` makes that `ferry ledger verify` does not:
// delivery and this machine's state (what waits for sync, clocks, Syncthing), contests
// and memory notes (doctor.OnlyChecks). Every other finding must be the same in
// both, in the same order.
var doctorOnly = []string{"pending_sync", "orphan_object", "clock_skew", "sync", "sync_settings", "stignore", "contested", "memory_conflict", "checkpoint_dispute"}

// finding is a finding as both commands print it with --json.
type finding struct {
	Check  string   `json:"check"`
	Level  string   `json:"level"`
	Path   string   `json:"path"`
	Detail string   `json:"detail"`
	Fix    string   `json:"fix"`
	Lines  []string `json:"lines"`
}

// cliIn runs the CLI in-process with FERRY_HOME home and no Syncthing to ask.
func cliIn(t *testing.T, home string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("FERRY_HOME", home)
	var o, e bytes.Buffer
	code = runIO(args, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

// mustCLI is cliIn that fails the test on a non-zero exit.
func mustCLI(t *testing.T, home string, args ...string) string {
	t.Helper()
	code, out, errs := cliIn(t, home, args...)
	if code != 0 {
		t.Fatalf("ferry %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// agreeWorld is one fixture: a channel and the home that reads it.
type agreeWorld struct{ home, ch string }

// smallChannel is a channel made through the CLI: the owner, bob seated as a member,
// two orders by bob (bob's segment: join, create, create).
func smallChannel(t *testing.T) (w agreeWorld, seg, dev string) {
	t.Helper()
	dir := t.TempDir()
	w = agreeWorld{home: filepath.Join(dir, "home"), ch: filepath.Join(dir, "ch")}
	mustCLI(t, w.home, "init", w.ch, "--project", "acme")
	mustCLI(t, w.home, "join", "--as", "bob", "--channel", w.ch)
	mustCLI(t, w.home, "grant", "bob", "--level", "member", "--channel", w.ch)
	mustCLI(t, w.home, "--as", "bob", "order", "new", "First", "--channel", w.ch)
	mustCLI(t, w.home, "--as", "bob", "order", "new", "Second", "--channel", w.ch)
	segs, _ := filepath.Glob(filepath.Join(w.ch, "ledger", "bob", "*.jsonl"))
	if len(segs) != 1 {
		t.Fatalf("bob's segments: %v", segs)
	}
	return w, segs[0], strings.TrimSuffix(filepath.Base(segs[0]), ".jsonl")
}

// lines returns a file's lines, each with its "\n".
func lines(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i := range ls {
		ls[i] += "\n"
	}
	return ls
}

func write(t *testing.T, p string, ls ...string) {
	t.Helper()
	s := strings.Join(ls, "")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyAndDoctorAgree: on every fixture — the committed ones (fixtures/busy,
// fixtures/vectors) and the damage doctor and verify are meant to find — `ferry ledger
// verify --json` lists exactly the findings `ferry doctor --json` lists apart from the
// doctor-only checks, in the same order, and both exit non-zero exactly when one of
// those findings is an error. Each damaged fixture also names the finding it must give.
func TestVerifyAndDoctorAgree(t *testing.T) {
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "LOCALAPPDATA", "APPDATA", "USERPROFILE"} {
		t.Setenv(k, t.TempDir()) // no Syncthing config to find
	}
	for _, k := range []string{"SYNCTHING_API_URL", "SYNCTHING_API_KEY", "STHOMEDIR", "STCONFDIR", "FERRY_CHANNEL", "FERRY_AGENT", "FERRY_PROJECT"} {
		t.Setenv(k, "")
	}
	committed := func(src, chDir string) func(t *testing.T) (agreeWorld, string) {
		return func(t *testing.T) (agreeWorld, string) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", src))); err != nil {
				t.Fatal(err)
			}
			home := filepath.Join(dir, "home")
			if _, err := os.Stat(home); err != nil {
				home = filepath.Join(t.TempDir(), "home") // a machine that never saw it
			}
			return agreeWorld{home: home, ch: filepath.Join(dir, chDir)}, ""
		}
	}
	cases := []struct {
		name string
		make func(t *testing.T) (w agreeWorld, want string) // want: a check that must be found ("" none)
		// wantFinding, when set, must match one finding (check, path, detail and fix).
		wantFinding func(f finding, dev string) bool
	}{
		{name: "fixtures/busy", make: committed("fixtures/busy", "channel")},
		{name: "fixtures/vectors", make: committed("fixtures/vectors/ferry", "channel")},
		{name: "clean", make: func(t *testing.T) (agreeWorld, string) {
			w, _, _ := smallChannel(t)
			return w, ""
		}},
		{name: "syncthing-style copy readers skip", make: func(t *testing.T) (agreeWorld, string) {
			w, seg, dev := smallChannel(t)
			ls := lines(t, seg)
			write(t, filepath.Join(filepath.Dir(seg), dev+".jsonl.sync-conflict-20261129-101010-ABCDEFG"), ls...)
			write(t, seg, ls[:3]...)                     // the segment was rolled back: seq 4 is only in the copy
			w.home = filepath.Join(t.TempDir(), "other") // a machine that never read seq 4
			return w, "unmerged_copy"
		}, wantFinding: func(f finding, dev string) bool {
			return f.Check == "unmerged_copy" && f.Level == "error" && f.Path == "ledger/bob/"+dev+".jsonl.sync-conflict-20261129-101010-ABCDEFG" &&
				strings.HasPrefix(f.Detail, "1 record(s) (bob/"+dev+"#4) are in no file readers merge") &&
				f.Fix == "rename it to ledger/bob/"+dev+".jsonl.sync-conflict-20261129-101010-ABCDEFG.jsonl (same folder) so ferry merges its records"
		}},
		{name: "drive-style backup readers skip", make: func(t *testing.T) (agreeWorld, string) {
			w, seg, dev := smallChannel(t)
			ls := lines(t, seg)
			write(t, filepath.Join(filepath.Dir(seg), dev+" (1).jsonl.bak"), ls...)
			write(t, seg, ls[:2]...)
			w.home = filepath.Join(t.TempDir(), "other")
			return w, "unmerged_copy"
		}, wantFinding: func(f finding, dev string) bool {
			return f.Check == "unmerged_copy" && f.Path == "ledger/bob/"+dev+" (1).jsonl.bak" &&
				strings.HasPrefix(f.Detail, "2 record(s) (bob/"+dev+"#3, bob/"+dev+"#4) are in no file readers merge") &&
				f.Fix == "rename it to ledger/bob/"+dev+" (1).jsonl.bak.jsonl (same folder) so ferry merges its records"
		}},
		{name: "backup whose records all count", make: func(t *testing.T) (agreeWorld, string) {
			w, seg, dev := smallChannel(t)
			write(t, filepath.Join(filepath.Dir(seg), dev+".jsonl.bak"), lines(t, seg)...)
			return w, "conflict_copy"
		}},
		{name: "merged conflict copy", make: func(t *testing.T) (agreeWorld, string) {
			w, seg, dev := smallChannel(t)
			ls := lines(t, seg)
			write(t, filepath.Join(filepath.Dir(seg), dev+".sync-conflict-20261129-101010-ABCDEFG.jsonl"), ls...)
			write(t, seg, ls[:2]...)
			return w, "conflict_copy"
		}},
		{name: "another writer's line inside a segment", make: func(t *testing.T) (agreeWorld, string) {
			w, seg, _ := smallChannel(t)
			msegs, _ := filepath.Glob(filepath.Join(w.ch, "ledger", "master", "*.jsonl"))
			ml := lines(t, msegs[0])
			write(t, seg, append(lines(t, seg), ml[len(ml)-1])...)
			return w, "misplaced"
		}, wantFinding: func(f finding, dev string) bool {
			return f.Check == "misplaced" && f.Level == "warning" && f.Path == "ledger/bob/"+dev+".jsonl:5" &&
				strings.Contains(f.Detail, "a line of master/") && strings.Contains(f.Detail, "it counts as master's record")
		}},
		{name: "broken chain", make: func(t *testing.T) (agreeWorld, string) {
			w, seg, _ := smallChannel(t)
			ls := lines(t, seg)
			write(t, seg, ls[0], ls[2])
			w.home = filepath.Join(t.TempDir(), "other") // a machine that never read seq 2
			return w, "broken_chain"
		}, wantFinding: func(f finding, dev string) bool {
			return f.Check == "broken_chain" && strings.Contains(f.Fix, "the records after the break still count") &&
				!strings.Contains(f.Fix, "after the break count for nothing")
		}},
		{name: "torn tail and bad signature", make: func(t *testing.T) (agreeWorld, string) {
			w, seg, _ := smallChannel(t)
			ls := lines(t, seg)
			forged := strings.Replace(ls[2], `"title`, `"titlX`, 1)
			if forged == ls[2] {
				forged = regexp.MustCompile(`"sig":"[A-Za-z0-9+/_-]{4}`).ReplaceAllString(ls[2], `"sig":"AAAA`)
			}
			write(t, seg, ls[0], ls[1], forged)
			f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"v":1,"writer":"bob","dev`)
			f.Close()
			return w, "torn"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, want := tc.make(t)
			vcode, vout, verr := cliIn(t, w.home, "ledger", "verify", "--json", "--channel", w.ch)
			dcode, dout, derr := cliIn(t, w.home, "doctor", "--json", "--channel", w.ch)
			var vr, dr struct {
				Findings []finding `json:"findings"`
			}
			if err := json.Unmarshal([]byte(vout), &vr); err != nil {
				t.Fatalf("verify --json: %v\n%s%s", err, vout, verr)
			}
			if err := json.Unmarshal([]byte(dout), &dr); err != nil {
				t.Fatalf("doctor --json: %v\n%s%s", err, dout, derr)
			}
			shared := []finding{}
			for _, f := range dr.Findings {
				if !slices.Contains(doctorOnly, f.Check) {
					shared = append(shared, f)
				}
			}
			if vr.Findings == nil {
				vr.Findings = []finding{}
			}
			if !reflect.DeepEqual(vr.Findings, shared) {
				t.Fatalf("verify and doctor disagree:\nverify: %+v\ndoctor: %+v", vr.Findings, shared)
			}
			errs := slices.ContainsFunc(shared, func(f finding) bool { return f.Level == "error" })
			if (vcode != 0) != errs || errs && dcode == 0 {
				t.Errorf("exit codes: verify %d, doctor %d, errors among the shared findings: %v\n%s\n%s", vcode, dcode, errs, verr, derr)
			}
			if want != "" && !slices.ContainsFunc(shared, func(f finding) bool { return f.Check == want }) {
				t.Errorf("no %s finding: %+v", want, shared)
			}
			if tc.wantFinding != nil {
				dev := ""
				if segs, _ := filepath.Glob(filepath.Join(w.ch, "ledger", "bob", "*.jsonl")); len(segs) > 0 {
					dev = strings.TrimSuffix(filepath.Base(segs[0]), ".jsonl")
				}
				if !slices.ContainsFunc(shared, func(f finding) bool { return tc.wantFinding(f, dev) }) {
					t.Errorf("the expected finding is missing: %+v", shared)
				}
			}
			// verify's text lists the same findings, one line each.
			_, text, _ := cliIn(t, w.home, "ledger", "verify", "--channel", w.ch)
			for _, f := range shared {
				if !strings.Contains(text, f.Check) || !strings.Contains(text, f.Detail) {
					t.Errorf("verify's text does not list %s %q:\n%s", f.Check, f.Detail, text)
				}
			}
			// The rename the fix names makes ferry merge the records.
			for _, f := range shared {
				m := regexp.MustCompile(`^rename it to (\S.*) \(same folder\)`).FindStringSubmatch(f.Fix)
				if f.Check != "unmerged_copy" || m == nil {
					continue
				}
				if err := os.Rename(filepath.Join(w.ch, f.Path), filepath.Join(w.ch, m[1])); err != nil {
					t.Fatal(err)
				}
				if code, out, errs := cliIn(t, w.home, "ledger", "verify", "--channel", w.ch); code != 0 || strings.Contains(out, "unmerged_copy") {
					t.Errorf("after the rename to %s: exit %d\n%s%s", m[1], code, out, errs)
				}
				return
			}
		})
	}
}
