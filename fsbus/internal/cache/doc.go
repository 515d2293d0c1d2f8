// Package cache holds the file formats of the two machine-local caches a Load reads
// (docs/format.md §18): the local index (index.go: the ledger as last read and the
// signatures already checked, in CRC-32C frames) and the fold checkpoint
// (checkpoint.go: the fold, its arrival log reading and the ledger position it was
// taken at, under a layout and binary identity that must match). Both are caches:
// either may be deleted at any time, and anything that does not decode, check or
// match reads as absent. When to read and write them is the façade's (fsbus/index.go,
// fsbus/checkpoint.go).
package cache
