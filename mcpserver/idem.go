package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ferryhq/ferry/fsbus"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/ledger"
)

// Idempotency of the MCP writes (docs/design.md §4 "Mutations take an optional
// idempotency key"; §2 "idem"). Two layers:
//
//   - The ledger decides. fsbus writes the key into the entry (idem) with the hash of
//     the call's arguments (data.args): a call repeating a key this agent already used
//     writes nothing, and the same key with other arguments is a conflict — after a
//     restart, and on any machine, because the key lives in the entry.
//   - The reply journal returns the first result. A replay must answer what the first
//     call answered, not today's state (the order may have moved on since), so each
//     keyed call's result is kept, machine-local, in
//     <cache>/channels/<project>/mcp-replies/<agent>/<sha256(key)>.json as
//     {"tool", "args" (sha256 of the RFC 8785 form of the arguments minus key),
//     "result"}. A replay with the same arguments returns those bytes; with other
//     arguments it is a conflict before anything is called. Where the journal has no
//     record (another machine, a purged cache, a crash between the write and the
//     record) the call goes to fsbus, which replays by the ledger — same object, no
//     second write — and that answer is recorded as the first from then on.

// keyedActions are, per core tool, the actions that write and so replay by key.
var keyedActions = map[string][]string{
	"ferry_orders":    {"new", "claim", "progress", "submit", "review"},
	"ferry_talk":      {"post", "send"},
	"ferry_primary":   {"standby", "takeover", "take", "release"},
	"ferry_ask_human": {"raise"},
}

// replyRecord is one journal file.
type replyRecord struct {
	Tool   string          `json:"tool"`
	Args   string          `json:"args"`
	Result json.RawMessage `json:"result"`
}

// idempotent wraps the Call of every tool in keyedActions with the reply journal.
// Keyed calls of one server run one at a time (the channel lock serialises their
// writes anyway).
func (f *Ferry) idempotent(tools []*Tool) []*Tool {
	var mu sync.Mutex
	for _, t := range tools {
		if actions, ok := keyedActions[t.Name]; ok {
			t.Call = f.replaying(&mu, t.Name, actions, t.Call)
		}
	}
	return tools
}

// replaying is call with the reply journal in front of its keyed actions.
func (f *Ferry) replaying(mu *sync.Mutex, tool string, actions []string, call func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		var probe struct {
			Action string `json:"action"`
			Key    string `json:"key"`
		}
		if json.Unmarshal(args, &probe) != nil || probe.Key == "" || !slices.Contains(actions, probe.Action) {
			return call(ctx, args) // not a keyed write: the tool reports bad arguments itself
		}
		digest, err := argsDigest(tool, args)
		if err != nil {
			return call(ctx, args)
		}
		ch, err := f.channel()
		if err != nil {
			return nil, err
		}
		path := replyPath(ch, f.cfg.Agent, probe.Key)
		mu.Lock()
		defer mu.Unlock()
		if rec, ok := f.readReply(path); ok {
			if rec.Tool != tool || rec.Args != digest {
				return nil, errs.Errorf(errs.Conflict, "use a new key for a different call", "idempotency key %q was already used with other arguments", probe.Key)
			}
			return rec.Result, nil
		}
		out, err := call(ctx, args)
		if err != nil {
			return nil, err
		}
		b, err := marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encoding result: %w", err)
		}
		rec, err := marshal(replyRecord{Tool: tool, Args: digest, Result: b})
		if err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o755)
		}
		if err == nil {
			err = fsutil.WriteFile(path, append(rec, '\n'), 0o644)
		}
		if err != nil {
			// The write happened and the ledger holds the key: a replay still writes
			// nothing; it answers from today's state instead of this reply.
			fmt.Fprintf(f.cfg.Log, "mcp: recording the reply of key %q: %v\n", probe.Key, err)
		}
		return json.RawMessage(b), nil
	}
}

// readReply reads a journal record; ok is false when there is none or it is damaged
// (logged: the call then replays through the ledger).
func (f *Ferry) readReply(path string) (replyRecord, bool) {
	var rec replyRecord
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err == nil && (rec.Args == "" || !json.Valid(rec.Result)) {
		err = errors.New("incomplete record")
	}
	if err != nil {
		fmt.Fprintf(f.cfg.Log, "mcp: ignoring reply record %s: %v\n", path, err)
		return rec, false
	}
	return rec, true
}

// replyPath is the journal file of (project, agent, key): the key hashed, so any
// string is a safe file name.
func replyPath(ch *fsbus.Channel, agent, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(ch.Home.StateDir(ch.Project()), "mcp-replies", agent, hex.EncodeToString(sum[:16])+".json")
}

// argsDigest is "sha256:" of the RFC 8785 form of {tool, arguments minus key}: equal
// for the same call however its JSON was spelled.
func argsDigest(tool string, args json.RawMessage) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return "", err
	}
	delete(m, "key")
	c, err := ledger.Canonical(map[string]any{"tool": tool, "args": m})
	if err != nil {
		return "", err
	}
	return ledger.HashBytes(c), nil
}
