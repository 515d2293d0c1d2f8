// Package gitsync carries a channel kept in a git repository (`ferry sync --git`;
// docs/sync.md "git"; docs/design.md §2 rule 1):
//
//	res, err := gitsync.Sync(ctx, root, gitsync.Options{Device: device, DeviceFile: file, Lock: lock})
//
// A channel kept in a git repository travels by commits. Because every file ferry
// writes has one writer on one machine — segments per (writer, device), objects
// written once by their author's device, presence per (writer, device) — two machines'
// commits never touch one file, so a rebase of one onto the other cannot conflict.
// Only human notes under memory/ can, and those are reported, never resolved by guess.
package gitsync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// Options is what Sync needs of the channel besides its folder.
type Options struct {
	// Device is this machine's device id: the segments, presence files and objects
	// that name it are this machine's to commit.
	Device string
	// DeviceFile is the file holding the device id, named in the fix when two
	// machines use one device id.
	DeviceFile string
	// Lock runs fn holding the channel lock, so no ferry write lands while Sync
	// commits or rebases; nil runs fn without a lock.
	Lock func(fn func() error) error
	// Owner is set on a machine holding the master key: a change of channel.toml is
	// its to commit (the first compact rewrites it as format 2, master-signed, there;
	// docs/design.md §3).
	Owner bool
}

// Result is what Sync did.
type Result struct {
	Repo   string `json:"repo"`   // the repository's top-level directory
	Branch string `json:"branch"` // the branch synced
	Remote string `json:"remote"` // its upstream's remote
	// Committed lists the channel files (relative to the channel folder, with "/")
	// this call committed: this machine's segments, objects and presence, new channel
	// files, memory notes changed here. [] when there was nothing to commit.
	Committed []string `json:"committed"`
	Commit    string   `json:"commit,omitempty"` // the commit made, before any rebase
	// Pulled counts the commits brought in from the remote, PulledFiles the files
	// they changed.
	Pulled      int `json:"pulled"`
	PulledFiles int `json:"pulled_files"`
	// Pushed counts the commits pushed; Retried is set when the first push was
	// rejected (another machine pushed meanwhile) and the pull and push were redone.
	Pushed  int  `json:"pushed"`
	Retried bool `json:"retried,omitempty"`
	// LeftAlone lists changed or new files in the channel that are not this machine's
	// to commit (another machine's files changed here, conflict copies, deletions).
	LeftAlone []string `json:"left_alone"`

	lastReject string // git's words for the last rejected push
}

// gitRunner runs the git executable in one directory, without a shell.
type gitRunner struct {
	ctx context.Context
	bin string
	dir string
}

// run runs git args with stdin in (nil: none) and returns its stdout without trailing
// white space, and an error holding the trimmed stderr when git exits non-zero.
func (g *gitRunner) run(in []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(g.ctx, g.bin, args...)
	cmd.Dir = g.dir
	// No prompt may hang a sync (credentials, an editor); messages in English so the
	// few we look at can be recognised.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_MERGE_AUTOEDIT=no", "LC_ALL=C", "LANGUAGE=C")
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		if g.ctx.Err() != nil {
			return "", g.ctx.Err()
		}
		return strings.TrimRight(so.String(), " \r\n"), &gitError{args: args, stderr: strings.TrimSpace(se.String() + "\n" + so.String()), err: err}
	}
	return strings.TrimRight(so.String(), " \r\n"), nil // never the left: status lines start with a space
}

// gitError is a git command that failed.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, lastLines(e.stderr, 3))
}
func (e *gitError) Unwrap() error { return e.err }

// lastLines returns the last n non-empty lines of s, joined by " / ".
func lastLines(s string, n int) string {
	var ls []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " / ")
}

