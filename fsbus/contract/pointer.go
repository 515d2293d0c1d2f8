package contract

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
)

// Limits of an order's pointers.
const (
	// MaxPointers is the most file pointers one order carries.
	MaxPointers = 64
	// MaxPointerBytes is the largest file a pointer fingerprints (bytes on disk); the
	// file is streamed, never read whole.
	MaxPointerBytes = 256 << 20
	// textSniff is how many leading bytes decide whether a file is text: text has no
	// NUL byte in them.
	textSniff = 8 << 10
	// recentEdit is how recent a change must be (by the file's mtime) for dispatch to
	// warn about unsaved editor buffers.
	recentEdit = 3 * time.Second
	// claimRetry is how long a claim or submit waits before checking mismatching
	// pointers a second time (an editor or sync tool still flushing).
	claimRetry = 150 * time.Millisecond
)

// Pointer health, as VerifyOrder, Claim and Submit judge it on this machine.
const (
	pointerOK      = "ok"
	PointerChanged = "changed"
	PointerMissing = "missing"
	PointerRefused = "refused"
)

// PointerCheck is the health of one pointer on this machine.
type PointerCheck struct {
	Path   string `json:"path"`
	Status string `json:"status"`           // ok|changed|missing|refused
	Reason string `json:"reason,omitempty"` // why it is not ok
}

// PointerReport is the health of an order's pointers in one workspace
// (ADR 0003 §2). OK is true when every pointer (and the diff, when there is one) is ok.
// DiffMode is true when the files on disk do not match but the order is a read-only
// review whose verified diff covers every pointer: it may be claimed to review the
// diff, not the files on disk.
type PointerReport struct {
	Order      string         `json:"order"`
	Workspace  string         `json:"workspace"`
	Commit     string         `json:"commit,omitempty"`     // this checkout's HEAD
	Dispatched string         `json:"dispatched,omitempty"` // the pointers' commit
	Pointers   []PointerCheck `json:"pointers"`
	Diff       *PointerCheck  `json:"diff,omitempty"`
	OK         bool           `json:"ok"`
	DiffMode   bool           `json:"diff_mode,omitempty"`
}

// Stale lists the pointers that are not ok.
func (r *PointerReport) Stale() []PointerCheck {
	var out []PointerCheck
	for _, p := range r.Pointers {
		if p.Status != pointerOK {
			out = append(out, p)
		}
	}
	if r.Diff != nil && r.Diff.Status != pointerOK {
		out = append(out, *r.Diff)
	}
	return out
}

// ResolveWorkspace returns the workspace root pointers are relative to: dir when given
// (made absolute), else the git top-level of the current directory, else the current
// directory. It returns invalid when dir is not a directory.
func ResolveWorkspace(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("reading the current directory: %w", err)
		}
		return WorkspaceRoot(wd), nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", errs.Errorf(errs.Invalid, "pass an existing directory to --workspace", "workspace %s: %v", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", errs.Errorf(errs.Invalid, "pass an existing directory to --workspace", "workspace %s is not a directory", dir)
	}
	return abs, nil
}

// WorkspaceRoot is the workspace root of a directory: the git top-level of dir when
// dir lies in a git checkout, else dir (the rule ResolveWorkspace applies to the current
// directory).
func WorkspaceRoot(dir string) string {
	if top := GitOutput(dir, "rev-parse", "--show-toplevel"); top != "" {
		return filepath.Clean(filepath.FromSlash(top))
	}
	return dir
}

