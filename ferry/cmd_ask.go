package main

import "errors"

// AskCmd groups the ask verbs (issue 3).
type AskCmd struct{}

// Run implements the command.
func (c *AskCmd) Run(g *Globals) error { return errors.New("ask: not built yet") }
