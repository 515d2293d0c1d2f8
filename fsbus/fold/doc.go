// Package fold is the channel's state machine: a pure function from the ledger's
// entries (and the objects they name) to the State every command and tool reads, and
// the queries over that State the surfaces print (queries.go).
//
// The fold reads no clock and does no I/O (docs/design.md §2): it is handed the merged
// entries, an ObjectReader and the master's key, and its only output is the State.
// Whatever depends on this machine's clock — a window closed, a holder silent — is
// decided by package fsbus over the State and the arrival log. The layering test
// (internal/repocheck/layers_test.go) holds this package to its imports, and a
// linter rule bans time.Now and ledger.Open in it.
//
// Every thing with a life cycle — an order, an ask, the primary role, an agent's
// grants — is a chain resolved by basis (chain.go); two writers racing for one step
// resolve the same way on every machine (docs/design.md §4), and a rival create is
// named in Contested (rival.go). Folded.FoldDelta folds only the things new entries touch on
// top of a previous fold (fold_incr.go, ADR 0010), with the same result as a full fold.
//
// The writes in package fsbus check a draft against the same rules (CheckLevel,
// CheckScope, the chain states) before they sign it, so the fold and the writes share
// one state machine.
package fold
