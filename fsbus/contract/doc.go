// Package contract checks an order's contract on this machine (docs/format.md §11):
// pointers — workspace-relative files and line ranges, fingerprinted when the order
// is dispatched and checked again at claim and submit (pointer.go) — and result
// schemas, compiled from the order and applied to a submit's structured output
// (schema.go). It reads the workspace, never the channel: the contract's types are
// the fold's (fold.Contract, fold.Pointer), and package fsbus decides what a stale
// pointer or a failed schema means for the order.
package contract
