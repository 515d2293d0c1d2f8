package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/internal/keyfile"
	"github.com/ferryhq/ferry/ledger"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary stand in for the ferry binary: testscript puts a copy
// named "ferry" on PATH, which runs main, so every `exec ferry …` line in
// testdata/script/*.txtar and every ferryExe process is a real, separate ferry process.
// Every key it locks or exports costs testScryptWorkFactor, not the release binary's
// scrypt cost (TestReleaseBinaryLocksAtFullCost), and the garbage collector runs at a
// quarter of its default pace (GOGC=400): most ferry processes live milliseconds, and
// the tests' own process keeps little, so collecting less changes nothing they check
// and saves a fifth of the package's CPU time. After the tests it removes what
// startBuild built.
func TestMain(m *testing.M) {
	keyfile.ScryptWorkFactor = testScryptWorkFactor
	debug.SetGCPercent(400)
	if os.Getenv(raceHelperEnv) == "1" {
		os.Exit(raceClaimHelper())
	}
	testscript.Main(cleanupM{m}, map[string]func(){
		"ferry":  main,
		"runjob": scriptRunjob, // the FILE of ferry run journeys (run_test.go)
		"claude": scriptClaude, // Claude Code's CLI, for ferry connect (connect_script_test.go)
	})
}

// TestScripts runs the CLI journeys in testdata/script. Each script says on its first
// lines what behaviour it guards and, where it is written down, the section that says
// so (docs/format.md §N, docs/runs.md, docs/mcp.md, an ADR). The scripts run in
// parallel with each other and with the other parallel tests: each has its own work
// dir and FERRY_HOME, and a script's environment is its own (testscript), not the
// process's.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                filepath.Join("testdata", "script"),
		RequireUniqueNames: true,
		Setup: func(env *testscript.Env) error {
			// Machine-local state lives in the script's work dir, never in the real home.
			vars := env.Vars[:0]
			for _, kv := range env.Vars {
				if !strings.HasPrefix(kv, "FERRY_CHANNEL=") && !strings.HasPrefix(kv, "FERRY_AGENT=") && !strings.HasPrefix(kv, "FERRY_HOME=") {
					vars = append(vars, kv)
				}
			}
			env.Vars = vars
			env.Setenv("FERRY_HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("ESC", "\x1b") // a terminal escape, for scripts that try to inject one
			return nil
		},
		Cmds: scriptCmds,
		// [root]: running as the superuser, whom a read-only folder does not stop.
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// scriptCmds are the helpers the scripts use to look at and tamper with channel files.
// They are plain Go, so the scripts run the same on every OS.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"copydir":    cmdCopyDir,
	"capture":    cmdCapture,
	"firstfile":  cmdFirstFile,
	"appendline": cmdAppendLine,
	"forgeline":  cmdForgeLine,
	"editjson":   cmdEditJSON,
	"replace":    cmdReplace,
	"tree":       cmdTree,
	"validjson":  cmdValidJSON,
	"zerofill":   cmdZeroFill,
	"crlf":       cmdCRLF,
	// doctor.txtar: half a line, as a sync tool delivers it.
	"appendpartial": cmdAppendPartial,
	// sync_writer.txtar: a line wiped with NULs, a file rolled back.
	"zeroline":  cmdZeroLine,
	"headlines": cmdHeadLines,
}

