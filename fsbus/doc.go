// Package fsbus is the channel on disk: its layout, machine-local keys and config,
// identity and grants, signed objects, the state folded from the ledger, and every
// operation the CLI and the MCP server share. Each operation is one function here, so
// permission checks, signing and entries are identical whichever surface calls it
// (docs/design.md §3). docs/format.md is the normative description of the format; this comment
// is a map of the code.
//
// # Layout
//
// A channel is a directory (usually inside a synced folder):
//
//	channel.toml                     format (1, or 2 once compacted), project, title, master key, policy; signed
//	PROTOCOL.md, .gitattributes      written once by Init
//	.stignore                        machine-local (Syncthing does not sync it)
//	ledger/<writer>/<device>.jsonl   append-only segments (package ledger)
//	orders/<id>.json                 OrderObject, signed by its author, written once
//	results/<id>.json                ResultObject of a submit
//	messages/<id>.json               MessageObject (to, body), signed by its sender; msg.post names it
//	asks/<id>.json                   AskObject (title, recommendation, reasoning); ask.raise names it
//	handins/<writer>/<id>.json       HandinObject (ref, note); handin.add names it
//	presence/<writer>.<device>.json  PresenceObject, rewritten by its one writer (heartbeat)
//	memory/                          human notes (searched by ferry_search)
//	releases/                        binaries a release.approve names (update.go)
//	checkpoints/                     the owner's checkpoints: heads and chunks (owner_checkpoint.go)
//
// Chains with a life cycle — an order, an ask, the primary role, an agent's grants —
// resolve by basis in chain.go; decisions and messages have no chain.
//
// Machine-local state lives in a Home: keys (0600), pinned master keys, the project →
// channel map, the device id, each segment's high-water mark and the MCP session lease
// (sessionlease.go) under ConfigDir; lock files, the arrival log, the local index
// (index.go: what Load has read and verified, so it reads only new bytes), the fold
// checkpoint and the presence sightings under CacheDir. FERRY_HOME moves both. Every write of them goes through internal/fsutil;
// a file whose loss breaks a promise fails the command when it cannot be written, a
// cache warns once (Home.Warn; docs/format.md §18).
//
// # Keys and the trust root
//
// keystore.go holds a key plain (<name>.key) or locked with a passphrase
// (<name>.key.locked, age scrypt, its public key in a plain first line); `ferry key
// unlock` opens a locked key into ConfigDir/unlocked/<project>/<name>.key with an expiry,
// and a session with a locked key reads but answers locked on every write. Exports are
// the key file age-encrypted to a passphrase. rotation.go resolves the master.rotate
// chain from channel.toml's key: Fold verifies each master entry under the key the
// chain binds to its (device, seq), and the machine's pin follows the chain
// (docs/adr/0008-master-rotation.md).
//
// # Updates and search
//
// A release.approve (update_fold.go) is the master's signature on a version and, per
// platform, the sha256 of a binary under releases/; View.Releases folds the counted
// ones, View.CheckUpdate compares them with the running version (SemVer precedence) and
// Session.ApplyUpdate copies the approved file through os.Root beside the binary,
// checks its sha256 and renames it into place. Channel.Search (search.go) is the one
// matcher of `ferry search` and the MCP tool ferry_search.
//
// # Unattended runs
//
// Package fsbus/runner claims ready orders and runs an executable on each, keeps the
// run journal, the daemon lease and the job queue for heavy orders, and settles an
// agent's dead runs and orphaned run claims at start-up with signed releases. runs.go
// keeps the machine-local run registry it writes (a record and a flock per running
// run), which presence files read. docs/runs.md describes the rules.
//
// # Writing
//
// Every write goes through Session.write: under the machine-local channel flock it
// loads a fresh View (ledger.Read → Fold → arrival log), lets the operation check the
// move with the very state machine the fold uses, publishes any object by rename, then
// appends one entry to the writer's own segment. The entry names the head of the
// thing's chain in data.basis, which makes it a compare-and-set: on one machine exactly
// one of N racing processes wins; across machines the chain branches and Fold resolves
// it (furthest stage, then lower hash) the same way everywhere. A write never goes
// through a symbolic link below the channel root (links.go).
//
// # Folding
//
// Fold is a pure function of the entries and the object files they name; it never
// reads a clock. It verifies every entry against the key the writer's covering grant
// binds (grants apply by per-segment sequence bounds) and its level, then builds agents
// and orders. A claim beyond its writer's scoped grant counts for nothing (scope.go).
// Entries that count for nothing are listed in State.Ignored; branched chains are
// listed as contests naming the winner and everyone involved. Channel.Verify (and
// package fsbus/doctor, which starts from its findings) lists every kind of forgery
// and tampering with a fix (forgery.go).
// What is left to this machine's clock — a holder's liveness, an order's windows — is
// measured from sightings on the OS boot clock, never the wall clock alone, so a
// wall-clock step makes no live holder silent (clock.go, ADR 0013).
//
// # Watching and carrying
//
// Package watch (fsbus/watch) turns change into hints: fsnotify on the channel's directories (never
// on files), debounced, temp names of every sync tool ignored
// (internal/fsutil.IsTempName), with a rescan on overflow and on a timer, and polling
// alone where events do not arrive (FERRY_WATCH=poll). WaitFor (MCP long-poll) and Follow (`ferry watch`, `ferry talk
// read --follow`) reload on each hint and decide for themselves what is new.
// Channel.SyncGit carries a channel kept in a git repository: it commits only the files
// this machine wrote, rebases onto the upstream and pushes; one writer per file means
// no rebase conflict in anything ferry writes. Every rename goes through
// internal/fsutil.Rename, retried on Windows on sharing violations; ferry locks only
// its own lock files in the cache dir, never a data file.
//
// # Contracts
//
// An order may carry a Contract (contract.go): file pointers fingerprinted at
// dispatch in the author's workspace (pointer.go: os.Root, sensitive names refused,
// sha256 with CRLF read as LF), a result schema, a diff, windows and run hints. The
// files are compared on the machine that acts — Claim refuses a differing checkout
// locally with stale and writes nothing; Submit records refusals as progress
// entries the fold counts, then a submit with an outcome (pointer_stale,
// validation_failed); MarkStale is the author's order.stale. Reading files is never
// part of the fold.
package fsbus