// Sync carries the channel in the folder root through the git repository it lives in
// (`ferry sync --git`): under the channel lock (o.Lock) it commits this machine's new and
// changed files — its own segments (and their torn tails), the objects its writers
// published, its presence files, memory notes changed here, and the channel's own
// files while they are new — and only those; then fetches the branch's upstream,
// rebases onto it (`git pull --rebase`, with --autostash so edits it does not commit
// survive) and pushes. A push rejected because another machine pushed meanwhile is
// retried once after another fetch and rebase. git runs as an executable (no shell),
// never prompting (GIT_TERMINAL_PROMPT=0); the commit skips hooks (--no-verify), since a
// project's pre-commit formatter must never rewrite a file ferry signed.
//
// Errors (each changes nothing in the repository; a commit already made stays, and is
// pushed by the next sync):
//   - not_found: git is not installed;
//   - invalid: the channel is not in a git repository; HEAD is detached; the branch has
//     no upstream (the hint names the git push -u to run); no remote at all; git has no
//     committer identity;
//   - conflict: a rebase or merge is already in progress; the index holds staged
//     changes that are not this machine's channel files; the rebase conflicted — only
//     possible in files two machines edit, the human notes in memory/ — then it is
//     aborted, the local commit and edits are kept, and the message names the files;
//   - retry_needed: fetching or pushing failed (network, credentials, a push rejected
//     twice).
func Sync(ctx context.Context, root string, o Options) (*Result, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, errs.Errorf(errs.NotFound, "install git (https://git-scm.com/downloads), or carry the channel with a sync tool such as Syncthing", "git is not installed: no git executable on PATH")
	}
	g := &gitRunner{ctx: ctx, bin: bin, dir: root}
	s := &syncer{root: root, o: o, blob: blobOf(g)}
	top, err := g.run(nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "run `git init` in it (or in a folder above it), add a remote, commit and `git push -u`; or carry it with a sync tool", "the channel folder %s is not in a git repository", root)
	}
	prefix, err := g.run(nil, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, gitFailed(err)
	}
	res := &Result{Repo: filepath.FromSlash(top), Committed: []string{}, LeftAlone: []string{}}
	if err := g.noOperationInProgress(); err != nil {
		return nil, err
	}
	res.Branch, err = g.run(nil, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		return nil, errs.Errorf(errs.Invalid, "check out a branch (git switch BRANCH), then sync again", "HEAD is detached in %s: there is no branch to commit to and push", top)
	}
	res.Remote, _ = g.run(nil, "config", "--get", "branch."+res.Branch+".remote")
	merge, _ := g.run(nil, "config", "--get", "branch."+res.Branch+".merge")
	if res.Remote == "" || merge == "" {
		remotes, _ := g.run(nil, "remote")
		if remotes == "" {
			return nil, errs.Errorf(errs.Invalid, "git remote add origin URL, then git push -u origin "+res.Branch, "the repository %s has no remote to push to", top)
		}
		first := strings.Fields(remotes)[0]
		return nil, errs.Errorf(errs.Invalid, "set it once: git push -u "+first+" "+res.Branch, "branch %s has no upstream", res.Branch)
	}

	var commitErr error
	err = s.lock(func() error {
		commitErr = s.commit(g, prefix, res)
		return nil
	})
	if err == nil {
		err = commitErr
	}
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if err := s.pull(g, res); err != nil {
			return res, err
		}
		pushed, rejected, err := g.push(res, merge)
		if err != nil {
			return res, err
		}
		res.Pushed = pushed
		if !rejected {
			return res, nil
		}
		if attempt == 1 {
			return res, errs.Errorf(errs.RetryNeeded, "another machine keeps pushing to "+res.Remote+": run ferry sync --git again in a moment (the commit stays local until then)", "the push to %s was rejected twice: %s", res.Remote, res.lastReject)
		}
		res.Retried = true
	}
}

// syncer is one Sync of the channel folder root.
type syncer struct {
	root string
	o    Options
	// blob returns the git blob id of rev:./rel, or of the file rel in the work tree
	// with rev "" ("" when there is none); nil in tests without git.
	blob func(rev, rel string) string
}

// blobOf is syncer.blob over g.
func blobOf(g *gitRunner) func(rev, rel string) string {
	return func(rev, rel string) string {
		var id string
		var err error
		if rev == "" {
			id, err = g.run(nil, "hash-object", "--", rel)
		} else {
			id, err = g.run(nil, "rev-parse", "-q", "--verify", rev+":./"+rel)
		}
		if err != nil {
			return ""
		}
		return id
	}
}

