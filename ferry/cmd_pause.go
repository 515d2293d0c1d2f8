package main

import (
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/ferryhq/ferry/fsbus/fold"
	"github.com/ferryhq/ferry/fsbus/pause"
	"github.com/ferryhq/ferry/internal/errs"
)

// PauseCmd is `ferry pause`: the machine-local stop switch (docs/format.md §18).
type PauseCmd struct {
	Reason string `help:"Why, one line (shown to every refused call)." placeholder:"TEXT"`
	Show   bool   `help:"List the switches set on this machine; change nothing."`
}

// Help is the long help.
func (c *PauseCmd) Help() string {
	return "Without --channel or --project on the command line it pauses every channel on this machine; " +
		"with one of them, that channel only. While paused this machine refuses `ferry primary take` and " +
		"`ferry update apply`, `ferry run` and `ferry daemon` claim no new orders (a running file finishes), " +
		"and `ferry mcp serve` answers every tool call `paused` except read-only status. " +
		"The switch is never synced: other machines go on. Only `ferry resume` lifts it; no MCP tool can."
}

// ResumeCmd is `ferry resume`.
type ResumeCmd struct{}

// Help is the long help.
func (c *ResumeCmd) Help() string {
	return "Without --channel or --project on the command line it lifts every pause on this machine; " +
		"with one of them, that channel's own switch only (a machine-wide pause still holds)."
}

// pauseProject is the project a pause or resume is about: "" (the whole machine) unless
// --channel or --project was given on the command line itself — FERRY_CHANNEL alone,
// which many shells set for everything, never narrows an emergency stop to one channel.
func pauseProject(g *Globals, k *kong.Context) (string, error) {
	explicit := slices.ContainsFunc(k.Args, func(a string) bool {
		return a == "--channel" || a == "--project" || strings.HasPrefix(a, "--channel=") || strings.HasPrefix(a, "--project=")
	})
	if !explicit {
		return "", nil
	}
	if g.Channel == "" && g.Project != "" {
		if !fold.ValidName(g.Project) {
			return "", errs.Errorf(errs.Invalid, "project ids use a-z, 0-9 and '-'", "bad project id %q", g.Project)
		}
		return g.Project, nil // a project is paused by id, mapped here or not
	}
	ch, err := g.Open()
	if err != nil {
		return "", err
	}
	return ch.Project(), nil
}

// pauseView is the JSON form of the switches.
type pauseView struct {
	Paused []pause.State `json:"paused"`
	Lifted []pause.State `json:"lifted,omitempty"`
}

// Run implements the command.
func (c *PauseCmd) Run(g *Globals, k *kong.Context) error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	if c.Show {
		ps := h.Pauses()
		if g.JSON {
			return g.printJSON(pauseView{Paused: nonNil(ps)})
		}
		if len(ps) == 0 {
			g.printf("not paused\n")
		}
		for _, p := range ps {
			g.printf("%s\n", pauseLine(&p))
		}
		return nil
	}
	project, err := pauseProject(g, k)
	if err != nil {
		return err
	}
	now := time.Now()
	if testClock != nil {
		now = testClock()
	}
	p, err := h.Pause(project, c.Reason, now)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(pauseView{Paused: h.Pauses()})
	}
	g.printf("✔ %s\n", pauseLine(p))
	cmd := "ferry resume"
	if project != "" {
		cmd += " --project " + project
	}
	g.printf("  lift it with `%s`\n", cmd)
	return nil
}

// Run implements the command.
func (c *ResumeCmd) Run(g *Globals, k *kong.Context) error {
	h, err := g.Home()
	if err != nil {
		return err
	}
	project, err := pauseProject(g, k)
	if err != nil {
		return err
	}
	lifted, err := h.Resume(project)
	if err != nil {
		return err
	}
	still := h.Pauses()
	if g.JSON {
		return g.printJSON(pauseView{Paused: nonNil(still), Lifted: lifted})
	}
	switch {
	case len(lifted) == 0 && len(still) == 0:
		g.printf("nothing to resume: not paused\n")
	case len(lifted) == 0:
		g.printf("nothing to resume: project %s has no pause of its own\n", project)
	}
	for _, p := range lifted {
		g.printf("✔ resumed: %s\n", strings.TrimPrefix(pauseLine(&p), "paused: "))
	}
	for _, p := range still {
		g.printf("still %s\n", pauseLine(&p))
		if p.Project == "" && project != "" {
			// The machine-wide switch still pauses the project.
			g.printf("  project %s stays paused while this machine is: `ferry resume` (without --project) lifts it\n", project)
		}
	}
	return nil
}

func pauseLine(p *pause.State) string {
	scope := "this machine (every channel)"
	if p.Project != "" {
		scope = "project " + p.Project + " on this machine"
	}
	s := "paused: " + scope + " since " + p.At.Format("2006-01-02 15:04 UTC")
	if p.Reason != "" {
		s += " — " + p.Reason
	}
	return s
}

func nonNil(ps []pause.State) []pause.State {
	if ps == nil {
		return []pause.State{}
	}
	return ps
}