// zeroline FILE N overwrites line N (1-based) of FILE, its newline included, with NUL
// bytes: a hole in the middle of a segment.
func cmdZeroLine(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "zeroline")
	if len(args) != 2 {
		ts.Fatalf("usage: zeroline FILE N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	p := ts.MkAbs(args[0])
	b, err := os.ReadFile(p)
	ts.Check(err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	if n < 1 || n > len(lines) || len(lines[n-1]) == 0 {
		ts.Fatalf("zeroline: %s has no line %d", args[0], n)
	}
	clear(lines[n-1])
	ts.Check(os.WriteFile(p, bytes.Join(lines, nil), 0o644))
}

// headlines FILE N cuts FILE to its first N lines (a folder rolled back).
func cmdHeadLines(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "headlines")
	if len(args) != 2 {
		ts.Fatalf("usage: headlines FILE N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	p := ts.MkAbs(args[0])
	b, err := os.ReadFile(p)
	ts.Check(err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	if n < 0 || n > len(lines) {
		ts.Fatalf("headlines: %s has fewer than %d lines", args[0], n)
	}
	ts.Check(os.WriteFile(p, bytes.Join(lines[:n], nil), 0o644))
}

// crlf FILE rewrites FILE with CRLF line endings (a Windows checkout of it).
func cmdCRLF(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "crlf")
	if len(args) != 1 {
		ts.Fatalf("usage: crlf FILE")
	}
	s := strings.ReplaceAll(ts.ReadFile(args[0]), "\r\n", "\n")
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(strings.ReplaceAll(s, "\n", "\r\n")), 0o644))
}

// appendpartial FILE TEXT appends TEXT without a newline to FILE: a line that has not
// fully arrived.
func cmdAppendPartial(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "appendpartial")
	if len(args) != 2 {
		ts.Fatalf("usage: appendpartial FILE TEXT")
	}
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_APPEND|os.O_WRONLY, 0)
	ts.Check(err)
	_, err = f.WriteString(args[1])
	ts.Check(err)
	ts.Check(f.Close())
}

// zerofill FILE overwrites FILE with as many NUL bytes as it holds (a sync tool's
// preallocated file, a disk error, a bad restore).
func cmdZeroFill(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "zerofill")
	if len(args) != 1 {
		ts.Fatalf("usage: zerofill FILE")
	}
	p := ts.MkAbs(args[0])
	fi, err := os.Stat(p)
	ts.Check(err)
	ts.Check(os.WriteFile(p, make([]byte, fi.Size()), 0o644))
}

func noNeg(ts *testscript.TestScript, neg bool, name string) {
	if neg {
		ts.Fatalf("unsupported: ! %s", name)
	}
}

// capture VAR REGEXP sets $VAR to the first group REGEXP matches in the last stdout.
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "capture")
	if len(args) != 2 {
		ts.Fatalf("usage: capture VAR REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if len(m) < 2 {
		ts.Fatalf("capture: no match for %q in stdout", args[1])
	}
	ts.Setenv(args[0], m[1])
}

// firstfile VAR DIR GLOB sets $VAR to the path of the first file in DIR (in name order)
// whose name matches GLOB.
func cmdFirstFile(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "firstfile")
	if len(args) != 3 {
		ts.Fatalf("usage: firstfile VAR DIR GLOB")
	}
	m, err := filepath.Glob(filepath.Join(ts.MkAbs(args[1]), args[2]))
	ts.Check(err)
	if len(m) == 0 {
		ts.Fatalf("firstfile: nothing matches %s in %s", args[2], args[1])
	}
	sort.Strings(m)
	ts.Setenv(args[0], m[0])
}

// appendline FILE TEXT appends TEXT and "\n" to FILE: a complete line.
func cmdAppendLine(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "appendline")
	if len(args) != 2 {
		ts.Fatalf("usage: appendline FILE TEXT")
	}
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_APPEND|os.O_WRONLY, 0)
	ts.Check(err)
	_, err = f.WriteString(args[1] + "\n")
	ts.Check(err)
	ts.Check(f.Close())
}