// sameBlob reports whether the work tree's file a holds the bytes HEAD holds at b.
func (s *syncer) sameBlob(a, b string) bool {
	if s.blob == nil {
		return false
	}
	id := s.blob("", a)
	return id != "" && id == s.blob("HEAD", b)
}

// lock runs fn under o.Lock (directly when it is nil).
func (s *syncer) lock(fn func() error) error {
	if s.o.Lock == nil {
		return fn()
	}
	return s.o.Lock(fn)
}

// gitFailed turns an unexpected git failure into an internal error naming it.
func gitFailed(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errs.Errorf(errs.RetryNeeded, "run ferry sync --git again", "sync interrupted: %v", err)
	}
	return &errs.Error{Category: errs.Internal, Err: err, Message: err.Error(), Hint: "run the git command by hand to see why; the repository is as it was"}
}

// noOperationInProgress refuses to start while a rebase, merge or cherry-pick is under
// way: the user's, or one a crashed sync left.
func (g *gitRunner) noOperationInProgress() error {
	for _, name := range []string{"rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD"} {
		p, err := g.run(nil, "rev-parse", "--git-path", name)
		if err != nil {
			return gitFailed(err)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(g.dir, p)
		}
		if _, err := os.Stat(p); err == nil {
			return errs.Errorf(errs.Conflict, "finish it (git rebase --continue, git merge --continue) or abort it (--abort), then sync again",
				"a git %s is in progress in this repository", strings.TrimSuffix(strings.ToLower(strings.Split(name, "_")[0]), "-merge"))
		}
	}
	return nil
}

// statusEntry is one line of git status: index and worktree codes, channel-relative
// path (with "/"), and whether it is inside the channel.
type statusEntry struct {
	x, y byte
	path string
}