// GitOutput runs git with args in dir and returns its trimmed stdout, or "" when git is
// missing, dir is not a repository, or git fails (within 5 s).
func GitOutput(dir string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// workspaceCommit is the workspace's HEAD commit, or "" outside a git repository.
func workspaceCommit(ws string) string {
	c := GitOutput(ws, "rev-parse", "--verify", "--quiet", "HEAD")
	if len(c) < 40 || strings.ContainsAny(c, " \n") {
		return ""
	}
	return c
}

// windowsReserved are the device names Windows refuses as file names, with or without
// an extension (docs/design.md §2 rule 10).
var windowsReserved = map[string]bool{"con": true, "prn": true, "aux": true, "nul": true, "conin$": true, "conout$": true}

func isWindowsReserved(name string) bool {
	base, _, _ := strings.Cut(strings.ToLower(name), ".")
	base = strings.TrimRight(base, " ")
	if windowsReserved[base] {
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "com") || strings.HasPrefix(base, "lpt")) && base[3] >= '0' && base[3] <= '9' {
		return true
	}
	// Windows reserves COM¹–COM³ and LPT¹–LPT³ too (superscript digits).
	if d, ok := strings.CutPrefix(base, "com"); ok && (d == "¹" || d == "²" || d == "³") {
		return true
	}
	if d, ok := strings.CutPrefix(base, "lpt"); ok && (d == "¹" || d == "²" || d == "³") {
		return true
	}
	return false
}

// sensitiveName reports whether one path component names a file that must never be
// pointed at: .env*, *.pem, *.key, id_rsa*, *credentials*, *secret*, .npmrc.
func sensitiveName(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, ".env") || strings.HasSuffix(n, ".pem") || strings.HasSuffix(n, ".key") ||
		strings.HasPrefix(n, "id_rsa") || strings.Contains(n, "credentials") || strings.Contains(n, "secret") ||
		n == ".npmrc"
}

// CheckPointerPath checks a workspace-relative path written with '/' (or the OS
// separator) and returns it cleaned, '/'-separated. It returns invalid, naming the
// rule, for an empty, absolute or drive path, a ".." component, a ':' or '\\', a
// control character, a Windows reserved name (CON, NUL, COM1…), a component ending in
// a dot or space, and sensitive names: .env*, *.pem, *.key, id_rsa*, *credentials*,
// *secret*, .npmrc in any component, and .git/config.
func CheckPointerPath(p string) (string, error) {
	refuse := func(why string) (string, error) {
		return "", errs.Errorf(errs.Invalid, "point at files inside the workspace by relative path; secrets are never pointed at", "pointer %s refused: %s", secretguard.Quote(p), why)
	}
	// The path is written in the clear into the order object (secret guard).
	if err := secretguard.Check("pointer path", p); err != nil {
		return "", err
	}
	q := filepath.ToSlash(p)
	switch {
	case strings.TrimSpace(q) == "":
		return refuse("empty path")
	case HasControl(q, false):
		return refuse("control characters")
	case strings.HasPrefix(q, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		return refuse("absolute path")
	case strings.ContainsAny(q, `\:`):
		return refuse(`'\' or ':' is not portable`)
	}
	for _, c := range strings.Split(q, "/") {
		switch {
		case c == "..":
			return refuse("'..' leaves the workspace")
		case c == "" || c == ".":
			continue
		case isWindowsReserved(c):
			return refuse("reserved name on Windows")
		case strings.HasSuffix(c, ".") || strings.HasSuffix(c, " "):
			return refuse("a name ending in a dot or space is not portable")
		case sensitiveName(c):
			return refuse("sensitive file name")
		}
	}
	clean := path.Clean(q)
	if clean == "." {
		return refuse("names the workspace itself")
	}
	if strings.EqualFold(clean, ".git/config") {
		return refuse("sensitive file name")
	}
	return clean, nil
}

// parsePointerSpec splits "path" or "path:FIRST-LAST" (or "path:LINE").
func parsePointerSpec(spec string) (p string, first, last int, err error) {
	p = spec
	if i := strings.LastIndexByte(spec, ':'); i > 0 {
		r := spec[i+1:]
		a, b, two := strings.Cut(r, "-")
		fa, ea := strconv.Atoi(a)
		fb, eb := fa, error(nil)
		if two {
			fb, eb = strconv.Atoi(b)
		}
		if ea == nil && eb == nil {
			if fa < 1 || fb < fa {
				return "", 0, 0, errs.Errorf(errs.Invalid, "write a range as path:FIRST-LAST with 1 ≤ FIRST ≤ LAST", "bad line range in %s", secretguard.Quote(spec))
			}
			p, first, last = spec[:i], fa, fb
		}
	}
	return p, first, last, nil
}

// fingerprint is a file's content as a pointer records it.
type fingerprint struct {
	Size  int64  `json:"-"`
	SHA   string `json:"-"`
	Text  bool   `json:"-"`
	Lines int    `json:"-"`
	mtime time.Time
}

// openPointer opens rel inside root (os.Root: no escape through "..", absolute paths
// or symlinks) and fingerprints it. It returns the pointer status for a failure:
// missing when the file is not there, refused when it escapes the root, is a symlink to
// a sensitive name, is not a regular file or is larger than MaxPointerBytes.
func openPointer(root *os.Root, rel string) (fingerprint, string, string) {
	name := filepath.FromSlash(rel)
	if symlinkToSensitive(root, rel) {
		return fingerprint{}, PointerRefused, "symlink to a sensitive file"
	}
	// Stat (through the root) before opening: opening a FIFO blocks until a writer
	// comes, and a device or socket is never read.
	if fi, err := root.Stat(name); err == nil && !fi.Mode().IsRegular() {
		return fingerprint{}, PointerRefused, notRegular(fi.Mode())
	}
	f, err := root.OpenFile(name, openPointerFlags, 0)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fingerprint{}, PointerMissing, "no such file"
		case strings.Contains(err.Error(), "escapes"):
			if hasSymlink(root, rel) {
				return fingerprint{}, PointerRefused, "leads outside the workspace (through a symlink)"
			}
			return fingerprint{}, PointerRefused, "leads outside the workspace"
		default:
			why := err.Error()
			var pe *fs.PathError
			if errors.As(err, &pe) && pe.Err != nil {
				why = pe.Err.Error() // the path is already named by the caller
			}
			return fingerprint{}, PointerMissing, "cannot open: " + why
		}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fingerprint{}, PointerMissing, "cannot stat: " + err.Error()
	}
	if !fi.Mode().IsRegular() { // swapped in after the Stat: O_NONBLOCK kept the open from hanging
		return fingerprint{}, PointerRefused, notRegular(fi.Mode())
	}
	if fi.Size() > MaxPointerBytes {
		return fingerprint{}, PointerRefused, fmt.Sprintf("%d bytes; the limit is %d", fi.Size(), MaxPointerBytes)
	}
	fp, err := HashContent(io.LimitReader(f, MaxPointerBytes+1))
	if err != nil {
		return fingerprint{}, PointerMissing, "cannot read: " + err.Error()
	}
	if fp.Size > MaxPointerBytes {
		return fingerprint{}, PointerRefused, fmt.Sprintf("more than %d bytes", MaxPointerBytes)
	}
	fp.mtime = fi.ModTime()
	return fp, pointerOK, ""
}

