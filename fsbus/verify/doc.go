// Package verify holds the checks `ferry ledger verify` and `ferry doctor` share: one
// list of findings, each with a level and a one-line fix (docs/design.md §2), built
// from the ledger's own report, what the fold ignored, object files whose hash or
// signature is wrong, conflict copies, records that vanished from the folder, key
// changes, rival creates and links inside the channel. It reads the channel's files
// and a View the façade loaded (Channel and View carry what it needs), and writes
// nothing. Report is the result the façade's Verify returns.
package verify