// commit stages and commits this machine's files (see Sync). Caller holds the
// channel lock.
func (s *syncer) commit(g *gitRunner, prefix string, res *Result) error {
	var ours, foreignStaged []string
	// Staged anywhere in the repository (the channel may sit inside a project's repo):
	// a commit takes the whole index, so what is staged outside the channel is refused.
	staged, err := g.run(nil, "diff", "--cached", "--name-only", "-z")
	if err != nil {
		return gitFailed(err)
	}
	for _, p := range strings.Split(staged, "\x00") {
		if p != "" && !strings.HasPrefix(p, prefix) {
			foreignStaged = append(foreignStaged, p)
		}
	}
	// The channel's own changes: its subtree only, so a big repository around it is
	// not walked for untracked files.
	out, err := g.run(nil, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--", ".")
	if err != nil {
		return gitFailed(err)
	}
	for _, rec := range strings.Split(out, "\x00") {
		if len(rec) < 4 {
			continue
		}
		e := statusEntry{x: rec[0], y: rec[1], path: rec[3:]}
		staged := e.x != ' ' && e.x != '?'
		rel, inside := strings.CutPrefix(e.path, prefix)
		if !inside {
			continue
		}
		switch s.owns(rel, e) {
		case ownMine:
			ours = append(ours, rel)
		case ownSkip:
		default:
			res.LeftAlone = append(res.LeftAlone, rel)
			if staged {
				foreignStaged = append(foreignStaged, e.path)
			}
		}
	}
	if len(foreignStaged) > 0 {
		slices.Sort(foreignStaged)
		return errs.Errorf(errs.Conflict, "commit them yourself, or unstage them (git restore --staged PATH…), then sync again",
			"the git index holds staged changes that are not this machine's channel files: %s", strings.Join(foreignStaged, ", "))
	}
	if len(ours) == 0 {
		return nil
	}
	slices.Sort(ours)
	spec := []byte(strings.Join(ours, "\x00") + "\x00")
	if _, err := g.run(spec, "--literal-pathspecs", "add", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
		return gitFailed(err)
	}
	msg := fmt.Sprintf("ferry sync: %d file(s) from device %s\n\n%s\n", len(ours), s.o.Device, strings.Join(ours, "\n"))
	if _, err := g.run(nil, "commit", "-q", "--no-verify", "-m", msg); err != nil {
		_, _ = g.run(spec, "--literal-pathspecs", "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul")
		var ge *gitError
		if errors.As(err, &ge) && (strings.Contains(ge.stderr, "tell me who you are") || strings.Contains(ge.stderr, "empty ident") || strings.Contains(ge.stderr, "user.email")) {
			return errs.Errorf(errs.Invalid, `git config user.name "Your Name" && git config user.email you@example.com (add --global for every repository)`, "git has no committer identity on this machine")
		}
		return gitFailed(err)
	}
	res.Commit, _ = g.run(nil, "rev-parse", "HEAD")
	res.Committed = ours
	return nil
}

// Ownership of a changed path (owns).
const (
	ownOther = iota // not this machine's to commit: left alone, reported
	ownMine         // this machine wrote it: committed
	ownSkip         // machine-local or in progress: ignored silently
)

// owns decides whether the changed channel file rel (status e) is this machine's
// to commit: the one-writer rule of docs/design.md §2 rule 1, applied by path and, for
// objects, by the device inside the file (objects are written once by their author's
// device).
func (s *syncer) owns(rel string, e statusEntry) int {
	base := path.Base(rel)
	untracked := e.x == '?'
	switch {
	case rel == "channel.toml" && e.x != 'D' && e.y != 'D' && !untracked && s.o.Owner:
		return ownMine // the first compact's rewrite as format 2, on the owner's machine
	case rel == "channel.toml" || rel == "PROTOCOL.md" || rel == ".gitattributes":
		if untracked {
			return ownMine // written once, at init, on this machine
		}
		return ownOther
	case rel == ".stignore":
		return ownSkip // machine-local: Syncthing does not sync it either
	case fsutil.IsTempName(base) && !strings.Contains(base, ".torn-"):
		return ownSkip // a write in progress
	}
	parts := strings.Split(rel, "/")
	if e.x == 'D' || e.y == 'D' {
		// ferry deletes a channel file only when it moved whole to archive/
		// (docs/format.md §21 "Moving frozen files"): the deletion is committed with
		// the archive copy holding the committed bytes.
		if parts[0] == "ledger" && len(parts) == 3 && isChainFile(base) && s.sameBlob("archive/"+rel, rel) {
			return ownMine
		}
		// The owner takes archive/ out of the folder (`ferry archive move DIR`, §21
		// "Taking the archive out"): its deletions there are the owner's to commit.
		if parts[0] == "archive" && len(parts) == 4 && parts[1] == "ledger" && isChainFile(base) && s.o.Owner {
			return ownMine
		}
		return ownOther
	}
	switch {
	case parts[0] == "archive" && len(parts) == 4 && parts[1] == "ledger" && untracked && isChainFile(base):
		// A moved file: this machine's own chain, or the bytes HEAD holds under its
		// live name (any machine may commit the same bytes under the same name).
		if d, _, _ := ledger.ParseSegmentName(base); d == s.o.Device || s.sameBlob(rel, strings.Join(parts[1:], "/")) {
			return ownMine
		}
	case parts[0] == "ledger" && len(parts) == 3:
		if d, _, ok := ledger.ParseSegmentName(base); ok && d == s.o.Device {
			return ownMine // its segment, or one of its epoch files (docs/format.md §21)
		}
		if strings.HasPrefix(base, s.o.Device+".") && strings.Contains(base, ".torn-") {
			return ownMine // a torn tail it moved aside: <device>[.<epoch>].torn-<n>
		}
	case parts[0] == "presence" && len(parts) == 2:
		if f := strings.Split(strings.TrimSuffix(base, ".json"), "."); len(f) == 2 && f[1] == s.o.Device && strings.HasSuffix(base, ".json") {
			return ownMine
		}
	case parts[0] == "checkpoints" && len(parts) == 3 && untracked:
		// Named by their hash (docs/format.md §20): bytes that hash to the name are the
		// same on every machine holding them, so any machine may commit them.
		if sum := s.fileHash(rel); parts[1] == "chunks" && sum != "" && base == sum+".json" {
			return ownMine
		}
		if _, prefix, ok := strings.Cut(parts[1], "-"); ok && base == "head.json" && len(prefix) == 16 {
			if sum := s.fileHash(rel); sum != "" && strings.HasPrefix(sum, prefix) {
				return ownMine
			}
		}
	case parts[0] == "memory" && strings.HasSuffix(strings.ToLower(base), ".md"):
		return ownMine // a human's note, written here
	case (parts[0] == "orders" || parts[0] == "messages" || parts[0] == "asks" || parts[0] == "results") && len(parts) == 2,
		parts[0] == "handins" && len(parts) == 3:
		if untracked && strings.HasSuffix(base, ".json") && s.objectDevice(rel) == s.o.Device {
			return ownMine
		}
	}
	return ownOther
}

// isChainFile reports whether base names one of a chain's own files (docs/format.md §21
// "Names").
func isChainFile(base string) bool {
	_, _, ok := ledger.ParseSegmentName(base)
	return ok
}

// fileHash returns the lowercase hex sha256 of the file rel ("" when it cannot be read).
func (s *syncer) fileHash(rel string) string {
	raw, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(rel)))
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// objectDevice returns the device named inside the object file rel ("" when it does
// not parse).
func (s *syncer) objectDevice(rel string) string {
	raw, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(rel)))
	if err != nil {
		return ""
	}
	var env struct {
		Device string `json:"device"`
	}
	if json.Unmarshal(raw, &env) != nil {
		return ""
	}
	return env.Device
}

