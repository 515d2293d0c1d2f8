// Package pause is the pause switch (docs/format.md §18): a machine-local,
// never-synced file under the config dir that stops this machine acting on its own —
// for every channel
// (ConfigDir/paused.json) or for one project (ConfigDir/paused/<project>.json). While
// paused, this machine refuses primary.take (PrimaryTake) and `ferry update apply`
// (ApplyUpdate, ADR 0005), `ferry run` and `ferry daemon` claim no new orders (a file
// already running finishes), and `ferry mcp serve` answers every tool call `paused`
// except the read-only status calls (docs/mcp.md). Only `ferry resume`, on this
// machine's command line, lifts it: no MCP tool unpauses. The owner's and agents'
// entries from other machines still arrive and fold as usual.
package pause

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
)

// MaxReason is the longest pause reason, in characters.
const MaxReason = 200

// State is one pause switch.
type State struct {
	// Project is the paused project id, "" for the whole machine.
	Project string    `json:"project,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

func (p *State) scope() string {
	if p.Project == "" {
		return "this machine"
	}
	return "project " + p.Project + " on this machine"
}

// File is the switch file of project ("" = machine-wide) in the config dir dir.
func File(dir, project string) string {
	if project == "" {
		return filepath.Join(dir, "paused.json")
	}
	return filepath.Join(dir, "paused", project+".json")
}

// Set sets the switch for project ("" = every channel on this machine) in the config
// dir dir, with a one-line reason the caller has checked; setting it again replaces
// the reason. Errors: internal when the file cannot be written.
func Set(dir, project, reason string, now time.Time) (*State, error) {
	p := &State{Project: project, Reason: reason, At: now.UTC().Truncate(time.Millisecond)}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	p0 := File(dir, project)
	if err := os.MkdirAll(filepath.Dir(p0), 0o700); err != nil {
		return nil, fmt.Errorf("making %s: %w", filepath.Dir(p0), err)
	}
	if err := fsutil.WriteFile(p0, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// Resume lifts pauses: with project "" every switch on this machine (the machine-wide
// one and each project's), else that project's only. It returns the switches it lifted
// (none when nothing was paused: not an error). Errors: invalid for a bad project
// name; internal when a file cannot be removed.
func Resume(dir, project string) ([]State, error) {
	if project != "" && !fold.ValidName(project) {
		return nil, errs.Errorf(errs.Invalid, "project ids use a-z, 0-9 and '-'", "bad project id %q", project)
	}
	var lift []State
	if project != "" {
		if p := at(File(dir, project), project); p != nil {
			lift = append(lift, *p)
		}
	} else {
		lift = List(dir)
	}
	for _, p := range lift {
		file := File(dir, p.Project)
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if fi, serr := os.Stat(file); serr == nil && fi.IsDir() {
				// os.Remove takes an empty directory; one with files is not ferry's to delete.
				return nil, errs.Errorf(errs.Invalid, "look inside it, move its files away and remove it, then run `ferry resume` again",
					"the pause switch %s is a directory with files in it, not a pause file: it pauses this machine until it is removed", file)
			}
			return nil, fmt.Errorf("removing the pause switch: %w", err)
		}
	}
	return lift, nil
}

// List lists every switch set in the config dir dir, the machine-wide one first.
func List(dir string) []State {
	var out []State
	if p := at(File(dir, ""), ""); p != nil {
		out = append(out, *p)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "paused"))
	var names []string
	for _, e := range ents {
		// A directory of that name pauses too (at fails safe): list it.
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && fold.ValidName(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if p := at(File(dir, n), n); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// Of returns the switch in the config dir dir that pauses project — the machine-wide
// one first — or nil when it runs.
func Of(dir, project string) *State {
	if p := at(File(dir, ""), ""); p != nil {
		return p
	}
	if project == "" || !fold.ValidName(project) {
		return nil
	}
	return at(File(dir, project), project)
}

// at reads one switch file: nil when it does not exist. A file that exists but cannot
// be read or decoded still pauses (fail safe), with the damage as its reason.
func at(file, project string) *State {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var p State
	if fi, serr := os.Stat(file); serr == nil && fi.IsDir() {
		return &State{Project: project, At: fi.ModTime().UTC().Truncate(time.Millisecond),
			Reason: "the pause switch " + file + " is a directory, not a pause file; `ferry resume` removes it when empty"}
	}
	if err != nil || json.Unmarshal(b, &p) != nil || !utf8.ValidString(p.Reason) {
		return &State{Project: project, Reason: "the pause file " + file + " is damaged; `ferry resume` removes it"}
	}
	p.Project = project
	if contract.HasControl(p.Reason, false) {
		p.Reason = "(reason holds control characters)"
	}
	return &p
}

// Check returns a paused error when project (or the machine) is paused in the config
// dir dir, naming the scope, the reason and `ferry resume`; nil otherwise. doing says
// what was refused ("primary take").
func Check(dir, project, doing string) error {
	p := Of(dir, project)
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