// notRegular names what a pointed path is when it is not a regular file.
func notRegular(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "not a regular file (a directory)"
	case m&fs.ModeNamedPipe != 0:
		return "not a regular file (a FIFO; never opened)"
	case m&fs.ModeSocket != 0:
		return "not a regular file (a socket; never opened)"
	case m&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return "not a regular file (a device; never opened)"
	}
	return "not a regular file"
}

// hasSymlink reports whether a component of rel is a symlink in root.
func hasSymlink(root *os.Root, rel string) bool {
	comps := strings.Split(rel, "/")
	for i := range comps {
		fi, err := root.Lstat(filepath.FromSlash(strings.Join(comps[:i+1], "/")))
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// symlinkToSensitive reports whether a component of rel is a symlink whose target names
// a sensitive file or a .git directory (so "link/config" with link -> .git is refused
// like .git/config). os.Root already refuses targets outside the workspace.
func symlinkToSensitive(root *os.Root, rel string) bool {
	comps := strings.Split(rel, "/")
	for i := range comps {
		prefix := filepath.FromSlash(strings.Join(comps[:i+1], "/"))
		fi, err := root.Lstat(prefix)
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		target, err := root.Readlink(prefix)
		if err != nil {
			return true // a link we cannot read is not followed
		}
		for _, c := range strings.Split(filepath.ToSlash(target), "/") {
			if sensitiveName(c) || strings.EqualFold(c, ".git") {
				return true
			}
		}
	}
	return false
}

// HashContent streams r into sha256. Text (no NUL in the first 8 KiB) is hashed with
// every CRLF read as LF; lines counts '\n'-terminated lines plus a last unterminated
// one. Binary content is hashed as is.
func HashContent(r io.Reader) (fingerprint, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(textSniff)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return fingerprint{}, err
	}
	fp := fingerprint{Text: bytes.IndexByte(head, 0) < 0}
	h := sha256.New()
	buf := make([]byte, 64<<10)
	out := make([]byte, 0, 64<<10)
	cr := false // a '\r' held back from the previous chunk
	var last byte
	for {
		n, err := br.Read(buf)
		chunk := buf[:n]
		if fp.Text {
			out = out[:0]
			for _, b := range chunk {
				if cr && b != '\n' {
					out = append(out, '\r')
				}
				cr = b == '\r'
				if !cr {
					out = append(out, b)
				}
			}
			chunk = out
		}
		if len(chunk) > 0 {
			h.Write(chunk)
			fp.Size += int64(len(chunk))
			fp.Lines += bytes.Count(chunk, []byte{'\n'})
			last = chunk[len(chunk)-1]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fingerprint{}, err
		}
	}
	if cr {
		h.Write([]byte{'\r'})
		fp.Size++
		last = '\r'
	}
	if fp.Size > 0 && last != '\n' {
		fp.Lines++
	}
	fp.SHA = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return fp, nil
}

// FingerprintPointers resolves each spec ("path" or "path:FIRST-LAST") inside the
// workspace ws and records its Pointer. It returns the pointers, warnings
// (a file changed within the last 3 s: an editor may not have saved it yet) and
// invalid when a path is refused (CheckPointerPath), escapes the workspace through a
// symlink, is missing, not a regular file, larger than MaxPointerBytes, named twice,
// when a line range lies past the end of a text file or is given for a binary file,
// or when there are more than MaxPointers. now is the clock the warning compares
// mtimes with.
func FingerprintPointers(ws string, specs []string, now time.Time) ([]fold.Pointer, []string, error) {
	if len(specs) == 0 {
		return nil, nil, nil
	}
	if len(specs) > MaxPointers {
		return nil, nil, errs.Errorf(errs.Invalid, "point at the files that matter; put the rest in the body", "%d pointers; the limit is %d", len(specs), MaxPointers)
	}
	root, err := OpenRoot(ws)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	commit := workspaceCommit(ws)
	var out []fold.Pointer
	var warn []string
	seen := map[string]bool{}
	for _, spec := range specs {
		p, first, last, err := parsePointerSpec(spec)
		if err != nil {
			return nil, nil, err
		}
		if p, err = CheckPointerPath(p); err != nil {
			return nil, nil, err
		}
		if seen[p] {
			return nil, nil, errs.Errorf(errs.Invalid, "name each file once", "pointer %s named twice", p)
		}
		seen[p] = true
		fp, status, why := openPointer(root, p)
		if status != pointerOK {
			hint := "point at an existing regular file inside the workspace " + ws
			if status == PointerRefused {
				hint = "point at files inside the workspace; secrets are never pointed at"
			}
			return nil, nil, errs.Errorf(errs.Invalid, hint, "pointer %s %s: %s", p, status, why)
		}
		ptr := fold.Pointer{Path: p, Size: fp.Size, SHA256: fp.SHA, Commit: commit}
		switch {
		case !fp.Text && first > 0:
			return nil, nil, errs.Errorf(errs.Invalid, "point at a binary file without a line range", "pointer %s: a line range needs a text file", p)
		case first > 0 && last > fp.Lines:
			return nil, nil, errs.Errorf(errs.Invalid, "check the range against the file", "pointer %s: lines %d-%d, but the file has %d", p, first, last, fp.Lines)
		case first > 0:
			ptr.FirstLine, ptr.LastLine = first, last
		case fp.Text && fp.Lines > 0:
			ptr.FirstLine, ptr.LastLine = 1, fp.Lines
		}
		if d := now.Sub(fp.mtime); d < recentEdit && d > -recentEdit {
			warn = append(warn, fmt.Sprintf("%s changed less than 3 s ago: save it in your editor if it has unsaved changes, then dispatch again if the content differs", p))
		}
		out = append(out, ptr)
	}
	return out, warn, nil
}

// OpenRoot opens the workspace ws as an os.Root, or returns invalid.
func OpenRoot(ws string) (*os.Root, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "pass an existing directory to --workspace", "opening workspace %s: %v", ws, err)
	}
	return root, nil
}