// pull fetches the upstream and rebases onto it (what `git pull --rebase
// --autostash` does), holding the channel lock during the rebase so no ferry write
// lands while files are being checked out. A conflict aborts the rebase: the local
// commit and edits are kept.
func (s *syncer) pull(g *gitRunner, res *Result) error {
	if _, err := g.run(nil, "fetch", "-q", res.Remote); err != nil {
		var ge *gitError
		if errors.As(err, &ge) {
			return errs.Errorf(errs.RetryNeeded, "check the network and the remote (git remote -v, git fetch "+res.Remote+"); what was committed stays local until the next sync",
				"fetching from %s failed: %s", res.Remote, lastLines(ge.stderr, 2))
		}
		return gitFailed(err)
	}
	up, err := g.run(nil, "rev-parse", "-q", "--verify", "@{upstream}")
	if err != nil || up == "" {
		return nil // the remote branch does not exist yet: the push creates it
	}
	n, err := g.run(nil, "rev-list", "--count", "HEAD..@{upstream}")
	if err != nil {
		return gitFailed(err)
	}
	incoming, _ := strconv.Atoi(n)
	if incoming == 0 {
		return nil
	}
	files, _ := g.run(nil, "diff", "--name-only", "HEAD...@{upstream}")
	var rebaseErr error
	err = s.lock(func() error {
		if _, err := g.run(nil, "rebase", "-q", "--autostash", "@{upstream}"); err != nil {
			rebaseErr = s.rebaseFailed(g, err)
		}
		return nil
	})
	if err == nil {
		err = rebaseErr
	}
	if err != nil {
		return err
	}
	res.Pulled += incoming
	if files != "" {
		res.PulledFiles += len(strings.Split(files, "\n"))
	}
	return nil
}

// rebaseFailed aborts a failed rebase (so the branch, the local commit and the edits
// are as they were) and names the conflicting files.
func (s *syncer) rebaseFailed(g *gitRunner, err error) error {
	conflicted, _ := g.run(nil, "diff", "--name-only", "--diff-filter=U")
	_, abortErr := g.run(nil, "rebase", "--abort")
	if abortErr != nil && conflicted == "" {
		return gitFailed(err)
	}
	if conflicted == "" {
		var ge *gitError
		msg := err.Error()
		if errors.As(err, &ge) {
			msg = lastLines(ge.stderr, 3)
		}
		return errs.Errorf(errs.Conflict, "run git pull --rebase by hand to see why; nothing was lost: the rebase was aborted and the local commit kept",
			"rebasing onto the upstream failed: %s", msg)
	}
	files := strings.Fields(conflicted)
	prefix, _ := g.run(nil, "rev-parse", "--show-prefix")
	var owned []string // files with one writer on one machine: segments, presence, objects
	for _, f := range files {
		rel, inside := strings.CutPrefix(f, prefix)
		if inside && !strings.HasPrefix(rel, "memory/") {
			owned = append(owned, f)
		}
	}
	if len(owned) > 0 {
		return s.clonedDeviceConflict(owned, prefix)
	}
	return errs.Errorf(errs.Conflict,
		"nothing was lost: the rebase was aborted and your commit and edits are kept. Merge by hand: git pull --rebase, edit each file to keep both sides, git add it, git rebase --continue, then ferry sync --git again (one memory note per author avoids this)",
		"pulling from the upstream conflicts in %s (edited on two machines)", strings.Join(files, ", "))
}

