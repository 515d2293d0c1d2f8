package fsbus

import (
	"strings"
	"time"

	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/pause"
	"github.com/ferryhq/ferry/internal/errs"
	"github.com/ferryhq/ferry/internal/secretguard"
)

// Pause sets the pause switch (fsbus/pause) for project ("" = every channel on this
// machine) with an optional one-line reason; pausing again replaces the reason.
// Errors: invalid for a bad project name or a reason that is not one line of at most
// pause.MaxReason characters (or looks like a credential); internal when the file
// cannot be written.
func (h *Home) Pause(project, reason string, now time.Time) (*pause.State, error) {
	reason = strings.TrimSpace(reason)
	if project != "" && !fold.ValidName(project) {
		return nil, errs.Errorf(errs.Invalid, "project ids use a-z, 0-9 and '-'", "bad project id %q", project)
	}
	if reason != "" {
		if err := checkShortLine("pause reason", reason, pause.MaxReason); err != nil {
			return nil, err
		}
		if err := secretguard.Check("pause reason", reason); err != nil {
			return nil, err
		}
	}
	return pause.Set(h.ConfigDir, project, reason, now)
}

// Resume lifts pauses (pause.Resume): with project "" every switch on this machine,
// else that project's only, returning the switches lifted.
func (h *Home) Resume(project string) ([]pause.State, error) {
	return pause.Resume(h.ConfigDir, project)
}

// Pauses lists every switch set on this machine, the machine-wide one first.
func (h *Home) Pauses() []pause.State { return pause.List(h.ConfigDir) }

// Paused returns the switch that pauses project on this machine, or nil when it runs.
func (h *Home) Paused(project string) *pause.State { return pause.Of(h.ConfigDir, project) }

// CheckPaused returns a paused error when project (or the machine) is paused
// (pause.Check); doing says what was refused ("primary take").
func (h *Home) CheckPaused(project, doing string) error {
	return pause.Check(h.ConfigDir, project, doing)
}