// ReasonUnsafePath is the refusal of a pointer whose recorded path is not a safe
// workspace-relative path: the contract is wrong, not the checkout.
const ReasonUnsafePath = "the path is not a safe workspace-relative path"

// checkOne compares one pointer with the file in root.
func checkOne(root *os.Root, p fold.Pointer) PointerCheck {
	c := PointerCheck{Path: p.Path, Status: pointerOK}
	rel, err := CheckPointerPath(p.Path)
	if err != nil || rel != p.Path {
		c.Status, c.Reason = PointerRefused, ReasonUnsafePath
		return c
	}
	fp, status, why := openPointer(root, rel)
	switch {
	case status != pointerOK:
		c.Status, c.Reason = status, why
	case fp.Size != p.Size:
		c.Status, c.Reason = PointerChanged, fmt.Sprintf("size %d bytes, dispatched %d", fp.Size, p.Size)
	case fp.SHA != p.SHA256:
		c.Status, c.Reason = PointerChanged, "content differs (sha256)"
	}
	return c
}

// CheckPointers compares the contract's pointers (and its diff) with the files in the
// workspace ws, once. It never writes.
func CheckPointers(ws string, id string, ct *fold.Contract) *PointerReport {
	r := &PointerReport{Order: id, Workspace: ws, OK: true, Commit: workspaceCommit(ws), Pointers: []PointerCheck{}}
	for _, p := range ct.Pointers {
		if p.Commit != "" {
			r.Dispatched = p.Commit
			break
		}
	}
	root, err := os.OpenRoot(ws)
	for _, p := range ct.Pointers {
		c := PointerCheck{Path: p.Path, Status: PointerMissing, Reason: "workspace cannot be opened"}
		if err == nil {
			c = checkOne(root, p)
		}
		r.OK = r.OK && c.Status == pointerOK
		r.Pointers = append(r.Pointers, c)
	}
	if ct.Diff != nil {
		c := PointerCheck{Path: ct.Diff.Path, Status: PointerMissing, Reason: "workspace cannot be opened"}
		if err == nil {
			c = checkOne(root, *ct.Diff)
		}
		r.Diff = &c
		r.OK = r.OK && c.Status == pointerOK
		if !r.OK && ct.ReadOnly && c.Status == pointerOK && r.refusedNone() {
			if files, derr := ReadDiffFiles(root, ct.Diff.Path); derr == nil && Covers(files, ct.Pointers) {
				r.DiffMode = true
			}
		}
	}
	if root != nil {
		root.Close()
	}
	return r
}

