package fsbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/fsbus/contract"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/fsutil"
	"github.com/ferryhq/ferry/internal/secretguard"
)

// The pause switch (docs/format.md §18): a machine-local, never-synced file under
// Home.ConfigDir that stops this machine acting on its own — for every channel
// (ConfigDir/paused.json) or for one project (ConfigDir/paused/<project>.json). While
// paused, this machine refuses primary.take (PrimaryTake) and `ferry update apply`
// (ApplyUpdate, ADR 0005), `ferry run` and `ferry daemon` claim no new orders (a file
// already running finishes), and `ferry mcp serve` answers every tool call `paused`
// except the read-only status calls (docs/mcp.md). Only `ferry resume`, on this
// machine's command line, lifts it: no MCP tool unpauses. The owner's and agents'
// entries from other machines still arrive and fold as usual.

// maxPauseReason is the longest pause reason, in characters.
const maxPauseReason = 200

// PauseState is one pause switch.
type PauseState struct {
	// Project is the paused project id, "" for the whole machine.
	Project string    `json:"project,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

func (p *PauseState) scope() string {
	if p.Project == "" {
		return "this machine"
	}
	return "project " + p.Project + " on this machine"
}

// pausePath is the switch file of project ("" = machine-wide).
func (h *Home) pausePath(project string) string {
	if project == "" {
		return filepath.Join(h.ConfigDir, "paused.json")
	}
	return filepath.Join(h.ConfigDir, "paused", project+".json")
}

// Pause sets the switch for project ("" = every channel on this machine) with an
// optional one-line reason; pausing again replaces the reason. Errors: invalid for a
// bad project name or a reason that is not one line of at most MaxPauseReason
// characters (or looks like a credential); internal when the file cannot be written.
func (h *Home) Pause(project, reason string, now time.Time) (*PauseState, error) {
	reason = strings.TrimSpace(reason)
	if project != "" && !fold.ValidName(project) {
		return nil, errs.Errorf(errs.Invalid, "project ids use a-z, 0-9 and '-'", "bad project id %q", project)
	}
	if reason != "" {
		if err := checkShortLine("pause reason", reason, maxPauseReason); err != nil {
			return nil, err
		}
		if err := secretguard.Check("pause reason", reason); err != nil {
			return nil, err
		}
	}
	p := &PauseState{Project: project, Reason: reason, At: now.UTC().Truncate(time.Millisecond)}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	path := h.pausePath(project)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("making %s: %w", filepath.Dir(path), err)
	}
	if err := fsutil.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// Resume lifts pauses: with project "" every switch on this machine (the machine-wide
// one and each project's), else that project's only. It returns the switches it lifted
// (none when nothing was paused: not an error). Errors: invalid for a bad project
// name; internal when a file cannot be removed.
func (h *Home) Resume(project string) ([]PauseState, error) {
	if project != "" && !fold.ValidName(project) {
		return nil, errs.Errorf(errs.Invalid, "project ids use a-z, 0-9 and '-'", "bad project id %q", project)
	}
	var lift []PauseState
	if project != "" {
		if p := h.pauseAt(h.pausePath(project), project); p != nil {
			lift = append(lift, *p)
		}
	} else {
		lift = h.Pauses()
	}
	for _, p := range lift {
		path := h.pausePath(p.Project)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
				// os.Remove takes an empty directory; one with files is not ferry's to delete.
				return nil, errs.Errorf(errs.Invalid, "look inside it, move its files away and remove it, then run `ferry resume` again",
					"the pause switch %s is a directory with files in it, not a pause file: it pauses this machine until it is removed", path)
			}
			return nil, fmt.Errorf("removing the pause switch: %w", err)
		}
	}
	return lift, nil
}

// Pauses lists every switch set on this machine, the machine-wide one first.
func (h *Home) Pauses() []PauseState {
	var out []PauseState
	if p := h.pauseAt(h.pausePath(""), ""); p != nil {
		out = append(out, *p)
	}
	ents, _ := os.ReadDir(filepath.Join(h.ConfigDir, "paused"))
	var names []string
	for _, e := range ents {
		// A directory of that name pauses too (pauseAt fails safe): list it.
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && fold.ValidName(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if p := h.pauseAt(h.pausePath(n), n); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// Paused returns the switch that pauses project on this machine — the machine-wide one
// first — or nil when it runs.
func (h *Home) Paused(project string) *PauseState {
	if p := h.pauseAt(h.pausePath(""), ""); p != nil {
		return p
	}
	if project == "" || !fold.ValidName(project) {
		return nil
	}
	return h.pauseAt(h.pausePath(project), project)
}

// pauseAt reads one switch file: nil when it does not exist. A file that exists but
// cannot be read or decoded still pauses (fail safe), with the damage as its reason.
func (h *Home) pauseAt(path, project string) *PauseState {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var p PauseState
	if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
		return &PauseState{Project: project, At: fi.ModTime().UTC().Truncate(time.Millisecond),
			Reason: "the pause switch " + path + " is a directory, not a pause file; `ferry resume` removes it when empty"}
	}
	if err != nil || json.Unmarshal(b, &p) != nil || !utf8.ValidString(p.Reason) {
		return &PauseState{Project: project, Reason: "the pause file " + path + " is damaged; `ferry resume` removes it"}
	}
	p.Project = project
	if contract.HasControl(p.Reason, false) {
		p.Reason = "(reason holds control characters)"
	}
	return &p
}

// CheckPaused returns a paused error when project (or the machine) is paused, naming
// the scope, the reason and `ferry resume`; nil otherwise. doing says what was refused
// ("primary take").
func (h *Home) CheckPaused(project, doing string) error {
	p := h.Paused(project)
	if p == nil {
		return nil
	}
	why := ""
	if p.Reason != "" {
		why = " (" + p.Reason + ")"
	}
	hint := "the owner runs `ferry resume` on this machine to lift it"
	if p.Project != "" {
		hint = "the owner runs `ferry resume --project " + p.Project + "` (or `ferry resume`) on this machine to lift it"
	}
	return errs.Errorf(errs.Paused, hint, "%s is paused since %s%s: %s refused", p.scope(), p.At.Format("2006-01-02 15:04 UTC"), why, doing)
}
