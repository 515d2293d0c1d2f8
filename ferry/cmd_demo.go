package main

// DemoCmd is `ferry demo`.
type DemoCmd struct {
	Keep bool `help:"Keep the sandbox folder afterwards."`
}

// Run implements the command.
func (c *DemoCmd) Run(g *Globals) error { return runDemo(g, c.Keep) }