func (r *PointerReport) refusedNone() bool {
	for _, p := range r.Pointers {
		if p.Status == PointerRefused {
			return false
		}
	}
	return true
}

// CheckPointersSettled is CheckPointers, checked again after 150 ms when it does not
// match (an editor or sync tool may still be writing; ADR 0003 §2).
func CheckPointersSettled(ws, id string, ct *fold.Contract) *PointerReport {
	r := CheckPointers(ws, id, ct)
	if r.OK {
		return r
	}
	SettleWait()
	return CheckPointers(ws, id, ct)
}

// SettleWait is the pause before the second check (a variable so a test can do the
// editor's late write there instead of sleeping).
var SettleWait = func() { time.Sleep(claimRetry) }

// StaleError is the stale refusal of a claim or submit: why the files differ (another
// commit, or local edits, listing the files) and how to recover.
func StaleError(cat errs.Category, r *PointerReport, what string) *errs.Error {
	var files []string
	var list []string
	for _, p := range r.Stale() {
		files = append(files, p.Path)
		list = append(list, p.Path+" ("+p.Status+": "+p.Reason+")")
	}
	msg := fmt.Sprintf("order %s: %s; the files differ from the dispatch in %s: %s", r.Order, what, r.Workspace, strings.Join(list, ", "))
	var hint string
	switch {
	case r.Dispatched != "" && r.Commit != "" && r.Commit != r.Dispatched:
		msg += fmt.Sprintf(" — this checkout is at commit %s, the pointers were taken at %s", fold.Short(r.Commit), fold.Short(r.Dispatched))
		hint = fmt.Sprintf("run `git stash` if you have local edits, then `git checkout %s` (fetch it first if it is missing), and try again; a machine whose checkout matches can take it meanwhile", r.Dispatched)
	case r.Dispatched != "":
		msg += " — this checkout is at the dispatched commit and has local edits"
		hint = "run `git stash` (or `git checkout -- " + strings.Join(files, " ") + "`) to restore the files as dispatched, and try again"
	default:
		hint = "restore the files as they were at dispatch, and try again; `ferry order verify " + r.Order + "` shows each pointer"
	}
	return errs.Errorf(cat, hint, "%s", msg)
}

