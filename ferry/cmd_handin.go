package main

import "errors"

// HandinCmd groups the handin verbs (issue 3).
type HandinCmd struct{}

// Run implements the command.
func (c *HandinCmd) Run(g *Globals) error { return errors.New("handin: not built yet") }
