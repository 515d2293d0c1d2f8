// Package search is `ferry search` and the MCP tool ferry_search: both look through
// the same things with the same matcher, so the CLI and an agent find the same hits in
// the same order — orders (title, body, progress and review notes, the submitted
// reference and summary), messages, decisions and asks (title, recommendation,
// reasoning, answer note). A hit needs every word of the query, any case, in its title
// or text. It reads a View the façade loaded; the query's caps are the façade's
// (fsbus.MaxSearchQuery, docs/format.md §12).
package search