// clonedDeviceConflict is the error of a rebase that conflicted in files only one
// machine ever writes — segments ledger/<writer>/<device>.jsonl, presence and objects
// (docs/design.md §2 rule 1). They can only conflict when two machines use one device id (a
// home or config dir copied to a second machine, a restored backup): both appended to
// the same segment. The rebase has been aborted. The fix gives one machine a new
// device id (ferry makes one when the device file is missing) and keeps that
// machine's records as a copy readers merge by content; segments are never edited by
// hand.
func (s *syncer) clonedDeviceConflict(files []string, prefix string) error {
	seg := files[0]
	for _, f := range files {
		if strings.HasPrefix(strings.TrimPrefix(f, prefix), "ledger/") && strings.HasSuffix(f, ".jsonl") {
			seg = f
			break
		}
	}
	keep := strings.TrimSuffix(seg, ".jsonl") + ".clone.jsonl"
	devFile := s.o.DeviceFile
	return errs.Errorf(errs.Conflict,
		fmt.Sprintf("nothing was lost: the rebase was aborted and your commit is kept; never edit a segment by hand. On ONE of the two machines, in the repository's top folder: "+
			"(1) delete %s (ferry makes a new device id on its next run); "+
			"(2) git merge @{upstream}; "+
			"(3) git show HEAD:%s > %s (this machine's records, kept as a copy ferry merges by content); "+
			"(4) git checkout --theirs -- %s (the other machine's version stays the segment; repeat for each file named); "+
			"(5) git add -A %s && git commit --no-edit; "+
			"(6) ferry sync --git, then ferry doctor (it lists the fork and which records count)",
			devFile, seg, keep, seg, path.Dir(seg)),
		"pulling from the upstream conflicts in %s, files only one machine ever writes: two machines use one device id (%s), as when a ferry home or config dir is copied to another machine",
		strings.Join(files, ", "), s.o.Device)
}

// push pushes HEAD to the upstream branch merge. It reports the commits pushed, and
// rejected=true when the remote moved on meanwhile (fetch first).
func (g *gitRunner) push(res *Result, merge string) (pushed int, rejected bool, err error) {
	ahead := "0"
	if up, err := g.run(nil, "rev-parse", "-q", "--verify", "@{upstream}"); err == nil && up != "" {
		ahead, err = g.run(nil, "rev-list", "--count", "@{upstream}..HEAD")
		if err != nil {
			return 0, false, gitFailed(err)
		}
	} else {
		ahead, err = g.run(nil, "rev-list", "--count", "HEAD")
		if err != nil {
			return 0, false, nil // an unborn branch: nothing to push
		}
	}
	n, _ := strconv.Atoi(ahead)
	if n == 0 {
		return 0, false, nil
	}
	if _, err := g.run(nil, "push", "-q", res.Remote, "HEAD:"+merge); err != nil {
		var ge *gitError
		if errors.As(err, &ge) {
			// The remote moved on: refused as not a fast-forward, or — when another push
			// landed while this one was being received — its ref update lost the race.
			for _, race := range []string{"[rejected]", "fetch first", "non-fast-forward", "failed to update ref", "cannot lock ref"} {
				if strings.Contains(ge.stderr, race) {
					res.lastReject = lastLines(ge.stderr, 2)
					return 0, true, nil
				}
			}
			return 0, false, errs.Errorf(errs.RetryNeeded, "check the network, the remote and your credentials (git push "+res.Remote+"); the commit stays local until the next sync",
				"pushing to %s failed: %s", res.Remote, lastLines(ge.stderr, 2))
		}
		return 0, false, gitFailed(err)
	}
	return n, false, nil // git moved the remote-tracking ref with the push
}
