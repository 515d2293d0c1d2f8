package main

import "errors"

// TalkCmd groups the talk verbs (issue 3).
type TalkCmd struct{}

// Run implements the command.
func (c *TalkCmd) Run(g *Globals) error { return errors.New("talk: not built yet") }
