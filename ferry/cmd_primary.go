package main

import "errors"

// PrimaryCmd groups the primary verbs (issue 3).
type PrimaryCmd struct{}

// Run implements the command.
func (c *PrimaryCmd) Run(g *Globals) error { return errors.New("primary: not built yet") }
