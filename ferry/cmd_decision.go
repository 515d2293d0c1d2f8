package main

import "errors"

// DecisionCmd groups the decision verbs (issue 3).
type DecisionCmd struct{}

// Run implements the command.
func (c *DecisionCmd) Run(g *Globals) error { return errors.New("decision: not built yet") }