// diffFile is one file block of a unified diff: its path and whether a hunk of it
// adds or removes a line.
type diffFile struct {
	Path    string `json:"-"`
	changes bool
}

// maxDiffBytes is the largest unified diff a contract's diff pointer may name (bytes).
const maxDiffBytes = 8 << 20

// ReadDiffFiles reads the unified diff at rel inside root and lists its file blocks.
func ReadDiffFiles(root *os.Root, rel string) ([]diffFile, error) {
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDiffBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDiffBytes {
		return nil, fmt.Errorf("the diff is larger than %d bytes", maxDiffBytes)
	}
	return ParseUnifiedDiff(b)
}

// ParseUnifiedDiff lists the file blocks of a unified diff (`--- a/x`, `+++ b/x`,
// `@@ … @@` hunks; git's "a/" and "b/" prefixes stripped). It returns an error when
// there is no file block, or a block has no hunk that adds or removes a line (ADR 0003
// §2: hunks that change at least one line).
func ParseUnifiedDiff(b []byte) ([]diffFile, error) {
	var files []diffFile
	var cur *diffFile
	var minus string
	inHunk := false
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "--- "):
			minus, inHunk = diffPath(line[4:]), false
		case strings.HasPrefix(line, "+++ ") && !inHunk:
			p := diffPath(line[4:])
			if p == "/dev/null" {
				p = minus
			}
			files = append(files, diffFile{Path: p})
			cur = &files[len(files)-1]
		case strings.HasPrefix(line, "@@ "):
			if cur == nil {
				return nil, errors.New("a hunk before any file header")
			}
			inHunk = true
		case inHunk && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")):
			cur.changes = true
		case strings.HasPrefix(line, "diff "):
			inHunk = false
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no file in the diff (expected `--- a/PATH`, `+++ b/PATH` and `@@` hunks)")
	}
	for _, f := range files {
		if !f.changes {
			return nil, fmt.Errorf("%s has no hunk that adds or removes a line", f.Path)
		}
	}
	return files, nil
}

func diffPath(s string) string {
	s, _, _ = strings.Cut(s, "\t")
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return s
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		s = s[2:]
	}
	return path.Clean(s)
}

// Covers reports whether the diff touches every pointer's file.
func Covers(files []diffFile, ptrs []fold.Pointer) bool {
	for _, p := range ptrs {
		if !slices.ContainsFunc(files, func(f diffFile) bool { return f.Path == p.Path }) {
			return false
		}
	}
	return true
}

// Uncovered lists the pointers the diff does not touch.
func Uncovered(files []diffFile, ptrs []fold.Pointer) []string {
	var out []string
	for _, p := range ptrs {
		if !slices.ContainsFunc(files, func(f diffFile) bool { return f.Path == p.Path }) {
			out = append(out, p.Path)
		}
	}
	return out
}
