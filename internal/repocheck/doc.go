// Package repocheck holds tests of the repository as a whole rather than of a Go API.
// It has no code of its own; `go test ./internal/repocheck` runs:
//
//   - TestDesignTable: the table under "Where each concern lives" in docs/design.md
//     names only paths that exist, and lists every package of the module;
//   - TestNoOutsideReferences: no text file of the tree points at files the repository
//     does not contain, or at the history of how it was built (docs/design.md is the
//     design; git keeps the history). ADR numbers cited must name a file in docs/adr;
//   - TestSkips: no test skips but in the gates of skipGates, each of which fails
//     instead when .ci/run asks for its test; `go test -short` shrinks, never skips.
//
// They find the module root by walking up from the test's directory to go.mod.
package repocheck
