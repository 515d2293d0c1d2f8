// Package watch wakes a caller when something arrives in a channel, and follows a
// channel's events (`ferry watch`, long-poll `wait_s` in the MCP server, `ferry talk
// read --wait`). Watch gives hints from fsnotify and a rescan timer; WaitFor loads the
// channel through the façade on each hint until the caller's condition holds; Follow
// turns what arrived into events with a resumable cursor. It sits on top of package
// fsbus: every decision it reports is the façade's Load and View, never the watcher's
// own notion of what changed.
package watch
