package main

func runDemo(g *Globals, keep bool) error { return nil }