// forgeline FILE REGEXP KEY VALUE appends to FILE a copy of its first ledger line that
// REGEXP matches, with the field KEY (dotted for nested objects: data.level) set to
// VALUE: a well-formed line with the original's writer, device and seq whose signature
// no longer matches. An unknown field "forged" is added and counted up until the
// copy's entry hash is lower than the original's, so a fork resolved by hash alone
// would pick the forgery.
func cmdForgeLine(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "forgeline")
	if len(args) != 4 {
		ts.Fatalf("usage: forgeline FILE REGEXP KEY VALUE")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	var line string
	for _, l := range strings.Split(ts.ReadFile(args[0]), "\n") {
		if re.MatchString(l) {
			line = l
			break
		}
	}
	if line == "" {
		ts.Fatalf("forgeline: no line of %s matches %q", args[0], args[1])
	}
	orig, err := ledger.ParseLine([]byte(line))
	ts.Check(err)
	edited := setJSONField(ts, []byte(line), args[2], args[3], false)
	for i := 0; i < 1000; i++ {
		out := setJSONField(ts, edited, "forged", strconv.Itoa(i), true)
		e, err := ledger.ParseLine(out)
		ts.Check(err)
		if e.Hash() < orig.Hash() {
			cmdAppendLine(ts, false, []string{args[0], string(out)})
			return
		}
	}
	ts.Fatalf("forgeline: found no copy with a lower hash")
}

// editjson FILE KEY VALUE sets the string field KEY of the JSON object in FILE to
// VALUE, as a person with an editor would.
func cmdEditJSON(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "editjson")
	if len(args) != 3 {
		ts.Fatalf("usage: editjson FILE KEY VALUE")
	}
	out := setJSONField(ts, []byte(ts.ReadFile(args[0])), args[1], args[2], false)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), append(out, '\n'), 0o644))
}

// setJSONField sets the string field key (dotted) of the JSON object raw; it adds the
// field only when create is set.
func setJSONField(ts *testscript.TestScript, raw []byte, key, value string, create bool) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	ts.Check(dec.Decode(&obj))
	path := strings.Split(key, ".")
	m := obj
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			ts.Fatalf("no object at %q", k)
		}
		m = next
	}
	last := path[len(path)-1]
	if _, ok := m[last]; !ok && !create {
		ts.Fatalf("no field %q", key)
	}
	m[last] = value
	out, err := json.Marshal(obj)
	ts.Check(err)
	return out
}

// replace FILE OLD NEW replaces every OLD in FILE by NEW and fails if there is none.
func cmdReplace(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "replace")
	if len(args) != 3 {
		ts.Fatalf("usage: replace FILE OLD NEW")
	}
	s := ts.ReadFile(args[0])
	if !strings.Contains(s, args[1]) {
		ts.Fatalf("replace: %q not in %s", args[1], args[0])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(strings.ReplaceAll(s, args[1], args[2])), 0o644))
}

// tree DIR prints every file under DIR, in name order, with its size and sha256: cmp
// two such listings to show a command wrote nothing.
func cmdTree(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "tree")
	if len(args) != 1 {
		ts.Fatalf("usage: tree DIR")
	}
	root := ts.MkAbs(args[0])
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			lines = append(lines, rel+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		lines = append(lines, fmt.Sprintf("%s %d %s", rel, len(b), hex.EncodeToString(sum[:8])))
		return nil
	})
	ts.Check(err)
	sort.Strings(lines)
	fmt.Fprintln(ts.Stdout(), strings.Join(lines, "\n"))
}

// validjson fails unless the last stdout is exactly one JSON value.
func cmdValidJSON(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "validjson")
	if len(args) != 0 {
		ts.Fatalf("usage: validjson")
	}
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile("stdout")))
	var v any
	if err := dec.Decode(&v); err != nil {
		ts.Fatalf("stdout is not JSON: %v", err)
	}
	if dec.More() {
		ts.Fatalf("stdout holds more than one JSON value")
	}
}

// cmdCopyDir copies the tree SRC to DST, which must not exist (a copy of a channel
// elsewhere on the machine): copydir SRC DST.
func cmdCopyDir(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: copydir SRC DST")
	}
	ts.Check(os.CopyFS(ts.MkAbs(args[1]), os.DirFS(ts.MkAbs(args[0]))))
}
